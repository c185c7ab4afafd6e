package collapser

import (
	"testing"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestInterceptors_IdenticalCallsShareOneRun(t *testing.T) {
	tests := []struct {
		name string
		// serve serves g and returns a client whose calls go through c.
		serve func(t *testing.T, c *Collapser, g *testkit.Greeter) hellov1.GreeterClient
	}{
		{"server", func(t *testing.T, c *Collapser, g *testkit.Greeter) hellov1.GreeterClient {
			return serveGreeter(t, c, g)
		}},
		{"client", func(t *testing.T, c *Collapser, g *testkit.Greeter) hellov1.GreeterClient {
			return clientOf(t, c, g.Start(t))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 10
			hold := make(chan struct{})
			g := heldGreeter(hold)
			c, reg := newCollapser(t, "", nil)
			client := tt.serve(t, c, g)

			calls := held(t, c, client, n, "ann", "Bearer ann")
			close(hold)
			for _, call := range calls {
				r := testkit.Recv(t, "a call's answer", call)
				if r.err != nil || r.msg.GetMessage() != "hello ann" || r.msg.GetCall() != 1 {
					t.Errorf("reply = %v, %v; want hello ann, call 1", r.msg, r.err)
				}
				if got := r.header.Get("x-call"); len(got) != 1 || got[0] != "1" {
					t.Errorf("header x-call = %q, want [1]: the run's header goes to every caller", got)
				}
				if got := r.trailer.Get("x-served"); len(got) != 1 {
					t.Errorf("trailer x-served = %q, want the run's", got)
				}
			}
			if got := g.Calls.SayHello.Load(); got != 1 {
				t.Errorf("handler runs = %d, want 1", got)
			}
			// Only the split between outcomes is asserted: the default TTL
			// is 100 ms, and a busy machine may take longer between calls.
			if got := outcomes(t, reg); got["leader"] != 1 || got["joined"] != n-1 {
				t.Errorf("outcomes = %v, want 1 leader and %d joined", got, n-1)
			}
		})
	}
}
