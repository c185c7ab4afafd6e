package collapse

import (
	"testing"
	"time"
)

func TestGroup_PeekedResultIsTakenOverWithWhatIsLeftOfItAndItsRefreshTime(t *testing.T) {
	const ttl, swr = time.Second, 2 * time.Second
	opts := &CallOptions{TTL: ttl, StaleWhileRevalidate: swr, TTLJitter: 0.5, EarlyRefresh: true}
	old, oldClock := newTestGroup(t, Options[string]{})
	// A key whose early refresh falls inside its first result's life.
	key := refreshedKey(t, old, opts, "answer", nil, int64(300*time.Millisecond))
	fresh, refresh := times(t, old, key)
	oldClock.Store(int64(300 * time.Millisecond))
	h, ok := old.Peek(key)
	if !ok || h.Value != "answer" {
		t.Fatalf("Peek = %+v, %v; want the fresh answer", h, ok)
	}
	now := int64(300 * time.Millisecond)
	want := Handoff[string]{Value: "answer", RefreshIn: time.Duration(refresh - now),
		Left: Windows{TTL: time.Duration(fresh - now), StaleWhileRevalidate: swr}}
	if h != want {
		t.Fatalf("Peek = %+v, want %+v: the windows left (not cut at the refresh) and the refresh's time", h, want)
	}
	if _, r := times(t, old, key); r != refresh {
		t.Error("Peek started the early refresh: it must not count as a read")
	}

	// The new cache takes it over, on a clock of its own.
	taken, newClock := newTestGroup(t, Options[string]{
		Declared: func(v string) (Windows, bool) { return h.Left, v == "handed" },
		Handed:   func(v string) (time.Duration, bool) { return h.RefreshIn, v == "handed" },
	})
	newClock.Store(int64(5 * time.Second))
	do(taken, key, opts, value("handed", nil))
	gotFresh, gotRefresh := times(t, taken, key)
	if gotFresh != int64(5*time.Second)+int64(h.Left.TTL) || gotRefresh != int64(5*time.Second)+int64(h.RefreshIn) {
		t.Errorf("taken over: fresh until %v, refresh at %v; want %v (what was left, not jittered again) and %v",
			time.Duration(gotFresh), time.Duration(gotRefresh), 5*time.Second+h.Left.TTL, 5*time.Second+h.RefreshIn)
	}
}

func TestGroup_PeekFindsNoResultThatIsNotFresh(t *testing.T) {
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Second}
	for _, tt := range []struct {
		name  string
		setUp func(g *Group[string], clock interface{ Store(int64) })
	}{
		{"none held", func(*Group[string], interface{ Store(int64) }) {}},
		{"past its TTL", func(g *Group[string], clock interface{ Store(int64) }) {
			do(g, "k", opts, value("v", nil))
			clock.Store(int64(time.Second))
		}},
		{"soft-purged", func(g *Group[string], _ interface{ Store(int64) }) {
			do(g, "k", opts, value("v", nil))
			g.Purge("k", true)
		}},
		{"a pass marker", func(g *Group[string], _ interface{ Store(int64) }) {
			do(g, "k", opts, value("private", nil))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newTestGroup(t, Options[string]{Private: func(v string) bool { return v == "private" }})
			tt.setUp(g, clock)
			if h, ok := g.Peek("k"); ok {
				t.Errorf("Peek = %+v, want none", h)
			}
		})
	}
}

func TestGroup_PeekDuringAnEarlyRefreshHandsTheFreshResultOverDue(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, EarlyRefresh: true}
	key := refreshedKey(t, g, opts, "old", nil, 0)
	_, refresh := times(t, g, key)
	clock.Store(refresh)
	gate := newGate("new", nil)
	do(g, key, opts, gate.fn) // starts the refresh
	<-gate.started
	h, ok := g.Peek(key)
	close(gate.release)
	if !ok || h.Value != "old" || h.RefreshIn != 1 {
		t.Errorf("Peek during the refresh = %+v, %v; want the fresh result, due for its refresh at once", h, ok)
	}
}
