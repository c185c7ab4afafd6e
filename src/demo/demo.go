// Package demo sends bursts of identical SayHello requests (StreamHellos
// calls with Config.Stream), or a steady load over many keys (Config.Rate),
// to a target (the collapser sidecar, or the hello backend itself) and
// reports what happened: errors, latencies, and how many calls the backend
// really served, read from the backend's own Stats service or metrics
// before and after the bursts (during a steady load, every second: tally).
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/hello"
)

// DefaultConnectTimeout is how long the demo keeps trying to reach the target
// and the backend (Config.ConnectTimeout), and bounds each read of the
// backend's counts.
const DefaultConnectTimeout = 5 * time.Second

// StreamsPerConnection is how many concurrent requests the demo sends over
// one connection when Config.Connections is 0: a burst of many callers comes
// from many clients, and a server bounds the calls one connection may have
// open (the sidecar's default is 1,000).
const StreamsPerConnection = 500

// defaultProgressInterval is how often progress is written.
const defaultProgressInterval = time.Second

// Config describes a demo run.
type Config struct {
	// Target is where the bursts are sent (host:port, plaintext).
	Target string
	// Backend is where Stats.GetCounts is read (host:port, plaintext): the
	// hello backend itself, never through the sidecar. Exactly one of Backend
	// and BackendMetrics is set.
	Backend string
	// BackendMetrics is the URL of the hello backend's Prometheus metrics
	// (http://host:2113/metrics), where the count is read from
	// hello_requests_total instead: for a backend whose gRPC port only its
	// sidecar can reach, as the chart runs it.
	BackendMetrics string
	// Requests is how many requests each burst sends; it must be positive
	// unless Rate is set.
	Requests int
	// Rate, when positive, makes the run a steady load instead of bursts:
	// Rate requests per second for Duration (Requests is then Rate times
	// Duration), sent on time whatever their latency, at most Concurrency
	// in flight. With BackendMetrics, the backends' counts are read every
	// second during the load, so that backends that come and go meanwhile
	// (a rolling restart) are all counted (tally).
	Rate int
	// Duration is how long a steady load (Rate) lasts.
	Duration time.Duration
	// Keys, with Rate, spreads the load over that many keys: request n is
	// named Name-<n modulo Keys>. 0: every request is named Name.
	Keys int
	// Concurrency is how many requests of a burst are in flight at most;
	// 0 = all of them at once.
	Concurrency int
	// Connections is how many connections to the target the requests are
	// spread over; 0 = one per StreamsPerConnection concurrent requests.
	Connections int
	// Name is the HelloRequest name every request carries.
	Name string
	// Distinct makes every request of a burst distinct, named Name-<n>: a
	// load of distinct keys, each its own backend call.
	Distinct bool
	// Stream makes every request a StreamHellos call of StreamMessages
	// replies, StreamIntervalMs apart, instead of a SayHello call; the
	// backend's StreamHellos count is read.
	Stream           bool
	StreamMessages   int
	StreamIntervalMs int
	// Authorization is the first burst's authorization header; "" = none.
	Authorization string
	// SecondAuthorization, when non-empty, adds a second burst with this
	// authorization header, running at the same time as the first.
	SecondAuthorization string
	// Timeout bounds each request; 0 = no bound.
	Timeout time.Duration
	// ConnectTimeout is how long each connection to the target and the
	// backend may take to become ready, gRPC retrying meanwhile; 0 =
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Progress receives a progress line every ProgressInterval and one at the
	// end; nil = no progress.
	Progress io.Writer
	// ProgressInterval is how often progress is written; 0 = 1s.
	ProgressInterval time.Duration
}

func (c *Config) validate() error {
	var errs []error
	if c.Target == "" {
		errs = append(errs, errors.New("target is empty"))
	}
	if (c.Backend == "") == (c.BackendMetrics == "") {
		errs = append(errs, errors.New("set exactly one of backend and backend metrics URL"))
	}
	switch {
	case c.Rate < 0:
		errs = append(errs, fmt.Errorf("rate must not be negative, got %d", c.Rate))
	case c.Rate > 0 && c.Duration <= 0:
		errs = append(errs, fmt.Errorf("a steady load (rate %d) needs a positive duration, got %s", c.Rate, c.Duration))
	case c.Rate > 0 && (c.Stream || c.SecondAuthorization != ""):
		errs = append(errs, errors.New("a steady load (rate) sends SayHello calls of one credential: no stream, no second authorization"))
	case c.Rate == 0 && c.Requests <= 0:
		errs = append(errs, fmt.Errorf("requests must be positive, got %d", c.Requests))
	case c.Rate == 0 && (c.Keys != 0 || c.Duration != 0):
		errs = append(errs, errors.New("keys and duration are those of a steady load: set rate too"))
	}
	if c.Keys < 0 {
		errs = append(errs, fmt.Errorf("keys must not be negative, got %d", c.Keys))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency must not be negative, got %d", c.Concurrency))
	}
	if c.Stream && (c.StreamMessages < 1 || c.StreamMessages > hello.MaxStreamCount) {
		errs = append(errs, fmt.Errorf("stream messages must be in [1, %d], got %d", hello.MaxStreamCount, c.StreamMessages))
	}
	if c.StreamIntervalMs < 0 || c.StreamIntervalMs > hello.MaxStreamIntervalMs {
		errs = append(errs, fmt.Errorf("stream interval must be in [0, %d] ms, got %d", hello.MaxStreamIntervalMs, c.StreamIntervalMs))
	}
	if c.Connections < 0 {
		errs = append(errs, fmt.Errorf("connections must not be negative, got %d", c.Connections))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout must not be negative, got %s", c.Timeout))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("connect timeout must not be negative, got %s", c.ConnectTimeout))
	}
	return errors.Join(errs...)
}

// Run connects to the target and the backend, reads the backend's count of
// the method the bursts call (SayHello, or StreamHellos with cfg.Stream;
// from Stats, or the backend's metrics), sends the burst(s), reads the count
// again and reports. It fails when either address cannot be reached or the
// counts cannot be read; failed requests are counted in the Report, not
// returned as an error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	if cfg.Rate > 0 {
		cfg.Requests = int(int64(cfg.Rate) * int64(cfg.Duration) / int64(time.Second))
	}
	conns, err := dial(ctx, cfg.Target, cfg.Backend, cfg.connections(), cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout))
	if err != nil {
		return nil, err
	}
	defer conns.close()
	var backend counter = statsCounter{client: hellov1.NewStatsClient(conns.backend), addr: cfg.Backend}
	if cfg.Backend == "" {
		if backend, err = newMetricsCounter(cfg.BackendMetrics); err != nil {
			return nil, err
		}
	}
	method := hellov1.Greeter_SayHello_FullMethodName
	if cfg.Stream {
		method = hellov1.Greeter_StreamHellos_FullMethodName
	}
	specs := cfg.bursts()
	p := &progress{}
	p.total.Store(int64(len(specs) * cfg.Requests))
	results := make([][]result, len(specs))
	durations := make([]time.Duration, len(specs))
	greeters := make([]hellov1.GreeterClient, len(conns.targets))
	for i, conn := range conns.targets {
		greeters[i] = hellov1.NewGreeterClient(conn)
	}
	var elapsed time.Duration
	calls, err := measure(ctx, &cfg, backend, method, func() {
		stopProgress := startProgress(cfg.Progress, cfg.ProgressInterval, p)
		defer stopProgress()
		start := time.Now()
		var wg sync.WaitGroup
		for i, spec := range specs {
			send := sendBurst
			if spec.rate > 0 {
				send = sendSteady
			}
			wg.Go(func() { results[i], durations[i] = send(ctx, greeters, spec, p) })
		}
		wg.Wait()
		elapsed = time.Since(start)
	})
	if err != nil {
		return nil, err
	}
	bursts := make([]Burst, len(specs))
	var latencies []time.Duration
	for i, spec := range specs {
		bursts[i] = summarise(hello.Caller(spec.authorization), spec.stream != nil, results[i], durations[i])
		latencies = append(latencies, okLatencies(results[i])...)
	}
	return newReport(method, bursts, calls, elapsed, latencies), nil
}

// measure runs send and returns the backend's count of method over it:
// for a steady load read from the backends' metrics, a tally of every
// backend that served during it; otherwise the count after less the count
// before.
func measure(ctx context.Context, cfg *Config, backend counter, method string, send func()) (int64, error) {
	if m, ok := backend.(metricsCounter); ok && cfg.Rate > 0 {
		t, err := newTally(ctx, m, method)
		if err != nil {
			return 0, err
		}
		return t.during(ctx, send), nil
	}
	before, err := backend.count(ctx, method)
	if err != nil {
		return 0, err
	}
	send()
	after, err := backend.count(ctx, method)
	if err != nil {
		return 0, err
	}
	return after - before, nil
}

// connections returns how many target connections the run uses.
func (c *Config) connections() int {
	if c.Connections > 0 {
		return c.Connections
	}
	concurrent := c.Concurrency
	if concurrent <= 0 || concurrent > c.Requests {
		concurrent = c.Requests
	}
	if c.SecondAuthorization != "" {
		concurrent *= 2
	}
	return (concurrent + StreamsPerConnection - 1) / StreamsPerConnection
}

// bursts returns the bursts cfg asks for, the first one first.
func (c *Config) bursts() []burstSpec {
	first := burstSpec{requests: c.Requests, concurrency: c.Concurrency, name: c.Name, distinct: c.Distinct,
		rate: c.Rate, keys: c.Keys, authorization: c.Authorization, timeout: c.Timeout}
	if c.Stream {
		first.stream = &streamSpec{messages: c.StreamMessages, intervalMs: c.StreamIntervalMs}
	}
	if c.SecondAuthorization == "" {
		return []burstSpec{first}
	}
	second := first
	second.authorization = c.SecondAuthorization
	return []burstSpec{first, second}
}
