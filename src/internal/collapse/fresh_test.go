package collapse

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

// doFresh calls g.DoCopy, asking for a fresh result, and returns its
// result as one value.
func doFresh(g *Group[string], key string, opts *CallOptions, fn func(*Call) (string, error)) result {
	v, o, err := g.DoCopy(context.Background(), key, opts, fn, &Copy{Fresh: true})
	return result{v, o, err}
}

func TestGroup_DoCopyFreshNeverServesAStaleResult(t *testing.T) {
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Hour, StaleIfError: time.Hour}
	for _, tt := range []struct {
		name  string
		stale func(g *Group[string], clock *atomic.Int64)
	}{
		{"past its TTL", func(_ *Group[string], clock *atomic.Int64) { clock.Store(int64(2 * time.Second)) }},
		{"soft-purged", func(g *Group[string], _ *atomic.Int64) { g.Purge("k", true) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newTestGroup(t, Options[string]{})
			do(g, "k", opts, value("old", nil))
			if r := doFresh(g, "k", opts, value("unused", nil)); r != (result{"old", Hit, nil}) {
				t.Errorf("fresh result: %+v, want a hit", r)
			}
			tt.stale(g, clock)
			var calls atomic.Int64
			if r := doFresh(g, "k", opts, value("new", &calls)); r != (result{"new", Lead, nil}) {
				t.Errorf("stale result: %+v, want a call of its own", r)
			}
			if r := do(g, "k", opts, value("unused", nil)); r != (result{"new", Hit, nil}) {
				t.Errorf("after: %+v, want the new result", r)
			}
			if calls.Load() != 1 {
				t.Errorf("calls = %d, want 1", calls.Load())
			}
		})
	}
}

func TestGroup_DoCopyFreshJoinsTheRefreshOthersAreServedStaleDuring(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Hour}
	do(g, "k", opts, value("old", nil))
	clock.Store(int64(2 * time.Second))
	refresh := newGate("new", nil)
	// A caller's read starts the background refresh and is served stale.
	if r := do(g, "k", opts, refresh.fn); r != (result{"old", Stale, nil}) {
		t.Fatalf("read past the TTL: %+v, want stale", r)
	}
	testkit.Recv(t, "the refresh to start", refresh.started)
	fresh := doFreshAsync(g, context.Background(), "k", opts, refresh.fn)
	// A fresh copy joins the refresh rather than take the stale result.
	waitWaiters(t, g, 1)
	close(refresh.release)
	if r := testkit.Recv(t, "the fresh caller's result", fresh); r != (result{"new", Join, nil}) {
		t.Errorf("fresh caller: %+v, want the refresh's value, joined", r)
	}
	if refresh.calls.Load() != 1 {
		t.Errorf("calls = %d, want the one refresh", refresh.calls.Load())
	}
}

func TestGroup_DoCopyFreshMayGetTheLastResultWhenTheCallFails(t *testing.T) {
	// stale-if-error is a promise to every caller of a call that fails.
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, StaleIfError: time.Hour}
	do(g, "k", opts, value("old", nil))
	clock.Store(int64(2 * time.Second))
	if r := doFresh(g, "k", opts, failing(errors.New("down"), nil)); r != (result{"old", StaleOnError, nil}) {
		t.Errorf("failed call: %+v, want the last result, stale on error", r)
	}
}

func TestGroup_DoCopySaysWhatIsLeftOfTheWindows(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{Private: isPrivate})
	opts := &CallOptions{TTL: 10 * time.Second, StaleWhileRevalidate: 20 * time.Second, StaleIfError: 30 * time.Second}
	left := func(key, v string, fn func(*Call) (string, error)) (Outcome, Windows) {
		t.Helper()
		var c Copy
		got, o, err := g.DoCopy(context.Background(), key, opts, fn, &c)
		if err != nil || got != v {
			t.Fatalf("%s: %q, %v; want %q", key, got, err, v)
		}
		return o, c.Left
	}
	full := Windows{TTL: 10 * time.Second, StaleWhileRevalidate: 20 * time.Second, StaleIfError: 30 * time.Second}
	steps := []struct {
		at   time.Duration
		fn   func(*Call) (string, error)
		want Outcome
		left Windows
	}{
		{0, value("v", nil), Lead, full},
		{4 * time.Second, value("v", nil), Hit, Windows{6 * time.Second, 20 * time.Second, 30 * time.Second}},
		{15 * time.Second, value("v", nil), Stale, Windows{0, 15 * time.Second, 25 * time.Second}},
	}
	for _, s := range steps {
		clock.Store(int64(s.at))
		if o, w := left("k", "v", s.fn); o != s.want || w != s.left {
			t.Errorf("at %v: %v with %+v left, want %v with %+v", s.at, o, w, s.want, s.left)
		}
	}
	testkit.WaitFor(t, "the refresh to end", func() bool { return g.Stats().InFlight == 0 })

	// Past the refresh window, a failed call is answered with the result
	// kept for stale-if-error: what is left of that window.
	clock.Store(int64(50 * time.Second)) // the refresh's result: fresh until 25s, stale until 45s and 55s
	if o, w := left("k", "v", failing(errors.New("down"), nil)); o != StaleOnError || w != (Windows{StaleIfError: 5 * time.Second}) {
		t.Errorf("stale on error: %v with %+v left, want 5s of stale-if-error", o, w)
	}
	// A value the Group does not keep has nothing left.
	if o, w := left("private", "private", value("private", nil)); o != Lead || w != (Windows{}) {
		t.Errorf("private value: %v with %+v left, want nothing", o, w)
	}
}

func TestGroup_DoCopyOfAJoinedCallSaysWhatIsLeftOfItsResult(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: 10 * time.Second, StaleIfError: 30 * time.Second}
	call := newGate("v", nil)
	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	var c Copy
	joined := async(func() (string, Outcome, error) { return g.DoCopy(context.Background(), "k", opts, call.fn, &c) })
	waitWaiters(t, g, 2)
	close(call.release)
	testkit.Recv(t, "the leader's result", leader)
	if r := testkit.Recv(t, "the joined result", joined); r != (result{"v", Join, nil}) || c.Left != opts.Windows() {
		t.Errorf("joined: %+v with %+v left, want v, joined, with the whole windows %+v", r, c.Left, opts.Windows())
	}
	// Once purged, nothing is left of the result.
	g.Purge("k", false)
	c = Copy{}
	g.DoCopy(context.Background(), "k", opts, value("new", nil), &c)
	if c.Left != opts.Windows() {
		t.Errorf("after the purge, the new result has %+v left, want %+v", c.Left, opts.Windows())
	}
}
