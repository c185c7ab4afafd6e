package tracing_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/internal/tracing"
	"github.com/collapser/collapser/src/otlptest"
)

// endSpans starts and ends n spans named name, each a root.
func endSpans(tr *tracing.Tracing, name string, n int) {
	tracer := tr.TracerProvider().Tracer("tracing_test")
	for range n {
		_, span := tracer.Start(context.Background(), name)
		span.End()
	}
}

func TestNew_OffWithoutAnEndpoint(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no endpoint":   {"OTEL_SERVICE_NAME": "x"},
		"sdk disabled":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			tr, err := tracing.New(tracing.Options{})
			if err != nil || tr != nil {
				t.Fatalf("New = %v, %v; want nil, nil: tracing off", tr, err)
			}
			// Off is a nil *Tracing, whose every method does nothing.
			if tr.ServerOptions() != nil || tr.DialOptions() != nil || tr.TracerProvider() != nil || tr.Stats() != (tracing.Stats{}) {
				t.Error("a nil Tracing gives options, a provider or counts")
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestNew_RefusesWhatTheSDKWouldQuietlyReplace(t *testing.T) {
	for variable, value := range map[string]string{
		"OTEL_SDK_DISABLED":           "yes",
		"OTEL_TRACES_EXPORTER":        "zipkin",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "sometimes",
		"OTEL_TRACES_SAMPLER_ARG":     "1.5",
		"OTEL_BSP_MAX_QUEUE_SIZE":     "0",
	} {
		t.Run(variable, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
			t.Setenv(variable, value)
			tr, err := tracing.New(tracing.Options{})
			if err == nil || !strings.Contains(err.Error(), variable) {
				_ = tr.Shutdown(context.Background())
				t.Fatalf("New with %s=%s: error %v, want one naming the variable", variable, value, err)
			}
		})
	}
}

func TestTracing_ExportsToTheEndpointAsTheServiceNamed(t *testing.T) {
	for _, tt := range []struct{ env, want string }{
		{"", tracing.DefaultServiceName},
		{"checkout-collapser", "checkout-collapser"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			r := otlptest.Start(t)
			r.Setenv(t)
			if tt.env != "" {
				t.Setenv("OTEL_SERVICE_NAME", tt.env)
			}
			tr := otlptest.NewTracing(t, tracing.Options{})
			endSpans(tr, "one", 1)
			spans := r.WaitFor(t, "the span", func(s otlptest.Spans) bool { return len(s) == 1 })
			if spans[0].Name != "one" || spans[0].Service != tt.want {
				t.Errorf("received %q of service %q, want %q of %q", spans[0].Name, spans[0].Service, "one", tt.want)
			}
		})
	}
}

func TestTracing_AFullQueueDropsAndCountsWithoutWaiting(t *testing.T) {
	const queue, ended = 2, 10
	r := otlptest.Start(t)
	r.Setenv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	release := r.Hold() // no export returns: the first spans wait
	tr := otlptest.NewTracing(t, tracing.Options{})
	endSpans(tr, "burst", ended) // returns: ending a span never waits for room
	if got := tr.Stats(); got.QueueFull != ended-queue {
		t.Errorf("dropped %d spans for a full queue, want %d: all but the %d waiting", got.QueueFull, ended-queue, queue)
	}
	release()
	r.WaitFor(t, "the spans that waited", func(s otlptest.Spans) bool { return len(s) == queue })
	endSpans(tr, "after", 1) // room again
	r.WaitFor(t, "a span after the burst", func(s otlptest.Spans) bool { return len(s.Named("after")) == 1 })
	if got := tr.Stats(); got != (tracing.Stats{QueueFull: ended - queue}) {
		t.Errorf("stats %+v after the queue emptied", got)
	}
}

func TestTracing_FailedExportsAreCountedAndLoggedOnce(t *testing.T) {
	r := otlptest.Start(t)
	r.Setenv(t)
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	r.Refuse(codes.InvalidArgument) // not retried: each batch fails at once
	logs := &logrecorder.Recorder{}
	tr := otlptest.NewTracing(t, tracing.Options{Logger: slog.New(logs)})
	endSpans(tr, "refused", 3)
	testkit.WaitFor(t, "three failed exports", func() bool { return tr.Stats().ExportFailed == 3 })
	r.Refuse(codes.OK)
	endSpans(tr, "accepted", 1)
	r.WaitFor(t, "the span after the failures", func(s otlptest.Spans) bool { return len(s) == 1 })
	testkit.WaitFor(t, "the recovery logged", func() bool { return logs.Count(slog.LevelInfo, "traces: export works again", "", "") == 1 })
	if n := logs.Count(slog.LevelWarn, "traces: export failed", "", ""); n != 1 {
		t.Errorf("export failures logged %d times, want once for the run of three", n)
	}
	if got := tr.Stats(); got != (tracing.Stats{ExportFailed: 3}) {
		t.Errorf("stats %+v, want 3 spans of failed exports", got)
	}
}
