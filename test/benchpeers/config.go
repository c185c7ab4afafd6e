package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// config is the harness's command line.
type config struct {
	bin     string // holds collapser, hello-backend and plainproxy
	ghz     string
	nginx   string
	proto   string // hello.proto, for ghz
	workdir string // configs, logs and ghz output; the caller removes it
	out     string // the JSON report
	// revision names the collapser measured in the report (its git commit).
	revision string

	rounds      int
	duration    time.Duration // of each steady run
	warmup      time.Duration // of the steady run before the rounds
	concurrency int           // of steady runs, on one connection
	burst       burstLoad

	clientCPUs string // taskset list for ghz; "" = not pinned
	serverCPUs string // taskset list for the backend and the proxies; "" = not pinned

	scenarios []scenario
}

// burstLoad is the shape of the burst scenario's runs.
type burstLoad struct {
	requests    int
	connections int
}

// parseConfig parses args; usage and flag errors go to stderr.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	var only string
	fs := flag.NewFlagSet("benchpeers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.bin, "bin", "bin", "`directory` of the collapser, hello-backend and plainproxy binaries")
	fs.StringVar(&c.ghz, "ghz", "bin/ghz", "`path` of ghz")
	fs.StringVar(&c.nginx, "nginx", "/usr/sbin/nginx", "`path` of nginx")
	fs.StringVar(&c.proto, "proto", "src/api/hello/v1/hello.proto", "`path` of hello.proto, for ghz")
	fs.StringVar(&c.workdir, "workdir", "", "`directory` for configs, logs and ghz output (required; left in place)")
	fs.StringVar(&c.out, "out", "bin/bench-peers.json", "`path` of the JSON report")
	fs.StringVar(&c.revision, "revision", "", "`name` of the collapser build measured (e.g. its git commit), for the report")
	fs.IntVar(&c.rounds, "rounds", 5, "interleaved rounds per scenario; medians are over these")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each steady run")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "length of the unrecorded steady run per target before the rounds")
	fs.IntVar(&c.concurrency, "concurrency", 50, "concurrent calls of steady runs, on one connection")
	fs.IntVar(&c.burst.requests, "burst", 10000, "calls of each burst, all sent at once")
	fs.IntVar(&c.burst.connections, "burst-connections", 20, "connections a burst is spread over")
	fs.StringVar(&c.clientCPUs, "client-cpus", "", "CPU `list` (taskset -c) to pin ghz to; empty: not pinned")
	fs.StringVar(&c.serverCPUs, "server-cpus", "", "CPU `list` (taskset -c) to pin the backend and the proxies to; empty: not pinned")
	fs.StringVar(&only, "scenarios", "", "comma-separated scenario `ids` to run (default all: "+strings.Join(scenarioIDs(), ",")+")")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.workdir == "" {
		return config{}, errors.New("--workdir is required")
	}
	if c.rounds < 1 || c.concurrency < 1 || c.burst.requests < 1 || c.burst.connections < 1 {
		return config{}, errors.New("--rounds, --concurrency, --burst and --burst-connections must be at least 1")
	}
	if c.duration <= 0 || c.warmup < 0 {
		return config{}, errors.New("--duration must be positive and --warmup not negative")
	}
	for _, list := range []string{c.clientCPUs, c.serverCPUs} {
		if _, err := countCPUs(list); err != nil {
			return config{}, err
		}
	}
	var err error
	if c.scenarios, err = selectScenarios(only, c.clientCPUs != "" || c.serverCPUs != ""); err != nil {
		return config{}, err
	}
	for _, p := range []*string{&c.bin, &c.ghz, &c.nginx, &c.proto, &c.workdir, &c.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return config{}, fmt.Errorf("absolute path of %s: %w", *p, err)
		}
	}
	return c, nil
}

// countCPUs returns how many CPUs a taskset -c list names ("1", "0,2",
// "2-3"); 0 for "".
func countCPUs(list string) (int, error) {
	if list == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < a {
			return 0, fmt.Errorf("CPU list %q: %q is not a CPU number or range", list, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// joinLines joins lines with a newline and an indent.
func joinLines(lines []string) string {
	return strings.Join(lines, "\n  ")
}
