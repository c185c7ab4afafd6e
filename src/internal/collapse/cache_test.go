package collapse

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGroup_ResultServedForItsOwnTTL(t *testing.T) {
	// Two keys with different TTLs in one Group: each expires on its own.
	g, clock := newTestGroup(t, Options[string]{})
	short := &CallOptions{TTL: 100 * time.Millisecond}
	long := &CallOptions{TTL: time.Second}
	var shortCalls, longCalls atomic.Int64

	steps := []struct {
		at              time.Duration
		short, longWant Outcome
	}{
		{0, Lead, Lead},
		{99 * time.Millisecond, Hit, Hit},
		{100 * time.Millisecond, Lead, Hit}, // short expired exactly at its TTL
		{150 * time.Millisecond, Hit, Hit},
		{time.Second, Lead, Lead},
	}
	for _, s := range steps {
		clock.Store(int64(s.at))
		if r := do(g, "short", short, value("s", &shortCalls)); r != (result{"s", s.short, nil}) {
			t.Errorf("at %v short: got %+v, want %v", s.at, r, s.short)
		}
		if r := do(g, "long", long, value("l", &longCalls)); r != (result{"l", s.longWant, nil}) {
			t.Errorf("at %v long: got %+v, want %v", s.at, r, s.longWant)
		}
	}
	if shortCalls.Load() != 3 || longCalls.Load() != 2 {
		t.Errorf("calls = %d short, %d long; want 3 and 2", shortCalls.Load(), longCalls.Load())
	}
}

func TestGroup_LimitsCountKeysValuesAndOverhead(t *testing.T) {
	size := func(s string) int64 { return int64(len(s)) }
	cost := func(key, val string) int64 { return heapsize.String(key) + int64(len(val)) + EntryOverhead }
	ttl := &CallOptions{TTL: time.Hour}
	bigKey := strings.Repeat("k", 1000)
	tests := []struct {
		name        string
		opts        Options[string]
		keys        []string // each key's value is "v"
		wantEntries int
		wantBytes   int64
	}{
		{"max entries evicts the first to go", Options[string]{Limits: Limits{MaxEntries: 2}, Size: size}, []string{"a", "b", "c"}, 2, 2 * cost("a", "v")},
		{"max bytes evicts the first to go", Options[string]{Limits: Limits{MaxBytes: cost("a", "v") + 1}, Size: size}, []string{"a", "b"}, 1, cost("b", "v")},
		{"a large key counts", Options[string]{Limits: Limits{MaxBytes: cost(bigKey, "v") + 10}, Size: size}, []string{"a", bigKey}, 1, cost(bigKey, "v")},
		{"a key too large is not kept", Options[string]{Limits: Limits{MaxEntryBytes: cost("a", "v")}, Size: size}, []string{"a", bigKey}, 1, cost("a", "v")},
		{"without Size a key still counts: not kept", Options[string]{Limits: Limits{MaxEntryBytes: cost("a", "")}}, []string{"a", strings.Repeat("b", 9)}, 1, cost("a", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGroup(t, tt.opts)
			for _, k := range tt.keys {
				if r := do(g, k, ttl, value("v", nil)); r.err != nil {
					t.Fatal(r.err)
				}
			}
			if st := g.Stats(); st.Entries != tt.wantEntries || st.Bytes != tt.wantBytes {
				t.Errorf("stats = %+v, want %d entries, %d bytes", st, tt.wantEntries, tt.wantBytes)
			}
			last := tt.keys[len(tt.keys)-1]
			r := do(g, last, ttl, value("v", nil))
			if wantHit := !strings.Contains(tt.name, "not kept"); (r.outcome == Hit) != wantHit {
				t.Errorf("latest key: outcome %v, want hit=%v", r.outcome, wantHit)
			}
		})
	}
}

func TestGroup_EvictsTheResultThatGoesFirst(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{Limits: Limits{MaxEntries: 2}})
	// Eviction is per shard first: use three keys of one shard.
	keys := sameShardKeys(g, 3)
	long, short, added := keys[0], keys[1], keys[2]
	do(g, long, &CallOptions{TTL: time.Hour}, value("l", nil))
	do(g, short, &CallOptions{TTL: time.Minute}, value("s", nil))
	do(g, added, &CallOptions{TTL: time.Hour}, value("n", nil))
	if r := do(g, long, &CallOptions{TTL: time.Hour}, value("x", nil)); r.outcome != Hit {
		t.Errorf("long-lived result: %v, want a hit (the short one goes first)", r.outcome)
	}
	if r := do(g, short, &CallOptions{TTL: time.Minute}, value("x", nil)); r.outcome != Lead {
		t.Errorf("short-lived result: %v, want evicted", r.outcome)
	}
}

// sameShardKeys returns n keys that g puts in one shard.
func sameShardKeys(g *Group[string], n int) []string {
	var keys []string
	want := -1
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("key-", i)
		s := int(maphash.String(g.seed, k) & (shardCount - 1))
		if want < 0 {
			want = s
		}
		if s == want {
			keys = append(keys, k)
		}
	}
	return keys
}

func TestGroup_StatsDropResultsThatAreGone(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Second, StaleIfError: time.Second}
	for _, k := range []string{"a", "b", "c"} {
		do(g, k, opts, value(k, nil))
	}
	if st := g.Stats(); st.Entries != 3 || st.Bytes != 3*(heapsize.String("a")+EntryOverhead) {
		t.Fatalf("stats = %+v, want 3 entries", st)
	}
	clock.Store(int64(time.Second)) // stale, still held for StaleIfError
	if st := g.Stats(); st.Entries != 3 {
		t.Fatalf("stats past TTL = %+v, want 3 entries still held", st)
	}
	clock.Store(int64(2 * time.Second))
	if st := g.Stats(); st != (Stats{}) {
		t.Errorf("stats when gone = %+v, want zero", st)
	}
}

func TestGroup_StaleWhileRevalidateAnswersAtOnceAndRefreshesOnce(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: 100 * time.Millisecond, StaleWhileRevalidate: time.Second}
	do(g, "k", opts, value("old", nil))

	clock.Store(int64(100*time.Millisecond + 1)) // TTL + ε
	refresh := newGate("new", nil)
	const callers = 1000
	for i := range callers {
		// Every caller is answered without waiting: Do returns on this
		// goroutine while the refresh is held.
		if r := do(g, "k", opts, refresh.fn); r != (result{"old", Stale, nil}) {
			t.Fatalf("caller %d got %+v, want the stale result", i, r)
		}
	}
	testkit.Recv(t, "the refresh to start", refresh.started)
	if n := refresh.calls.Load(); n != 1 {
		t.Fatalf("refreshes started = %d, want 1", n)
	}
	close(refresh.release)
	testkit.WaitFor(t, "the refresh", func() bool { return g.Stats().InFlight == 0 })
	if r := do(g, "k", opts, value("x", nil)); r != (result{"new", Hit, nil}) {
		t.Errorf("after the refresh: %+v, want the new result fresh", r)
	}
}

func TestGroup_FailedRefreshExtendsNoWindow(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: 100 * time.Millisecond, StaleWhileRevalidate: 100 * time.Millisecond}
	do(g, "k", opts, value("old", nil))

	clock.Store(int64(150 * time.Millisecond))
	var calls atomic.Int64
	if r := do(g, "k", opts, failing(errors.New("down"), &calls)); r != (result{"old", Stale, nil}) {
		t.Fatalf("got %+v, want stale", r)
	}
	testkit.WaitFor(t, "the refresh", func() bool { return g.Stats().InFlight == 0 })
	if r := do(g, "k", opts, failing(errors.New("down"), &calls)); r != (result{"old", Stale, nil}) {
		t.Errorf("after a failed refresh: %+v, want still stale", r)
	}
	testkit.WaitFor(t, "the second refresh", func() bool { return g.Stats().InFlight == 0 })
	clock.Store(int64(200 * time.Millisecond)) // the window ends where it always did
	if r := do(g, "k", opts, failing(errors.New("down"), &calls)); r.outcome != Lead || r.err == nil {
		t.Errorf("past the window: %+v, want the caller's own failing call", r)
	}
	if calls.Load() != 3 {
		t.Errorf("calls = %d, want 3 (two refreshes, one lead)", calls.Load())
	}
}

func TestGroup_StaleIfError(t *testing.T) {
	down := errors.New("unavailable")
	refused := errors.New("invalid argument")
	staleOn := func(err error) bool { return errors.Is(err, down) }
	opts := &CallOptions{TTL: 100 * time.Millisecond, StaleIfError: time.Second, StaleOn: staleOn}
	tests := []struct {
		name string
		at   time.Duration
		err  error
		want result
	}{
		{"accepted error inside the window", 500 * time.Millisecond, down, result{"good", StaleOnError, nil}},
		{"error StaleOn refuses", 500 * time.Millisecond, refused, result{"", Lead, refused}},
		{"past the window", 1100 * time.Millisecond, down, result{"", Lead, down}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newTestGroup(t, Options[string]{})
			do(g, "k", opts, value("good", nil))
			clock.Store(int64(tt.at))
			if r := do(g, "k", opts, failing(tt.err, nil)); r != tt.want {
				t.Errorf("got %+v, want %+v", r, tt.want)
			}
			// The error was not kept: the next caller calls again.
			var calls atomic.Int64
			do(g, "k", opts, value("later", &calls))
			if calls.Load() != 1 {
				t.Errorf("next caller made %d calls, want 1", calls.Load())
			}
		})
	}
}

func TestGroup_StaleIfErrorReachesFollowers(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{})
	opts := &CallOptions{TTL: time.Millisecond, StaleIfError: time.Hour}
	do(g, "k", opts, value("good", nil))
	clock.Store(int64(time.Minute))
	call := newGate("", errors.New("down"))
	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", opts, call.fn)
	waitWaiters(t, g, 2)
	close(call.release)
	for _, c := range []<-chan result{leader, follower} {
		if r := testkit.Recv(t, "a caller's result", c); r != (result{"good", StaleOnError, nil}) {
			t.Errorf("got %+v, want the last good result", r)
		}
	}
}

func TestGroup_PrivateValueGoesOnlyToItsLeader(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{Private: func(v string) bool { return strings.HasPrefix(v, "private") }})
	opts := &CallOptions{TTL: time.Hour}
	shared := newGate("private:leader", nil)
	shared.check = func(c *Call) {
		if c.Own() {
			t.Error("the shared call is Own")
		}
	}
	leader := doAsync(g, context.Background(), "k", opts, shared.fn)
	testkit.Recv(t, "the shared call to start", shared.started)

	// Each follower makes a call of its own with its own function.
	var own atomic.Int64
	ownCall := func(c *Call) (string, error) {
		if !c.Own() {
			t.Error("a follower's own call is not Own")
		}
		return value("private:follower", &own)(c)
	}
	followers := make([]<-chan result, 3)
	for i := range followers {
		followers[i] = doAsync(g, context.Background(), "k", opts, ownCall)
	}
	waitWaiters(t, g, 4)
	close(shared.release)
	if r := testkit.Recv(t, "the leader's result", leader); r != (result{"private:leader", Lead, nil}) {
		t.Errorf("leader got %+v, want its own private value", r)
	}
	for _, f := range followers {
		if r := testkit.Recv(t, "a follower's result", f); r != (result{"private:follower", Private, nil}) {
			t.Errorf("follower got %+v, want its own call's value", r)
		}
	}
	if own.Load() != 3 {
		t.Errorf("followers' own calls = %d, want 3", own.Load())
	}
	// Nothing of the answer is kept: only the key's pass marker.
	if st := g.Stats(); st.Entries != 1 || st.Bytes != heapsize.String("k")+EntryOverhead {
		t.Errorf("stats = %+v, want one pass marker of %d bytes", st, heapsize.String("k")+EntryOverhead)
	}
}

func TestGroup_PrivateValueDropsTheEarlierResult(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{Private: func(v string) bool { return v == "private" }})
	opts := &CallOptions{TTL: time.Millisecond, StaleIfError: time.Hour}
	do(g, "k", opts, value("public", nil))
	clock.Store(int64(time.Minute))
	do(g, "k", opts, value("private", nil))
	if r := do(g, "k", opts, failing(errors.New("down"), nil)); r.err == nil {
		t.Errorf("got %+v, want the error: the key's answers turned private", r)
	}
}

func TestGroup_ValueDeclaresItsOwnWindows(t *testing.T) {
	// A value "ttl=<d>" declares its own TTL; "plain" keeps its call's; one
	// declaring zero windows is shared with its waiters but not kept.
	declared := func(v string) (Windows, bool) {
		d, ok := strings.CutPrefix(v, "ttl=")
		if !ok {
			return Windows{}, false
		}
		ttl, err := time.ParseDuration(d)
		if err != nil {
			panic(err)
		}
		return Windows{TTL: ttl, StaleWhileRevalidate: ttl}, true
	}
	g, clock := newTestGroup(t, Options[string]{Declared: declared})
	opts := &CallOptions{TTL: time.Second}
	var calls [3]atomic.Int64
	keys := []struct{ key, val string }{{"declared", "ttl=10s"}, {"plain", "plain"}, {"none", "ttl=0s"}}
	steps := []struct {
		at   time.Duration
		want [3]Outcome
	}{
		{0, [3]Outcome{Lead, Lead, Lead}},
		{999 * time.Millisecond, [3]Outcome{Hit, Hit, Lead}},
		{time.Second, [3]Outcome{Hit, Lead, Lead}}, // the call's TTL is over, the declared one is not
		{10 * time.Second, [3]Outcome{Stale, Lead, Lead}},
	}
	for _, s := range steps {
		clock.Store(int64(s.at))
		for i, k := range keys {
			if r := do(g, k.key, opts, value(k.val, &calls[i])); r != (result{k.val, s.want[i], nil}) {
				t.Errorf("at %v %s: got %+v, want %v", s.at, k.key, r, s.want[i])
			}
		}
	}
	testkit.WaitFor(t, "the background refresh to end", func() bool { return g.Stats().InFlight == 0 })
	if got := []int64{calls[0].Load(), calls[1].Load(), calls[2].Load()}; got[0] != 2 || got[1] != 3 || got[2] != 4 {
		t.Errorf("calls = %v; want 2 (lead, refresh), 3 and 4", got)
	}
}
