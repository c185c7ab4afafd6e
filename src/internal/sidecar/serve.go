package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/backendhealth"
)

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
	if s.peer != nil && lis.Peer == nil {
		return errors.New("sidecar: peers are configured but there is no peer listener")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	metricsServer := s.metricsServer()
	var wg sync.WaitGroup
	s.runTasks(ctx, &wg)
	failed := s.serveOn(&wg, lis, metricsServer)

	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	s.logger.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	s.health.Shutdown()
	s.stopServers()
	cancel()
	shutdownCtx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	if mErr := metricsServer.Shutdown(shutdownCtx); mErr != nil {
		err = errors.Join(err, fmt.Errorf("stop metrics server: %w", mErr))
	}
	wg.Wait()
	if rErr := s.release(); rErr != nil {
		err = errors.Join(err, rErr)
	}
	return err
}

// metricsServer returns the HTTP server of /metrics and the probes.
func (s *Sidecar) metricsServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metrics)
	mux.Handle(LivezPath, probe(s.health, LivenessService))
	mux.Handle(ReadyzPath, probe(s.health, ""))
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// runTasks runs, in wg until ctx ends, what keeps the parts up to date:
// the method kinds, the policy file, the backend's health, and with peers
// the replicas' leases and the peer token; the admin token when set.
func (s *Sidecar) runTasks(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { s.resolver.Run(ctx) })
	wg.Go(func() { s.policy.Run(ctx, 0) })
	wg.Go(func() { backendhealth.Watch(ctx, s.backend, s.health, healthInterval, s.resolver.Ready, s.logger) })
	if s.fleet != nil {
		wg.Go(func() { s.fleet.Run(ctx) })
	}
	if s.adminToken != nil {
		wg.Go(func() { s.adminToken.Run(ctx, 0) })
	}
}

// serveOn serves, in wg, each server on its listener of lis (the admin
// service only when lis has one), and returns the channel the failure of
// any is sent to.
func (s *Sidecar) serveOn(wg *sync.WaitGroup, lis Listeners, metricsServer *http.Server) <-chan error {
	failed := make(chan error, 4)
	wg.Go(func() {
		if err := s.server.Serve(s.limits.Listener(lis.GRPC)); err != nil {
			failed <- fmt.Errorf("serve gRPC on %s: %w", lis.GRPC.Addr(), err)
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
		if err := metricsServer.Serve(lis.Metrics); !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("serve metrics on %s: %w", lis.Metrics.Addr(), err)
		}
	})
	return failed
}

// stopServers stops the gRPC servers at once, each as stopGRPC does, and
// waits for them.
func (s *Sidecar) stopServers() {
	var stops sync.WaitGroup
	for _, srv := range []*grpc.Server{s.server, s.peer, s.admin} {
		if srv != nil {
			stops.Go(func() { s.stopGRPC(srv) })
		}
	}
	stops.Wait()
}

// release closes what New acquired, once every call has ended: the
// backend connection, the TLS files, the peer connection, the
// connections to the replicas, and tracing, after it exports the last
// spans.
func (s *Sidecar) release() error {
	var err error
	if cErr := s.backend.Close(); cErr != nil {
		err = errors.Join(err, fmt.Errorf("close backend connection: %w", cErr))
	}
	s.tls.close()
	if s.fleet != nil {
		err = errors.Join(err, s.fleet.Close())
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
