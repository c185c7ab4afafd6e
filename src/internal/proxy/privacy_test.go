package proxy_test

import (
	"context"
	"strings"
	"sync/atomic"
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

func TestUnary_AfterAPrivateAnswerItsKeysCallersGoStraightToTheBackend(t *testing.T) {
	// Hit-for-pass: once a key's answer was private, its callers do not
	// queue behind a call whose answer they most likely cannot share.
	const n = 5
	b := startBackend(t, nil)
	held := &heldAfterFirst{release: make(chan struct{})}
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Hour, wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
		held.ClientConnInterface = cc
		return held
	}})
	ctx := testkit.Context(t)
	if r := sayHello(ctx, s.client, prefixCookie+"s", ""); r.err != nil {
		t.Fatal(r.err)
	}
	calls := make([]<-chan result, n)
	for i := range calls {
		calls[i] = goSayHello(ctx, s.client, prefixCookie+"s", "")
	}
	// Every caller's call is at the backend at once; only the first waits
	// in the engine, for its own call.
	testkit.WaitFor(t, "every call at the backend", func() bool { return held.waiting.Load() == n })
	if w := s.proxy.Stats().Waiters; w != 1 {
		t.Errorf("engine waiters = %d, want 1: nobody waits for another's call", w)
	}
	close(held.release)
	for _, c := range calls {
		if r := testkit.Recv(t, "a call to finish", c); r.err != nil {
			t.Errorf("caller: %v", r.err)
		}
	}
	outcomes := map[string]int{}
	for _, r := range s.waitForRequests(t, n+1) {
		outcomes[r.outcome]++
	}
	if outcomes["leader"] != 2 || outcomes["pass"] != n-1 {
		t.Errorf("outcomes = %v, want 2 leaders (the first call and the pass call) and %d pass", outcomes, n-1)
	}
	if got := b.Calls.SayHello.Load(); got != n+1 {
		t.Errorf("backend calls = %d, want %d", got, n+1)
	}
}

// heldAfterFirst is a backend connection that holds every call but the
// first until release is closed, counting those it holds.
type heldAfterFirst struct {
	grpc.ClientConnInterface
	release chan struct{}
	calls   atomic.Int64
	waiting atomic.Int64
}

func (h *heldAfterFirst) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if h.calls.Add(1) > 1 {
		h.waiting.Add(1)
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}
