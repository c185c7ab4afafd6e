package coherence

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// journalConn reaches a Journal as a replica's peer connection does,
// without a network: Sync is its only method. down makes it fail.
type journalConn struct {
	j    *Journal
	down atomic.Bool
}

func (c *journalConn) Invoke(_ context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	if c.down.Load() {
		return status.Error(codes.Unavailable, "the replica cannot be reached")
	}
	if method != peerv1.Replicas_Sync_FullMethodName {
		return status.Errorf(codes.Unimplemented, "%s", method)
	}
	proto.Merge(reply.(*peerv1.SyncResponse), c.j.Sync(args.(*peerv1.SyncRequest)))
	return nil
}

func (c *journalConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("journalConn: no streams")
}

// lessee is one replica, "self:1", that syncs with others over conns.
type testLessee struct {
	*Leases
	clock *testkit.Clock

	mu      sync.Mutex
	list    []string // the replicas listed, self:1 included
	gone    map[string]bool
	applied []uint64 // the entries it applied, in order
	flushes int
	missed  int       // the flushes told purges were missed for good
	until   time.Time // what Hold was told last
}

// held returns what Hold was told last.
func (l *testLessee) held() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func newTestLessee(t *testing.T, clock *testkit.Clock, conns map[string]*journalConn) *testLessee {
	t.Helper()
	l := &testLessee{clock: clock, list: []string{"self:1"}, gone: map[string]bool{}}
	for addr := range conns {
		l.list = append(l.list, addr)
	}
	l.Leases = NewLeases(LeasesOptions{
		Replicas: func(context.Context) ([]string, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return slices.Clone(l.list), nil
		},
		Self: func(addr string) bool { return addr == "self:1" },
		Conn: func(addr string) (grpc.ClientConnInterface, error) { return conns[addr], nil },
		Gone: func(addr string) bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.gone[addr]
		},
		Apply: func(e *peerv1.Entry) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.applied = append(l.applied, e.GetSeq())
		},
		Flush: func(missed bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.flushes++
			if missed {
				l.missed++
			}
		},
		Hold: func(until time.Time) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.until = until
		},
		Now: clock.Now,
	})
	return l
}

// missedFlushes returns how many flushes were told purges were missed.
func (l *testLessee) missedFlushes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.missed
}

func (l *testLessee) state() (applied []uint64, flushes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.applied), l.flushes
}

func TestLeases_ApplyEachEntryOnce(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	a.j.Append(purgeOf("/a.B/M1"), peerv1.Scope_SCOPE_OWNED)
	a.j.Append(purgeOf("/a.B/M2"), peerv1.Scope_SCOPE_CALLERS)
	r.Sync(ctx)
	// Entry 3 is pushed, then found again by the next Sync: applied once.
	seq := a.j.Append(purgeOf("/a.B/M3"), peerv1.Scope_SCOPE_ALL)
	r.Pushed(a.j.ID(), seq, func() { r.Apply(seq) })
	r.Sync(ctx)
	r.Sync(ctx)
	if applied, flushes := r.state(); !slices.Equal(applied, []uint64{1, 2, 3}) || flushes != 0 {
		t.Errorf("applied %v with %d flushes, want [1 2 3] and none", applied, flushes)
	}
}

func TestLeases_RemembersAtMostMaxEntriesPushedAhead(t *testing.T) {
	// Pushes keep coming from a replica this one cannot sync with.
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	for seq := range uint64(MaxEntries + 5) {
		r.Pushed(a.j.ID(), seq+1, func() { r.Apply(seq + 1) })
	}
	if n := len(r.Leases.applied[a.j.ID()].above); n != MaxEntries {
		t.Errorf("%d entries pushed ahead remembered, want %d", n, MaxEntries)
	}
	r.Pushed(a.j.ID(), 1, func() { r.Apply(1) }) // forgotten: applied again
	if applied, _ := r.state(); len(applied) != MaxEntries+6 || applied[len(applied)-1] != 1 {
		t.Errorf("applied %d entries, the last %d; want %d, the last 1 again", len(applied), applied[len(applied)-1], MaxEntries+6)
	}
}

// Apply records seq as applied, as the lessee's Apply does for an entry.
func (l *testLessee) Apply(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied = append(l.applied, seq)
}

func TestLeases_LostEntriesTakeEverythingBack(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	for range MaxEntries + 1 {
		a.j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
	}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	r.Sync(testkit.Context(t))
	if applied, flushes := r.state(); len(applied) != 0 || flushes != 1 || r.missedFlushes() != 1 {
		t.Errorf("applied %d entries with %d flushes (%d for missed purges), want none and one flush, for missed purges", len(applied), flushes, r.missedFlushes())
	}
}

func TestLeases_ALeaseThatRunsOutTakesEverythingBackUntilRenewed(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	if !r.Coherent() {
		t.Fatal("not coherent before any lease: want coherent (none is needed yet)")
	}
	r.Sync(ctx)
	a.down.Store(true) // a cannot be reached, but is still there
	clock.Advance(Lease - time.Nanosecond)
	r.Sync(ctx)
	if !r.Coherent() {
		t.Error("not coherent within the lease")
	}
	if got := r.held(); !got.Equal(clock.Now().Add(time.Nanosecond)) {
		t.Errorf("held until %v, want the lease's end %v", got, clock.Now().Add(time.Nanosecond))
	}
	clock.Advance(time.Nanosecond)
	if r.Coherent() {
		t.Error("coherent after the lease ran out")
	}
	for range 2 {
		r.Sync(ctx)
	}
	if _, flushes := r.state(); flushes != 1 || r.missedFlushes() != 0 {
		t.Errorf("flushes = %d (%d for missed purges), want 1: everything taken back once, with no purge known missed", flushes, r.missedFlushes())
	}
	if st := r.Stats(); st.Coherent || st.Lapses != 1 || st.Held != 1 {
		t.Errorf("stats %+v, want not coherent, 1 lapse, 1 lease", st)
	}
	a.down.Store(false)
	r.Sync(ctx)
	if !r.Coherent() || !r.held().After(clock.Now()) {
		t.Errorf("coherent %v, held until %v, once every lease is renewed; want coherent, held", r.Coherent(), r.held())
	}
	if _, flushes := r.state(); flushes != 1 {
		t.Errorf("flushes = %d, want still 1", flushes)
	}
}

func TestLeases_ALapseNobodyAskedAboutIsTakenBackBeforeTheRenewal(t *testing.T) {
	// No call came while the lease had run out: the Sync that renews it
	// takes everything back first, since a purge may have waited it out.
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	r.Sync(ctx)
	clock.Advance(Lease)
	r.Sync(ctx)
	if _, flushes := r.state(); flushes != 1 || !r.Coherent() {
		t.Errorf("flushes = %d, coherent %v; want 1 and coherent again", flushes, r.Coherent())
	}
}

func TestLeases_AReplicaThatIsGoneOrLeftBindsNoMore(t *testing.T) {
	for _, tt := range []struct {
		name string
		lose func(r *testLessee, a *journalConn)
	}{
		{"nothing listens at its address", func(r *testLessee, a *journalConn) {
			a.down.Store(true)
			r.mu.Lock()
			r.gone["a:1"] = true
			r.mu.Unlock()
		}},
		{"it left the membership", func(r *testLessee, _ *journalConn) {
			r.mu.Lock()
			r.list = []string{"self:1"}
			r.mu.Unlock()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Unix(1e9, 0))
			a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
			r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
			ctx := testkit.Context(t)
			r.Sync(ctx)
			tt.lose(r, a)
			r.Sync(ctx)
			clock.Advance(2 * Lease)
			if !r.Coherent() {
				t.Error("not coherent: a replica no longer running still binds")
			}
		})
	}
}

func TestLeases_ARestartedReplicasJournalIsReadFromItsStart(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	a.j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	r.Sync(ctx)
	a.j = NewJournal(JournalOptions{Now: clock.Now}) // a restarted
	a.j.Append(purgeOf("/a.B/N"), peerv1.Scope_SCOPE_ALL)
	r.Sync(ctx)
	if applied, _ := r.state(); !slices.Equal(applied, []uint64{1, 1}) {
		t.Errorf("applied %v, want entry 1 of each journal", applied)
	}
}

func TestLeases_APurgeAwaitsTheReplicaThatFetchesIt(t *testing.T) {
	// The purge was not pushed to self:1: it fetches it, and the purge
	// returns once self:1 says it applied it.
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	r.Sync(ctx)
	seq := a.j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
	done := awaitAsync(ctx, a.j, seq, []string{"self:1"}, listed("self:1"))
	r.Sync(ctx) // fetches the entry
	r.Sync(ctx) // says it applied it
	if missed := testkit.Recv(t, "Await", done); missed != nil {
		t.Errorf("missed %v, want none", missed)
	}
	if applied, _ := r.state(); !slices.Equal(applied, []uint64{seq}) {
		t.Errorf("applied %v, want [%d]", applied, seq)
	}
}

func TestLeases_AReplicaNotListedServesNothingItKeeps(t *testing.T) {
	// A purge is taken to the replicas listed: one that is not among them
	// (an unready pod, where only ready pods are listed) could miss it.
	clock := testkit.NewClock(time.Unix(1e9, 0))
	a := &journalConn{j: NewJournal(JournalOptions{Now: clock.Now})}
	r := newTestLessee(t, clock, map[string]*journalConn{"a:1": a})
	ctx := testkit.Context(t)
	r.Sync(ctx)
	r.mu.Lock()
	r.list = []string{"a:1"}
	r.mu.Unlock()
	r.Sync(ctx)
	if _, flushes := r.state(); r.Coherent() || flushes != 1 || r.held().After(clock.Now()) {
		t.Errorf("coherent %v, %d flushes, held until %v; want not coherent, everything taken back", r.Coherent(), flushes, r.held())
	}
	r.mu.Lock()
	r.list = []string{"self:1", "a:1"}
	r.mu.Unlock()
	r.Sync(ctx)
	if !r.Coherent() {
		t.Error("not coherent once listed again")
	}
}
