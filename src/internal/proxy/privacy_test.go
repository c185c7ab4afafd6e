package proxy_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestUnary_PrivateResponsesGoOnlyToTheCallerTheyWereMadeFor(t *testing.T) {
	tests := []struct {
		name    string
		request string
		private func(result) string // the private value a caller got
	}{
		{"set-cookie header", prefixCookie + "s", func(r result) string { return strings.Join(r.header.Get("set-cookie"), ",") }},
		{"operator-listed trailer", prefixPrivate + "p", func(r result) string { return strings.Join(r.trailer.Get("x-user-trailer"), ",") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 5
			hold := make(chan struct{})
			b := startBackend(t, hold)
			s := startProxy(t, b.addr, proxyConfig{ttl: time.Hour, options: func(o *proxy.Options) {
				o.PrivateHeaders = []string{"X-User-Trailer"}
			}})
			ctx := testkit.Context(t)
			calls := startHeld(t, ctx, s, n, tt.request, "")
			close(hold)

			// Every caller got a private value of its own: the leader the
			// shared call's, each follower its own call's.
			seen := map[string]bool{}
			for _, c := range calls {
				r := testkit.Recv(t, "a call to finish", c)
				v := tt.private(r)
				if r.err != nil || v == "" || seen[v] {
					t.Errorf("caller got %q (err %v); private values so far %v", v, r.err, seen)
				}
				seen[v] = true
			}
			if got := b.Calls.SayHello.Load(); got != n {
				t.Errorf("backend calls = %d, want %d (the followers' own calls too)", got, n)
			}
			// Nothing was cached: the next caller calls the backend again.
			if r := sayHello(ctx, s.client, tt.request, ""); r.err != nil || seen[tt.private(r)] {
				t.Errorf("next caller got %q (err %v), want a value of its own", tt.private(r), r.err)
			}
			if got := b.Calls.SayHello.Load(); got != n+1 {
				t.Errorf("backend calls = %d, want %d", got, n+1)
			}
			outcomes := map[string]int{}
			for _, r := range s.waitForRequests(t, n+1) {
				outcomes[r.outcome]++
			}
			if outcomes["leader"] != 2 || outcomes["private"] != n-1 {
				t.Errorf("outcomes = %v, want 2 leaders and %d private", outcomes, n-1)
			}
		})
	}
}

func TestUnary_CallerAuthorityIsForwardedAndKeyed(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Hour})
	ctx := testkit.Context(t)
	for _, host := range []string{"tenant-a.example", "tenant-b.example", "tenant-a.example"} {
		if r := sayHello(ctx, s.client, "same", "", grpc.CallAuthority(host)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	got := b.authoritiesSeen()
	if len(got) != 2 || got[0] != "tenant-a.example" || got[1] != "tenant-b.example" {
		t.Errorf("backend saw authorities %v, want tenant-a then tenant-b (the third call a cache hit)", got)
	}
}

func TestUnary_AutoPolicyPassesUnannotatedMethodsThrough(t *testing.T) {
	b := startBackend(t, nil)
	writes := kinds{methodSayHello: {Kind: methodkind.Unary}} // as if SayHello had no idempotency_level
	s := startProxy(t, b.addr, proxyConfig{kinds: writes, policy: &policy.Defaults{CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}})
	ctx := testkit.Context(t)
	for range 3 {
		if r := sayHello(ctx, s.client, "order", ""); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := b.Calls.SayHello.Load(); got != 3 {
		t.Errorf("backend calls = %d, want 3: a possible write is never answered from another call", got)
	}
	for _, r := range s.waitForRequests(t, 3) {
		if r.outcome != "passthrough" {
			t.Errorf("observed %+v, want passthrough", r)
		}
	}
}
