package replay

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/testkit"
)

// ofKey matches the records of key, whatever their header.
func ofKey(key string) func(string, metadata.MD, bool) bool {
	return func(k string, _ metadata.MD, _ bool) bool { return k == key }
}

// keep reads a record of ten messages for key to its end, and waits until
// it is kept.
func keep(t *testing.T, s *Streams, key string) *source {
	t.Helper()
	held := s.Stats().Held
	src := newSource(nil)
	rd, o := s.Join(key, Life{TTL: time.Hour}, src.open)
	if o != Lead {
		t.Fatalf("the first caller of %q: %v, want leader", key, o)
	}
	done := goRead(t, rd)
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 10)
	close(src.up.msgs)
	if r := testkit.Recv(t, "the reader's end", done); r.err != nil {
		t.Fatalf("read: %v", r.err)
	}
	waitStats(t, s, func(st Stats) bool { return st.Held == held+1 })
	return src
}

func TestStreams_PurgeDropsAKeptRecordAndItsBytes(t *testing.T) {
	s := New(Options{})
	keep(t, s, "other")
	before := s.Stats()
	keep(t, s, "k")
	// A caller replaying the record when it is purged reads it to its end.
	replaying, o := s.Join("k", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Replay {
		t.Fatalf("a caller within the TTL: %v, want replayed", o)
	}
	if n := s.Purge(ofKey("k")); n != 1 {
		t.Errorf("Purge took back %d records, want 1", n)
	}
	if st := s.Stats(); st != before {
		t.Errorf("stats after the purge %+v, want those before the record was kept %+v", st, before)
	}
	if r := testkit.Recv(t, "the replaying caller's end", goRead(t, replaying)); r.err != nil || !slices.Equal(r.msgs, want(10)) {
		t.Errorf("the caller replaying the purged record: %d messages, %v; want all 10", len(r.msgs), r.err)
	}
	src := newSource(nil)
	rd, o := s.Join("k", Life{TTL: time.Hour}, src.open)
	if o != Lead {
		t.Errorf("the next caller: %v, want a new record", o)
	}
	rd.Close()
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
	if n := s.Purge(ofKey("k")); n != 0 {
		t.Errorf("a second purge took back %d records, want 0", n)
	}
	rd, o = s.Join("other", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Replay {
		t.Errorf("a caller of a key not purged: %v, want replayed", o)
	}
	rd.Close()
}

func TestStreams_PurgeDetachesALiveRecord(t *testing.T) {
	s := New(Options{})
	old := newSource(nil)
	reader, _ := s.Join("k", Life{TTL: time.Hour}, old.open)
	result := goRead(t, reader)
	testkit.Recv(t, "the open", old.started)
	send(t, old, 0, 5)
	waitStats(t, s, func(st Stats) bool { return st.Bytes > 0 })
	liveBytes := s.Stats().Bytes

	// A live record is detached, not counted: nothing of it was kept.
	if n := s.Purge(ofKey("k")); n != 0 {
		t.Errorf("Purge of a live record counted %d, want 0", n)
	}
	if st := s.Stats(); st.Live != 1 || st.Readers != 1 || st.Bytes != liveBytes {
		t.Errorf("stats of the detached record %+v, want it live with its reader and %d bytes", st, liveBytes)
	}
	// The key's next caller starts a record of its own.
	fresh := newSource(nil)
	rd, o := s.Join("k", Life{TTL: time.Hour}, fresh.open)
	if o != Lead {
		t.Fatalf("a caller after the purge: %v, want a new record", o)
	}
	freshResult := goRead(t, rd)
	testkit.Recv(t, "the new record's open", fresh.started)
	send(t, fresh, 0, 3)
	close(fresh.up.msgs)
	if r := testkit.Recv(t, "the new record's reader's end", freshResult); r.err != nil || !slices.Equal(r.msgs, want(3)) {
		t.Errorf("the new record's reader: %d messages, %v; want 3", len(r.msgs), r.err)
	}
	waitStats(t, s, func(st Stats) bool { return st.Held == 1 })

	// The detached record's reader reads it to its end, and it is not kept:
	// the new record stays the key's.
	send(t, old, 5, 10)
	close(old.up.msgs)
	if r := testkit.Recv(t, "the detached record's reader's end", result); r.err != nil || !slices.Equal(r.msgs, want(10)) {
		t.Errorf("the detached record's reader: %d messages, %v; want all 10", len(r.msgs), r.err)
	}
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
	if st := s.Stats(); st.Held != 1 || st.Readers != 0 {
		t.Errorf("stats %+v, want only the new record kept", st)
	}
	replayed, o := s.Join("k", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Replay {
		t.Fatalf("a caller after both ended: %v, want replayed", o)
	}
	if r := testkit.Recv(t, "the replay's end", goRead(t, replayed)); r.err != nil || !slices.Equal(r.msgs, want(3)) {
		t.Errorf("replayed %d messages, %v; want the new record's 3", len(r.msgs), r.err)
	}
	if n := s.Purge(ofKey("k")); n != 1 {
		t.Errorf("Purge of the new record took back %d, want 1", n)
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Errorf("stats after every record was taken back: %+v, want none", st)
	}
}

func TestStreams_PurgeMatchesByHeaderOnceItIsKnown(t *testing.T) {
	s := New(Options{})
	tagged := func(_ string, header metadata.MD, known bool) bool {
		return !known || slices.Contains(header.Get("tags"), "a")
	}
	// A live record whose header has not come: what it will say is not
	// known, and the purge takes it back.
	pending := newSource(nil)
	pending.gate = make(chan struct{})
	rd, _ := s.Join("pending", Life{TTL: time.Hour}, pending.open)
	s.Purge(tagged)
	next, o := s.Join("pending", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Lead {
		t.Errorf("a caller after the purge of a record without its header: %v, want a new record", o)
	}
	next.Close()
	close(pending.gate)
	close(pending.up.msgs)
	rd.Close()
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })

	for key, tags := range map[string]string{"a": "a", "b": "b"} {
		src := newSource(nil)
		src.up.header = metadata.Pairs("tags", tags)
		rd, _ := s.Join(key, Life{TTL: time.Hour}, src.open)
		done := goRead(t, rd)
		close(src.up.msgs)
		testkit.Recv(t, "the reader's end", done)
	}
	waitStats(t, s, func(st Stats) bool { return st.Held == 2 })
	if n := s.Purge(tagged); n != 1 {
		t.Errorf("Purge took back %d records, want the one whose header carries the tag", n)
	}
	for key, want := range map[string]Outcome{"a": Lead, "b": Replay} {
		rd, o := s.Join(key, Life{TTL: time.Hour}, newSource(nil).open)
		if o != want {
			t.Errorf("a caller of record %q: %v, want %v", key, o, want)
		}
		rd.Close()
	}
}

// aged is an upstream that says how long its record may be kept.
type aged struct {
	Upstream
	left time.Duration
	ok   bool
}

func (a aged) Left() (time.Duration, bool) { return a.left, a.ok }

func TestStreams_AnAgedUpstreamKeepsItsRecordNoLongerThanItSays(t *testing.T) {
	for _, tt := range []struct {
		name string
		left time.Duration
		ok   bool
		want time.Duration // how long the record is kept
	}{
		{"shorter", time.Second, true, time.Second},
		{"longer", time.Hour, true, time.Minute},
		{"none", 0, true, 0},
		{"silent", 0, false, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Unix(0, 0))
			s := New(Options{Now: clock.Now})
			src := newSource(nil)
			open := func(ctx context.Context) (Upstream, error) {
				up, err := src.open(ctx)
				return aged{up, tt.left, tt.ok}, err
			}
			rd, _ := s.Join("k", Life{TTL: time.Minute}, open)
			done := goRead(t, rd)
			close(src.up.msgs)
			testkit.Recv(t, "the reader's end", done)
			if tt.want == 0 {
				waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
				if st := s.Stats(); st.Held != 0 {
					t.Fatalf("stats %+v: a record its upstream says not to keep was kept", st)
				}
				return
			}
			waitStats(t, s, func(st Stats) bool { return st.Held == 1 })
			clock.Advance(tt.want - 1)
			if rd, o := s.Join("k", Life{TTL: time.Minute}, newSource(nil).open); o != Replay {
				t.Errorf("just before %v: %v, want replayed", tt.want, o)
			} else {
				rd.Close()
			}
			clock.Advance(1)
			if rd, o := s.Join("k", Life{TTL: time.Minute}, newSource(nil).open); o != Lead {
				t.Errorf("at %v: %v, want a new record", tt.want, o)
			} else {
				rd.Close()
			}
		})
	}
}
