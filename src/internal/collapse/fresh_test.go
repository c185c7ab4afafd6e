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

// Hit serves exactly the hits that start nothing: a fresh result whose
// early refresh is not due, and the result a call in flight refreshes
// early; a caller finds none otherwise, and Do serves it. It tells a
// copy what is left of the result.
func TestGroup_HitServesOnlyAFreshResultThatStartsNothing(t *testing.T) {
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Second}
	for _, tt := range []struct {
		name  string
		setUp func(g *Group[string], clock interface{ Store(int64) })
		want  bool
	}{
		{"fresh", func(g *Group[string], clock interface{ Store(int64) }) {
			do(g, "k", opts, value("v", nil))
			clock.Store(int64(400 * time.Millisecond))
		}, true},
		{"none held", func(*Group[string], interface{ Store(int64) }) {}, false},
		{"past its TTL", func(g *Group[string], clock interface{ Store(int64) }) {
			do(g, "k", opts, value("v", nil))
			clock.Store(int64(time.Second))
		}, false},
		{"soft-purged", func(g *Group[string], _ interface{ Store(int64) }) {
			do(g, "k", opts, value("v", nil))
			g.Purge("k", true)
		}, false},
		{"a pass marker", func(g *Group[string], _ interface{ Store(int64) }) {
			do(g, "k", opts, value("private", nil))
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newTestGroup(t, Options[string]{Private: func(v string) bool { return v == "private" }})
			tt.setUp(g, clock)
			var c Copy
			v, ok := g.Hit([]byte("k"), &c)
			if ok != tt.want || (ok && (v != "v" || c.Left.TTL != 600*time.Millisecond)) {
				t.Errorf("Hit = %q, %v, left %v; want %v (and v, 600ms left)", v, ok, c.Left.TTL, tt.want)
			}
		})
	}
}

// A fresh result due for its early refresh is no Hit: the read that
// starts the refresh is Do's.
func TestGroup_HitLeavesAResultDueForItsRefreshToDo(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, EarlyRefresh: true}
	do(g, "k", opts, value("v", nil))
	clock.Store(int64(time.Second) - 1) // past every point of a 1 s grid within the result's life
	if _, ok := g.Hit([]byte("k"), nil); ok {
		t.Error("Hit served a result due for its early refresh")
	}
}
