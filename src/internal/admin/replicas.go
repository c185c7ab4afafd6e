package admin

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
)

// The headers of a purge one replica takes to another.
const (
	// TokenHeader carries the release's peer token, which the peer listener
	// asks of every purge.
	TokenHeader = "collapser-peer-token"
	// OriginHeader carries the id of the sidecar that takes the purge to
	// the replicas: its own peer listener, one of them, skips it.
	OriginHeader = "collapser-purge-origin"
	// ScopeHeader says which of its answers a replica takes back:
	// scopeOwned or scopeCallers (see proxy.Scope).
	ScopeHeader = "collapser-purge-scope"
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

// Replicas are the other replicas of a sidecar, reached through their
// peer listeners.
type Replicas struct {
	// Fanout reaches every replica, this one included.
	Fanout *peers.Fanout
	// Token is the release's peer token, presented to every replica.
	Token string
	// Self is this sidecar's id, drawn at random when it starts: the
	// Service of its own peer listener skips purges of that origin.
	Self string
}

// purge runs req of scope on every replica but this one and adds what each
// took back to resp; the error names each replica not reached.
func (r *Replicas) purge(ctx context.Context, req *adminv1.PurgeRequest, scope proxy.Scope, resp *adminv1.PurgeResponse) error {
	name := scopeCallers
	if scope == proxy.Owned {
		name = scopeOwned
	}
	ctx = metadata.AppendToOutgoingContext(ctx, TokenHeader, r.Token, OriginHeader, r.Self, ScopeHeader, name)
	var mu sync.Mutex
	return r.Fanout.Each(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		got, err := adminv1.NewCacheClient(cc).Purge(ctx, req)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		resp.Entries += got.GetEntries()
		resp.Replicas += got.GetReplicas()
		return nil
	})
}
