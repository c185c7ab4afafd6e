package metrics

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/proxy"
)

const sayHello = "/hello.v1.Greeter/SayHello"

// The proxy reports through this package.
var _ proxy.Observer = (*Sidecar)(nil)

func newTestSidecar(t *testing.T, stats func() collapse.Stats) (*Sidecar, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if stats == nil {
		stats = func() collapse.Stats { return collapse.Stats{} }
	}
	s, err := NewSidecar(reg, stats)
	if err != nil {
		t.Fatalf("NewSidecar: %v", err)
	}
	return s, reg
}

func TestNewSidecar_RejectsMissingInputsAndDuplicateRegistration(t *testing.T) {
	stats := func() collapse.Stats { return collapse.Stats{} }
	if _, err := NewSidecar(nil, stats); err == nil {
		t.Error("NewSidecar(nil registerer) succeeded, want error")
	}
	reg := prometheus.NewRegistry()
	if _, err := NewSidecar(reg, nil); err == nil {
		t.Error("NewSidecar(nil stats) succeeded, want error")
	}
	if _, err := NewSidecar(reg, stats); err != nil {
		t.Fatalf("first NewSidecar: %v", err)
	}
	if _, err := NewSidecar(reg, stats); err == nil {
		t.Error("second NewSidecar on one registry succeeded, want duplicate registration error")
	}
}

func TestSidecar_MetricNamesMatchContractAndPassLint(t *testing.T) {
	s, reg := newTestSidecar(t, nil)
	s.ObserveRequest(sayHello, "leader", codes.OK)
	s.ObserveBackendCall(sayHello, codes.OK, time.Millisecond)

	for _, name := range []string{
		"collapser_requests_total", "collapser_backend_calls_total",
		"collapser_backend_call_duration_seconds", "collapser_inflight_keys",
		"collapser_waiters", "collapser_cache_entries", "collapser_cache_bytes",
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("GatherAndCount(%s) = %d, %v; want 1 series", name, n, err)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestSidecar_ObserveRequestCountsByMethodOutcomeAndCode(t *testing.T) {
	s, _ := newTestSidecar(t, nil)
	s.ObserveRequest(sayHello, "leader", codes.OK)
	s.ObserveRequest(sayHello, "joined", codes.OK)
	s.ObserveRequest(sayHello, "joined", codes.OK)
	s.ObserveRequest(sayHello, "passthrough", codes.Unavailable)
	s.ObserveRequest(sayHello, "error", codes.Code(99))

	want := `
# HELP collapser_requests_total Requests the sidecar answered, by method, how they were served (outcome) and the gRPC code the caller got.
# TYPE collapser_requests_total counter
collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="joined"} 2
collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="leader"} 1
collapser_requests_total{code="Unavailable",method="/hello.v1.Greeter/SayHello",outcome="passthrough"} 1
collapser_requests_total{code="Unknown",method="/hello.v1.Greeter/SayHello",outcome="error"} 1
`
	if err := testutil.CollectAndCompare(s.requests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestSidecar_ObserveBackendCallRecordsCountAndDuration(t *testing.T) {
	s, _ := newTestSidecar(t, nil)
	s.ObserveBackendCall(sayHello, codes.OK, 20*time.Millisecond)
	s.ObserveBackendCall(sayHello, codes.DeadlineExceeded, 3*time.Second)

	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues(sayHello, "OK")); got != 1 {
		t.Errorf("backend calls {OK} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues(sayHello, "DeadlineExceeded")); got != 1 {
		t.Errorf("backend calls {DeadlineExceeded} = %v, want 1", got)
	}
	h := readHistogram(t, s.backendDuration.WithLabelValues(sayHello))
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-3.02) > 1e-9 {
		t.Errorf("duration histogram count=%d sum=%v, want count=2 sum=3.02", h.GetSampleCount(), h.GetSampleSum())
	}
}

// readHistogram returns the current state of one histogram series.
func readHistogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	m, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a prometheus.Metric", o)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatalf("write metric: %v", err)
	}
	return out.GetHistogram()
}

func TestSidecar_GaugesReadStatsOncePerScrape(t *testing.T) {
	var calls atomic.Int64
	_, reg := newTestSidecar(t, func() collapse.Stats {
		calls.Add(1)
		return collapse.Stats{InFlight: 3, Waiters: 40, Entries: 7, Bytes: 1234}
	})
	want := `
# HELP collapser_cache_bytes Bytes of results held in the result cache.
# TYPE collapser_cache_bytes gauge
collapser_cache_bytes 1234
# HELP collapser_cache_entries Results held in the result cache.
# TYPE collapser_cache_entries gauge
collapser_cache_entries 7
# HELP collapser_inflight_keys Keys with a backend call in flight.
# TYPE collapser_inflight_keys gauge
collapser_inflight_keys 3
# HELP collapser_waiters Callers waiting for an in-flight backend call they joined.
# TYPE collapser_waiters gauge
collapser_waiters 40
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"collapser_cache_bytes", "collapser_cache_entries", "collapser_inflight_keys", "collapser_waiters"); err != nil {
		t.Error(err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("stats func called %d times for one scrape, want 1", got)
	}
}

func TestSidecar_MethodLabelBoundedAtMaxMethodsThenOther(t *testing.T) {
	s, _ := newTestSidecar(t, nil)
	const extra = 25
	for i := range MaxMethods + extra {
		m := fmt.Sprintf("/svc.S/M%d", i)
		s.ObserveRequest(m, "passthrough", codes.OK)
		s.ObserveBackendCall(m, codes.OK, time.Millisecond)
	}
	for name, c := range map[string]prometheus.Collector{"requests": s.requests, "backend calls": s.backendCalls, "duration": s.backendDuration} {
		if n := testutil.CollectAndCount(c); n != MaxMethods+1 {
			t.Errorf("%s series = %d, want %d (MaxMethods + other)", name, n, MaxMethods+1)
		}
	}
	if got := testutil.ToFloat64(s.requests.WithLabelValues(OtherMethod, "passthrough", "OK")); got != extra {
		t.Errorf("requests{method=other} = %v, want %d", got, extra)
	}
}
