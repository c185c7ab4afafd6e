package sidecar

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/internal/config"
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
	backend := &countingBackend{gate: make(chan struct{})}
	// No cache: every caller but the leader must have joined the call in flight.
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Sidecar) {
		c.CacheTTL = 0
		c.UnaryMethods = []string{sayHello}
	})
	// The callers come over several connections, as from many clients:
	// one connection carries at most max-concurrent-streams calls at once.
	clients := make([]hellov1.GreeterClient, burst/serverlimits.DefaultMaxConcurrentStreams)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
	}
	ctx := testkit.Context(t)

	replies := make([]*hellov1.HelloReply, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			replies[i], errs[i] = clients[i%len(clients)].SayHello(ctx, &hellov1.HelloRequest{Name: "burst"})
		})
	}
	// The backend call is held until every caller waits for it: the burst
	// fits in one backend latency by construction, whatever the machine.
	testkit.WaitFor(t, fmt.Sprintf("all %d callers waiting", burst), func() bool { return sc.proxy.Stats().Waiters >= burst })
	close(backend.gate)
	wg.Wait()

	for i := range burst {
		if errs[i] != nil || replies[i].GetCall() != 1 || replies[i].GetMessage() != "Hello, burst" {
			t.Fatalf("caller %d: reply %v, err %v; want call 1 for everyone", i, replies[i], errs[i])
		}
	}
	if got := backend.calls.Load(); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
	for outcome, want := range map[string]float64{"leader": 1, "joined": burst - 1, "cache_hit": 0} {
		if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("requests with outcome %s = %v, want %v", outcome, got, want)
		}
	}
	t.Logf("%d concurrent identical requests: %d backend call", burst, backend.calls.Load())
}

// steady is a sustained-load run: workers send one identical request after
// another through a sidecar for duration, against a backend of the given
// latency, with the given TTL and stale-while-revalidate window.
type steady struct {
	workers                     int
	latency, ttl, swr, duration time.Duration
}

// steadyResult is what a run measured: requests served, the backend's own
// call count, the run's time and the requests' latency percentiles.
type steadyResult struct {
	requests, calls int64
	elapsed         time.Duration
	p50, p99        time.Duration
}

// sustained makes the run r.
func sustained(t testing.TB, r steady) steadyResult {
	backend := &countingBackend{latency: r.latency}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Sidecar) {
		c.CacheTTL = r.ttl
		c.StaleWhileRevalidate = r.swr
		c.UnaryMethods = []string{sayHello}
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
	for w := range r.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				sent := time.Now()
				_, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "steady"})
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
	if failures.Load() != 0 {
		t.Errorf("%d requests failed, the first with %v", failures.Load(), firstFailure.Load())
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return steadyResult{
		requests: int64(len(all)), calls: backend.calls.Load(), elapsed: time.Since(start),
		p50: demo.Percentile(all, 50), p99: demo.Percentile(all, 99),
	}
}

// TestLoad_SustainedAtMostOneBackendCallPerCycle checks the invariant under
// steady load: a call takes the backend latency, its result is then cached
// for the TTL, so there is at most one backend call per latency+TTL. How
// close the count comes to that bound depends on the machine's speed: the
// benchmark BenchmarkLoadSustained reports it.
func TestLoad_SustainedAtMostOneBackendCallPerCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const latency, ttl = 50 * time.Millisecond, 100 * time.Millisecond
	r := sustained(t, steady{workers: 100, latency: latency, ttl: ttl, duration: 3 * time.Second})
	most := int64(r.elapsed/(latency+ttl)) + 1
	t.Logf("%d requests in %v: %d backend calls, at most %d allowed", r.requests, r.elapsed.Round(time.Millisecond), r.calls, most)
	if r.calls > most {
		t.Errorf("backend calls = %d, more than one per latency+TTL (%d)", r.calls, most)
	}
	if r.calls < 2 {
		t.Errorf("backend calls = %d: cached results never expired", r.calls)
	}
}

// BenchmarkLoadSustained reports how close steady load comes to one backend
// call per latency+TTL. Run it once: make load.
func BenchmarkLoadSustained(b *testing.B) {
	const latency, ttl, duration = 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second
	for b.Loop() {
		r := sustained(b, steady{workers: 100, latency: latency, ttl: ttl, duration: duration})
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
// the latency percentiles of both: without it, every TTL expiry makes the
// callers of the hot key wait a whole backend call. Run it once: make load.
func BenchmarkLoadStaleWhileRevalidate(b *testing.B) {
	const latency, ttl, duration = 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second
	for b.Loop() {
		for _, run := range []struct {
			name string
			swr  time.Duration
		}{{"no-swr", 0}, {"swr-1s", time.Second}} {
			r := sustained(b, steady{workers: 100, latency: latency, ttl: ttl, swr: run.swr, duration: duration})
			b.ReportMetric(float64(r.p50.Microseconds())/1000, run.name+"-p50-ms")
			b.ReportMetric(float64(r.p99.Microseconds())/1000, run.name+"-p99-ms")
			b.ReportMetric(float64(r.calls), run.name+"-backend-calls")
		}
	}
}

// TestLoad_StaleWhileRevalidateKeepsCallersFromWaiting checks what the
// benchmark measures: with a window, no caller of the hot key waits a
// backend call after the first, so p99 stays far below the latency.
func TestLoad_StaleWhileRevalidateKeepsCallersFromWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const latency, ttl = 200 * time.Millisecond, 50 * time.Millisecond
	r := sustained(t, steady{workers: 20, latency: latency, ttl: ttl, swr: time.Minute, duration: 2 * time.Second})
	t.Logf("%d requests: p50 %v, p99 %v, %d backend calls", r.requests, r.p50, r.p99, r.calls)
	if r.p99 >= latency/2 {
		t.Errorf("p99 = %v, want callers answered without waiting for the backend (%v)", r.p99, latency)
	}
}

// flat sends rounds of requests over many keys through a sidecar and
// returns the goroutine count and live heap after the first round and after
// the last.
func flat(t testing.TB, rounds, perRound int) (g0, g1 int, h0, h1 uint64) {
	const workers, keys = 100, 500
	backend := &countingBackend{latency: time.Millisecond}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Sidecar) {
		c.CacheTTL = 20 * time.Millisecond
		c.UnaryMethods = []string{sayHello}
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
