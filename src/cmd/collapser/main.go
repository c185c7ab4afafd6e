// Command collapser is the request-collapsing gRPC sidecar. It serves gRPC
// callers, forwards to the backend, shares one backend call among identical
// unary calls in flight, and serves Prometheus metrics. Run it with -h for
// its flags and environment variables.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/sidecar"
)

func main() {
	command.Main("collapser", func(ctx context.Context, args []string, _, stderr io.Writer) error {
		return run(ctx, args, os.Getenv, stderr)
	})
}

// run parses the configuration, starts the sidecar and serves until ctx ends.
// It prints one line with the bound addresses to stderr when it is serving.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	s, err := sidecar.New(cfg, logger)
	if err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen for gRPC: %w", err)
	}
	metricsLis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("listen for metrics: %w", err)
	}
	fmt.Fprintf(stderr, "collapser: serving gRPC on %s, metrics on %s, backend %s\n", grpcLis.Addr(), metricsLis.Addr(), cfg.Backend)
	return s.Serve(ctx, grpcLis, metricsLis)
}

func newLogger(cfg config.Sidecar, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
