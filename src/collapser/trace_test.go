package collapser

import (
	"context"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestTraces_EveryJoinedCallerLinksToTheRunThatAnsweredIt(t *testing.T) {
	const n = 5
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	hold := make(chan struct{})
	var handlerSpan trace.SpanContext
	g := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		<-hold
		handlerSpan = trace.SpanContextFromContext(ctx)
		return &hellov1.HelloReply{Message: "hello " + req.GetName()}, nil
	}}
	c, _ := newCollapser(t, "", func(o *Options) { o.TracerProvider = tp })
	addr := g.Start(t, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))),
		grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor()))
	calls := held(t, c, hellov1.NewGreeterClient(dial(t, addr)), n, "ann", "")
	close(hold)
	for _, call := range calls {
		if r := testkit.Recv(t, "a call's answer", call); r.err != nil {
			t.Fatal(r.err)
		}
	}

	var run sdktrace.ReadOnlySpan
	outcomes := map[string]int{}
	var servers []sdktrace.ReadOnlySpan
	testkit.WaitFor(t, "every span to end", func() bool { return len(spans.Ended()) == n+1 })
	for _, s := range spans.Ended() {
		if s.Name() == proxy.CallSpanName {
			run = s
			continue
		}
		servers = append(servers, s)
		for _, a := range s.Attributes() {
			if a.Key == proxy.OutcomeAttribute {
				outcomes[a.Value.AsString()]++
			}
		}
	}
	if run == nil || outcomes["leader"] != 1 || outcomes["joined"] != n-1 {
		t.Fatalf("spans: run %v, outcomes %v; want one %s span, 1 leader and %d joined", run != nil, outcomes, proxy.CallSpanName, n-1)
	}
	if handlerSpan.SpanID() != run.SpanContext().SpanID() {
		t.Errorf("the handler ran in span %v, want the run's %v", handlerSpan.SpanID(), run.SpanContext().SpanID())
	}
	for _, s := range servers {
		leader := s.SpanContext().SpanID() == run.Parent().SpanID()
		linked := len(s.Links()) == 1 && s.Links()[0].SpanContext.SpanID() == run.SpanContext().SpanID()
		if leader == linked {
			t.Errorf("server span %v: leader %v, linked to the run %v; want the run's parent or a link to it", s.SpanContext().SpanID(), leader, linked)
		}
	}
}
