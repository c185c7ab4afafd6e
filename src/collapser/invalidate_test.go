package collapser

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/testkit"
)

// writePolicy keeps reads an hour and makes SetGreeting's success take
// back the answers that carry its answer's tags.
const writePolicy = "default:\n  cacheTTL: 1h\nmethods:\n  - name: /hello.v1.Greeter/SetGreeting\n    invalidates:\n      responseTags: true\n"

func TestInvalidate_AWriteTakesBackWhatItsAnswerTags(t *testing.T) {
	tests := []struct {
		name string
		// hidden: the writer's caller does not see the tags header (the
		// server's callers, as the sidecar's); a client's own calls do.
		hidden bool
		// serve serves the hello backend with c, and returns a client of it.
		serve func(t *testing.T, c *Collapser, backend *hello.Server) hellov1.GreeterClient
	}{
		{"server interceptor", true, func(t *testing.T, c *Collapser, backend *hello.Server) hellov1.GreeterClient {
			return hellov1.NewGreeterClient(dial(t, serveHello(t, backend, grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor()))))
		}},
		{"client interceptor", false, func(t *testing.T, c *Collapser, backend *hello.Server) hellov1.GreeterClient {
			return hellov1.NewGreeterClient(dial(t, serveHello(t, backend), grpc.WithUnaryInterceptor(c.UnaryClientInterceptor())))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend, err := hello.New(hello.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := newCollapser(t, writePolicy, nil)
			client := tt.serve(t, c, backend)
			ctx := testkit.Context(t)
			if _, err := client.SetGreeting(ctx, &hellov1.Greeting{Name: "ann", Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if g, err := client.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: "ann"}); err != nil || g.GetText() != "hi" {
					t.Fatalf("GetGreeting = %v, %v; want hi", g, err)
				}
			}
			var header metadata.MD
			if _, err := client.SetGreeting(ctx, &hellov1.Greeting{Name: "ann", Text: "yo"}, grpc.Header(&header)); err != nil {
				t.Fatal(err)
			}
			if got := header.Get(hello.HeaderTags); (got == nil) != tt.hidden {
				t.Errorf("the writer saw tags %q; want them hidden: %v", got, tt.hidden)
			}
			g, err := client.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: "ann"})
			if err != nil || g.GetText() != "yo" || g.GetVersion() != 2 {
				t.Errorf("GetGreeting after the write = %v, %v; want yo, version 2", g, err)
			}
			counts, err := hellov1.NewStatsClient(dial(t, serveHello(t, backend))).GetCounts(ctx, &hellov1.GetCountsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := counts.GetByMethod()["/hello.v1.Greeter/GetGreeting"]; got != 2 {
				t.Errorf("backend GetGreeting calls = %d, want 2: one kept answer, and one after the write", got)
			}
		})
	}
}

// serveHello serves backend on a server of its own with opts until the
// test ends, and returns its address.
func serveHello(t *testing.T, backend *hello.Server, opts ...grpc.ServerOption) string {
	t.Helper()
	srv := grpc.NewServer(opts...)
	backend.Register(srv)
	lis := testkit.Listen(t, "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
