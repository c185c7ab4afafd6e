package collapse

import (
	"context"
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
