package collapse

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGroup_EarlyRefreshRefreshesAResultStillReadOnceOnItsGrid(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	const ttl = time.Second
	opts := &CallOptions{TTL: ttl, EarlyRefresh: true}
	var calls atomic.Int64
	// A key whose grid point falls inside its first result's life.
	key := refreshedKey(t, g, opts, "old", &calls, 0)
	calls.Store(0)
	fresh, refresh := times(t, g, key)
	if refresh <= 0 || refresh >= fresh || fresh != int64(ttl) {
		t.Fatalf("refresh at %v, fresh until %v: want a point within the TTL of %v", time.Duration(refresh), time.Duration(fresh), ttl)
	}

	clock.Store(refresh - 1)
	if r := do(g, key, opts, value("x", &calls)); r != (result{"old", Hit, nil}) || calls.Load() != 0 {
		t.Fatalf("before the point: %+v after %d calls, want a hit and no call", r, calls.Load())
	}
	clock.Store(refresh)
	gate := newGate("new", nil)
	var why atomic.Value
	gate.check = func(c *Call) { why.Store(c.Background()) }
	for i := range 100 {
		// Every read is a hit, the first starts the refresh, nobody waits.
		if r := do(g, key, opts, gate.fn); r != (result{"old", Hit, nil}) {
			t.Fatalf("read %d at the point: %+v, want the fresh result", i, r)
		}
	}
	testkit.Recv(t, "the refresh to start", gate.started)
	const latency = 20 * time.Millisecond
	clock.Add(int64(latency))
	close(gate.release)
	testkit.WaitFor(t, "the refresh", func() bool { return g.Stats().InFlight == 0 })
	if n, why := gate.calls.Load(), why.Load(); n != 1 || why != Early {
		t.Fatalf("refresh calls = %d, the call's Background = %v; want 1 Early", n, why)
	}
	if r := do(g, key, opts, value("x", &calls)); r != (result{"new", Hit, nil}) {
		t.Fatalf("after the refresh: %+v, want the new result", r)
	}
	// The new result's point is the next of the key's grid, a TTL after
	// the last: one refresh per TTL, however long the refresh took.
	newFresh, newRefresh := times(t, g, key)
	if newRefresh != refresh+int64(ttl) || newFresh != refresh+int64(latency+ttl) {
		t.Errorf("after the refresh: point %v, fresh until %v; want %v and %v", time.Duration(newRefresh), time.Duration(newFresh),
			time.Duration(refresh+int64(ttl)), time.Duration(refresh+int64(latency+ttl)))
	}
}

func TestGroup_EarlyRefreshLeavesResultsNobodyReadsToExpire(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, EarlyRefresh: true}
	var calls atomic.Int64
	for i := range 100 {
		do(g, fmt.Sprint("k", i), opts, value("v", &calls))
	}
	clock.Store(int64(time.Second))
	for i := range 100 {
		if r := do(g, fmt.Sprint("k", i), opts, value("v", &calls)); r.outcome != Lead {
			t.Fatalf("k%d after its TTL: %v, want a new call", i, r.outcome)
		}
	}
	if n := calls.Load(); n != 200 {
		t.Errorf("calls = %d, want 200: one per key, and no early refresh", n)
	}
}

func TestGroup_KeysLoadedTogetherAreRefreshedAndExpireSpreadOut(t *testing.T) {
	const keys, ttl, jitter, tenths = 2000, time.Second, 0.2, 10
	g, clock := newTestGroup(t, Options[string]{})
	clock.Store(int64(time.Hour) + 12345)
	now := clock.Load()
	opts := &CallOptions{TTL: ttl, EarlyRefresh: true, TTLJitter: jitter}
	var points, ends [tenths]int
	for i := range keys {
		key := fmt.Sprint("k", i)
		do(g, key, opts, value("v", nil))
		fresh, refresh := times(t, g, key)
		life := fresh - now
		if life > int64(ttl) || life < int64(float64(ttl)*(1-jitter)) {
			t.Fatalf("%s lives %v: want within [%v, %v]", key, time.Duration(life), time.Duration(float64(ttl)*(1-jitter)), ttl)
		}
		ends[(life-int64(float64(ttl)*(1-jitter)))*tenths/int64(float64(ttl)*jitter+1)]++
		if refresh == 0 {
			refresh = fresh // its point is its end
		}
		if refresh <= now || refresh > fresh {
			t.Fatalf("%s is refreshed at %v of a life of %v", key, time.Duration(refresh-now), time.Duration(life))
		}
		points[(refresh-now-1)*tenths/life]++
	}
	// Uniform: each tenth expects keys/10; 1.5 times that is over 7 standard
	// deviations away.
	for i := range tenths {
		if points[i] > keys/tenths*3/2 || ends[i] > keys/tenths*3/2 {
			t.Fatalf("refresh points per tenth of the TTL %v, ends per tenth of the jitter %v: want them spread evenly", points, ends)
		}
	}
}

func TestGroup_JitterNeverExceedsADeclaredTTL(t *testing.T) {
	const declared = 300 * time.Millisecond
	g, _ := newTestGroup(t, Options[string]{Declared: func(string) (Windows, bool) { return Windows{TTL: declared}, true }})
	opts := &CallOptions{TTL: time.Hour, TTLJitter: 0.5}
	for i := range 200 {
		key := fmt.Sprint("k", i)
		do(g, key, opts, value("v", nil))
		if fresh, _ := times(t, g, key); fresh > int64(declared) || fresh < int64(declared/2) {
			t.Fatalf("%s is fresh for %v: want within [%v, %v]", key, time.Duration(fresh), declared/2, declared)
		}
	}
}

func TestGroup_CopiesAreNeitherJitteredNorRefreshedEarly(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{Copied: func(v string) bool { return v == "copy" }})
	opts := &CallOptions{TTL: time.Second, TTLJitter: 0.5, EarlyRefresh: true}
	for i := range 100 {
		key := fmt.Sprint("k", i)
		do(g, key, opts, value("copy", nil))
		if fresh, refresh := times(t, g, key); fresh != int64(time.Second) || refresh != 0 {
			t.Fatalf("%s: fresh until %v, refreshed at %v; want its whole TTL and no early refresh", key, time.Duration(fresh), time.Duration(refresh))
		}
	}
}

func TestGroup_AFailedEarlyRefreshLeavesTheResultFreshUntilItsEnd(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, EarlyRefresh: true}
	key := refreshedKey(t, g, opts, "old", nil, 0)
	fresh, refresh := times(t, g, key)
	clock.Store(refresh)
	var calls atomic.Int64
	if r := do(g, key, opts, failing(errors.New("down"), &calls)); r != (result{"old", Hit, nil}) {
		t.Fatalf("at the point: %+v, want the fresh result", r)
	}
	testkit.WaitFor(t, "the refresh", func() bool { return g.Stats().InFlight == 0 })
	clock.Store(fresh - 1)
	for range 10 {
		if r := do(g, key, opts, failing(errors.New("down"), &calls)); r != (result{"old", Hit, nil}) {
			t.Fatalf("after the failed refresh: %+v, want the result until its end", r)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("calls = %d, want the one refresh: a failed one is not retried early", n)
	}
}

func TestGroup_ACopyIsFreshUntilTheOriginalsEarlyRefreshIsDue(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, StaleWhileRevalidate: time.Second, EarlyRefresh: true}
	key := refreshedKey(t, g, opts, "v", nil, 0)
	fresh, refresh := times(t, g, key)
	clock.Store(refresh / 2)
	var c Copy
	if _, o, err := g.DoCopy(context.Background(), key, opts, value("x", nil), &c); o != Hit || err != nil {
		t.Fatalf("DoCopy before the point: %v, %v", o, err)
	}
	// Fresh until the point, then stale as long as the original may be
	// served: within its window, and instead of an error until its end.
	want := Windows{
		TTL:                  time.Duration(refresh - refresh/2),
		StaleWhileRevalidate: time.Duration(fresh + int64(time.Second) - refresh),
		StaleIfError:         time.Duration(fresh - refresh),
	}
	if c.Left != want {
		t.Errorf("a copy's windows = %+v, want %+v", c.Left, want)
	}
	// The copy's next read, at the point, starts the refresh here: the
	// copy is then given what is left of the original's own life.
	clock.Store(refresh)
	gate := newGate("new", nil)
	if _, o, _ := g.DoCopy(context.Background(), key, opts, gate.fn, &c); o != Hit || c.Left.TTL != time.Duration(fresh-refresh) {
		t.Errorf("DoCopy at the point: %v, windows %+v; want a hit fresh until %v", o, c.Left, time.Duration(fresh-refresh))
	}
	testkit.Recv(t, "the refresh to start", gate.started)
	close(gate.release)
	testkit.WaitFor(t, "the refresh", func() bool { return g.Stats().InFlight == 0 })
}
