package sidecar

import (
	"cmp"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/credentials"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/tracing"
)

// peerLinks are what ties a sidecar to its peers: the connection to their
// ring, and how replicas prove they are the release's.
type peerLinks struct {
	ring  *peers.Ring
	trust peers.Trust
}

// dialPeers reads the release's peer token (at least peers.MinTokenBytes)
// and makes the connection to the peers over mutual, the credentials of
// mutual TLS between replicas (legs.peers), traced by tr. Plain text between
// replicas (mutual nil) is refused unless cfg.PeerPlaintext chose it.
func dialPeers(cfg config.Settings, mutual credentials.TransportCredentials, tr *tracing.Tracing, logger *slog.Logger) (*peerLinks, error) {
	// Parse checked it; settings made otherwise are checked here.
	if err := cfg.CheckPeerTransport(); err != nil {
		return nil, err
	}
	token, err := secretfile.Load(cfg.PeerTokenFile, peers.MinTokenBytes, logger)
	if err != nil {
		return nil, fmt.Errorf("peer token (%s): %w", config.EnvName("peer-token-file"), err)
	}
	links := &peerLinks{trust: peers.Trust{Token: token, TLS: mutual}}
	if mutual == nil {
		logger.Warn("calls between replicas are plain text (" + config.EnvName("peer-plaintext") + "): their peer token, callers' headers and answers can be read on the network; set " +
			config.EnvName("peer-tls-cert-file") + ", " + config.EnvName("peer-tls-key-file") + " and " + config.EnvName("peer-tls-ca-file") + " instead")
	}
	if links.ring, err = peers.Dial(cfg.Peers, cfg.PeerListen, append(tr.DialOptions(), links.trust.DialOptions()...)...); err != nil {
		links.close()
		return nil, err
	}
	return links, nil
}

// close closes the connection to the peers.
func (l *peerLinks) close() error {
	if l.ring == nil {
		return nil
	}
	return l.ring.Close()
}

// replicas returns the other replicas purges are taken to and synced with,
// which purge p and tell it until when it may serve what it keeps; nil
// without peers.
func replicas(cfg config.Settings, links *peerLinks, p *proxy.Proxy, logger *slog.Logger, sm seams) (*admin.Replicas, error) {
	if links == nil {
		return nil, nil
	}
	return admin.NewReplicas(admin.ReplicasOptions{
		Target:       cmp.Or(cfg.Replicas, cfg.Peers),
		Listen:       cfg.PeerListen,
		Trust:        links.trust,
		Purger:       p,
		Hold:         p.CoherentUntil,
		Logger:       logger,
		Now:          sm.now,
		SyncInterval: sm.syncEvery,
	})
}

// peerMetrics are the parts a scrape reads the peers' state from.
type peerMetrics struct {
	ring     *peers.Ring
	proxy    *proxy.Proxy
	replicas *admin.Replicas // nil: purges stay on this replica
}

// state returns what a scrape reports of the peers.
func (m peerMetrics) state() metrics.PeerState {
	ps := metrics.PeerState{Members: m.ring.Members(), Forwarded: m.proxy.Forwarded()}
	if m.replicas != nil {
		leases := m.replicas.Stats()
		ps.Leases = &leases
	}
	return ps
}
