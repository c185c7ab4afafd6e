package collapse

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGroup_PurgeTakesAResultBack(t *testing.T) {
	tests := []struct {
		name string
		opts *CallOptions
		soft bool
		want Outcome // the next caller's outcome
	}{
		{"hard", &CallOptions{TTL: time.Hour, StaleWhileRevalidate: time.Hour}, false, Lead},
		{"soft: stale while one call refreshes it", &CallOptions{TTL: time.Hour, StaleWhileRevalidate: time.Hour}, true, Stale},
		{"soft without a stale window", &CallOptions{TTL: time.Hour}, true, Lead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGroup(t, Options[string]{})
			var calls atomic.Int64
			do(g, "k", tt.opts, value("v1", &calls))
			do(g, "other", tt.opts, value("o", nil))
			if !g.Purge("k", tt.soft) {
				t.Fatal("Purge(k) = false, want true: a result was held")
			}
			if r := do(g, "k", tt.opts, value("v2", &calls)); r.outcome != tt.want {
				t.Errorf("after the purge: %+v, want outcome %v", r, tt.want)
			}
			testkit.WaitFor(t, "calls to end", func() bool { return g.Stats().InFlight == 0 })
			if r := do(g, "k", tt.opts, value("v3", &calls)); r != (result{"v2", Hit, nil}) {
				t.Errorf("once refreshed: %+v, want v2 as a hit", r)
			}
			if r := do(g, "other", tt.opts, value("x", nil)); r != (result{"o", Hit, nil}) {
				t.Errorf("another key: %+v, want its result untouched", r)
			}
			if got := calls.Load(); got != 2 {
				t.Errorf("calls = %d, want 2", got)
			}
			if st := g.Stats(); st.Entries != 2 {
				t.Errorf("entries = %d, want 2", st.Entries)
			}
		})
	}
	g, _ := newTestGroup(t, Options[string]{})
	if g.Purge("nothing", false) {
		t.Error("Purge of a key never held = true")
	}
}

func TestGroup_PurgeDetachesTheCallInFlight(t *testing.T) {
	// A call that started before the purge may have read what the purge is
	// for: its callers get its answer, but nobody after the purge does.
	g, _ := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Hour}
	before := newGate("before", nil)
	leader := doAsync(g, context.Background(), "k", opts, before.fn)
	testkit.Recv(t, "the first call to start", before.started)
	follower := doAsync(g, context.Background(), "k", opts, before.fn)
	waitWaiters(t, g, 2)

	if g.Purge("k", false) {
		t.Error("Purge = true, want false: nothing was held yet")
	}
	after := newGate("after", nil)
	next := doAsync(g, context.Background(), "k", opts, after.fn)
	testkit.Recv(t, "a new call to start", after.started)
	close(before.release)
	for _, c := range []<-chan result{leader, follower} {
		if r := testkit.Recv(t, "an earlier caller's result", c); r.val != "before" {
			t.Errorf("caller from before the purge: %+v, want the call it joined", r)
		}
	}
	close(after.release)
	if r := testkit.Recv(t, "the later caller's result", next); r != (result{"after", Lead, nil}) {
		t.Errorf("caller after the purge: %+v, want a call of its own as leader", r)
	}
	if r := do(g, "k", opts, value("x", nil)); r != (result{"after", Hit, nil}) {
		t.Errorf("kept: %+v, want the call made after the purge", r)
	}
}

func TestGroup_PurgeMatchingSelectsByKeyAndValue(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Hour}
	for _, kv := range [][2]string{{"/a/Get:1", "tag:red"}, {"/a/Get:2", "tag:blue"}, {"/b/Get:1", "tag:red"}} {
		do(g, kv[0], opts, value(kv[1], nil))
	}
	flight := newGate("flying", nil)
	flying := doAsync(g, context.Background(), "/a/Get:3", opts, flight.fn)
	testkit.Recv(t, "the call to start", flight.started)

	// By method: every key of /a/, the one in flight detached.
	byMethod := func(key, _ string) bool { return strings.HasPrefix(key, "/a/") }
	if n := g.PurgeMatching(byMethod, func(key string) bool { return strings.HasPrefix(key, "/a/") }, false); n != 2 {
		t.Errorf("PurgeMatching(/a/) = %d, want 2", n)
	}
	close(flight.release)
	testkit.Recv(t, "the detached call's result", flying)
	for key, want := range map[string]Outcome{"/a/Get:1": Lead, "/a/Get:2": Lead, "/a/Get:3": Lead, "/b/Get:1": Hit} {
		if r := do(g, key, opts, value("tag:red", nil)); r.outcome != want {
			t.Errorf("%s after purging /a/: %v, want %v", key, r.outcome, want)
		}
	}
	// By value (a tag): /a/Get:1..3 and /b/Get:1 all answered tag:red now.
	byTag := func(_, v string) bool { return v == "tag:red" }
	if n := g.PurgeMatching(byTag, func(string) bool { return true }, false); n != 4 {
		t.Errorf("PurgeMatching(tag:red) = %d, want 4", n)
	}
	if st := g.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("after purging everything: %+v, want nothing held", st)
	}
}

func TestGroup_ASoftPurgeOfManyRefreshesThemAtItsPace(t *testing.T) {
	const keys, rate = 10, 10 // a turn every 100ms
	gap := time.Second / rate
	for _, tt := range []struct {
		name string
		swr  time.Duration
		// how a read at or past its turn is served, and why its call runs
		atTurn Outcome
		why    Background
	}{
		{"stale windows: refreshed in the background", time.Hour, Stale, Purged},
		{"no stale window: served stale until its turn", 0, Lead, Foreground},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newTestGroup(t, Options[string]{SoftPurgeRate: rate})
			opts := &CallOptions{TTL: time.Hour, StaleWhileRevalidate: tt.swr}
			for i := range keys {
				do(g, fmt.Sprint("k", i), opts, value("old", nil))
			}
			if n := g.PurgeMatching(func(string, string) bool { return true }, func(string) bool { return true }, true); n != keys {
				t.Fatalf("purged %d, want %d", n, keys)
			}
			var calls atomic.Int64
			var whys sync.Map
			refresh := func(c *Call) (string, error) {
				calls.Add(1)
				whys.Store(c.Background(), true)
				return "new", nil
			}
			for turn := range keys + 1 {
				clock.Store(int64(turn) * int64(gap))
				for i := range keys {
					r := do(g, fmt.Sprint("k", i), opts, refresh)
					if r.outcome != Stale && r.outcome != tt.atTurn && r.outcome != Hit {
						t.Fatalf("at %v, k%d: %+v", time.Duration(clock.Load()), i, r)
					}
				}
				testkit.WaitFor(t, "the refreshes", func() bool { return g.Stats().InFlight == 0 })
				// Each turn lets one more key be refreshed: the purge's
				// refreshes are paced, whoever reads.
				if n := calls.Load(); n != int64(turn) {
					t.Fatalf("at %v: %d calls, want %d: one per turn passed", time.Duration(clock.Load()), n, turn)
				}
			}
			if _, ok := whys.Load(tt.why); !ok {
				t.Errorf("no refresh ran as %v", tt.why)
			}
		})
	}
}

func TestGroup_HardPurgesAndOneKeysPurgeAreNotPaced(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{SoftPurgeRate: 1})
	opts := &CallOptions{TTL: time.Hour, StaleWhileRevalidate: time.Hour}
	for i := range 10 {
		do(g, fmt.Sprint("k", i), opts, value("old", nil))
	}
	g.PurgeMatching(func(k string, _ string) bool { return k != "k0" }, func(string) bool { return true }, false)
	g.Purge("k0", true)
	var calls atomic.Int64
	for i := range 10 {
		do(g, fmt.Sprint("k", i), opts, value("new", &calls))
	}
	testkit.WaitFor(t, "the refreshes", func() bool { return g.Stats().InFlight == 0 })
	if n := calls.Load(); n != 10 {
		t.Errorf("calls = %d, want 10 at once: a hard purge takes back at once, a soft purge of one key refreshes it at once", n)
	}
}
