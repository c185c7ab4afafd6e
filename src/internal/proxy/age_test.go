package proxy_test

import (
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The proxies of these tests are their own only peer (see peer_test.go):
// each caller's answer is a forwarder's copy of the owner's, and both live
// in one proxy, on one clock the test moves.

// agedProxy starts a self-peered proxy whose rule keeps answers for ttl and
// swr after it, on clock.
func agedProxy(t *testing.T, backend string, clock *testkit.Clock, ttl, swr time.Duration) *runningProxy {
	t.Helper()
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: ttl, StaleWhileRevalidate: swr, Timeout: testkit.DefaultTimeout}
	return startProxy(t, backend, proxyConfig{peered: true, policy: &keep, options: func(o *proxy.Options) { o.Now = clock.Now }})
}

// purgeCopies takes back the forwarder's copy of "ann"'s answer, not the
// owner's: as if this replica's copy had been made later than the owner's.
func purgeCopies(s *runningProxy) int {
	return s.proxy.PurgeMethod(methodSayHello, proxy.Purge{Scope: proxy.Callers})
}

func TestPeers_ACopyLivesOnlyWhatIsLeftOfTheOwnersAnswer(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := agedProxy(t, b.addr, clock, 2*time.Second, 0)
	ctx := testkit.Context(t)
	call := func(at time.Duration) int64 {
		t.Helper()
		r := sayHello(ctx, s.client, "ann", "")
		if r.err != nil {
			t.Fatalf("at %v: %v", at, r.err)
		}
		if v := r.trailer.Get(peers.LifeHeader); v != nil {
			t.Errorf("at %v: the caller saw the owner's life trailer %q", at, v)
		}
		return r.reply.GetCall()
	}
	if got := call(0); got != 1 {
		t.Fatalf("first call answered by backend call %d", got)
	}
	// At 1.2 s this replica copies the owner's answer again: 0.8 s are left
	// of its life, and the copy lives no longer.
	clock.Advance(1200 * time.Millisecond)
	if n := purgeCopies(s); n != 1 {
		t.Fatalf("purged %d copies, want 1", n)
	}
	if got := call(1200 * time.Millisecond); got != 1 {
		t.Errorf("at 1.2s: backend call %d, want the owner's answer of call 1", got)
	}
	clock.Advance(799 * time.Millisecond)
	if got := call(1999 * time.Millisecond); got != 1 {
		t.Errorf("at 1.999s: backend call %d, want the copy of call 1", got)
	}
	clock.Advance(time.Millisecond)
	if got := call(2 * time.Second); got != 2 {
		t.Errorf("at 2s: backend call %d, want a new call 2: the answer's life is over everywhere", got)
	}
	if n := b.Calls.SayHello.Load(); n != 2 {
		t.Errorf("backend calls = %d, want 2", n)
	}
}

func TestPeers_ARefreshIsAnsweredFreshByTheOwner(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := agedProxy(t, b.addr, clock, time.Second, time.Hour)
	ctx := testkit.Context(t)
	if r := sayHello(ctx, s.client, "ann", ""); r.err != nil || r.reply.GetCall() != 1 {
		t.Fatalf("first call: %v, %v", r.reply, r.err)
	}
	// A soft purge of both copies: the next caller is served the old answer
	// while one refresh runs, and the owner answers that refresh with a
	// new answer, not with its own soft-purged copy.
	if n := s.proxy.PurgeMethod(methodSayHello, proxy.Purge{Soft: true}); n != 2 {
		t.Fatalf("soft purge took back %d answers, want 2 (the owner's and the copy)", n)
	}
	if r := sayHello(ctx, s.client, "ann", ""); r.err != nil || r.reply.GetCall() != 1 {
		t.Errorf("after the soft purge: %v, %v; want the old answer, stale", r.reply, r.err)
	}
	testkit.WaitFor(t, "the refresh", func() bool { return b.Calls.SayHello.Load() == 2 && s.proxy.Stats().InFlight == 0 })
	if r := sayHello(ctx, s.client, "ann", ""); r.err != nil || r.reply.GetCall() != 2 {
		t.Errorf("after the refresh: %v, %v; want the new answer of call 2", r.reply, r.err)
	}
	if n := b.Calls.SayHello.Load(); n != 2 {
		t.Errorf("backend calls = %d, want 2", n)
	}
}
