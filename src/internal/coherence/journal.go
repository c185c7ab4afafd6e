package coherence

import (
	"cmp"
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
)

// Defaults of a Journal and of Leases.
const (
	// Lease is how long a Sync's lease lasts, from when the replica that
	// holds it asked. It bounds how long a purge waits for a replica it
	// cannot reach, and how long a replica that reaches no other may serve
	// what it keeps.
	Lease = 10 * time.Second
	// SyncInterval is how often a replica syncs with every other.
	SyncInterval = time.Second
	// MaxEntries and MaxEntryBytes bound a journal: the oldest entries go
	// first, and a replica that has yet to apply one that went takes
	// everything it keeps back instead.
	MaxEntries    = 1024
	MaxEntryBytes = 1 << 20
	// MaxLessees bounds the replicas a journal keeps grants of; past it,
	// the one granted longest ago is forgotten (a purge then waits a whole
	// Lease for it, if it is still listed).
	MaxLessees = 1024
	// awaitPoll is how often Await looks at the membership and the clock
	// between confirmations.
	awaitPoll = 100 * time.Millisecond
)

// Journal numbers the purges this replica takes to the others, keeps the
// latest for the replicas that missed them, and records what each replica
// applied of it and the leases it granted. Create one with NewJournal; it is
// safe for concurrent use.
type Journal struct {
	id    string
	now   func() time.Time
	lease time.Duration

	mu      sync.Mutex
	seq     uint64             // the last entry's
	entries []*peerv1.Entry    // the latest, oldest first
	taken   []time.Time        // when each of entries was appended
	bytes   int                // what entries hold (proto.Size)
	lessees map[string]*lessee // by replica address
	changed chan struct{}      // closed, and replaced, when a replica applies more
}

// lessee is what a journal knows of one replica that synced with it.
type lessee struct {
	granted time.Time // when it last asked: its lease lasts until granted+lease
	applied uint64    // it applied every entry up to this one (its Syncs say so)
	// pushed are the entries after applied it took when they were pushed:
	// pushes run at once and end in any order, so an entry it took says
	// nothing of those before it. Only entries the journal holds are kept.
	pushed map[uint64]bool
}

// took reports whether the replica applied entry seq.
func (l *lessee) took(seq uint64) bool { return seq <= l.applied || l.pushed[seq] }

// JournalOptions configures a Journal. The zero value takes the defaults.
type JournalOptions struct {
	// Lease is how long a grant lasts (default Lease).
	Lease time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewJournal returns an empty journal with an id of its own, drawn at
// random: a replica that restarts starts a new journal.
func NewJournal(o JournalOptions) *Journal {
	j := &Journal{id: rand.Text(), now: o.Now, lease: o.Lease, lessees: map[string]*lessee{}, changed: make(chan struct{})}
	if j.now == nil {
		j.now = time.Now
	}
	if j.lease <= 0 {
		j.lease = Lease
	}
	return j
}

// ID returns the journal's id.
func (j *Journal) ID() string { return j.id }

// Append adds a purge of scope and returns its number.
func (j *Journal) Append(purge *adminv1.PurgeRequest, scope peerv1.Scope) uint64 {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	e := &peerv1.Entry{Seq: j.seq, Purge: purge, Scope: scope}
	j.entries, j.taken = append(j.entries, e), append(j.taken, now)
	j.bytes += proto.Size(e)
	for len(j.entries) > 1 && (len(j.entries) > MaxEntries || j.bytes > MaxEntryBytes) {
		j.bytes -= proto.Size(j.entries[0])
		j.entries[0] = nil
		j.entries, j.taken = j.entries[1:], j.taken[1:]
	}
	return j.seq
}

// Confirm records that the replica at addr applied entry seq (it took the
// purge pushed to it), and that one only.
func (j *Journal) Confirm(addr string, seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	l := j.lessee(addr)
	if l.took(seq) {
		return
	}
	if l.pushed == nil {
		l.pushed = map[uint64]bool{}
	}
	l.pushed[seq] = true
	j.prune(l)
	j.signal()
}

// prune forgets what l took of the entries up to l.applied, and of those
// the journal no longer holds (the oldest went: MaxEntries bounds what is
// kept). The caller holds j.mu.
func (j *Journal) prune(l *lessee) {
	first := j.seq + 1
	if len(j.entries) > 0 {
		first = j.entries[0].Seq
	}
	for seq := range l.pushed {
		if seq <= l.applied || seq < first {
			delete(l.pushed, seq)
		}
	}
}

// Sync answers a replica's SyncRequest: the entries after the last it
// applied, each with its age (how long ago it was appended), and a lease
// from now.
func (j *Journal) Sync(req *peerv1.SyncRequest) *peerv1.SyncResponse {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	since := req.GetSince()
	if req.GetJournal() != j.id {
		since = 0 // applied nothing of this journal
	}
	if addr := req.GetReplica(); addr != "" {
		l := j.lessee(addr)
		l.granted = now
		if since > l.applied {
			l.applied = since
			j.prune(l)
			j.signal()
		}
	}
	resp := &peerv1.SyncResponse{Journal: j.id, Last: j.seq}
	first := j.seq + 1 // of the entries held
	if len(j.entries) > 0 {
		first = j.entries[0].Seq
	}
	resp.Lost = since+1 < first
	i, _ := slices.BinarySearchFunc(j.entries, since+1, func(e *peerv1.Entry, seq uint64) int {
		return cmp.Compare(e.Seq, seq)
	})
	for k, e := range j.entries[i:] {
		resp.Entries = append(resp.Entries, &peerv1.Entry{Seq: e.Seq, Purge: e.Purge, Scope: e.Scope,
			Age: durationpb.New(now.Sub(j.taken[i+k]))})
	}
	return resp
}

// lessee returns addr's record, made on first use; past MaxLessees, the
// record granted longest ago makes room. The caller holds j.mu.
func (j *Journal) lessee(addr string) *lessee {
	if l := j.lessees[addr]; l != nil {
		return l
	}
	if len(j.lessees) >= MaxLessees {
		var oldest string
		for a, l := range j.lessees {
			if oldest == "" || l.granted.Before(j.lessees[oldest].granted) {
				oldest = a
			}
		}
		delete(j.lessees, oldest)
	}
	l := &lessee{}
	j.lessees[addr] = l
	return l
}

// signal wakes every Await. The caller holds j.mu.
func (j *Journal) signal() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Await waits until each replica that may serve what entry seq takes back
// has applied it, can no longer serve what it kept before (its lease from
// this journal ran out) or is gone, and returns those whose lease ran out:
// they missed the purge, and took back everything instead. The replicas
// are those listed (the others: every replica but this one) and those
// holding a lease from this journal when it starts, listed or not. A
// listed replica that never synced with this journal is given one Lease
// from now to do so; one that is neither listed any more (members, asked
// now and then, names every replica now) nor synced is gone. Await returns
// early, with ctx's error and the replicas not settled yet, when ctx ends.
func (j *Journal) Await(ctx context.Context, seq uint64, others []string, members func() []string) (missed []string, err error) {
	start := j.now()
	pending := slices.Clone(others)
	j.mu.Lock()
	for addr, l := range j.lessees {
		if !slices.Contains(pending, addr) && !l.granted.IsZero() && start.Before(j.until(l, start)) {
			pending = append(pending, addr)
		}
	}
	j.mu.Unlock()
	tick := time.NewTicker(awaitPoll)
	defer tick.Stop()
	for {
		j.mu.Lock()
		now, changed := j.now(), j.changed
		pending = slices.DeleteFunc(pending, func(addr string) bool {
			l := j.lessees[addr]
			switch {
			case l != nil && l.took(seq):
				return true
			case !now.Before(j.until(l, start)):
				missed = append(missed, addr)
				return true
			}
			return false
		})
		j.mu.Unlock()
		if len(pending) == 0 {
			return missed, nil
		}
		select {
		case <-changed:
		case <-tick.C:
			listed := members()
			j.mu.Lock()
			pending = slices.DeleteFunc(pending, func(addr string) bool {
				l := j.lessees[addr]
				return (l == nil || l.granted.IsZero()) && !slices.Contains(listed, addr)
			})
			j.mu.Unlock()
		case <-ctx.Done():
			return append(missed, pending...), ctx.Err()
		}
	}
}

// until is when the lease of lessee l runs out, for a wait that started
// at start: a replica that never synced (l nil, or only confirmed pushes)
// is given one lease from start to do so. The caller holds j.mu.
func (j *Journal) until(l *lessee, start time.Time) time.Time {
	if l == nil || l.granted.IsZero() {
		return start.Add(j.lease)
	}
	return l.granted.Add(j.lease)
}
