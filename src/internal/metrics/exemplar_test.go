package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/tracing"
)

// traceID is the trace of the calls the exemplar tests observe.
const traceID = "0af7651916cd43dd8448eb211c80319c"

// inTrace returns a context whose span is of traceID, sampled or not.
func inTrace(t *testing.T, sampled bool) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex("b7ad6b7169203331")
	if err != nil {
		t.Fatal(err)
	}
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// exemplars returns the trace IDs of the exemplars of the family name in
// reg: of its counters and its histograms' buckets.
func exemplars(t *testing.T, reg prometheus.Gatherer, name string) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	note := func(e *dto.Exemplar) {
		for _, l := range e.GetLabel() {
			if l.GetName() == exemplarLabel {
				ids = append(ids, l.GetValue())
			}
		}
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if e := m.GetCounter().GetExemplar(); e != nil {
				note(e)
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if e := b.GetExemplar(); e != nil {
					note(e)
				}
			}
		}
	}
	return ids
}

// traced is a Recorder's Sources with tracing on.
var traced = Sources{Traces: func() tracing.Stats { return tracing.Stats{} }}

func TestRecorder_ASampledCallIsTheExemplarOfItsCountsAndDuration(t *testing.T) {
	for _, sampled := range []bool{true, false} {
		s, reg := newTestRecorderWith(t, traced)
		ctx := inTrace(t, sampled)
		s.ObserveRequest(ctx, proxy.RouteCaller, sayHello, "joined", codes.OK)
		s.ObserveBackendCall(ctx, sayHello, codes.OK, 20*time.Millisecond)
		for _, name := range []string{"collapser_requests_total", "collapser_backend_calls_total", "collapser_backend_call_duration_seconds"} {
			got := exemplars(t, reg, name)
			switch {
			case sampled && (len(got) != 1 || got[0] != traceID):
				t.Errorf("%s exemplars %v, want the sampled call's trace %s", name, got, traceID)
			case !sampled && len(got) != 0:
				t.Errorf("%s exemplars %v of a call whose span is not sampled, want none", name, got)
			}
		}
	}
}

func TestRecorder_NoExemplarWithTracingOff(t *testing.T) {
	s, reg := newTestRecorder(t, nil)
	s.ObserveBackendCall(inTrace(t, true), sayHello, codes.OK, 20*time.Millisecond)
	if got := exemplars(t, reg, "collapser_backend_call_duration_seconds"); len(got) != 0 {
		t.Errorf("exemplars %v with tracing off, want none", got)
	}
}

func TestHandler_ServesExemplarsToAnOpenMetricsScraper(t *testing.T) {
	s, reg := newTestRecorderWith(t, traced)
	s.ObserveBackendCall(inTrace(t, true), sayHello, codes.OK, 20*time.Millisecond)
	for accept, want := range map[string]bool{"application/openmetrics-text; version=1.0.0": true, "text/plain": false} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		Handler(reg).ServeHTTP(rec, req)
		if got := strings.Contains(rec.Body.String(), `# {trace_id="`+traceID+`"}`); got != want {
			t.Errorf("Accept %s: exemplar served %v, want %v", accept, got, want)
		}
	}
}

func TestRecorder_SpansDroppedByReasonOnlyWithTracing(t *testing.T) {
	_, off := newTestRecorder(t, nil)
	if n, err := testutil.GatherAndCount(off, "collapser_trace_spans_dropped_total"); err != nil || n != 0 {
		t.Errorf("tracing off: %d series, %v; want none", n, err)
	}
	_, on := newTestRecorderWith(t, Sources{Traces: func() tracing.Stats { return tracing.Stats{QueueFull: 3, ExportFailed: 2} }})
	want := `
# HELP collapser_trace_spans_dropped_total Spans the sidecar ended and did not export, by reason: queue_full (OTEL_BSP_MAX_QUEUE_SIZE spans were waiting for export; a call never waits for room), export_failed (their batch's export failed).
# TYPE collapser_trace_spans_dropped_total counter
collapser_trace_spans_dropped_total{reason="export_failed"} 2
collapser_trace_spans_dropped_total{reason="queue_full"} 3
`
	if err := testutil.GatherAndCompare(on, strings.NewReader(want), "collapser_trace_spans_dropped_total"); err != nil {
		t.Error(err)
	}
}
