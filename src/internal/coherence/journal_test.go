package coherence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// purgeOf returns a purge of method m.
func purgeOf(m string) *adminv1.PurgeRequest {
	return &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: m}}
}

// seqs returns the numbers of entries.
func seqs(entries []*peerv1.Entry) []uint64 {
	var out []uint64
	for _, e := range entries {
		out = append(out, e.GetSeq())
	}
	return out
}

func TestJournal_SyncSendsWhatTheReplicaHasYetToApply(t *testing.T) {
	j := NewJournal(JournalOptions{})
	for i := range 3 {
		j.Append(purgeOf(fmt.Sprint("/a.B/M", i)), peerv1.Scope_SCOPE_OWNED)
	}
	tests := []struct {
		name    string
		req     *peerv1.SyncRequest
		want    []uint64
		wantAll bool // the response's entries are every one held
	}{
		{"first sync", &peerv1.SyncRequest{Replica: "r:1"}, []uint64{1, 2, 3}, true},
		{"applied two", &peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: 2}, []uint64{3}, false},
		{"applied all", &peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: 3}, nil, false},
		{"another journal's numbers", &peerv1.SyncRequest{Replica: "r:1", Journal: "old", Since: 3}, []uint64{1, 2, 3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := j.Sync(tt.req)
			if got := seqs(resp.GetEntries()); !slices.Equal(got, tt.want) {
				t.Errorf("entries %v, want %v", got, tt.want)
			}
			if resp.GetJournal() != j.ID() || resp.GetLast() != 3 || resp.GetLost() {
				t.Errorf("response %v, want journal %s, last 3, nothing lost", resp, j.ID())
			}
		})
	}
}

func TestJournal_KeepsTheLatestEntriesAndSaysWhenSomeAreLost(t *testing.T) {
	j := NewJournal(JournalOptions{})
	for i := range MaxEntries + 5 {
		j.Append(purgeOf(fmt.Sprint("/a.B/M", i)), peerv1.Scope_SCOPE_ALL)
	}
	resp := j.Sync(&peerv1.SyncRequest{Replica: "r:1"})
	if n := len(resp.GetEntries()); n != MaxEntries || !resp.GetLost() {
		t.Errorf("first sync: %d entries, lost %v; want %d and lost (the first 5 are gone)", n, resp.GetLost(), MaxEntries)
	}
	resp = j.Sync(&peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: 5})
	if n := len(resp.GetEntries()); n != MaxEntries || resp.GetLost() {
		t.Errorf("sync after entry 5: %d entries, lost %v; want %d, nothing lost", n, resp.GetLost(), MaxEntries)
	}
	// Bytes bound the journal too.
	big := NewJournal(JournalOptions{})
	for range 3 {
		big.Append(&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: strings.Repeat("t", MaxEntryBytes/2)}}, peerv1.Scope_SCOPE_ALL)
	}
	if n := len(big.Sync(&peerv1.SyncRequest{}).GetEntries()); n != 1 {
		t.Errorf("entries of half MaxEntryBytes held: %d, want 1", n)
	}
}

// A replica that fetches a purge late learns how long ago the journal took
// it: what follows a purge for a while (no handoff) counts from then. The
// entries still held are sent with the ages they have when asked, after
// the oldest went.
func TestJournal_SyncSendsEachEntrysAge(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	j := NewJournal(JournalOptions{Now: clock.Now})
	for range MaxEntries {
		j.Append(purgeOf("/a.B/Old"), peerv1.Scope_SCOPE_ALL)
	}
	clock.Advance(time.Minute)
	j.Append(purgeOf("/a.B/M1"), peerv1.Scope_SCOPE_ALL) // the first goes
	clock.Advance(3 * time.Second)
	j.Append(purgeOf("/a.B/M2"), peerv1.Scope_SCOPE_ALL)
	clock.Advance(time.Second)
	entries := j.Sync(&peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: MaxEntries - 1}).GetEntries()
	var ages []time.Duration
	for _, e := range entries {
		ages = append(ages, e.GetAge().AsDuration())
	}
	if want := []time.Duration{time.Minute + 4*time.Second, 4 * time.Second, time.Second}; !slices.Equal(ages, want) {
		t.Errorf("entries %v aged %v, want %v", seqs(entries), ages, want)
	}
}

// awaitAsync runs j.Await on a goroutine of its own.
func awaitAsync(ctx context.Context, j *Journal, seq uint64, others []string, members func() []string) <-chan []string {
	c := make(chan []string, 1)
	go func() {
		missed, err := j.Await(ctx, seq, others, members)
		if err != nil {
			missed = append(missed, "error: "+err.Error())
		}
		c <- missed
	}()
	return c
}

func listed(addrs ...string) func() []string {
	return func() []string { return addrs }
}

// leasesRunOut lets nothing happen but time passing on clock, a lease at a
// time, until the Await that sends on done has seen one pass since it
// started.
func leasesRunOut(t *testing.T, clock *testkit.Clock, done <-chan []string) {
	t.Helper()
	testkit.WaitFor(t, "Await to settle", func() bool {
		clock.Advance(Lease)
		return len(done) > 0
	})
}

func TestJournal_AwaitSettlesEachReplica(t *testing.T) {
	ctx := testkit.Context(t)
	clock := testkit.NewClock(time.Unix(1e9, 0))
	tests := []struct {
		name string
		// before is what happens before the purge, settle after it.
		before, settle func(j *Journal, seq uint64)
		member         func() []string
		missed         []string
	}{
		{"pushed", nil, func(j *Journal, seq uint64) { j.Confirm("r:1", seq) }, listed("r:1"), nil},
		{"fetched", func(j *Journal, _ uint64) {
			j.Sync(&peerv1.SyncRequest{Replica: "r:1"})
		}, func(j *Journal, seq uint64) {
			j.Sync(&peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: seq})
		}, listed("r:1"), nil},
		{"its lease ran out", func(j *Journal, _ uint64) {
			j.Sync(&peerv1.SyncRequest{Replica: "r:1"})
		}, nil, listed("r:1"), []string{"r:1"}},
		{"never synced: one lease to do so", nil, nil, listed("r:1"), []string{"r:1"}},
		{"neither listed nor synced", nil, nil, listed(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJournal(JournalOptions{Now: clock.Now})
			if tt.before != nil {
				tt.before(j, 0)
			}
			seq := j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
			done := awaitAsync(ctx, j, seq, []string{"r:1"}, tt.member)
			if tt.settle != nil {
				tt.settle(j, seq)
			} else {
				leasesRunOut(t, clock, done)
			}
			if got := testkit.Recv(t, "Await", done); !slices.Equal(got, tt.missed) {
				t.Errorf("missed %v, want %v", got, tt.missed)
			}
		})
	}
}

func TestJournal_APushedEntrySettlesNoEarlierOne(t *testing.T) {
	// Pushes run at once and end in any order: a replica that took a later
	// purge pushed to it may have missed an earlier one (its push failed).
	ctx := testkit.Context(t)
	clock := testkit.NewClock(time.Unix(1e9, 0))
	j := NewJournal(JournalOptions{Now: clock.Now})
	j.Sync(&peerv1.SyncRequest{Replica: "r:1"})
	first := j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_OWNED)
	second := j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_CALLERS)
	j.Confirm("r:1", second)
	if missed, err := j.Await(ctx, second, []string{"r:1"}, listed("r:1")); err != nil || missed != nil {
		t.Fatalf("Await of the entry pushed = %v, %v; want settled at once", missed, err)
	}
	done := awaitAsync(ctx, j, first, []string{"r:1"}, listed("r:1"))
	leasesRunOut(t, clock, done)
	if got := testkit.Recv(t, "Await", done); !slices.Equal(got, []string{"r:1"}) {
		t.Errorf("earlier entry: missed %v, want r:1 (it took only the later entry; its lease ran out)", got)
	}
	// A Sync that says every entry up to the second was applied settles both.
	j.Sync(&peerv1.SyncRequest{Replica: "r:1", Journal: j.ID(), Since: second})
	if missed, err := j.Await(ctx, first, []string{"r:1"}, listed("r:1")); err != nil || missed != nil {
		t.Errorf("Await of the earlier entry after the Sync = %v, %v; want settled at once", missed, err)
	}
}

func TestJournal_AwaitWaitsForAReplicaHoldingALeaseThoughNotListed(t *testing.T) {
	// A replica that is not ready is not listed, but syncs and may serve
	// once ready: the purge waits for it as for any other.
	ctx := testkit.Context(t)
	clock := testkit.NewClock(time.Unix(1e9, 0))
	j := NewJournal(JournalOptions{Now: clock.Now})
	j.Sync(&peerv1.SyncRequest{Replica: "unready:1"})
	seq := j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
	done := awaitAsync(ctx, j, seq, nil, listed())
	select {
	case got := <-done:
		t.Fatalf("Await returned %v before the unlisted replica applied the purge", got)
	case <-time.After(3 * awaitPoll): // the membership was looked at, at least twice
	}
	j.Sync(&peerv1.SyncRequest{Replica: "unready:1", Journal: j.ID(), Since: seq})
	if got := testkit.Recv(t, "Await", done); got != nil {
		t.Errorf("missed %v, want none", got)
	}
}

func TestJournal_AwaitEndsWithItsContext(t *testing.T) {
	j := NewJournal(JournalOptions{})
	seq := j.Append(purgeOf("/a.B/M"), peerv1.Scope_SCOPE_ALL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	missed, err := j.Await(ctx, seq, []string{"r:1"}, listed("r:1"))
	if !errors.Is(err, context.Canceled) || !slices.Equal(missed, []string{"r:1"}) {
		t.Errorf("Await = %v, %v; want r:1 unsettled and the context's error", missed, err)
	}
}

func TestJournal_RemembersAtMostMaxLessees(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	j := NewJournal(JournalOptions{Now: clock.Now})
	for i := range MaxLessees + 10 {
		clock.Advance(time.Millisecond)
		j.Sync(&peerv1.SyncRequest{Replica: fmt.Sprint("r:", i)})
	}
	j.mu.Lock()
	n, oldest, latest := len(j.lessees), j.lessees["r:0"], j.lessees[fmt.Sprint("r:", MaxLessees+9)]
	j.mu.Unlock()
	if n != MaxLessees || oldest != nil || latest == nil {
		t.Errorf("lessees = %d (the oldest kept %v, the latest %v), want %d, the oldest forgotten", n, oldest != nil, latest != nil, MaxLessees)
	}
}
