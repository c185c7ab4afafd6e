package replay

import (
	"slices"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/testkit"
)

// refreshLife keeps a record a minute, refreshed early on the grid of a
// hash whose point falls inside its first life.
var refreshLife = Life{TTL: time.Minute, EarlyRefresh: true, Hash: 42}

// refreshRun is a record of "k" kept at the time 0 of clock, and the
// source each of its refreshes opens.
type refreshRun struct {
	s     *Streams
	clock *testkit.Clock
	point time.Duration // the record's early refresh, from 0
	next  *source
}

// keptForRefresh reads "k"'s first stream (m0, m1) to its end, kept as
// life says (TTL and hash: refreshLife's), and returns its run.
func keptForRefresh(t *testing.T, life Life) *refreshRun {
	t.Helper()
	clock := testkit.NewClock(time.Unix(1e9, 0))
	r := &refreshRun{s: New(Options{Now: clock.Now}), clock: clock, next: newSource(nil)}
	at := collapse.RefreshPoint(refreshLife.Hash, clock.Now().UnixNano(), refreshLife.TTL)
	r.point = time.Unix(0, at).Sub(clock.Now())
	if at == 0 || r.point <= 0 || r.point >= refreshLife.TTL {
		t.Fatalf("refresh point %v: want one inside the first minute", r.point)
	}
	src := newSource(nil)
	lead, _ := r.s.Join("k", life, src.open)
	defer lead.Close()
	testkit.Recv(t, "the first open", src.started)
	send(t, src, 0, 2)
	close(src.up.msgs)
	if _, _, err := readAll(t, testkit.Context(t), lead); err != nil {
		t.Fatal(err)
	}
	return r
}

// replay reads "k" through a Join that must replay a kept record, and
// returns its messages.
func (r *refreshRun) replay(t *testing.T) []string {
	t.Helper()
	rd, o := r.s.Join("k", refreshLife, r.next.open)
	defer rd.Close()
	if o != Replay {
		t.Fatalf("at %v: %v, want a replay", r.clock.Now().Sub(time.Unix(1e9, 0)), o)
	}
	got, _, err := readAll(t, testkit.Context(t), rd)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A kept record read before its point starts nothing; the first read at
// its point starts one refresh, and is served the kept record meanwhile,
// as every reader is until the refresh has ended well and replaced it.
// The new record lives a TTL from its end, refreshed on the same grid.
func TestStreams_AKeptRecordReadAtItsRefreshPointIsReplacedByANewOne(t *testing.T) {
	r := keptForRefresh(t, refreshLife)
	r.clock.Advance(r.point - time.Millisecond)
	r.replay(t)
	if n := r.next.opened.Load(); n != 0 {
		t.Fatalf("a read before the refresh point opened %d streams, want none", n)
	}
	r.clock.Advance(time.Millisecond)
	if got := r.replay(t); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Errorf("the read that starts the refresh got %q, want the kept record", got)
	}
	testkit.Recv(t, "the refresh's open", r.next.started)
	if got := r.replay(t); !slices.Equal(got, []string{"m0", "m1"}) || r.next.opened.Load() != 1 {
		t.Errorf("a read while the refresh runs got %q and opened %d streams in all, want the kept record and 1", got, r.next.opened.Load())
	}
	send(t, r.next, 5, 6)
	close(r.next.up.msgs)
	testkit.WaitFor(t, "the refresh to end", func() bool { return r.s.Stats().Live == 0 })
	if got := r.replay(t); !slices.Equal(got, []string{"m5"}) {
		t.Errorf("a read after the refresh got %q, want the new record", got)
	}
	rd, _ := r.s.Join("k", refreshLife, r.next.open)
	defer rd.Close()
	if got := rd.Left(); got != refreshLife.TTL { // the clock has not moved since its end
		t.Errorf("the new record's life left = %v, want a TTL from its end", got)
	}
	if st := r.s.Stats(); st.Held != 1 || r.next.opened.Load() != 1 {
		t.Errorf("%d records held, %d refreshes opened; want 1 and 1", st.Held, r.next.opened.Load())
	}
}

// The kept record goes before its refresh has ended (a purge took it
// back): the refresh is cancelled, and replaces nothing.
func TestStreams_ARefreshOfARecordPurgedIsCancelledAndNotKept(t *testing.T) {
	r := keptForRefresh(t, refreshLife)
	r.clock.Advance(r.point)
	r.replay(t)
	ctx := r.next.firstContext(t)
	if n := r.s.Purge(ofKey("k")); n != 1 {
		t.Fatalf("purge took back %d records, want the kept one", n)
	}
	testkit.Recv(t, "the refresh's context to end", ctx.Done())
	testkit.WaitFor(t, "the refresh to end", func() bool { return r.s.Stats().Live == 0 })
	if st := r.s.Stats(); st.Held != 0 {
		t.Errorf("%d records held after the purge, want none: the refresh replaces nothing", st.Held)
	}
	rd, o := r.s.Join("k", refreshLife, newSource(nil).open)
	defer rd.Close()
	if o != Lead {
		t.Errorf("the next caller: %v, want a new record", o)
	}
}

// Without EarlyRefresh (a copy of another cache's record), a record read
// anywhere in its life starts nothing.
func TestStreams_ARecordWithoutEarlyRefreshIsNeverRefreshed(t *testing.T) {
	r := keptForRefresh(t, Life{TTL: refreshLife.TTL, Hash: refreshLife.Hash})
	for _, at := range []time.Duration{r.point, refreshLife.TTL - time.Millisecond} {
		r.clock.Advance(at - r.clock.Now().Sub(time.Unix(1e9, 0)))
		r.replay(t)
	}
	if n := r.next.opened.Load(); n != 0 {
		t.Errorf("reads at its point and at its end opened %d streams, want none", n)
	}
}

// Kept gives a cache that takes the key over the kept record, and when its
// refresh is due, without being a read: it starts no refresh. A live
// record, or none, is not kept.
func TestStreams_KeptGivesTheKeptRecordAndStartsNothing(t *testing.T) {
	r := keptForRefresh(t, refreshLife)
	for _, tt := range []struct {
		at   time.Duration
		want time.Duration
	}{{0, r.point}, {r.point, 1}} {
		r.clock.Advance(tt.at - r.clock.Now().Sub(time.Unix(1e9, 0)))
		rd, refreshIn, ok := r.s.Kept("k")
		if !ok || refreshIn != tt.want {
			t.Fatalf("at %v: Kept = %v, refresh in %v; want the record, refresh in %v", tt.at, ok, refreshIn, tt.want)
		}
		got, _, err := readAll(t, testkit.Context(t), rd)
		rd.Close()
		if err != nil || !slices.Equal(got, []string{"m0", "m1"}) {
			t.Errorf("at %v: the kept record read %q, %v", tt.at, got, err)
		}
	}
	if n := r.next.opened.Load(); n != 0 {
		t.Errorf("Kept opened %d streams, want none", n)
	}
	live := newSource(nil)
	lead, _ := r.s.Join("live", refreshLife, live.open)
	defer lead.Close()
	for _, key := range []string{"live", "none"} {
		if _, _, ok := r.s.Kept(key); ok {
			t.Errorf("Kept(%q) gave a record", key)
		}
	}
	r.clock.Advance(refreshLife.TTL)
	if _, _, ok := r.s.Kept("k"); ok {
		t.Error("Kept gave a record whose life is over")
	}
}
