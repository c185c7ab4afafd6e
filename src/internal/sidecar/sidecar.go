// Package sidecar assembles the collapser from its parts: the backend
// connection, the method-kind resolver, the policy, the proxy (which owns the
// collapse engine), the server's limits, the health service, the metrics
// endpoint and tracing, and runs them until told to stop.
package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/backendhealth"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/forwarding"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/serverlimits"
	"github.com/collapser/collapser/src/internal/tlsfiles"
	"github.com/collapser/collapser/src/internal/tracing"
)

// healthInterval is how often the backend's reachability is probed.
const healthInterval = 2 * time.Second

// LivenessService is the grpc.health.v1 service name that reports SERVING
// for as long as the sidecar runs, whatever the backend's state: a liveness
// probe should ask for it, so that a backend outage makes the pod unready
// (service "") without restarting the sidecar.
const LivenessService = "liveness"

// backendBackoff paces reconnection attempts to the backend.
var backendBackoff = backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// Sidecar is a configured collapser, ready to serve.
type Sidecar struct {
	cfg      config.Settings
	logger   *slog.Logger
	backend  *grpc.ClientConn
	tls      *legs
	peers    *peerLinks      // nil: no peers
	replicas *admin.Replicas // the replicas purges are taken to; nil: none
	proxy    *proxy.Proxy
	resolver *methodkind.Resolver
	policy   *policy.Store
	limits   serverlimits.Limits
	health   *health.Server
	server   *grpc.Server
	peer     *grpc.Server // serves the peers' calls; nil: no peers
	admin    *grpc.Server // serves the admin service (purges)
	// adminToken is what every admin call carries; nil: none.
	adminToken *secretfile.Value
	metrics    http.Handler
	tracing    *tracing.Tracing // nil: tracing is off
}

// New builds a Sidecar from cfg, and its tracing from the OTEL_* variables
// of the process environment (package tracing). It connects to nothing yet:
// the backend is dialled lazily, so the sidecar may start before its
// backend. A policy file that cannot be read or is invalid is an error.
func New(cfg config.Settings, logger *slog.Logger) (*Sidecar, error) {
	return newWith(cfg, logger, seams{now: time.Now})
}

// seams are what tests change of a sidecar besides its settings.
type seams struct {
	// now is the clock the answers' windows and the peers' leases are
	// read on.
	now func() time.Time
	// syncEvery is how often the replicas sync (0:
	// coherence.SyncInterval); a test that syncs them itself sets it long.
	syncEvery time.Duration
}

// newWith is New with seams.
func newWith(cfg config.Settings, logger *slog.Logger, sm seams) (*Sidecar, error) {
	rule, err := requestkey.NewRule(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("key headers: %w", err)
	}
	if cfg.Key.ShareAcrossCredentials {
		logger.Warn("UNSAFE: credentials are left out of the request key; callers with different credentials share responses")
	}
	// The metrics and the spans name methods from one bounded set.
	labels := methodlabel.New(methodlabel.MaxUnknown)
	tr, err := tracing.New(tracing.Options{SpanName: labels.Label, Logger: logger})
	if err != nil {
		return nil, err
	}
	s, err := dialAndAssemble(cfg, logger, rule, labels, tr, sm)
	if err != nil {
		// Nothing was exported yet: the spans that were not are no loss.
		_ = tr.Shutdown(context.Background())
		return nil, err
	}
	return s, nil
}

// dialAndAssemble makes the backend and peer connections, traced by tr, and
// assembles the parts around them.
func dialAndAssemble(cfg config.Settings, logger *slog.Logger, rule *requestkey.Rule, labels *methodlabel.Set, tr *tracing.Tracing, sm seams) (*Sidecar, error) {
	tls, err := openLegs(cfg)
	if err != nil {
		return nil, err
	}
	backend, err := grpc.NewClient(cfg.Backend, append(tr.DialOptions(),
		tls.backend,
		// The backend shares the pod: when it restarts, notice within a
		// second rather than after grpc's default backoff of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backendBackoff, MinConnectTimeout: 5 * time.Second}),
		// No service config is looked up: a DNS TXT query for it can wait
		// seconds for an answer that never comes where names outside the
		// cluster do not resolve.
		grpc.WithDisableServiceConfig())...)
	if err != nil {
		tls.close()
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	var links *peerLinks
	if cfg.Peers != "" {
		if links, err = dialPeers(cfg, tr, logger); err != nil {
			backend.Close()
			tls.close()
			return nil, err
		}
	}
	s, err := assemble(cfg, logger, backend, links, tls, rule, labels, tr, sm)
	if err != nil {
		backend.Close()
		tls.close()
		if links != nil {
			links.close()
		}
		return nil, err
	}
	return s, nil
}

// peerLinks are what ties a sidecar to its peers: the connection to their
// ring, and how replicas prove they are the release's.
type peerLinks struct {
	ring  *peers.Ring
	trust peers.Trust
	tls   *tlsfiles.Source // nil: plain text
}

// dialPeers reads the release's peer token (at least peers.MinTokenBytes)
// and the files of mutual TLS between replicas when set, and makes the
// connection to the peers, traced by tr.
func dialPeers(cfg config.Settings, tr *tracing.Tracing, logger *slog.Logger) (*peerLinks, error) {
	token, err := secretfile.Load(cfg.PeerTokenFile, peers.MinTokenBytes, logger)
	if err != nil {
		return nil, fmt.Errorf("peer token (%s): %w", config.EnvName("peer-token-file"), err)
	}
	links := &peerLinks{trust: peers.Trust{Token: token}}
	if cfg.PeerTLSCertFile != "" {
		if links.tls, err = tlsfiles.Watch(tlsfiles.Files{Cert: cfg.PeerTLSCertFile, Key: cfg.PeerTLSKeyFile, CA: cfg.PeerTLSCAFile}, 0); err != nil {
			return nil, fmt.Errorf("peer TLS (%s): %w", config.EnvName("peer-tls-cert-file"), err)
		}
		if links.trust.TLS, err = links.tls.Mutual(); err != nil {
			links.tls.Close()
			return nil, fmt.Errorf("peer TLS (%s): %w", config.EnvName("peer-tls-cert-file"), err)
		}
	} else {
		logger.Warn("calls between replicas are plain text: their peer token, callers' headers and answers can be read on the network; set " +
			config.EnvName("peer-tls-cert-file") + ", " + config.EnvName("peer-tls-key-file") + " and " + config.EnvName("peer-tls-ca-file"))
	}
	if links.ring, err = peers.Dial(cfg.Peers, cfg.PeerListen, append(tr.DialOptions(), links.trust.DialOptions()...)...); err != nil {
		links.close()
		return nil, err
	}
	return links, nil
}

// close closes the connection to the peers and stops watching the TLS
// files.
func (l *peerLinks) close() error {
	var err error
	if l.ring != nil {
		err = l.ring.Close()
	}
	if l.tls != nil {
		l.tls.Close()
	}
	return err
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

// scrapeSources are what a scrape reads of the proxy, the rules, the peers
// and replicas (nil: none) and tracing (nil: off).
func scrapeSources(p *proxy.Proxy, decider *policy.Decider, links *peerLinks, others *admin.Replicas, tr *tracing.Tracing) metrics.Sources {
	src := metrics.Sources{Stats: p.Stats, Streams: p.StreamStats, Methods: decider.Rules}
	if tr != nil {
		src.Traces = tr.Stats
	}
	if links != nil {
		src.Peers = peerMetrics{ring: links.ring, proxy: p, replicas: others}.state
	}
	return src
}

// peerMetrics are the parts the peer metrics read.
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

// assemble connects the parts around the backend and peer connections.
func assemble(cfg config.Settings, logger *slog.Logger, backend *grpc.ClientConn, links *peerLinks, tls *legs, rule *requestkey.Rule, labels *methodlabel.Set, tr *tracing.Tracing, sm seams) (*Sidecar, error) {
	resolver, err := methodkind.NewResolver(methodkind.Options{
		Backend:           backend,
		UseReflection:     cfg.Reflection,
		DescriptorSetPath: cfg.DescriptorSet,
		UnaryMethods:      cfg.Policy.CollapseMethods,
		Logger:            logger,
	})
	if err != nil {
		return nil, fmt.Errorf("method kinds: %w", err)
	}
	// The Recorder counts what the policy, the proxy and the admin service
	// tell it; what a scrape reads of them is registered once they exist.
	observer := metrics.NewRecorder(metrics.Options{Labels: labels, Exemplars: tr != nil})
	store, err := policy.NewStore(cfg.Policy, cfg.PolicyFile, logger, observer)
	if err != nil {
		return nil, err
	}
	decider := policy.NewDecider(store, resolver, logger)
	var peerRing proxy.Peers // a nil *peers.Ring must stay a nil interface
	if links != nil {
		peerRing = links.ring
	}
	p, err := proxy.New(proxy.Options{
		Settings:       cfg.Proxy,
		Backend:        backend,
		Peers:          peerRing,
		Forwarding:     forwarding.New(sm.now),
		Rules:          decider,
		KeyRule:        rule,
		Observer:       observer,
		TracerProvider: tr.TracerProvider(),
		Logger:         logger,
		Now:            sm.now,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	others, err := replicas(cfg, links, p, logger, sm)
	if err != nil {
		return nil, err
	}
	registry := metrics.NewRegistry()
	if err := metrics.Register(registry, observer, scrapeSources(p, decider, links, others, tr)); err != nil {
		return nil, err
	}
	limits := cfg.Server
	server := grpc.NewServer(slices.Concat(p.ServerOptions(), limits.ServerOptions(), tr.ServerOptions(), tls.callers)...)
	var peerServer *grpc.Server
	if links != nil {
		// Every call on the peer port proves it comes from a replica.
		peerServer = grpc.NewServer(slices.Concat(p.PeerServerOptions(), limits.ServerOptions(), tr.ServerOptions(),
			links.trust.ServerOptions())...)
		admin.NewPeer(p, others).Register(peerServer)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(LivenessService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(server, hs)
	var adminToken *secretfile.Value
	if cfg.AdminTokenFile != "" {
		if adminToken, err = secretfile.Load(cfg.AdminTokenFile, admin.MinTokenBytes, logger); err != nil {
			return nil, fmt.Errorf("admin token (%s): %w", config.EnvName("admin-token-file"), err)
		}
	}
	purges := admin.New(admin.Options{Purger: p, Observer: observer, AllowRemote: cfg.AdminAllowRemote, Replicas: others, Token: adminToken})
	// The proxy's purges on write go through the admin service, which
	// takes them to every replica; it is built on the proxy, after it.
	p.InvalidateThrough(purges)
	// Every caller is checked before anything of its call is read.
	adminServer := grpc.NewServer(append(limits.ServerOptions(), purges.Tap())...)
	purges.Register(adminServer)
	reflection.Register(adminServer) // grpcurl and friends find the admin service by themselves
	return &Sidecar{
		cfg:        cfg,
		logger:     logger,
		backend:    backend,
		tls:        tls,
		peers:      links,
		replicas:   others,
		proxy:      p,
		resolver:   resolver,
		policy:     store,
		limits:     limits,
		health:     hs,
		server:     server,
		peer:       peerServer,
		admin:      adminServer,
		adminToken: adminToken,
		metrics:    metrics.Handler(registry),
		tracing:    tr,
	}, nil
}

// Listeners are where a Sidecar serves.
type Listeners struct {
	// GRPC is where callers call; Metrics serves /metrics.
	GRPC, Metrics net.Listener
	// Peer is where peers forward calls; required with cfg.Peers, unused
	// without.
	Peer net.Listener
	// Admin is where the admin service (purges) is served; nil: nowhere.
	Admin net.Listener
}

// Serve serves on lis until ctx ends or a server fails, then shuts down:
// health turns NOT_SERVING, no new calls are accepted, and calls in flight
// get cfg.ShutdownTimeout to finish. Serve releases everything New
// acquired; a Sidecar serves once.
func (s *Sidecar) Serve(ctx context.Context, lis Listeners) error {
	grpcLis, metricsLis := lis.GRPC, lis.Metrics
	if s.peer != nil && lis.Peer == nil {
		return errors.New("sidecar: peers are configured but there is no peer listener")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metrics)
	mux.Handle(LivezPath, probe(s.health, LivenessService))
	mux.Handle(ReadyzPath, probe(s.health, ""))
	metricsServer := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	var wg sync.WaitGroup
	failed := make(chan error, 4)
	wg.Go(func() { s.resolver.Run(ctx) })
	wg.Go(func() { s.policy.Run(ctx, 0) })
	wg.Go(func() { backendhealth.Watch(ctx, s.backend, s.health, healthInterval, s.resolver.Ready, s.logger) })
	if s.replicas != nil {
		wg.Go(func() { s.replicas.Run(ctx) })
		wg.Go(func() { s.peers.trust.Token.Run(ctx, 0) })
	}
	if s.adminToken != nil {
		wg.Go(func() { s.adminToken.Run(ctx, 0) })
	}
	wg.Go(func() {
		if err := s.server.Serve(s.limits.Listener(grpcLis)); err != nil {
			failed <- fmt.Errorf("serve gRPC on %s: %w", grpcLis.Addr(), err)
		}
	})
	if s.peer != nil {
		wg.Go(func() {
			if err := s.peer.Serve(s.limits.Listener(lis.Peer)); err != nil {
				failed <- fmt.Errorf("serve peers on %s: %w", lis.Peer.Addr(), err)
			}
		})
	}
	if lis.Admin != nil {
		wg.Go(func() {
			if err := s.admin.Serve(netutil.LimitListener(lis.Admin, admin.MaxConnections)); err != nil {
				failed <- fmt.Errorf("serve the admin service on %s: %w", lis.Admin.Addr(), err)
			}
		})
	}
	wg.Go(func() {
		if err := metricsServer.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("serve metrics on %s: %w", metricsLis.Addr(), err)
		}
	})

	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	s.logger.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	s.health.Shutdown()
	var stops sync.WaitGroup
	for _, srv := range []*grpc.Server{s.server, s.peer, s.admin} {
		if srv != nil {
			stops.Go(func() { s.stopGRPC(srv) })
		}
	}
	stops.Wait()
	cancel()
	shutdownCtx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	if mErr := metricsServer.Shutdown(shutdownCtx); mErr != nil {
		err = errors.Join(err, fmt.Errorf("stop metrics server: %w", mErr))
	}
	wg.Wait()
	if cErr := s.backend.Close(); cErr != nil {
		err = errors.Join(err, fmt.Errorf("close backend connection: %w", cErr))
	}
	s.tls.close()
	if s.peers != nil {
		if cErr := s.peers.close(); cErr != nil {
			err = errors.Join(err, fmt.Errorf("close peer connection: %w", cErr))
		}
	}
	if s.replicas != nil {
		if cErr := s.replicas.Close(); cErr != nil {
			err = errors.Join(err, fmt.Errorf("close connections to replicas: %w", cErr))
		}
	}
	// Every call has ended, and its spans with it: the last are exported.
	if tErr := s.tracing.Shutdown(context.Background()); tErr != nil {
		err = errors.Join(err, tErr)
	}
	return err
}

// stopGRPC stops srv accepting calls and waits for those in flight, at
// most cfg.ShutdownTimeout, then cancels the rest.
func (s *Sidecar) stopGRPC(srv *grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(s.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.logger.Warn("calls still in flight at the shutdown timeout are cancelled")
		srv.Stop()
		<-stopped
	}
}
