// Package sidecar assembles the collapser sidecar: the backend connection,
// the engine (package engine: the method kinds, the policy, the proxy), the
// peers and the other replicas, the admin service, the server's limits, the
// health service, the metrics endpoint and tracing, and runs them until
// told to stop (serve.go). Each part takes its own group of the settings
// whole (config.Settings).
package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/engine"
	"github.com/collapser/collapser/src/internal/fleet"
	"github.com/collapser/collapser/src/internal/forwarding"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/serverlimits"
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
	fleet    *fleet.Fleet    // the other replicas; nil: no peers
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
	// The metrics and the spans name methods from one bounded set.
	labels := methodlabel.New(methodlabel.MaxUnknown)
	tr, err := tracing.New(tracing.Options{SpanName: labels.Label, Logger: logger})
	if err != nil {
		return nil, err
	}
	s, err := dialAndAssemble(cfg, logger, labels, tr, sm)
	if err != nil {
		// Nothing was exported yet: the spans that were not are no loss.
		_ = tr.Shutdown(context.Background())
		return nil, err
	}
	return s, nil
}

// dialAndAssemble makes the backend and peer connections, traced by tr, and
// assembles the parts around them.
func dialAndAssemble(cfg config.Settings, logger *slog.Logger, labels *methodlabel.Set, tr *tracing.Tracing, sm seams) (*Sidecar, error) {
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
	peers, err := fleet.Dial(cfg, logger, tr.DialOptions()...)
	if err != nil {
		backend.Close()
		tls.close()
		return nil, err
	}
	s := &Sidecar{cfg: cfg, logger: logger, backend: backend, tls: tls, fleet: peers, limits: cfg.Server, tracing: tr}
	if err := s.assemble(labels, sm); err != nil {
		backend.Close()
		tls.close()
		if peers != nil {
			peers.Close()
		}
		return nil, err
	}
	return s, nil
}

// assemble connects the parts around s's backend and peer connections:
// the engine (package engine), then what the sidecar serves it with, each
// built by a function of its own once the parts it needs exist; they need
// one another in this order, save that the proxy's writes purge through
// the admin service built on it (Proxy.InvalidateThrough).
func (s *Sidecar) assemble(labels *methodlabel.Set, sm seams) error {
	var ring proxy.Peers // a nil *peers.Ring must stay a nil interface
	if s.fleet != nil {
		ring = s.fleet.Ring()
	}
	e, err := engine.New(engine.Options{
		Policy:     s.cfg.Policy,
		PolicyFile: s.cfg.PolicyFile,
		Keys:       s.cfg.Key,
		Proxy:      s.cfg.Proxy,
		Kinds: methodkind.Options{
			Backend:           s.backend,
			UseReflection:     s.cfg.Reflection,
			DescriptorSetPath: s.cfg.DescriptorSet,
			UnaryMethods:      s.cfg.Policy.CollapseMethods,
		},
		Backend:        s.backend,
		Peers:          ring,
		Forwarding:     forwarding.New(sm.now),
		Labels:         labels,
		TracerProvider: s.tracing.TracerProvider(),
		Logger:         s.logger,
		Now:            sm.now,
	})
	if err != nil {
		return err
	}
	s.resolver, s.policy, s.proxy = e.Kinds, e.Policy, e.Proxy
	if s.fleet != nil {
		// Every call on the peer port proves it comes from a replica.
		if s.peer, err = s.fleet.Join(s.proxy, fleet.JoinOptions{
			ServerOptions: slices.Concat(s.limits.ServerOptions(), s.tracing.ServerOptions()),
			Now:           sm.now,
			SyncInterval:  sm.syncEvery,
		}); err != nil {
			return err
		}
		s.replicas = s.fleet.Replicas()
	}
	if s.adminToken, err = adminToken(s.cfg, s.logger); err != nil {
		return err
	}
	purges := admin.New(admin.Options{Purger: s.proxy, Observer: e.Recorder, AllowRemote: s.cfg.AdminAllowRemote, Replicas: s.replicas, Token: s.adminToken})
	// The proxy's writes purge through the admin service, built on it.
	s.proxy.InvalidateThrough(purges)
	if s.metrics, err = s.metricsHandler(e); err != nil {
		return err
	}
	s.server, s.health = s.callersServer()
	s.admin = adminServer(s.limits, purges)
	return nil
}

// adminToken reads the token every admin call must carry; nil when cfg
// names none.
func adminToken(cfg config.Settings, logger *slog.Logger) (*secretfile.Value, error) {
	if cfg.AdminTokenFile == "" {
		return nil, nil
	}
	token, err := secretfile.Load(cfg.AdminTokenFile, admin.MinTokenBytes, logger)
	if err != nil {
		return nil, fmt.Errorf("admin token (%s): %w", config.EnvName("admin-token-file"), err)
	}
	return token, nil
}

// metricsHandler registers e's counts and what a scrape reads of e, the
// peers and replicas, and tracing, and returns the handler that serves
// them with the Go runtime's.
func (s *Sidecar) metricsHandler(e *engine.Engine) (http.Handler, error) {
	src := e.Sources()
	if s.tracing != nil {
		src.Traces = s.tracing.Stats
	}
	if s.fleet != nil {
		src.Peers = s.fleet.State
	}
	registry := metrics.NewRegistry()
	if err := metrics.Register(registry, e.Recorder, src); err != nil {
		return nil, err
	}
	return metrics.Handler(registry), nil
}

// callersServer returns the server callers call, which serves the proxy,
// and its health service: NOT_SERVING until the backend is reachable,
// LivenessService SERVING.
func (s *Sidecar) callersServer() (*grpc.Server, *health.Server) {
	server := grpc.NewServer(slices.Concat(s.proxy.ServerOptions(), s.limits.ServerOptions(), s.tracing.ServerOptions(), s.tls.callers)...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(LivenessService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(server, hs)
	return server, hs
}

// adminServer returns the server of the admin service purges, within
// limits.
func adminServer(limits serverlimits.Limits, purges *admin.Service) *grpc.Server {
	// Every caller is checked before anything of its call is read.
	server := grpc.NewServer(append(limits.ServerOptions(), purges.Tap())...)
	purges.Register(server)
	reflection.Register(server) // grpcurl and friends find the admin service by themselves
	return server
}
