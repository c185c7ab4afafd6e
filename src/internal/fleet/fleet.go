// Package fleet ties one replica of a release (a sidecar, or a service
// that runs the library) to the others: the connection to their ring,
// which places every key on its owner; the trust every call between them
// carries (the release's peer token, and mutual TLS from files read again
// when they change); the replicas purges are taken to and synced with; and
// the server of the peer port, which serves the calls peers forward and
// their purges. A sidecar replica and a library replica join alike, so one
// release may run both.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/tlsfiles"
)

// Fleet is one replica's links to the others.
type Fleet struct {
	cfg      config.Settings
	logger   *slog.Logger
	ring     *peers.Ring
	trust    peers.Trust
	tls      *tlsfiles.Source // the peer leg's files; nil: plain text
	proxy    *proxy.Proxy     // set by Join
	replicas *admin.Replicas  // set by Join
}

// Dial reads the release's peer token (at least peers.MinTokenBytes) and
// the files of the mutual TLS between replicas that cfg names, and makes
// the connection to the peers, with extra dial options (a stats handler
// that traces the calls); nil when cfg names no peers. Plain text between
// replicas is refused unless cfg.PeerPlaintext chose it.
func Dial(cfg config.Settings, logger *slog.Logger, extra ...grpc.DialOption) (*Fleet, error) {
	if cfg.Peers == "" {
		return nil, cfg.CheckPeerTransport()
	}
	// Parse checked it; settings made otherwise are checked here.
	if err := cfg.CheckPeerTransport(); err != nil {
		return nil, err
	}
	token, err := secretfile.Load(cfg.PeerTokenFile, peers.MinTokenBytes, logger)
	if err != nil {
		return nil, fmt.Errorf("peer token (%s): %w", config.EnvName("peer-token-file"), err)
	}
	f := &Fleet{cfg: cfg, logger: logger, trust: peers.Trust{Token: token}}
	if cfg.PeerTLSCertFile != "" {
		if f.tls, err = tlsfiles.Watch(tlsfiles.Files{Cert: cfg.PeerTLSCertFile, Key: cfg.PeerTLSKeyFile, CA: cfg.PeerTLSCAFile}, 0); err != nil {
			return nil, fmt.Errorf("peer TLS (%s): %w", config.EnvName("peer-tls-cert-file"), err)
		}
		if f.trust.TLS, err = f.tls.Mutual(); err != nil {
			f.tls.Close()
			return nil, fmt.Errorf("peer TLS (%s): %w", config.EnvName("peer-tls-cert-file"), err)
		}
	} else {
		logger.Warn("calls between replicas are plain text (" + config.EnvName("peer-plaintext") + "): their peer token, callers' headers and answers can be read on the network; set " +
			config.EnvName("peer-tls-cert-file") + ", " + config.EnvName("peer-tls-key-file") + " and " + config.EnvName("peer-tls-ca-file") + " instead")
	}
	if f.ring, err = peers.Dial(cfg.Peers, cfg.PeerListen, append(extra, f.trust.DialOptions()...)...); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Ring is the connection to the peers, for the engine's placement of keys.
func (f *Fleet) Ring() proxy.Peers { return f.ring }

// Token is the release's peer token, as this replica reads it.
func (f *Fleet) Token() *secretfile.Value { return f.trust.Token }

// JoinOptions are what Join needs besides the proxy.
type JoinOptions struct {
	// ServerOptions are the peer port's server's options besides the
	// proxy's and the trust's: limits, a stats handler.
	ServerOptions []grpc.ServerOption
	// Now is the clock the replicas' leases are read on; nil: time.Now.
	Now func() time.Time
	// SyncInterval is how often the replicas sync (0:
	// coherence.SyncInterval).
	SyncInterval time.Duration
}

// Join ties p, the engine's proxy, to the other replicas: p's purges are
// taken to each, each tells p until when it may serve what it keeps, and
// the returned server (to serve on the peer listener) serves the calls
// peers forward with p, and the replicas' purges and syncs. Every call it
// takes proves it comes from a replica of the release.
func (f *Fleet) Join(p *proxy.Proxy, o JoinOptions) (*grpc.Server, error) {
	replicas, err := admin.NewReplicas(admin.ReplicasOptions{
		Target:       cmp.Or(f.cfg.Replicas, f.cfg.Peers),
		Listen:       f.cfg.PeerListen,
		Trust:        f.trust,
		Purger:       p,
		Hold:         p.CoherentUntil,
		Logger:       f.logger,
		Now:          o.Now,
		SyncInterval: o.SyncInterval,
	})
	if err != nil {
		return nil, err
	}
	f.proxy, f.replicas = p, replicas
	server := grpc.NewServer(slices.Concat(p.PeerServerOptions(), o.ServerOptions, f.trust.ServerOptions())...)
	admin.NewPeer(p, replicas).Register(server)
	return server, nil
}

// Replicas are the replicas purges are taken to and synced with; nil
// until Join.
func (f *Fleet) Replicas() *admin.Replicas { return f.replicas }

// State returns what a scrape reports of the peers.
func (f *Fleet) State() metrics.PeerState {
	ps := metrics.PeerState{Members: f.ring.Members()}
	if f.proxy != nil {
		ps.Forwarded = f.proxy.Forwarded()
	}
	if f.replicas != nil {
		leases := f.replicas.Stats()
		ps.Leases = &leases
	}
	return ps
}

// Run keeps the links up to date until ctx ends: the replicas' leases and
// the peer token.
func (f *Fleet) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if f.replicas != nil {
		wg.Go(func() { f.replicas.Run(ctx) })
	}
	wg.Go(func() { f.trust.Token.Run(ctx, 0) })
	wg.Wait()
}

// Close closes the connections to the peers and the replicas, and stops
// watching the TLS files; call it once no call uses them.
func (f *Fleet) Close() error {
	var err error
	if f.ring != nil {
		if cErr := f.ring.Close(); cErr != nil {
			err = fmt.Errorf("close peer connection: %w", cErr)
		}
	}
	if f.replicas != nil {
		if cErr := f.replicas.Close(); cErr != nil {
			err = errors.Join(err, fmt.Errorf("close connections to replicas: %w", cErr))
		}
	}
	if f.tls != nil {
		f.tls.Close()
	}
	return err
}
