package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/collapser"
	collapserconfig "github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/metrics"
)

// serve serves gRPC on lis.grpc and /metrics and /healthz on lis.metrics,
// and with --collapse the collapser's metrics and peer port on theirs,
// until ctx ends or a server fails, then stops them, giving calls in flight
// up to cfg.shutdownTimeout to finish.
func serve(ctx context.Context, cfg config, lis *listeners, logger *slog.Logger) error {
	reg := metrics.NewRegistry()
	servedBy, err := os.Hostname()
	if err != nil {
		logger.Warn("no hostname for the served-by trailer", "error", err)
	}
	backend, err := hello.New(hello.Options{Latency: cfg.latency, StreamInterval: cfg.streamInterval, ReplyBytes: cfg.replyBytes, ServedBy: servedBy, Registerer: reg})
	if err != nil {
		return errors.Join(err, lis.close())
	}
	var opts []grpc.ServerOption
	var interceptor *collapser.Collapser  // nil: no interceptor
	var collapserReg *prometheus.Registry // the interceptor's metrics
	if cfg.collapse {
		collapserReg = metrics.NewRegistry()
		if interceptor, err = newCollapser(cfg.collapser, collapserReg, logger); err != nil {
			return errors.Join(err, lis.close())
		}
		opts = append(opts, grpc.ChainUnaryInterceptor(interceptor.UnaryServerInterceptor()),
			grpc.ChainStreamInterceptor(interceptor.StreamServerInterceptor()))
	}
	gs := grpc.NewServer(opts...)
	if interceptor != nil {
		// The calls peers forward run the Greeter too.
		backend.Register(interceptor.Registrar(gs))
		interceptor.RegisterAdmin(gs)
	} else {
		backend.Register(gs)
	}
	healthSrv := health.NewServer() // overall status "" starts SERVING
	for _, svc := range []string{hellov1.Greeter_ServiceDesc.ServiceName, hellov1.Stats_ServiceDesc.ServiceName} {
		healthSrv.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(gs, healthSrv)
	reflection.Register(gs)

	healthConn, healthClient, err := dialHealth(lis.grpc.Addr())
	if err != nil {
		return errors.Join(err, closeCollapser(interceptor), lis.close())
	}
	defer healthConn.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg))
	mux.Handle(healthPath, healthHandler(healthClient))
	servers := []httpServer{{&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, lis.metrics}}
	if interceptor != nil {
		cmux := http.NewServeMux()
		cmux.Handle("/metrics", metrics.Handler(collapserReg))
		servers = append(servers, httpServer{&http.Server{Handler: cmux, ReadHeaderTimeout: 10 * time.Second}, lis.collapser})
	}

	g, gctx := errgroup.WithContext(ctx)
	if interceptor != nil {
		g.Go(func() error {
			interceptor.Run(gctx)
			return nil
		})
	}
	if lis.peer != nil {
		g.Go(func() error {
			if err := interceptor.ServePeers(lis.peer); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("serve peers: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := gs.Serve(lis.grpc); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve gRPC: %w", err)
		}
		return nil
	})
	for _, hs := range servers {
		g.Go(func() error {
			if err := hs.srv.Serve(hs.lis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics on %s: %w", hs.lis.Addr(), err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
		healthSrv.Shutdown()
		err := shutdown(gs, servers, cfg.shutdownTimeout)
		// Once no call runs: the peer port, and the connections to the peers.
		return errors.Join(err, closeCollapser(interceptor))
	})
	return g.Wait()
}

// httpServer is an HTTP server and its listener.
type httpServer struct {
	srv *http.Server
	lis net.Listener
}

// closeCollapser closes c, when there is one.
func closeCollapser(c *collapser.Collapser) error {
	if c == nil {
		return nil
	}
	return c.Close()
}

// newCollapser returns the collapser the sidecar's settings s describe,
// with its metrics on reg. Of s, what the library does is read: the policy
// (file and defaults), the keys, the engine's bounds, the admin token and
// the peers; the sidecar's own listeners, TLS and server limits are not.
func newCollapser(s collapserconfig.Settings, reg prometheus.Registerer, logger *slog.Logger) (*collapser.Collapser, error) {
	o := collapser.DefaultOptions()
	o.PolicyFile, o.Policy, o.Keys, o.Engine, o.AdminTokenFile = s.PolicyFile, s.Policy, s.Key, s.Proxy, s.AdminTokenFile
	o.Peers = peersOf(s)
	o.Registerer = reg
	o.Logger = logger
	c, err := collapser.New(o)
	if err != nil {
		return nil, fmt.Errorf("--collapse: %w", err)
	}
	return c, nil
}

// peersOf returns the library's Peers of the sidecar's settings s: the
// inverse of what the library passes its fleet (collapser.Peers'
// settings), which TestPeersOf_EverySidecarPeerSettingReachesPeers and the
// library's own test keep whole.
func peersOf(s collapserconfig.Settings) collapser.Peers {
	return collapser.Peers{
		Target: s.Peers, Replicas: s.Replicas, Listen: s.PeerListen, TokenFile: s.PeerTokenFile,
		CertFile: s.PeerTLSCertFile, KeyFile: s.PeerTLSKeyFile, CAFile: s.PeerTLSCAFile, Plaintext: s.PeerPlaintext,
	}
}

// shutdown stops gs and the HTTP servers gracefully, forcing all after
// timeout.
func shutdown(gs *grpc.Server, servers []httpServer, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	var err error
	for _, hs := range servers {
		if hErr := hs.srv.Shutdown(ctx); hErr != nil {
			err = errors.Join(err, fmt.Errorf("shut down metrics server on %s: %w", hs.lis.Addr(), hErr), hs.srv.Close())
		}
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop() // ends GracefulStop too
		<-stopped
	}
	return err
}
