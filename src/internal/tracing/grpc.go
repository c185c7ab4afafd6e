package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// ServerOptions returns the options that give every call a grpc.Server
// serves a server span, the child of the caller's trace context if it sent
// one; nil when tracing is off.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return t.handlers().ServerOptions()
}

// DialOptions returns the options that give every call made on a
// connection a client span, the child of the span in the call's context,
// whose trace context goes with the call; nil when tracing is off.
func (t *Tracing) DialOptions() []grpc.DialOption {
	if t == nil {
		return nil
	}
	return t.handlers().DialOptions()
}

// handlers are t's gRPC handlers.
func (t *Tracing) handlers() Handlers {
	return Handlers{provider: t.provider, propagator: t.propagator, spanName: t.spanName}
}

// Handlers trace gRPC calls as the sidecar's Tracing does, with a tracer
// provider of another's: the library's, whose application owns it. The
// zero Handlers trace nothing.
type Handlers struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	spanName   func(string) string
}

// HandlersOf returns the Handlers that start spans with provider (nil:
// none) and carry the W3C trace context and baggage, as the sidecar's do.
func HandlersOf(provider trace.TracerProvider) Handlers {
	if provider == nil {
		return Handlers{}
	}
	return Handlers{provider: provider, propagator: newPropagator(), spanName: func(m string) string { return m }}
}

// ServerOptions returns the options that give every call a grpc.Server
// serves a server span, the child of the caller's trace context if it sent
// one; nil for the zero Handlers.
func (h Handlers) ServerOptions() []grpc.ServerOption {
	if h.provider == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(bounded{otelgrpc.NewServerHandler(h.handlerOptions()...), h.spanName})}
}

// DialOptions returns the options that give every call made on a
// connection a client span, whose trace context goes with the call; nil
// for the zero Handlers.
func (h Handlers) DialOptions() []grpc.DialOption {
	if h.provider == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(bounded{otelgrpc.NewClientHandler(h.handlerOptions()...), h.spanName})}
}

// handlerOptions are the options of otelgrpc's handlers: h's provider and
// propagators, no metrics (collapser's own are Prometheus'), and only the
// calls worth a span.
func (h Handlers) handlerOptions() []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(h.provider),
		otelgrpc.WithPropagators(h.propagator),
		otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool { return traced(info.FullMethodName) }),
	}
}

// traced reports whether calls of fullMethod get spans: all but the health
// checks (the kubelet's probes, the sidecar's of its backend) and the
// reflection the sidecar learns its backend's methods by, which would fill
// the traces with calls no request made.
func traced(fullMethod string) bool {
	return !strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") && !strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// bounded is a stats handler that bounds what the spans of the otelgrpc
// handler it wraps hold. otelgrpc names a span, and sets its rpc.method,
// after the method the call names, which a caller of the proxy chooses: the
// span is named after the method's bounded name (Options.SpanName). And it
// sets a failed call's status message as the span's status description: a
// message may repeat what the caller asked, so the span gets the code alone.
type bounded struct {
	stats.Handler
	name func(fullMethod string) string
}

// TagRPC starts the call's span under the bounded name of its method.
// Untraced methods keep their names, so that the filter knows them.
func (h bounded) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if traced(info.FullMethodName) {
		if name := h.name(info.FullMethodName); name != info.FullMethodName {
			renamed := *info
			renamed.FullMethodName = name
			info = &renamed
		}
	}
	return h.Handler.TagRPC(ctx, info)
}

// HandleRPC hands rs on, the end of a failed call without its status
// message.
func (h bounded) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	if end, ok := rs.(*stats.End); ok && end.Error != nil {
		codeOnly := *end
		codeOnly.Error = status.Error(status.Code(end.Error), "")
		rs = &codeOnly
	}
	h.Handler.HandleRPC(ctx, rs)
}
