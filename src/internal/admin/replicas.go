package admin

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
)

// The headers of a purge one replica takes to another.
const (
	// OriginHeader carries the journal id of the sidecar that takes the
	// purge to the replicas: its own peer listener, one of them, skips it.
	OriginHeader = "collapser-purge-origin"
	// ScopeHeader says which of its answers a replica takes back:
	// scopeOwned or scopeCallers (see proxy.Scope).
	ScopeHeader = "collapser-purge-scope"
	// SeqHeader carries the purge's number in its origin's journal, by
	// which a replica that fetches it later (coherence.Leases) knows it
	// applied it already.
	SeqHeader = "collapser-purge-seq"
)

// The values of ScopeHeader.
const (
	scopeOwned   = "owned"
	scopeCallers = "callers"
)

// scopeOf returns the scope a peer's purge asks for; Everything when it
// names none it knows.
func scopeOf(ctx context.Context) proxy.Scope {
	switch v := metadata.ValueFromIncomingContext(ctx, ScopeHeader); {
	case slices.Equal(v, []string{scopeOwned}):
		return proxy.Owned
	case slices.Equal(v, []string{scopeCallers}):
		return proxy.Callers
	}
	return proxy.Everything
}

// scopes maps proxy's scopes to their journal entries' and headers' names.
var scopes = map[proxy.Scope]struct {
	entry  peerv1.Scope
	header string
}{
	proxy.Owned:      {peerv1.Scope_SCOPE_OWNED, scopeOwned},
	proxy.Callers:    {peerv1.Scope_SCOPE_CALLERS, scopeCallers},
	proxy.Everything: {peerv1.Scope_SCOPE_ALL, ""},
}

// proxyScope returns the proxy scope of a journal entry's.
func proxyScope(s peerv1.Scope) proxy.Scope {
	for scope, names := range scopes {
		if names.entry == s {
			return scope
		}
	}
	return proxy.Everything
}

// Replicas are the other replicas of a sidecar, ready or not, reached
// through their peer listeners as the release's own (peers.Trust: its peer
// token, mutual TLS when set). A purge is taken to each at once; the replicas it did not reach fetch it from this
// sidecar's journal, and the purge waits for them or for their leases to
// run out (package coherence). Create them with NewReplicas and run them
// (Run).
type Replicas struct {
	fanout  *peers.Fanout
	journal *coherence.Journal
	leases  *coherence.Leases
	logger  *slog.Logger
}

// ReplicasOptions configures Replicas. Every field but Logger, Now, Lease
// and SyncInterval is required.
type ReplicasOptions struct {
	// Target names every replica, ready or not, this one included, as
	// peers.NewFanout takes it.
	Target string
	// Listen is this sidecar's peer listener, by which it knows itself.
	Listen string
	// Trust is how this replica proves it is one of the release's.
	Trust peers.Trust
	// Purger applies here the purges this sidecar fetches from the others'
	// journals, and takes everything back when a lease runs out.
	Purger Purger
	// Hold is told until when this sidecar may serve what it keeps (see
	// coherence.LeasesOptions.Hold; proxy.Proxy.CoherentUntil).
	Hold func(until time.Time)
	// Logger receives what happens to the leases; nil discards it.
	Logger *slog.Logger
	// Now, Lease and SyncInterval: see coherence.LeasesOptions.
	Now                 func() time.Time
	Lease, SyncInterval time.Duration
}

// NewReplicas returns the replicas o names.
func NewReplicas(o ReplicasOptions) (*Replicas, error) {
	fanout, err := peers.NewFanout(o.Target, o.Listen, o.Trust.DialOptions()...)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Replicas{
		fanout:  fanout,
		journal: coherence.NewJournal(coherence.JournalOptions{Lease: o.Lease, Now: o.Now}),
		logger:  o.Logger,
	}
	r.leases = coherence.NewLeases(coherence.LeasesOptions{
		Replicas: fanout.Replicas,
		Self:     fanout.Self,
		Conn:     fanout.Conn,
		Gone:     fanout.Gone,
		Apply:    func(e *peerv1.Entry) { applyEntry(o.Purger, e) },
		Flush: func(missed bool) {
			if missed {
				o.Purger.PurgeAll()
			} else {
				o.Purger.TakeBackAll()
			}
		},
		Hold:     o.Hold,
		Lease:    o.Lease,
		Interval: o.SyncInterval,
		Now:      o.Now,
		Logger:   o.Logger,
	})
	return r, nil
}

// applyEntry takes the purge of e, an entry of another replica's journal
// fetched late, with p: of e's scope, taken as long ago as e's age. An
// entry whose purge is not valid is skipped.
func applyEntry(p Purger, e *peerv1.Entry) {
	if kind, err := check(e.GetPurge()); err == nil {
		purgeWith(p, kind, e.GetPurge(), proxy.Purge{Soft: e.GetPurge().GetSoft(), Scope: proxyScope(e.GetScope()),
			Age: e.GetAge().AsDuration()})
	}
}

// Run syncs with the other replicas until ctx ends (coherence.Leases).
func (r *Replicas) Run(ctx context.Context) { r.leases.Run(ctx) }

// Sync syncs with the other replicas once (coherence.Leases.Sync).
func (r *Replicas) Sync(ctx context.Context) { r.leases.Sync(ctx) }

// Coherent reports whether this sidecar may serve what it keeps: see
// coherence.Leases.Coherent.
func (r *Replicas) Coherent() bool { return r.leases.Coherent() }

// Stats returns a snapshot of the leases this sidecar holds.
func (r *Replicas) Stats() coherence.Stats { return r.leases.Stats() }

// Close closes the connections to the replicas.
func (r *Replicas) Close() error { return r.fanout.Close() }

// register registers the journal's Sync service on the peer listener's
// server.
func (r *Replicas) register(srv grpc.ServiceRegistrar) {
	coherence.NewServer(r.journal).Register(srv)
}

// pushed applies, with apply, the purge a replica pushed here, unless this
// sidecar fetched it already; a purge without a number (from an older
// replica) is applied.
func (r *Replicas) pushed(ctx context.Context, apply func()) {
	origin := metadata.ValueFromIncomingContext(ctx, OriginHeader)
	seq, err := strconv.ParseUint(firstOf(metadata.ValueFromIncomingContext(ctx, SeqHeader)), 10, 64)
	if len(origin) != 1 || err != nil {
		apply()
		return
	}
	r.leases.Pushed(origin[0], seq, apply)
}

func firstOf(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// purge takes req, of scope, to every other replica: it records it in the
// journal, pushes it to every replica at once, and waits for those it does
// not reach (coherence.Journal.Await). It adds what each replica it reached
// took back to resp, and returns the replicas whose lease ran out instead.
func (r *Replicas) purge(ctx context.Context, req *adminv1.PurgeRequest, scope proxy.Scope, resp *adminv1.PurgeResponse) ([]string, error) {
	seq := r.journal.Append(req, scopes[scope].entry)
	listed, err := r.fanout.Replicas(ctx)
	if err != nil {
		r.logger.Warn("purge: the replicas could not be listed: waiting for those that hold a lease", "err", err)
	}
	others := slices.DeleteFunc(slices.Clone(listed), r.fanout.Self)
	push, stop := context.WithCancel(metadata.AppendToOutgoingContext(ctx,
		OriginHeader, r.journal.ID(), ScopeHeader, scopes[scope].header, SeqHeader, strconv.FormatUint(seq, 10)))
	defer stop()
	var mu sync.Mutex
	var pushes sync.WaitGroup
	pushes.Go(func() {
		_ = r.fanout.Each(push, func(ctx context.Context, addr string, cc grpc.ClientConnInterface) error {
			got, err := adminv1.NewCacheClient(cc).Purge(ctx, req)
			if err != nil {
				return err
			}
			r.journal.Confirm(addr, seq)
			mu.Lock()
			defer mu.Unlock()
			resp.Entries += got.GetEntries()
			resp.Replicas += got.GetReplicas()
			return nil
		})
	})
	missed, err := r.journal.Await(ctx, seq, others, func() []string {
		if now, err := r.fanout.Replicas(ctx); err == nil {
			return now
		}
		return listed
	})
	stop() // pushes to replicas that settled otherwise
	pushes.Wait()
	return missed, err
}
