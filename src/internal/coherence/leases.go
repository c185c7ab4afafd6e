package coherence

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
)

// maxJournals bounds the journals whose entries a Leases remembers having
// applied; past it, those of replicas it no longer syncs with are
// forgotten (an entry of theirs pushed again is applied again: a purge
// twice, no loss).
const maxJournals = 1024

// Leases holds this replica's leases from the other replicas: it syncs
// with each of them, applies the purges they took that it missed, and tells
// until when it may serve what it keeps (LeasesOptions.Hold). Create one
// with NewLeases and run it (Run); it is safe for concurrent use.
type Leases struct {
	o LeasesOptions

	mu      sync.Mutex
	peers   map[string]*peer    // by replica address: the replicas synced with
	applied map[string]*applied // by journal id
	lapsed  bool                // a lease ran out and everything was taken back; guarded by mu
	// unlisted: the replicas last listed did not include this one, so no
	// purge is taken to it and no replica waits for it; guarded by mu.
	unlisted bool
	lapses   atomic.Int64

	// validUntil is when the first lease held runs out (UnixNano on
	// o.Now's clock); math.MaxInt64 while none is held.
	validUntil atomic.Int64
}

// peer is what this replica knows of another it synced with.
type peer struct {
	journal string    // the replica's journal id, as it last said
	asked   time.Time // when the Sync that granted the lease was sent
	leased  bool      // the lease binds: false once nothing is left at its address
}

// applied is what this replica applied of one journal: every entry up to
// through, and those after it in above (pushed out of order).
type applied struct {
	through uint64
	above   map[uint64]bool
}

// LeasesOptions configures Leases. Replicas, Self, Conn, Apply and Flush
// are required.
type LeasesOptions struct {
	// Replicas returns the address of every replica now, ready or not,
	// this one included.
	Replicas func(ctx context.Context) ([]string, error)
	// Self reports whether addr is this replica's own.
	Self func(addr string) bool
	// Conn returns the connection to the replica at addr.
	Conn func(addr string) (grpc.ClientConnInterface, error)
	// Gone reports whether nothing is left at addr: the last attempt to
	// connect was refused, or found no host. Nil: never.
	Gone func(addr string) bool
	// Apply takes back here what an entry took back.
	Apply func(*peerv1.Entry)
	// Flush takes back everything this replica keeps, and detaches every
	// call in flight. missed: purges this replica has yet to apply are
	// gone from a journal, and never will be applied. Otherwise a lease ran
	// out, or this replica is not listed: it may have missed purges, which
	// it applies once it syncs again.
	Flush func(missed bool)
	// Hold is told, after every Sync, until when this replica may serve
	// what it keeps and share calls: when the first lease it holds runs
	// out (far in the future while it holds none). Past it, until the next
	// Hold, every call must be a call of its own. Nil: nobody is told.
	Hold func(until time.Time)
	// Lease and Interval default to Lease and SyncInterval.
	Lease, Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives what happens to the leases; nil discards it.
	Logger *slog.Logger
}

// NewLeases returns Leases that hold no lease yet: coherent until the first
// Sync grants one.
func NewLeases(o LeasesOptions) *Leases {
	if o.Lease <= 0 {
		o.Lease = Lease
	}
	if o.Interval <= 0 {
		o.Interval = SyncInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Gone == nil {
		o.Gone = func(string) bool { return false }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hold == nil {
		o.Hold = func(time.Time) {}
	}
	l := &Leases{o: o, peers: map[string]*peer{}, applied: map[string]*applied{}}
	l.validUntil.Store(math.MaxInt64)
	return l
}

// Coherent reports whether this replica may serve what it keeps now: no
// lease it holds has run out.
func (l *Leases) Coherent() bool {
	return l.o.Now().UnixNano() < l.validUntil.Load()
}

// lapse takes everything back the first time a Sync finds a lease run out
// (a purge may have waited it out, and the replica that took it may be
// gone before this one fetches it), or this replica unlisted, for why. The
// caller holds l.mu.
func (l *Leases) lapse(why string) {
	if l.lapsed || l.Coherent() {
		return
	}
	l.lapsed = true
	l.lapses.Add(1)
	l.o.Flush(false)
	l.o.Logger.Warn("coherence: " + why + ": everything kept was taken back, and calls share nothing until every replica is reached again")
}

// Run syncs with every replica every Interval until ctx ends.
func (l *Leases) Run(ctx context.Context) {
	tick := time.NewTicker(l.o.Interval)
	defer tick.Stop()
	for {
		l.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// synced is what one Sync with a replica got.
type synced struct {
	addr  string
	asked time.Time
	resp  *peerv1.SyncResponse
	gone  bool // it failed, and nothing is left at addr
}

// Sync syncs with every other replica once: each grants a lease and sends
// the entries of its journal this replica has yet to apply, which it
// applies before the lease counts.
func (l *Leases) Sync(ctx context.Context) {
	addrs, listErr := l.o.Replicas(ctx)
	if listErr != nil {
		l.o.Logger.Warn("coherence: the replicas could not be listed: syncing with those synced with before", "err", listErr)
	}
	l.mu.Lock()
	self, targets := "", addrs
	if listErr != nil {
		targets = slices.Collect(maps.Keys(l.peers))
	}
	for _, addr := range addrs {
		if l.o.Self(addr) {
			self = addr
		}
	}
	if listErr == nil {
		l.unlisted = self == ""
	}
	l.mu.Unlock()

	results := make(chan synced, len(targets))
	var wg sync.WaitGroup
	for _, addr := range targets {
		if addr == self {
			continue
		}
		wg.Go(func() { results <- l.syncWith(ctx, addr, self) })
	}
	wg.Wait()
	close(results)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapse("a lease from another replica ran out") // before these renew it: take everything back first
	for r := range results {
		switch {
		case r.resp != nil:
			l.apply(r.resp)
			l.peers[r.addr] = &peer{journal: r.resp.GetJournal(), asked: r.asked, leased: true}
		case r.gone && l.peers[r.addr] != nil:
			l.peers[r.addr].leased = false // a replica no longer running serves nothing
		}
	}
	if listErr == nil {
		for addr := range l.peers {
			if !slices.Contains(addrs, addr) {
				delete(l.peers, addr) // left the membership
			}
		}
	}
	l.renew()
}

// syncWith asks the replica at addr for what this replica, at self, has
// yet to apply of its journal. The ask is bounded by one Interval, and by a
// fifth of a Lease.
func (l *Leases) syncWith(ctx context.Context, addr, self string) synced {
	r := synced{addr: addr, asked: l.o.Now()}
	cc, err := l.o.Conn(addr)
	if err == nil {
		req := &peerv1.SyncRequest{Replica: self}
		l.mu.Lock()
		if p := l.peers[addr]; p != nil {
			req.Journal = p.journal
			if a := l.applied[p.journal]; a != nil {
				req.Since = a.through
			}
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, min(l.o.Interval, l.o.Lease/5))
		defer cancel()
		r.resp, err = peerv1.NewReplicasClient(cc).Sync(ctx, req)
	}
	if err != nil {
		r.gone = l.o.Gone(addr)
		l.o.Logger.Debug("coherence: sync failed", "replica", addr, "gone", r.gone, "err", err)
	}
	return r
}

// apply applies the entries of resp this replica has yet to apply, or
// takes everything back when some of them are lost. The caller holds l.mu.
func (l *Leases) apply(resp *peerv1.SyncResponse) {
	a := l.appliedOf(resp.GetJournal())
	if resp.GetLost() {
		l.o.Flush(true)
		l.o.Logger.Warn("coherence: purges this replica missed are gone from another replica's journal: everything kept was taken back", "journal", resp.GetJournal())
	} else {
		for _, e := range resp.GetEntries() {
			if e.GetSeq() > a.through && !a.above[e.GetSeq()] {
				l.o.Apply(e)
			}
		}
	}
	a.through = max(a.through, resp.GetLast())
	for seq := range a.above {
		if seq <= a.through {
			delete(a.above, seq)
		}
	}
}

// Pushed applies, with apply, entry seq of journal that its replica pushed
// here, unless it was applied already. It remembers at most MaxEntries
// entries pushed ahead of those its Syncs applied.
func (l *Leases) Pushed(journal string, seq uint64, apply func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.appliedOf(journal)
	if seq <= a.through || a.above[seq] {
		return
	}
	apply()
	a.above[seq] = true
	if len(a.above) > MaxEntries {
		// A journal holds no more: the oldest is forgotten, and applied
		// again if a Sync sends it (a purge twice, no loss).
		delete(a.above, slices.Min(slices.Collect(maps.Keys(a.above))))
	}
}

// appliedOf returns what was applied of journal, made on first use. The
// caller holds l.mu.
func (l *Leases) appliedOf(journal string) *applied {
	if a := l.applied[journal]; a != nil {
		return a
	}
	if len(l.applied) >= maxJournals {
		for id := range l.applied {
			if !l.knows(id) {
				delete(l.applied, id)
			}
		}
	}
	a := &applied{above: map[uint64]bool{}}
	l.applied[journal] = a
	return a
}

// knows reports whether a replica this one synced with has journal. The
// caller holds l.mu.
func (l *Leases) knows(journal string) bool {
	for _, p := range l.peers {
		if p.journal == journal {
			return true
		}
	}
	return false
}

// renew sets when the first lease held runs out, and ends a lapse when
// none has. The caller holds l.mu.
func (l *Leases) renew() {
	until := int64(math.MaxInt64)
	for _, p := range l.peers {
		if p.leased {
			until = min(until, p.asked.Add(l.o.Lease).UnixNano())
		}
	}
	if l.unlisted {
		// Purges are taken to the replicas listed, and wait for them: one
		// that is not listed could miss one unseen. It serves nothing it
		// keeps until it is listed.
		until = 0
	}
	l.validUntil.Store(until)
	l.o.Hold(time.Unix(0, until))
	if l.unlisted {
		l.lapse("this replica is not among the replicas listed, so purges may miss it")
	}
	if l.lapsed && l.Coherent() {
		l.lapsed = false
		l.o.Logger.Info("coherence: every replica reached again: kept answers are served again")
	}
}

// Stats is a snapshot of Leases, for gauges.
type Stats struct {
	// Held is how many replicas this one holds a lease from.
	Held int
	// Coherent is Coherent's answer now.
	Coherent bool
	// Lapses counts the times a lease ran out.
	Lapses int64
}

// Stats returns a snapshot of l.
func (l *Leases) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.peers {
		if p.leased {
			n++
		}
	}
	return Stats{Held: n, Coherent: l.Coherent(), Lapses: l.lapses.Load()}
}
