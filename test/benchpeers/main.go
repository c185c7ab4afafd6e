// Command benchpeers measures collapser side by side with what a user would
// run in its place: nothing (direct calls to the backend), nginx's grpc_pass
// and a plain grpc-go proxy (../plainproxy). It is the harness of
// make bench-peers (scripts/bench-peers.sh installs the tools and builds the
// binaries it starts).
//
// For each scenario it starts a hello backend and the three proxies in front
// of it on loopback (in miss-peers, a lone collapser and three peered ones
// instead), then runs interleaved rounds of ghz against each target of each
// scenario (direct, collapser, nginx, plain of the first scenario, then of
// the next, ..., then the second round). Per run it records ghz's
// RPS and latency percentiles, the CPU time of the proxy's and the backend's
// processes from /proc, and the backend's own count of SayHello calls. It
// prints one table of medians over the rounds, with each RPS as a ratio to
// direct in the same round, and writes every run to a JSON file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// main repeats src/internal/command.Main, which this module cannot import.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

// run measures every scenario of args, prints the table to stdout and
// writes the JSON report. Progress goes to stderr. It fails after writing
// both when a run had errors or a count that cannot be right.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	hz, err := clockTicks()
	if err != nil {
		return err
	}
	rep := newReport(cfg, hz)
	results, err := runScenarios(ctx, cfg, cpuMeter{ticksPerSecond: hz}, cfg.scenarios, stderr)
	if err != nil {
		return err
	}
	for _, res := range results {
		rep.add(res)
	}
	rep.finish()
	if err := writeTable(stdout, rep); err != nil {
		return err
	}
	if err := writeJSON(cfg.out, rep); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "benchpeers: wrote %s\n", cfg.out)
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%d problem(s), the numbers above are suspect:\n  %s", len(rep.Problems), joinLines(rep.Problems))
	}
	return nil
}
