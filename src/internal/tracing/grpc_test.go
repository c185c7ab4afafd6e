package tracing_test

import (
	"context"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/internal/tracing"
	"github.com/collapser/collapser/src/otlptest"
)

func TestHandlers_SpanPerCallNamedBoundedHealthUntraced(t *testing.T) {
	r := otlptest.Start(t)
	r.Setenv(t)
	const bounded = "other"
	tr := otlptest.NewTracing(t, tracing.Options{SpanName: func(string) string { return bounded }})
	g := &testkit.Greeter{
		SayHello: func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			return &hellov1.HelloReply{}, nil
		},
		Services: func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) },
	}
	addr := g.Start(t, tr.ServerOptions()...)
	conn, err := grpc.NewClient(addr, append(tr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := testkit.Context(t)
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hellov1.NewGreeterClient(conn).SayHello(ctx, &hellov1.HelloRequest{Name: "n"}); err != nil {
		t.Fatal(err)
	}
	spans := r.WaitFor(t, "the call's client and server spans", func(s otlptest.Spans) bool { return len(s) >= 2 })
	if len(spans) != 2 {
		t.Fatalf("received %d spans, want the call's two: health checks are not traced", len(spans))
	}
	client := spans.Where(func(s otlptest.Span) bool { return s.Kind == tracepb.Span_SPAN_KIND_CLIENT })
	server := spans.Where(func(s otlptest.Span) bool { return s.Kind == tracepb.Span_SPAN_KIND_SERVER })
	if len(client) != 1 || len(server) != 1 {
		t.Fatalf("spans %+v, want one client and one server span", spans)
	}
	if server[0].TraceID != client[0].TraceID || server[0].ParentSpanID != client[0].SpanID {
		t.Errorf("server span %+v is not the child of the client span %+v: the trace context did not go with the call", server[0], client[0])
	}
	for _, s := range spans {
		if s.Name != bounded || s.Attributes["rpc.method"] != "" {
			t.Errorf("span %q with rpc.method %q, want the bounded name %q and no method attribute", s.Name, s.Attributes["rpc.method"], bounded)
		}
	}
}
