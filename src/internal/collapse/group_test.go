package collapse

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGroup_DuplicateCallsShareOneCall(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)

	const n = 100
	leader := doAsync(g, context.Background(), "k", nil, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	var followers []<-chan result
	for range n - 1 {
		followers = append(followers, doAsync(g, context.Background(), "k", nil, call.fn))
	}
	waitWaiters(t, g, n)
	close(call.release)

	if r := testkit.Recv(t, "the leader's result", leader); r != (result{"v", Lead, nil}) {
		t.Errorf("leader got %+v, want v/leader/nil", r)
	}
	for _, f := range followers {
		if r := testkit.Recv(t, "a follower's result", f); r != (result{"v", Join, nil}) {
			t.Errorf("follower got %+v, want v/joined/nil", r)
		}
	}
	if got := call.calls.Load(); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}
}

func TestGroup_DifferentKeysDoNotShare(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	var calls atomic.Int64
	for _, k := range []string{"a", "b", "a\x00", ""} {
		if r := do(g, k, nil, value(k, &calls)); r != (result{k, Lead, nil}) {
			t.Errorf("Do(%q) = %+v", k, r)
		}
	}
	if calls.Load() != 4 {
		t.Errorf("calls = %d, want 4", calls.Load())
	}
}

func TestGroup_ErrorsReachFollowersAndAreNotKept(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	boom := errors.New("boom")
	call := newGate("", boom)
	opts := &CallOptions{TTL: time.Hour}

	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", opts, call.fn)
	waitWaiters(t, g, 2)
	close(call.release)
	for _, c := range []<-chan result{leader, follower} {
		if r := testkit.Recv(t, "a caller's result", c); !errors.Is(r.err, boom) {
			t.Errorf("got err %v, want boom", r.err)
		}
	}
	if r := do(g, "k", opts, value("ok", nil)); r.outcome != Lead {
		t.Errorf("call after an error: outcome %v, want leader (errors are not kept)", r.outcome)
	}
}

func TestGroup_PanicReachesEveryWaiterAndWorkerSurvives(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	release := make(chan struct{})
	started := make(chan struct{})
	fn := func(*Call) (string, error) {
		close(started)
		<-release
		panic("kaboom")
	}
	leader := doAsync(g, context.Background(), "k", nil, fn)
	testkit.Recv(t, "the call to start", started)
	follower := doAsync(g, context.Background(), "k", nil, fn)
	waitWaiters(t, g, 2)
	close(release)
	for _, c := range []<-chan result{leader, follower} {
		var pe *PanicError
		if r := testkit.Recv(t, "a caller's result", c); !errors.As(r.err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
			t.Errorf("got err %v, want a *PanicError with kaboom and a stack", r.err)
		}
	}
	if r := do(g, "k", nil, value("after", nil)); r.val != "after" || r.err != nil {
		t.Errorf("Do after a panic = %+v", r)
	}
}

func TestGroup_GoexitReachesEveryWaiter(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	release := make(chan struct{})
	started := make(chan struct{})
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		g.Do(context.Background(), "k", nil, func(*Call) (string, error) {
			close(started)
			<-release
			runtime.Goexit() // ends the leader's goroutine, as it asks
			return "", nil
		})
		t.Error("Do returned to a leader whose call ran runtime.Goexit")
	}()
	testkit.Recv(t, "the call to start", started)
	follower := doAsync(g, context.Background(), "k", nil, value("x", nil))
	waitWaiters(t, g, 2)
	close(release)
	if r := testkit.Recv(t, "the follower's result", follower); !errors.Is(r.err, ErrGoexit) {
		t.Errorf("follower err = %v, want ErrGoexit", r.err)
	}
	testkit.Recv(t, "the leader's goroutine to end", leaderDone)
	if g.Stats().InFlight != 0 {
		t.Errorf("call still in flight after Goexit")
	}
}

func TestGroup_LeaderLeavingDoesNotFailFollowers(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)

	ctx, cancel := context.WithCancel(context.Background())
	leader := doAsync(g, ctx, "k", nil, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", nil, call.fn)
	waitWaiters(t, g, 2)

	// The call runs on the leader's goroutine: the leader's Do returns when
	// it ends (a gRPC caller has its answer from its own client by then).
	cancel()
	close(call.release)
	if r := testkit.Recv(t, "the follower's result", follower); r.val != "v" || r.err != nil {
		t.Errorf("follower got %+v, want v", r)
	}
	if r := testkit.Recv(t, "the leader's result", leader); !errors.Is(r.err, context.Canceled) || r.outcome != Lead {
		t.Errorf("leader got %+v, want canceled", r)
	}
	if n := len(call.ended); n != 0 {
		t.Errorf("the call's context ended %d times while a follower waited", n)
	}
}

func TestGroup_EachFollowerStopsAtItsOwnDeadline(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)

	leader := doAsync(g, context.Background(), "k", nil, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if r := testkit.Recv(t, "the call's result", doAsync(g, ctx, "k", nil, call.fn)); !errors.Is(r.err, context.DeadlineExceeded) || r.outcome != Join {
		t.Errorf("short follower got %+v, want deadline exceeded", r)
	}
	close(call.release)
	if r := testkit.Recv(t, "the leader's result", leader); r.val != "v" || r.err != nil {
		t.Errorf("leader got %+v, want v", r)
	}
}

func TestGroup_LastWaiterLeavingCancelsTheCall(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)
	opts := &CallOptions{TTL: time.Hour}

	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	leader := doAsync(g, ctx1, "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, ctx2, "k", opts, call.fn)
	waitWaiters(t, g, 2)

	cancel1()
	testkit.WaitFor(t, "the leader to leave", func() bool { return waiting(g, "k") == 1 })
	select {
	case err := <-call.ended:
		t.Fatalf("call ended (%v) while a follower still waited", err)
	default:
	}
	cancel2()
	testkit.Recv(t, "the follower's result", follower)
	if err := testkit.Recv(t, "the call to end by its context", call.ended); !errors.Is(err, context.Canceled) {
		t.Errorf("call's context ended with %v, want Canceled", err)
	}
	if r := testkit.Recv(t, "the leader's result", leader); !errors.Is(r.err, context.Canceled) {
		t.Errorf("leader got %+v, want canceled", r)
	}

	// The key is free at once: the next caller leads a call of its own.
	var calls atomic.Int64
	if r := do(g, "k", opts, value("next", &calls)); r != (result{"next", Lead, nil}) || calls.Load() != 1 {
		t.Errorf("next caller got %+v after %d calls, want next/leader after 1", r, calls.Load())
	}
	testkit.WaitFor(t, "the cancelled call to complete", func() bool { return g.Stats().InFlight == 0 })
	if r := do(g, "k", opts, value("x", nil)); r != (result{"next", Hit, nil}) {
		t.Errorf("after the cancelled call completed: %+v, want the next caller's result as a hit", r)
	}
}

func TestGroup_FinishKeepsAnAbandonedCallForTheCache(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)
	opts := &CallOptions{TTL: time.Hour, Finish: true}

	ctx, cancel := context.WithCancel(context.Background())
	contexts := make(chan context.Context, 1)
	call.check = func(c *Call) { contexts <- c.Context() }
	leader := doAsync(g, ctx, "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	callCtx := testkit.Recv(t, "the call's context", contexts)
	cancel()
	// The leader, the call's last waiter, has left: without Finish, the
	// call's context would be cancelled now.
	testkit.WaitFor(t, "the leader to leave", func() bool { return waiting(g, "k") == 0 })
	if err := callCtx.Err(); err != nil {
		t.Errorf("the call's context ended (%v) when its last waiter left although Finish is set", err)
	}
	close(call.release)
	if r := testkit.Recv(t, "the leader's result", leader); !errors.Is(r.err, context.Canceled) {
		t.Errorf("leader got %+v, want canceled", r)
	}
	if n := len(call.ended); n != 0 {
		t.Errorf("the call's context ended although Finish is set")
	}
	if r := do(g, "k", opts, value("x", nil)); r != (result{"v", Hit, nil}) {
		t.Errorf("got %+v, want the finished call's result as a hit", r)
	}
}

func TestGroup_CallTimeoutBoundsTheCall(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	call := newGate("v", nil)
	r := testkit.Recv(t, "the call's result", doAsync(g, context.Background(), "k", &CallOptions{Timeout: 10 * time.Millisecond}, call.fn))
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("got %+v, want the call's own deadline", r)
	}
}

func TestGroup_MaxCallsQueuesWithinTheCallersWait(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{MaxCalls: 1})
	busy := newGate("busy", nil)
	first := doAsync(g, context.Background(), "a", nil, busy.fn)
	testkit.Recv(t, "the busy call to start", busy.started)

	// A second key's call waits for the slot; its caller's deadline ends the
	// wait, and the queued call is dropped without running.
	var calls atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r := testkit.Recv(t, "the call's result", doAsync(g, ctx, "b", nil, value("b", &calls))); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("queued caller got %+v, want its own deadline", r)
	}
	testkit.WaitFor(t, "the queue to empty", func() bool { return g.Stats().Queued == 0 })

	// Without a deadline of the caller, the call's timeout ends the wait.
	r := testkit.Recv(t, "the call's result", doAsync(g, context.Background(), "c", &CallOptions{Timeout: 20 * time.Millisecond}, value("c", &calls)))
	if !errors.Is(r.err, ErrOverloaded) {
		t.Errorf("queued call got %+v, want ErrOverloaded", r)
	}

	// A queued call runs as soon as the slot is free.
	queued := doAsync(g, context.Background(), "d", nil, value("d", &calls))
	testkit.WaitFor(t, "a queued call", func() bool { return g.Stats().Queued == 1 })
	close(busy.release)
	if r := testkit.Recv(t, "the queued call's result", queued); r != (result{"d", Lead, nil}) {
		t.Errorf("queued call got %+v, want d", r)
	}
	testkit.Recv(t, "the first call's result", first)
	if calls.Load() != 1 {
		t.Errorf("calls = %d, want 1 (only d ran)", calls.Load())
	}
}

func TestGroup_ConcurrentMixedKeys(t *testing.T) {
	g := New(Options[string]{Limits: Limits{MaxEntries: 50}, MaxCalls: 4})
	opts := []*CallOptions{
		{TTL: time.Millisecond},
		{TTL: time.Microsecond, StaleWhileRevalidate: time.Millisecond},
		{StaleIfError: time.Millisecond},
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 2000 {
				k := keys[(w+i)%len(keys)]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
				if i%3 == 0 {
					ctx, cancel = context.WithCancel(context.Background())
				}
				v, _, err := g.Do(ctx, k, opts[(w+i)%len(opts)], value(k, nil))
				cancel()
				if err == nil && v != k {
					t.Errorf("key %s: got %q", k, v)
					return
				}
			}
		})
	}
	wg.Wait()
	testkit.WaitFor(t, "calls to complete", func() bool {
		st := g.Stats()
		return st.InFlight == 0 && st.Waiters == 0 && st.Queued == 0
	})
}
