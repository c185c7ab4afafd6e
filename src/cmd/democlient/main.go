// Command democlient sends a burst of identical SayHello requests (with
// --stream, StreamHellos calls) to a target (the collapser sidecar) and prints
// how many calls of that method the hello backend really served, read from
// the backend's own Stats service (or, with --backend-metrics, its metrics),
// and the collapse ratio.
// With --second-authorization a second burst with another credential runs at
// the same time, showing replies are never shared across credentials. With
// --rate it sends a steady load over --keys keys for --duration instead, and
// counts the calls of every backend that served it, pods that came and went
// during a rollout included. It
// exits non-zero when an address is still unreachable after --connect-timeout,
// a request fails or a reply names the wrong caller. Run it with -h for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/internal/command"
)

func main() {
	command.Main("democlient", run)
}

// run parses args, runs the demo and writes the report to stdout (text, or
// JSON with --json) and progress to stderr (unless --json or --quiet).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseOptions(args, stdout, stderr)
	if err != nil {
		return err
	}
	if !opts.json && !opts.quiet {
		opts.demo.Progress = stderr
	}
	report, err := demo.Run(ctx, opts.demo)
	if err != nil {
		return err
	}
	if opts.json {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	return verdict(report, opts.minCollapseRatio)
}

// verdict is the error that makes the run fail: failed requests, replies
// computed for another credential, or less collapsing than asked for.
func verdict(r *demo.Report, minCollapseRatio float64) error {
	var errs []error
	if r.CollapseRatio < minCollapseRatio {
		errs = append(errs, fmt.Errorf("collapse ratio %.4f is below --min-collapse-ratio %.4f (%d backend calls for %d requests)",
			r.CollapseRatio, minCollapseRatio, r.BackendCalls, r.Requests-r.Errors))
	}
	if r.Errors > 0 {
		errs = append(errs, fmt.Errorf("%d of %d requests failed", r.Errors, r.Requests))
	}
	for i, b := range r.Bursts {
		if b.Incomplete > 0 {
			errs = append(errs, fmt.Errorf("burst %d: %d streams lacked replies or mixed two backend calls", i+1, b.Incomplete))
		}
		if b.Mismatched > 0 {
			errs = append(errs, fmt.Errorf("burst %d: %d replies named a caller other than %q", i+1, b.Mismatched, b.Caller))
		}
	}
	return errors.Join(errs...)
}
