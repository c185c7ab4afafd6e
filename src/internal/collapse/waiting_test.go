package collapse

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGroup_MaxWaitersSendsTheNextCallerToACallOfItsOwn(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("shared", nil)
	opts := &CallOptions{TTL: time.Hour, MaxWaiters: 2}

	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	followers := []<-chan result{
		doAsync(g, context.Background(), "k", opts, call.fn),
		doAsync(g, context.Background(), "k", opts, call.fn),
	}
	waitWaiters(t, g, 3)
	// The waiting list is full: the next caller does not wait.
	var own atomic.Int64
	if r := do(g, "k", opts, value("own", &own)); r != (result{"own", Own, nil}) {
		t.Errorf("caller beyond MaxWaiters: %+v, want its own call's value with outcome own", r)
	}
	if waiting(g, "k") != 3 {
		t.Errorf("waiting = %d after the own call, want 3: it never counted itself in", waiting(g, "k"))
	}
	close(call.release)
	for i, c := range append(followers, leader) {
		if r := testkit.Recv(t, "a caller's result", c); r.val != "shared" || r.err != nil {
			t.Errorf("caller %d: %+v, want the shared value", i, r)
		}
	}
	// The own call's value was never kept: the shared call's is.
	if r := do(g, "k", opts, value("later", nil)); r != (result{"shared", Hit, nil}) {
		t.Errorf("after the calls: %+v, want the shared value as a hit", r)
	}
	if call.calls.Load() != 1 || own.Load() != 1 {
		t.Errorf("calls = %d shared, %d own; want 1 and 1", call.calls.Load(), own.Load())
	}
}

func TestGroup_WaitTimeoutLetsAFollowerMakeItsOwnCall(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("slow", nil)
	opts := &CallOptions{TTL: time.Hour, WaitTimeout: time.Millisecond}

	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	// The leader's call hangs until released; a follower stops waiting for
	// it after its timeout and is answered by a call of its own.
	if r := do(g, "k", opts, value("own", nil)); r != (result{"own", Own, nil}) {
		t.Errorf("follower past its wait timeout: %+v, want its own call's value with outcome own", r)
	}
	if waiting(g, "k") != 1 {
		t.Errorf("waiting = %d, want 1 (the leader): the follower left the list", waiting(g, "k"))
	}
	close(call.release)
	if r := testkit.Recv(t, "the leader's result", leader); r != (result{"slow", Lead, nil}) {
		t.Errorf("leader: %+v", r)
	}
	if r := do(g, "k", opts, value("later", nil)); r != (result{"slow", Hit, nil}) {
		t.Errorf("after the calls: %+v, want the leader's value as a hit (an own call is never kept)", r)
	}
}

func TestGroup_OwnCallStillTakesASlot(t *testing.T) {
	// A call of its own counts against MaxCalls like any other: a full
	// waiting list cannot push the backend past its bound.
	g, _ := newTestGroup(t, Options[string]{MaxCalls: 1})
	call := newGate("shared", nil)
	opts := &CallOptions{MaxWaiters: 1, Timeout: time.Hour}
	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", opts, call.fn)
	waitWaiters(t, g, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := testkit.Recv(t, "the own call's result", doAsync(g, ctx, "k", opts, value("own", nil))); r.outcome != Own || r.err == nil {
		t.Errorf("own call with no slot free and its context over: %+v, want outcome own and an error", r)
	}
	close(call.release)
	for _, c := range []<-chan result{leader, follower} {
		testkit.Recv(t, "a caller's result", c)
	}
}

func TestGroup_MaxWaitersCountsNoLeaderForABackgroundRefresh(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Hour, MaxWaiters: 1}
	do(g, "k", opts, value("old", nil))
	clock.Store(int64(2 * time.Second))
	refresh := newGate("new", nil)
	do(g, "k", opts, refresh.fn) // served stale; the refresh starts, nobody waits for it
	testkit.Recv(t, "the refresh to start", refresh.started)
	// Callers who want a fresh answer wait for the refresh: one may.
	first := doFreshAsync(g, context.Background(), "k", opts, refresh.fn)
	waitWaiters(t, g, 1)
	if r := doFresh(g, "k", opts, value("own", nil)); r != (result{"own", Own, nil}) {
		t.Errorf("second waiter of a refresh with MaxWaiters 1: %+v, want a call of its own", r)
	}
	close(refresh.release)
	if r := testkit.Recv(t, "the first waiter's result", first); r != (result{"new", Join, nil}) {
		t.Errorf("first waiter: %+v", r)
	}
}

func TestGroup_OwnCallWaitsForASlotWithinTheCallTimeout(t *testing.T) {
	// A caller sent to a call of its own waits for a slot no longer than
	// a shared call would: the key's Timeout.
	g, _ := newTestGroup(t, Options[string]{MaxCalls: 1})
	call := newGate("shared", nil)
	slow := &CallOptions{MaxWaiters: 1, Timeout: time.Hour}
	opts := &CallOptions{MaxWaiters: 1, Timeout: time.Millisecond}
	leader := doAsync(g, context.Background(), "k", slow, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", slow, call.fn)
	waitWaiters(t, g, 2)
	// The slot is held until released: the own call's wait ends with its
	// timeout, while the caller's own context lasts.
	r := testkit.Recv(t, "the own call's result", doAsync(g, context.Background(), "k", opts, value("own", nil)))
	if r.outcome != Own || !errors.Is(r.err, ErrOverloaded) {
		t.Errorf("own call with no slot free: %+v, want outcome own and ErrOverloaded", r)
	}
	close(call.release)
	for _, c := range []<-chan result{leader, follower} {
		testkit.Recv(t, "a caller's result", c)
	}
}
