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
	lis, err := listen(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "hello-backend: serving gRPC on %s, metrics on %s, latency %s\n", lis.grpc.Addr(), lis.metrics.Addr(), cfg.latency)
	if lis.collapser != nil {
		peers := "none"
		if lis.peer != nil {
			peers = lis.peer.Addr().String()
		}
		fmt.Fprintf(stderr, "hello-backend: collapsing, its metrics on %s, peers on %s\n", lis.collapser.Addr(), peers)
	}
	return serve(ctx, cfg, lis, logger)
}

// listeners are where the backend serves: gRPC, its metrics, and with
// --collapse the collapser's metrics and, with peers, the peer port.
type listeners struct {
	grpc, metrics net.Listener
	collapser     net.Listener // nil: not collapsing
	peer          net.Listener // nil: no peers
}

// listen opens the listeners cfg names.
func listen(cfg config) (*listeners, error) {
	lis := &listeners{}
	for _, l := range []struct {
		to   *net.Listener
		what string
		addr string
		on   bool
	}{
		{&lis.grpc, "gRPC", cfg.listen, true},
		{&lis.metrics, "metrics", cfg.metricsListen, true},
		{&lis.collapser, "the collapser's metrics", cfg.collapser.MetricsListen, cfg.collapse},
		{&lis.peer, "peers", cfg.collapser.PeerListen, cfg.collapse && cfg.collapser.Peers != ""},
	} {
		if !l.on {
			continue
		}
		var err error
		if *l.to, err = net.Listen("tcp", l.addr); err != nil {
			return nil, errors.Join(fmt.Errorf("listen for %s on %s: %w", l.what, l.addr, err), lis.close())
		}
	}
	return lis, nil
}

// close closes the listeners open.
func (l *listeners) close() error {
	var err error
	for _, lis := range []net.Listener{l.grpc, l.metrics, l.collapser, l.peer} {
		if lis != nil {
			err = errors.Join(err, lis.Close())
		}
	}
	return err
}
