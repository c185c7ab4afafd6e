package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/internal/command"
)

// options are the parsed command line.
type options struct {
	demo  demo.Config
	json  bool // write the report as JSON
	quiet bool // write no progress
	// minCollapseRatio fails the run when the collapse ratio is lower.
	minCollapseRatio float64
}

// parseOptions parses args. -h usage goes to stdout, flag errors and their
// usage to stderr; the error of -h is flag.ErrHelp.
func parseOptions(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("democlient", flag.ContinueOnError)
	fs.StringVar(&o.demo.Target, "target", "localhost:50052", "gRPC `address` the requests are sent to (the collapser sidecar)")
	fs.StringVar(&o.demo.Backend, "backend", "localhost:50051", "gRPC `address` of the hello backend, where its own counts are read (Stats)")
	fs.StringVar(&o.demo.BackendMetrics, "backend-metrics", "", "when set, read the counts from hello_requests_total at this `URL` of the backend's metrics (http://host:2113/metrics) instead of --backend")
	fs.IntVar(&o.demo.Requests, "requests", 10000, "requests per burst, all identical")
	fs.IntVar(&o.demo.Concurrency, "concurrency", 10000, "most requests of a burst in flight at once")
	fs.IntVar(&o.demo.Connections, "connections", 0, "connections the requests are spread over; 0: one per 500 concurrent requests")
	fs.StringVar(&o.demo.Name, "name", "world", "`name` to greet in every request")
	fs.BoolVar(&o.demo.Stream, "stream", false, "send StreamHellos calls of --stream-messages replies instead of SayHello calls, and check every caller got them all, identical")
	fs.IntVar(&o.demo.StreamMessages, "stream-messages", 100, "replies each StreamHellos call asks for (with --stream)")
	fs.IntVar(&o.demo.StreamIntervalMs, "stream-interval-ms", 0, "milliseconds between two StreamHellos replies (with --stream)")
	fs.BoolVar(&o.demo.Distinct, "distinct", false, "make every request distinct (name-0, name-1, ...): a load of distinct keys")
	fs.IntVar(&o.demo.Rate, "rate", 0, "when positive, send a steady load of this many requests per second for --duration instead of a burst (--requests is then ignored); with --backend-metrics, every pod that served is counted, those that came and went too")
	fs.DurationVar(&o.demo.Duration, "duration", 0, "how long the steady load (--rate) lasts")
	fs.IntVar(&o.demo.Keys, "keys", 0, "spread the steady load (--rate) over this many keys: request n is named name-(n modulo keys)")
	fs.StringVar(&o.demo.Authorization, "authorization", "", "authorization header `value` of the requests (e.g. \"Bearer alice\")")
	fs.StringVar(&o.demo.SecondAuthorization, "second-authorization", "", "when set, a second burst with this authorization header `value` runs at the same time")
	fs.DurationVar(&o.demo.Timeout, "timeout", 10*time.Second, "deadline of each request; 0 = none")
	fs.DurationVar(&o.demo.ConnectTimeout, "connect-timeout", demo.DefaultConnectTimeout, "how long to keep trying to reach the target and the backend before giving up")
	fs.BoolVar(&o.json, "json", false, "write the report as JSON (and no progress)")
	fs.BoolVar(&o.quiet, "quiet", false, "write no progress")
	fs.Float64Var(&o.minCollapseRatio, "min-collapse-ratio", 0, "fail unless the collapse ratio (1 - backend calls / successful requests) reaches this `ratio`, 0 to 1")
	if err := command.ParseFlags(fs, args, stdout, stderr); err != nil {
		return options{}, err
	}
	if o.demo.BackendMetrics != "" {
		o.demo.Backend = ""
	}
	if o.minCollapseRatio < 0 || o.minCollapseRatio > 1 {
		return options{}, fmt.Errorf("--min-collapse-ratio must be between 0 and 1, got %v", o.minCollapseRatio)
	}
	return o, nil
}
