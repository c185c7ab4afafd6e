// Command collapser-injector is the mutating admission webhook that puts the
// collapser sidecar in front of any gRPC workload whose pod template asks for
// it (annotation collapser.io/inject: "true", or its namespace labelled
// collapser.io/inject=enabled). The sidecar is the container the chart
// renders into the injector's template; the injector fills in each pod's
// settings from its annotations. It makes and renews its own certificate,
// or serves the one cert-manager keeps in a mounted Secret (--cert-dir),
// and serves Prometheus metrics. Run it with -h for its flags and
// environment variables.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/envflag"
)

func main() {
	command.Main("collapser-injector", func(ctx context.Context, args []string, _, stderr io.Writer) error {
		return run(ctx, args, os.LookupEnv, stderr)
	})
}

// run parses the settings, connects to the API server (in the cluster, or
// through KUBECONFIG) and serves until ctx ends.
func run(ctx context.Context, args []string, lookup envflag.Lookup, stderr io.Writer) error {
	s, err := parseSettings(args, lookup, stderr)
	if err != nil {
		return err
	}
	logger := command.NewLogger(s.LogLevel, s.LogFormat, stderr)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("API server configuration: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("API server client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API server discovery: %w", err)
	}
	mode, err := sidecarMode(s.SidecarMode, disc.ServerVersion)
	if err != nil {
		return err
	}
	webhookLis, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen for the webhook: %w", err)
	}
	opsLis, err := net.Listen("tcp", s.OpsListen)
	if err != nil {
		webhookLis.Close()
		return fmt.Errorf("listen for metrics and probes: %w", err)
	}
	return serve(ctx, s, c, mode, listeners{webhook: webhookLis, ops: opsLis}, logger)
}
