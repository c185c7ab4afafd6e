// Package tracing builds the sidecar's OpenTelemetry tracer provider from
// the standard OTEL_* environment variables, and the gRPC stats handlers
// that give every call a span.
//
// Tracing is off, and New returns a nil *Tracing, unless an OTLP endpoint
// is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// and it stays off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// Off costs nothing: a nil *Tracing gives no server or dial options, so no
// stats handler runs, and no TracerProvider, so the proxy starts no span.
//
// On, spans go over OTLP/gRPC (the only protocol the sidecar speaks, so
// another OTEL_EXPORTER_OTLP_PROTOCOL is an error rather than a surprise)
// through the SDK's batch processor. The SDK reads its own variables:
// the sampler (OTEL_TRACES_SAMPLER, parentbased_always_on by default, so a
// caller's sampling decision is followed), the batch processor's delay and
// batch size, the exporter's endpoint, headers, TLS, timeout and
// compression, and the span limits; the resource is service.name
// "collapser" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise. A value the SDK would quietly replace by its default (a
// sampler it does not know, a ratio out of range, a queue size that is not
// a positive number) stops startup instead, naming its variable.
//
// A call never waits for the exporter: a span that ends while
// OTEL_BSP_MAX_QUEUE_SIZE spans wait for export is dropped and counted
// (Stats), and so are the spans of a batch whose export failed (see queue).
// Shutdown exports what is left within FlushTimeout.
//
// Propagation is W3C trace context and baggage, the OpenTelemetry default
// (OTEL_PROPAGATORS is not read), given to the handlers explicitly: the
// package sets no OpenTelemetry globals. Spans are named after the method,
// bounded as the metrics' method label is (Options.SpanName), since callers
// choose method names; a failed call's span has its code, not its status
// message, which may repeat what was asked; the health and reflection calls
// the sidecar makes and answers on its own are not traced.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

const (
	// DefaultServiceName is the service.name of the sidecar's spans unless
	// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
	DefaultServiceName = "collapser"
	// FlushTimeout bounds how long Shutdown exports the spans still waiting.
	FlushTimeout = 5 * time.Second
)

// Options configures New.
type Options struct {
	// SpanName returns the name a call of fullMethod is reported under
	// (methodlabel.Set.Label); nil: the method's own name.
	SpanName func(fullMethod string) string
	// Logger is told when exports start failing and when they work again;
	// nil discards it.
	Logger *slog.Logger
}

// Tracing is the sidecar's tracer provider and the gRPC options that trace
// its calls. A nil *Tracing is tracing off: every method works on it and
// does nothing.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
	queue      *queue
	exporter   *exporter
	spanName   func(string) string
}

// Stats counts the spans the sidecar ended and did not export.
type Stats struct {
	// QueueFull counts the spans dropped because OTEL_BSP_MAX_QUEUE_SIZE
	// spans were waiting for export.
	QueueFull uint64
	// ExportFailed counts the spans of batches whose export failed.
	ExportFailed uint64
}

// New returns the Tracing the process environment configures, or nil when
// tracing is off. It connects to nothing yet: the exporter dials on its
// first export.
func New(o Options) (*Tracing, error) {
	s, err := readSettings(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if !s.on {
		return nil, nil
	}
	ctx := context.Background() // neither builds anything that lasts beyond the call
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName)),
		resource.WithFromEnv(), // after the default: OTEL_SERVICE_NAME wins
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	otlp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	q := &queue{max: int64(s.maxQueue)}
	exp := &exporter{SpanExporter: otlp, queue: q, logger: logger}
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(s.maxQueue))
	t := &Tracing{
		provider:   sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(q)),
		propagator: newPropagator(),
		queue:      q,
		exporter:   exp,
		spanName:   o.SpanName,
	}
	if t.spanName == nil {
		t.spanName = func(m string) string { return m }
	}
	return t, nil
}

// TracerProvider returns the provider spans are started with; nil when
// tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Stats returns the counts of spans not exported so far.
func (t *Tracing) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{QueueFull: t.queue.dropped.Load(), ExportFailed: t.exporter.failed.Load()}
}

// Shutdown ends tracing: spans ended later are not exported, and those
// still waiting are exported within FlushTimeout (or ctx, if it ends first).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, FlushTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: export the last spans: %w", err)
	}
	return nil
}

// newPropagator returns the propagators of every call collapser traces:
// the W3C trace context and baggage.
func newPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}
