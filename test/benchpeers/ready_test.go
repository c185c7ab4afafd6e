package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

func TestCollapserRuleIs_WantsTheMethodsOwnRuleSetToOne(t *testing.T) {
	const head = "# TYPE collapser_method_rule_info gauge\n"
	tests := []struct {
		name, rules string
		ok          bool
	}{
		{"the rule", `collapser_method_rule_info{action="collapse",method="/m",reason=""} 1`, true},
		{"another action", `collapser_method_rule_info{action="passthrough",method="/m",reason="unannotated"} 1`, false},
		{"another method", `collapser_method_rule_info{action="collapse",method="/m2",reason=""} 1`, false},
		{"the method in another label", `collapser_method_rule_info{action="collapse",method="/n",other_method="/m"} 1`, false},
		{"not 1", `collapser_method_rule_info{action="collapse",method="/m",reason=""} 0`, false},
		{"no rules", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintln(w, head+tt.rules)
			}))
			defer srv.Close()
			err := collapserRuleIs(srv.URL, "/m", "collapse")(t.Context())
			if (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestReachesPeers_PassesOnlyWhenNoCallFellBack(t *testing.T) {
	tests := []struct {
		name      string
		fallbacks func(calls int64) int64 // the counter after that many calls
		failName  string                  // a name the greeter fails
		ok        bool
	}{
		{"no fallback", func(int64) int64 { return 2 }, "", true},
		{"a collapser that does not forward (no counter)", nil, "", true},
		{"fallbacks during the calls", func(calls int64) int64 { return calls / 10 }, "", false},
		{"a failed call", func(int64) int64 { return 0 }, "peers ready 7", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &countingGreeter{fail: tt.failName}
			c := startGreeter(t, g)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.fallbacks != nil {
					fmt.Fprintf(w, "# TYPE collapser_peer_fallbacks_total counter\n"+
						"collapser_peer_fallbacks_total{code=\"Unavailable\",method=\"/m\"} %d\n"+
						"collapser_peer_fallbacks_total{code=\"DeadlineExceeded\",method=\"/m\"} 1\n", tt.fallbacks(g.calls.Load()))
				}
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), defaultTestTimeout)
			defer cancel()
			err := reachesPeers(c, srv.URL)(ctx)
			if (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
			if tt.ok && len(g.names()) != peerCheckCalls {
				t.Errorf("%d distinct names for %d calls", len(g.names()), peerCheckCalls)
			}
		})
	}
}

func TestCounterTotal_SumsEverySeriesAndIsZeroWithoutOne(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE c_total counter\nc_total{a=\"x\"} 2\nc_total{a=\"y\"} 3.5")
	}))
	defer srv.Close()
	for name, want := range map[string]float64{"c_total": 5.5, "d_total": 0} {
		if got, err := counterTotal(t.Context(), srv.URL, name); err != nil || got != want {
			t.Errorf("counterTotal(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
}

// countingGreeter counts SayHello calls and the distinct names asked for;
// it fails the name fail.
type countingGreeter struct {
	hellov1.UnimplementedGreeterServer
	fail  string
	calls atomic.Int64
	mu    sync.Mutex
	seen  map[string]bool // guarded by mu
}

func (g *countingGreeter) SayHello(_ context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	g.calls.Add(1)
	if req.GetName() == g.fail {
		return nil, status.Error(codes.Unavailable, "failed")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	g.seen[req.GetName()] = true
	return &hellov1.HelloReply{Message: "Hello, " + req.GetName()}, nil
}

// names returns the distinct names asked for.
func (g *countingGreeter) names() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.seen)
}

// startGreeter serves g on a loopback port until the test ends and returns
// a client of it.
func startGreeter(t *testing.T, g hellov1.GreeterServer) *client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hellov1.RegisterGreeterServer(srv, g)
	go func() { _ = srv.Serve(lis) }() // ends with Stop
	c, err := dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.close()
		srv.Stop()
	})
	return c
}
