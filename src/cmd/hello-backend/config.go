package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/collapser/collapser/src/collapser"
	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/envflag"
)

// envPrefix starts the environment variable of every flag: HELLO_LISTEN for
// --listen, HELLO_METRICS_LISTEN for --metrics-listen, HELLO_LATENCY for
// --latency, and so on.
const envPrefix = "HELLO_"

// maxReplyBytes bounds --reply-bytes: within grpc-go's default 4 MiB
// message limit with room for the other fields.
const maxReplyBytes = 4<<20 - 1024

// config is the backend's configuration.
type config struct {
	listen          string
	metricsListen   string
	latency         time.Duration
	streamInterval  time.Duration
	replyBytes      int
	shutdownTimeout time.Duration
	logLevel        slog.Level
	// collapse serves the Greeter through the collapser library's server
	// interceptor, with collapsePolicy its policy file ("": none).
	collapse       bool
	collapsePolicy string
	// peers makes the interceptor one replica among the release's others,
	// sidecars or backends that collapse alike; no Target: none.
	peers collapser.Peers
}

// parseConfig returns the settings given by args over the environment read
// through lookup, over the defaults. -h usage goes to stdout, flag errors and
// their usage to stderr; the error of -h is flag.ErrHelp.
func parseConfig(args []string, lookup envflag.Lookup, stdout, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("hello-backend", flag.ContinueOnError)
	fs.Usage = envflag.Usage(fs, envPrefix, "latency")
	fs.StringVar(&c.listen, "listen", ":50051", "gRPC `address` to serve Greeter, Stats, reflection and health on")
	fs.StringVar(&c.metricsListen, "metrics-listen", ":2113", "`address` of the Prometheus /metrics endpoint")
	fs.DurationVar(&c.latency, "latency", 50*time.Millisecond, "how long each Greeter request waits before it is answered")
	fs.DurationVar(&c.streamInterval, "stream-interval", 0, "time between two StreamHellos replies of a request that sets no interval_ms")
	fs.IntVar(&c.replyBytes, "reply-bytes", 0, "pad every greeting with '.' to at least this many `bytes`, for loads with answers of a given size; 0: no padding")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long calls in flight may take to finish after SIGTERM")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelWarn, "least severe log `level`: debug, info, warn or error")
	fs.BoolVar(&c.collapse, "collapse", false, "collapse identical calls in this process, with the collapser library's server interceptor (no sidecar); its metrics join /metrics and its admin service the gRPC port")
	fs.StringVar(&c.collapsePolicy, "collapse-policy-file", "", "`path` of the collapser policy file the interceptor follows (the sidecar's format), reloaded when it changes; needs --collapse")
	c.peers = collapser.DefaultOptions().Peers
	peerFlags := []struct {
		value *string
		name  string
		usage string
	}{
		{&c.peers.Target, "collapse-peers", "gRPC `target` of every replica, this one included, sidecars or backends with --collapse (the sidecar's --peers): each key's handler runs on its owner; needs --collapse"},
		{&c.peers.Replicas, "collapse-replicas", "gRPC `target` of every replica, ready or not (the sidecar's --replicas); empty: --collapse-peers"},
		{&c.peers.Listen, "collapse-peer-listen", "`address` peers forward calls to, with --collapse-peers (the sidecar's --peer-listen)"},
		{&c.peers.TokenFile, "collapse-peer-token-file", "`path` of the release's peer token (the sidecar's --peer-token-file), required with --collapse-peers"},
		{&c.peers.CertFile, "collapse-peer-tls-cert-file", "`path` of this replica's certificate for mutual TLS between replicas (the sidecar's --peer-tls-cert-file)"},
		{&c.peers.KeyFile, "collapse-peer-tls-key-file", "`path` of the key of --collapse-peer-tls-cert-file"},
		{&c.peers.CAFile, "collapse-peer-tls-ca-file", "`path` of the CA certificates that sign the replicas' certificates"},
	}
	for _, f := range peerFlags {
		fs.StringVar(f.value, f.name, *f.value, f.usage)
	}
	fs.BoolVar(&c.peers.Plaintext, "collapse-peer-plaintext", false, "let replicas call each other in plain text (the sidecar's --peer-plaintext)")

	if err := envflag.Apply(fs, envPrefix, lookup); err != nil {
		return config{}, err
	}
	if err := command.ParseFlags(fs, args, stdout, stderr); err != nil {
		return config{}, err
	}
	if c.latency < 0 {
		return config{}, fmt.Errorf("--latency (%s) must not be negative, got %s", envName("latency"), c.latency)
	}
	if c.streamInterval < 0 {
		return config{}, fmt.Errorf("--stream-interval (%s) must not be negative, got %s", envName("stream-interval"), c.streamInterval)
	}
	if c.replyBytes < 0 || c.replyBytes > maxReplyBytes {
		return config{}, fmt.Errorf("--reply-bytes (%s) must be in [0, %d], got %d", envName("reply-bytes"), maxReplyBytes, c.replyBytes)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"collapse-policy-file", c.collapsePolicy != ""}, {"collapse-peers", c.peers.Target != ""}} {
		if f.set && !c.collapse {
			return config{}, fmt.Errorf("--%s (%s) needs --collapse (%s)", f.name, envName(f.name), envName("collapse"))
		}
	}
	if c.shutdownTimeout < 0 {
		return config{}, fmt.Errorf("--shutdown-timeout (%s) must not be negative, got %s", envName("shutdown-timeout"), c.shutdownTimeout)
	}
	return c, nil
}

// envName returns the environment variable read for a flag.
func envName(flagName string) string {
	return envflag.Name(envPrefix, flagName)
}
