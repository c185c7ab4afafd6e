// Command collapser is the request-collapsing gRPC sidecar. It serves gRPC
// callers and forwards to the backend: identical unary calls of safe methods
// share one backend call and its short-lived result, identical server
// streams of methods the policy replays share one backend stream, with peers
// across replicas too, and everything else passes through. It serves
// Prometheus metrics. Run it with -h for its flags and environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc/resolver/dns"

	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/envflag"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/sidecar"
)

func main() {
	// Peers are found by DNS, resolved again every peers.ResolveInterval
	// (grpc-go's default lets a resolution wait 30 s after the last one),
	// so a replica that joins is seen within it. It must be set before any
	// gRPC channel exists.
	dns.SetMinResolutionInterval(peers.ResolveInterval)
	command.Main("collapser", func(ctx context.Context, args []string, _, stderr io.Writer) error {
		return run(ctx, args, os.LookupEnv, stderr)
	})
}

// run parses the configuration, starts the sidecar and serves until ctx ends.
// It prints one line with the bound addresses to stderr when it is serving.
func run(ctx context.Context, args []string, lookup envflag.Lookup, stderr io.Writer) error {
	cfg, err := config.Parse(args, lookup, stderr)
	if err != nil {
		return err
	}
	logger := command.NewLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	setGoMemoryLimit(cfg, lookup, logger)
	s, err := sidecar.New(cfg, logger)
	if err != nil {
		return err
	}
	lis, err := listen(cfg)
	if err != nil {
		return err
	}
	extra := ""
	if lis.Admin != nil {
		extra += fmt.Sprintf(", admin on %s", lis.Admin.Addr())
	}
	if lis.Peer != nil {
		extra += fmt.Sprintf(", peers %s on %s", cfg.Peers, lis.Peer.Addr())
	}
	fmt.Fprintf(stderr, "collapser: serving gRPC on %s, metrics on %s, backend %s%s\n", lis.GRPC.Addr(), lis.Metrics.Addr(), cfg.Backend, extra)
	return s.Serve(ctx, lis)
}

// listen opens the sidecar's listeners: gRPC, metrics, the admin service's
// unless --admin-listen is empty, and the peers' with --peers. On an error
// it closes those it opened.
func listen(cfg config.Settings) (sidecar.Listeners, error) {
	var lis sidecar.Listeners
	var opened []net.Listener
	open := func(what, addr string, to *net.Listener) error {
		network := "tcp"
		if socket, ok := strings.CutPrefix(addr, "unix:"); ok {
			// A socket left by an earlier run (a restarted container, a
			// volume that outlived it) would refuse the new one.
			if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("listen for %s: %w", what, err)
			}
			network, addr = "unix", socket
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			return fmt.Errorf("listen for %s: %w", what, err)
		}
		// Who may connect is who can reach the socket's directory (a
		// volume mounted into the pod's containers), whatever their user:
		// a socket made under the umask takes connections from its owner only.
		if network == "unix" {
			if err := os.Chmod(addr, 0o666); err != nil {
				l.Close()
				return fmt.Errorf("listen for %s: %w", what, err)
			}
		}
		*to = l
		opened = append(opened, l)
		return nil
	}
	err := open("gRPC", cfg.Listen, &lis.GRPC)
	if err == nil {
		err = open("metrics", cfg.MetricsListen, &lis.Metrics)
	}
	if err == nil && cfg.AdminListen != "" {
		err = open("the admin service", cfg.AdminListen, &lis.Admin)
	}
	if err == nil && cfg.Peers != "" {
		err = open("peers", cfg.PeerListen, &lis.Peer)
	}
	if err != nil {
		for _, l := range opened {
			l.Close()
		}
	}
	return lis, err
}

// setGoMemoryLimit gives the Go runtime the soft memory limit the container's
// limit allows (--memory-limit), so the collector works harder as the heap
// nears it instead of letting the container be killed. A GOMEMLIMIT of the
// environment, which the runtime read at start, wins.
func setGoMemoryLimit(cfg config.Settings, lookup envflag.Lookup, logger *slog.Logger) {
	limit := cfg.GoMemoryLimit()
	// The runtime takes an empty GOMEMLIMIT for none, as it is here.
	switch env, _ := lookup("GOMEMLIMIT"); {
	case limit == 0:
		return
	case env != "":
		logger.Info("GOMEMLIMIT is set: --memory-limit leaves the Go memory limit alone", "GOMEMLIMIT", env)
		return
	}
	debug.SetMemoryLimit(limit)
	logger.Info("Go soft memory limit set", "bytes", limit, "memory_limit", cfg.MemoryLimit)
}
