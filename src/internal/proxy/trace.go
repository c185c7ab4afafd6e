package proxy

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
)

// The proxy's part of a trace (Options.TracerProvider). Every call the
// sidecar serves has a server span (the sidecar's stats handler starts it);
// the proxy tells it how the call was served (OutcomeAttribute). The one
// call a flight makes for its callers has a span of its own (CallSpanName),
// the child of the span of the caller that led it (or, for a refresh, that
// found its answer stale), and the parent of the client span of the backend
// call, or of the call to the key's owner. Every caller answered by a call
// it did not make (joined, a hit, stale, stale on error) has a span link to
// that call's span: a Response keeps what the link needs (producer). The
// engine knows nothing of it: the span context travels with the answer.

const (
	// tracerName is the instrumentation scope of the proxy's spans.
	tracerName = "github.com/collapser/collapser/src/internal/proxy"
	// OutcomeAttribute is the attribute of a caller's server span that says
	// how the call was served: the outcome label of its metrics.
	OutcomeAttribute = attribute.Key("collapser.outcome")
	// CallSpanName names the span of the one call that answered a flight's
	// callers, whose span links point at it.
	CallSpanName = "collapser.call"
)

// producer is what a Response keeps of the span of the call that produced
// it: what a link needs, without the trace state, which a caller's header
// makes as long as it likes. The zero value is no span.
type producer struct {
	traceID trace.TraceID
	spanID  trace.SpanID
	flags   trace.TraceFlags
}

// spanContext returns the span context p was made of, without its state.
func (p producer) spanContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: p.traceID, SpanID: p.spanID, TraceFlags: p.flags})
}

// startCall returns the context and span of a call made for the callers of
// a flight. call is the call's own context, which belongs to no caller;
// caller is the context of the caller whose goroutine runs it (or whose
// stale answer started it), whose span becomes its parent: the backend
// sees that caller's trace, sampled or not. span is nil when tracing is off
// or that caller's span is not sampled: the call follows its decision. (Its
// span may have ended already: a refresh outlives the stale serve that
// started it.)
func (p *Proxy) startCall(caller, call context.Context) (context.Context, trace.Span) {
	call = p.underCaller(caller, call)
	if p.tracer == nil || !trace.SpanContextFromContext(call).IsSampled() {
		return call, nil
	}
	return p.tracer.Start(call, CallSpanName, trace.WithSpanKind(trace.SpanKindInternal))
}

// underCaller returns call, a context that belongs to no caller, carrying
// the span of caller, so that the spans started in it are its children;
// call itself when tracing is off.
func (p *Proxy) underCaller(caller, call context.Context) context.Context {
	if p.tracer == nil {
		return call
	}
	return trace.ContextWithSpan(call, trace.SpanFromContext(caller))
}

// endCall ends span, the span of a call that produced resp or failed with
// err, and keeps in resp what a link to it needs. Only the call's status
// code is recorded: a message may carry what the backend was asked.
func endCall(span trace.Span, resp *Response, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(otelcodes.Error, status.Code(err).String())
	}
	if resp != nil {
		sc := span.SpanContext()
		resp.producer = producer{traceID: sc.TraceID(), spanID: sc.SpanID(), flags: sc.TraceFlags()}
	}
	span.End()
}

// answeredBy returns the span a caller's span links to: the span of the
// call that produced resp when the caller got it as outcome without making
// that call itself; no span otherwise.
func answeredBy(outcome collapse.Outcome, resp *Response) producer {
	switch {
	case resp == nil:
		return producer{}
	case outcome == collapse.Join, outcome == collapse.Hit, outcome == collapse.Stale, outcome == collapse.StaleOnError:
		return resp.producer
	}
	return producer{}
}

// report records how a caller's call was served: in route's series of the
// observer, and on the caller's span, which links to from's span if from
// is one.
func (p *Proxy) report(ctx context.Context, route Route, method, outcome string, code codes.Code, from producer) {
	p.observer.ObserveRequest(ctx, route, method, outcome, code)
	if p.tracer == nil {
		return // tracing off: not even a context lookup
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(OutcomeAttribute.String(outcome))
	if from.spanID.IsValid() {
		span.AddLink(trace.Link{SpanContext: from.spanContext()})
	}
}
