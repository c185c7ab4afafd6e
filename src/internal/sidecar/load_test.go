package sidecar

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/serverlimits"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The load tests run the whole sidecar over loopback gRPC against a backend
// that counts its calls. They take seconds, so -short skips them.

func TestLoad_BurstOfIdenticalRequestsMakesOneBackendCall(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const burst = 10_000
	gate := make(chan struct{})
	backend := &testkit.Greeter{SayHello: gated(gate)}
	// No cache: every caller but the leader must have joined the call in flight.
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CacheTTL = 0
		c.Policy.Timeout = time.Hour // the gate ends the call, however long the burst takes to gather
		c.Policy.CollapseMethods = []string{sayHello}
	})
	// The callers come over several connections, as from many clients:
	// one connection carries at most max-concurrent-streams calls at once.
	clients := make([]hellov1.GreeterClient, burst/serverlimits.DefaultMaxConcurrentStreams)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
	}

	// A loaded machine takes longer than DefaultTimeout to send 10,000
	// calls under -race: the waits below bound a stall of the burst, and
	// the callers wait as long as the test does.
	replies := make([]*hellov1.HelloReply, burst)
	errs := make([]error, burst)
	var answered atomic.Int64
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			replies[i], errs[i] = clients[i%len(clients)].SayHello(t.Context(), &hellov1.HelloRequest{Name: "burst"})
			answered.Add(1)
		})
	}
	// The backend call is held until every caller waits for it: the burst
	// fits in one backend latency by construction, whatever the machine.
	testkit.WaitForCount(t, "callers waiting", burst, func() int { return sc.proxy.Stats().Waiters })
	close(gate)
	testkit.WaitForCount(t, "callers answered", burst, func() int { return int(answered.Load()) })
	wg.Wait()

	for i := range burst {
		if errs[i] != nil || replies[i].GetCall() != 1 || replies[i].GetMessage() != "Hello, burst" {
			t.Fatalf("caller %d: reply %v, err %v; want call 1 for everyone", i, replies[i], errs[i])
		}
	}
	if got := backend.Calls.SayHello.Load(); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
	for outcome, want := range map[string]float64{"leader": 1, "joined": burst - 1, "cache_hit": 0} {
		if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("requests with outcome %s = %v, want %v", outcome, got, want)
		}
	}
	t.Logf("%d concurrent identical requests: %d backend call", burst, backend.Calls.SayHello.Load())
}

// steady is a sustained-load run: workers send one identical request after
// another through a sidecar, against a backend of the given latency, with
// the given TTL and stale-while-revalidate window, until the backend has
// made calls calls, or for duration when calls is 0. duration bounds the
// run either way.
type steady struct {
	workers                     int
	latency, ttl, swr, duration time.Duration
	calls                       int64
	edit                        func(*config.Settings) // more settings, or nil
	requestIDs                  bool                   // every request carries a request_id of its own
}

// steadyResult is what a run measured: requests served, the backend's own
// call count, the sidecar's count of requests by outcome, the run's time and
// the requests' latency percentiles.
type steadyResult struct {
	requests, calls int64
	outcomes        map[string]int64
	elapsed         time.Duration
	p50, p99        time.Duration
}

// sustained makes the run r.
func sustained(t testing.TB, r steady) steadyResult {
	backend := &testkit.Greeter{SayHello: slow(r.latency)}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CacheTTL = r.ttl
		c.Policy.StaleWhileRevalidate = r.swr
		c.Policy.CollapseMethods = []string{sayHello}
		if r.edit != nil {
			r.edit(c)
		}
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx, cancel := context.WithTimeout(context.Background(), r.duration)
	defer cancel()

	end, _ := ctx.Deadline()
	var failures atomic.Int64
	var firstFailure atomic.Value
	latencies := make([][]time.Duration, r.workers)
	var wg sync.WaitGroup
	start := time.Now()
	more := func() bool { return ctx.Err() == nil && (r.calls == 0 || backend.Calls.SayHello.Load() < r.calls) }
	var sent atomic.Int64
	for w := range r.workers {
		wg.Go(func() {
			for more() {
				req := &hellov1.HelloRequest{Name: "steady"}
				if r.requestIDs {
					req.RequestId = strconv.FormatInt(sent.Add(1), 10)
				}
				sent := time.Now()
				_, err := client.SayHello(ctx, req)
				// The sidecar learns the run's deadline from grpc-timeout and
				// may report it a hair before the client's own timer fires.
				atEnd := status.Code(err) == codes.DeadlineExceeded && time.Until(end) < 100*time.Millisecond
				switch {
				case err == nil:
					latencies[w] = append(latencies[w], time.Since(sent))
				case !atEnd:
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failures.Load() != 0 {
		t.Errorf("%d requests failed, the first with %v", failures.Load(), firstFailure.Load())
	}
	if calls := backend.Calls.SayHello.Load(); calls < r.calls {
		t.Errorf("the run ended after %v with %d backend calls, short of the %d it runs for", elapsed.Round(time.Millisecond), calls, r.calls)
	}
	outcomes := map[string]int64{}
	for _, o := range collapse.Outcomes {
		outcomes[o.String()] = int64(sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": o.String()}))
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return steadyResult{
		requests: int64(len(all)), calls: backend.Calls.SayHello.Load(), outcomes: outcomes, elapsed: elapsed,
		p50: demo.Percentile(all, 50), p99: demo.Percentile(all, 99),
	}
}

// expiring leaves a result to expire before it is called again: not
// jittered (nor refreshed early, as startSidecar's).
func expiring(c *config.Settings) { c.Policy.TTLJitter = 0 }

// TestLoad_SustainedAtMostOneBackendCallPerCycle checks the invariant under
// steady load: a call takes the backend latency, its result is then cached
// for the TTL, so there is at most one backend call per latency+TTL; with
// early refresh (the default) a result still read is refreshed before its
// TTL ends, at most once per TTL less its jitter, the first time anywhere
// in its first TTL. The run lasts until the backend has made 20 calls
// (cached results expire), however long a loaded machine takes for them:
// the bound derived from the run's time only grows with it. How close the
// count comes to that bound depends on the machine's speed: the benchmark
// BenchmarkLoadSustained reports it.
func TestLoad_SustainedAtMostOneBackendCallPerCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const latency, ttl, calls = 50 * time.Millisecond, 100 * time.Millisecond, 20
	for _, tt := range []struct {
		name  string
		edit  func(*config.Settings)
		cycle time.Duration
		first int64 // calls besides one per cycle
	}{
		{"expiring", expiring, latency + ttl, 1},
		{"refreshed early", func(c *config.Settings) { c.Policy.EarlyRefresh = true }, time.Duration(float64(ttl) * (1 - policy.DefaultTTLJitter)), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := sustained(t, steady{workers: 100, latency: latency, ttl: ttl, calls: calls, duration: testkit.DefaultTimeout, edit: tt.edit})
			most := int64(r.elapsed/tt.cycle) + tt.first
			t.Logf("%d requests in %v: %d backend calls, at most %d allowed", r.requests, r.elapsed.Round(time.Millisecond), r.calls, most)
			if r.calls > most {
				t.Errorf("backend calls = %d, more than one per %v (%d)", r.calls, tt.cycle, most)
			}
		})
	}
}

// BenchmarkLoadSustained reports how close steady load comes to one backend
// call per latency+TTL, for results left to expire. Run it once: make load.
func BenchmarkLoadSustained(b *testing.B) {
	const latency, ttl, duration = 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second
	for b.Loop() {
		r := sustained(b, steady{workers: 100, latency: latency, ttl: ttl, duration: duration, edit: expiring})
		want := float64(r.elapsed) / float64(latency+ttl)
		b.ReportMetric(float64(r.requests), "requests")
		b.ReportMetric(float64(r.calls), "backend-calls")
		b.ReportMetric(want, "expected-calls")
		b.ReportMetric(100*math.Abs(float64(r.calls)-want)/want, "%off")
		b.ReportMetric(1-float64(r.calls)/float64(r.requests), "collapse-ratio")
	}
}

// BenchmarkLoadStaleWhileRevalidate runs the same steady load without and
// with a stale-while-revalidate window, one after the other, and reports
// the latency percentiles of both, for results left to expire: without it,
// every TTL expiry makes the callers of the hot key wait a whole backend
// call. Run it once: make load.
func BenchmarkLoadStaleWhileRevalidate(b *testing.B) {
	const latency, ttl, duration = 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second
	for b.Loop() {
		for _, run := range []struct {
			name string
			swr  time.Duration
		}{{"no-swr", 0}, {"swr-1s", time.Second}} {
			r := sustained(b, steady{workers: 100, latency: latency, ttl: ttl, swr: run.swr, duration: duration, edit: expiring})
			b.ReportMetric(float64(r.p50.Microseconds())/1000, run.name+"-p50-ms")
			b.ReportMetric(float64(r.p99.Microseconds())/1000, run.name+"-p99-ms")
			b.ReportMetric(float64(r.calls), run.name+"-backend-calls")
		}
	}
}

// BenchmarkLoadRequestIDs runs the same steady load three times, one after
// the other: requests without a request_id, requests that each carry one
// of their own and a policy whose key leaves it out, and the same requests
// with a policy that does not. It reports each run's collapse ratio, and
// the second's as a share of the first's. Run it once: make load.
func BenchmarkLoadRequestIDs(b *testing.B) {
	const latency, ttl, duration = 50 * time.Millisecond, 100 * time.Millisecond, 5 * time.Second
	for b.Loop() {
		var base float64
		for _, run := range []struct {
			name       string
			requestIDs bool
			ignore     []string
		}{{"no-id", false, nil}, {"id-ignored", true, []string{"request_id"}}, {"id-in-key", true, nil}} {
			r := sustained(b, steady{workers: 100, latency: latency, ttl: ttl, duration: duration, requestIDs: run.requestIDs,
				edit: func(c *config.Settings) { expiring(c); c.PolicyFile = schemaPolicy(b, ttl, run.ignore...) }})
			ratio := 1 - float64(r.calls)/float64(r.requests)
			if run.name == "no-id" {
				base = ratio
			}
			b.ReportMetric(ratio, run.name+"-collapse-ratio")
			b.ReportMetric(float64(r.calls), run.name+"-backend-calls")
			b.ReportMetric(100*ratio/base, run.name+"-%of-no-id")
		}
	}
}

// TestLoad_StaleWhileRevalidateKeepsCallersFromWaiting checks what the
// benchmark measures: with a window, no caller of the hot key waits for a
// backend call after the first. Every later call is a refresh nobody waits
// for: the run lasts until the backend has made 5 calls, and the sidecar
// counts one leader, joiners from the first call only, and stale answers.
// Its results are left to expire, so that every refresh is one of the
// window's.
func TestLoad_StaleWhileRevalidateKeepsCallersFromWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const workers, latency, ttl, calls = 20, 200 * time.Millisecond, 50 * time.Millisecond, 5
	r := sustained(t, steady{workers: workers, latency: latency, ttl: ttl, swr: time.Minute, calls: calls, duration: testkit.DefaultTimeout, edit: expiring})
	t.Logf("%d requests: %d backend calls, outcomes %v", r.requests, r.calls, r.outcomes)
	o := r.outcomes
	if o["leader"] != 1 {
		t.Errorf("%d requests led a backend call, want 1: the first; a leader waits for its call", o["leader"])
	}
	// A worker waits at most once: its first request, if the first call is
	// still running then.
	if o["leader"]+o["joined"] > workers {
		t.Errorf("%d requests waited for a backend call (leader %d, joined %d), want at most one per worker (%d)",
			o["leader"]+o["joined"], o["leader"], o["joined"], workers)
	}
	// Each refresh starts on a stale answer.
	if o["stale"] < r.calls-1 {
		t.Errorf("%d stale answers for %d backend calls, want one at least for each refresh", o["stale"], r.calls)
	}
	if served := o["leader"] + o["joined"] + o["cache_hit"] + o["stale"]; served != r.requests {
		t.Errorf("outcomes %v add up to %d requests, want the %d served", o, served, r.requests)
	}
}

// flat sends rounds of requests over many keys through a sidecar and
// returns the goroutine count and live heap after the first round and after
// the last.
func flat(t testing.TB, rounds, perRound int) (g0, g1 int, h0, h1 uint64) {
	const workers, keys = 100, 500
	backend := &testkit.Greeter{SayHello: slow(time.Millisecond)}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CacheTTL = 20 * time.Millisecond
		c.Policy.CollapseMethods = []string{sayHello}
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*testkit.DefaultTimeout)
	defer cancel()

	round := func() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(perRound); i = next.Add(1) {
					name := fmt.Sprintf("key-%d", i%keys)
					if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: name}); err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	measure := func() (int, uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc
	}
	round() // warm up: connections, workers, pools
	g0, h0 = measure()
	for range rounds - 1 {
		round()
	}
	g1, h1 = measure()
	return g0, g1, h0, h1
}

func TestLoad_GoroutinesAndHeapStayFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	g0, g1, h0, h1 := flat(t, 3, 4_000)
	t.Logf("goroutines %d -> %d, heap %d KiB -> %d KiB", g0, g1, h0>>10, h1>>10)
	if g1 > g0+10 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	if growth := int64(h1) - int64(h0); growth > 8<<20 {
		t.Errorf("heap grew by %d KiB", growth>>10)
	}
}

// BenchmarkLoadFlat reports goroutines and live heap across 100,000
// requests. Run it once: make load.
func BenchmarkLoadFlat(b *testing.B) {
	for b.Loop() {
		g0, g1, h0, h1 := flat(b, 10, 10_000)
		b.ReportMetric(float64(g0), "goroutines-start")
		b.ReportMetric(float64(g1), "goroutines-end")
		b.ReportMetric(float64(h0>>10), "heap-KiB-start")
		b.ReportMetric(float64(h1>>10), "heap-KiB-end")
	}
}
