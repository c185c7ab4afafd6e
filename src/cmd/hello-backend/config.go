package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/collapser/collapser/src/internal/command"
	collapserconfig "github.com/collapser/collapser/src/internal/config"
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
	// collapse serves the Greeter through the collapser library's
	// interceptors, configured by collapser: the sidecar's settings, read
	// from its COLLAPSER_* variables.
	collapse  bool
	collapser collapserconfig.Settings
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
	fs.BoolVar(&c.collapse, "collapse", false, "collapse identical calls in this process with the collapser library's interceptors (no sidecar), set by the sidecar's own COLLAPSER_* variables: "+
		"its policy file, keys, bounds, admin token and peers (a replica of a release of sidecars and backends alike); its metrics are served on COLLAPSER_METRICS_LISTEN, its admin service on the gRPC port")

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
	if c.collapse {
		settings, err := collapserconfig.Parse(nil, lookup, stderr)
		if err != nil {
			return config{}, fmt.Errorf("--collapse (%s): the collapser's settings: %w", envName("collapse"), err)
		}
		c.collapser = settings
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
