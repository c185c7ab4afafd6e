// Command hello-backend is the demo's slow backend: a gRPC Greeter that waits
// --latency before answering and counts every request, a Stats service
// reporting those counts, server reflection and grpc.health.v1, plus
// Prometheus metrics (hello_requests_total) and an HTTP health check
// (/healthz, the gRPC health status, for probes that cannot reach a gRPC
// listener bound to loopback) on a second port. Run it with -h for its flags
// and environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/collapser/collapser/src/internal/command"
)

func main() {
	command.Main("hello-backend", run)
}

// run parses args over the environment, listens and serves until ctx ends.
// -h usage goes to stdout; logs (JSON) and one line with the bound addresses
// go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, os.LookupEnv, stdout, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	grpcLis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen for gRPC on %s: %w", cfg.listen, err)
	}
	metricsLis, err := net.Listen("tcp", cfg.metricsListen)
	if err != nil {
		return errors.Join(fmt.Errorf("listen for metrics on %s: %w", cfg.metricsListen, err), grpcLis.Close())
	}
	fmt.Fprintf(stderr, "hello-backend: serving gRPC on %s, metrics on %s, latency %s\n", grpcLis.Addr(), metricsLis.Addr(), cfg.latency)
	return serve(ctx, cfg, grpcLis, metricsLis, logger)
}
