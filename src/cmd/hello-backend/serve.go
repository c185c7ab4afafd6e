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
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/metrics"
)

// serve serves gRPC on grpcLis and /metrics and /healthz on metricsLis until ctx ends or
// either server fails, then stops both, giving calls in flight up to
// cfg.shutdownTimeout to finish.
func serve(ctx context.Context, cfg config, grpcLis, metricsLis net.Listener, logger *slog.Logger) error {
	reg := metrics.NewRegistry()
	servedBy, err := os.Hostname()
	if err != nil {
		logger.Warn("no hostname for the served-by trailer", "error", err)
	}
	backend, err := hello.New(hello.Options{Latency: cfg.latency, StreamInterval: cfg.streamInterval, ReplyBytes: cfg.replyBytes, ServedBy: servedBy, Registerer: reg})
	if err != nil {
		return errors.Join(err, grpcLis.Close(), metricsLis.Close())
	}
	var opts []grpc.ServerOption
	var interceptor *collapser.Collapser // nil: no interceptor
	if cfg.collapse {
		if interceptor, err = newCollapser(cfg, reg, logger); err != nil {
			return errors.Join(err, grpcLis.Close(), metricsLis.Close())
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

	healthConn, healthClient, err := dialHealth(grpcLis.Addr())
	if err != nil {
		return errors.Join(err, grpcLis.Close(), metricsLis.Close())
	}
	defer healthConn.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg))
	mux.Handle(healthPath, healthHandler(healthClient))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	g, gctx := errgroup.WithContext(ctx)
	if interceptor != nil {
		g.Go(func() error {
			interceptor.Run(gctx)
			return nil
		})
	}
	if cfg.peers.Target != "" {
		peerLis, err := net.Listen("tcp", cfg.peers.Listen)
		if err != nil {
			return errors.Join(fmt.Errorf("listen for peers on %s: %w", cfg.peers.Listen, err), interceptor.Close(), grpcLis.Close(), metricsLis.Close())
		}
		g.Go(func() error {
			if err := interceptor.ServePeers(peerLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("serve peers: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return interceptor.Close()
		})
	}
	g.Go(func() error {
		if err := gs.Serve(grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve gRPC: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := hs.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve metrics: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
		healthSrv.Shutdown()
		return shutdown(gs, hs, cfg.shutdownTimeout)
	})
	return g.Wait()
}

// newCollapser returns the collapser of cfg's policy file, with its
// metrics on reg.
func newCollapser(cfg config, reg prometheus.Registerer, logger *slog.Logger) (*collapser.Collapser, error) {
	o := collapser.DefaultOptions()
	o.PolicyFile = cfg.collapsePolicy
	o.Peers = cfg.peers
	o.Registerer = reg
	o.Logger = logger
	c, err := collapser.New(o)
	if err != nil {
		return nil, fmt.Errorf("--collapse: %w", err)
	}
	return c, nil
}

// shutdown stops gs and hs gracefully, forcing both after timeout.
func shutdown(gs *grpc.Server, hs *http.Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	httpErr := hs.Shutdown(ctx)
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop() // ends GracefulStop too
		<-stopped
	}
	if httpErr != nil {
		return errors.Join(fmt.Errorf("shut down metrics server: %w", httpErr), hs.Close())
	}
	return nil
}
