package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/internal/tracing"
	"github.com/collapser/collapser/src/otlptest"
)

// The benchmarks call SayHello over real loopback gRPC with a backend that
// answers at once, so they measure the proxy's own cost per path:
//
//	Direct       client → backend (the baseline)
//	ProxiedMiss  client → proxy → backend for every call (no cache, unique payloads)
//	ProxiedMissForwarded  client → proxy → owner's peer listener → backend
//	ProxiedHit   client → proxy, answered from the result cache
//	ProxiedMissSchema, ProxiedHitSchema  the same, the key built from the
//	             parsed request (its descriptor known), not its bytes
//	ProxiedJoin  parallel identical calls, no cache: as many as happen to
//	             overlap share a backend call; joined/op reports how many.
//
// The ...Parallel variants of Direct, ProxiedMiss (cached, as the sidecar's
// default rule does) and Passthrough make parallelCallers calls at once, as
// a load generator does. Every benchmark of unary calls reports the process's
// CPU time per call (cpu-ns/op): the proxy's own cost is the difference from
// Direct's. MissAgainstPassthrough alternates the three in one process, in
// rounds short enough that the machine's other load weighs on them alike,
// and reports a miss's cost against a pass-through's (miss/pass).
//
// The ...Traced variants run the same with tracing on, every call sampled.

func BenchmarkDirect(b *testing.B) { benchmarkDirect(b, sequentialCalls) }

// BenchmarkDirectParallel is the baseline of the ...Parallel benchmarks.
func BenchmarkDirectParallel(b *testing.B) { benchmarkDirect(b, parallelCalls) }

func benchmarkDirect(b *testing.B, calls caller) {
	backend := startBackend(b, nil)
	calls(b, directClient(b, backend.addr), "direct-")
}

// directClient returns a client of the backend at addr, without a proxy.
func directClient(b *testing.B, addr string) hellov1.GreeterClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return hellov1.NewGreeterClient(conn)
}

func BenchmarkProxiedMiss(b *testing.B) { benchmarkMiss(b, proxyConfig{}, sequentialCalls) }

// BenchmarkProxiedMissSchema is BenchmarkProxiedMiss with SayHello's
// request descriptor known: each call's key is built from its parsed
// request, not from its bytes.
func BenchmarkProxiedMissSchema(b *testing.B) {
	benchmarkMiss(b, proxyConfig{kinds: describedKinds}, sequentialCalls)
}

// BenchmarkProxiedMissTraced is BenchmarkProxiedMiss with every call traced
// (startTracing): the cost of tracing a leader.
func BenchmarkProxiedMissTraced(b *testing.B) {
	benchmarkMiss(b, proxyConfig{tracing: startTracing(b)}, sequentialCalls)
}

// BenchmarkProxiedMissParallel is a sidecar's miss under load: every call
// a new key, led, answered and cached for the default rule's TTL.
func BenchmarkProxiedMissParallel(b *testing.B) {
	benchmarkMiss(b, loadedMissConfig, parallelCalls)
}

func benchmarkMiss(b *testing.B, cfg proxyConfig, calls caller) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, cfg)
	calls(b, s.client, "miss-")
	if got := backend.Calls.SayHello.Load(); got != int64(b.N)+1 {
		b.Fatalf("backend calls = %d, want %d: every call must miss", got, b.N+1)
	}
	reportDropped(b, cfg.tracing)
}

// BenchmarkProxiedMissForwarded is BenchmarkProxiedMiss with the call made
// by the key's owner, a peer (here the proxy itself): one hop more.
func BenchmarkProxiedMissForwarded(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{peered: true})
	sequentialCalls(b, s.client, "forwarded-")
	if got := backend.Calls.SayHello.Load(); got != int64(b.N)+1 {
		b.Fatalf("backend calls = %d, want %d: every call must miss", got, b.N+1)
	}
	if len(s.observed.peerCalls) != b.N+1 {
		b.Fatalf("forwarded calls = %d, want %d", len(s.observed.peerCalls), b.N+1)
	}
}

// BenchmarkPassthrough is a unary call the policy passes through (collapse
// none), distinct every time: the path of every call that is not collapsed.
func BenchmarkPassthrough(b *testing.B) { benchmarkPassthrough(b, passthroughConfig, sequentialCalls) }

// BenchmarkPassthroughParallel is BenchmarkPassthrough under load.
func BenchmarkPassthroughParallel(b *testing.B) {
	benchmarkPassthrough(b, loadedPassthroughConfig, parallelCalls)
}

func benchmarkPassthrough(b *testing.B, cfg proxyConfig, calls caller) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, cfg)
	calls(b, s.client, "pass-")
	if got := backend.Calls.SayHello.Load(); got != int64(b.N)+1 {
		b.Fatalf("backend calls = %d, want %d: every call passes through", got, b.N+1)
	}
}

// passthroughConfig passes every call through (collapse none).
var passthroughConfig = proxyConfig{policy: &policy.Defaults{Collapse: policy.Never, Timeout: testkit.DefaultTimeout}}

// The proxies of the benchmarks under load: a sidecar's default rule (a
// miss's answer kept for policy.DefaultCacheTTL), and passthroughConfig,
// both unobserved.
var (
	loadedMissConfig        = proxyConfig{ttl: policy.DefaultCacheTTL, options: unobserved}
	loadedPassthroughConfig = proxyConfig{policy: passthroughConfig.policy, options: unobserved}
)

// unobserved takes out the recorder startProxy gives a proxy: it keeps
// every observation, and over a benchmark's many calls its growing slices,
// one more for a miss (its freshness), are a heap the collector marks
// again and again, which a sidecar's counters are not.
func unobserved(o *proxy.Options) { o.Observer = nil }

// BenchmarkMissAgainstPassthrough makes b.N calls of each of three kinds,
// parallelCallers at a time, in rounds of interleavedCalls: to the backend
// directly, as misses through a proxy (as ProxiedMissParallel) and through
// a proxy that passes them through (as PassthroughParallel), one backend
// behind all three. The rounds alternate, so that what else runs on the
// machine weighs on the three alike. It reports each kind's CPU time per
// call and miss/pass: the proxy's own CPU time per miss over its own per
// pass-through, each the kind's less direct's.
func BenchmarkMissAgainstPassthrough(b *testing.B) {
	backend := startBackend(b, nil)
	kinds := []struct {
		unit   string
		client hellov1.GreeterClient
		cpu    time.Duration
	}{
		{unit: "direct-cpu-ns/op", client: directClient(b, backend.addr)},
		{unit: "miss-cpu-ns/op", client: startProxy(b, backend.addr, loadedMissConfig).client},
		{unit: "pass-cpu-ns/op", client: startProxy(b, backend.addr, loadedPassthroughConfig).client},
	}
	var next atomic.Int64
	for i := range kinds {
		callsAtOnce(b, kinds[i].client, 1, &next) // opens the connections
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += interleavedCalls {
		n := min(interleavedCalls, b.N-done)
		for i := range kinds {
			start := testkit.CPUTime(b)
			callsAtOnce(b, kinds[i].client, n, &next)
			kinds[i].cpu += testkit.CPUTime(b) - start
		}
	}
	b.StopTimer()
	if got, want := backend.Calls.SayHello.Load(), next.Load(); got != want {
		b.Fatalf("backend calls = %d, want %d: every call must reach it", got, want)
	}
	for _, k := range kinds {
		b.ReportMetric(float64(k.cpu)/float64(b.N), k.unit)
	}
	direct := kinds[0].cpu
	b.ReportMetric(float64(kinds[1].cpu-direct)/float64(kinds[2].cpu-direct), "miss/pass")
}

// interleavedCalls is how many calls of each kind a round of
// BenchmarkMissAgainstPassthrough makes.
const interleavedCalls = 1000

// callsAtOnce makes n SayHello calls, parallelCallers at a time, each named
// by next and with parallelDeadline.
func callsAtOnce(b *testing.B, c hellov1.GreeterClient, n int, next *atomic.Int64) {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range min(n, parallelCallers) {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := callOnce(c, "kind-"+strconv.FormatInt(next.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// callOnce makes a SayHello call named name, with parallelDeadline.
func callOnce(c hellov1.GreeterClient, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), parallelDeadline)
	defer cancel()
	_, err := c.SayHello(ctx, &hellov1.HelloRequest{Name: name})
	return err
}

// caller makes a benchmark's b.N calls, each named prefix and a number of
// its own: one after another (sequentialCalls) or parallelCallers at a time
// (parallelCalls).
type caller func(b *testing.B, c hellov1.GreeterClient, prefix string)

// sequentialCalls is benchmarkCalls for a caller.
func sequentialCalls(b *testing.B, c hellov1.GreeterClient, prefix string) {
	benchmarkCalls(b, c, func(i int) string { return fmt.Sprint(prefix, i) })
}

// parallelCallers is how many calls parallelCalls makes at once: ghz's
// concurrency in the measurements (-c 50).
const parallelCallers = 50

// parallelDeadline is the deadline of each call parallelCalls makes: the
// timeout make bench-peers gives ghz's calls, so that every backend call
// carries one too, as it does there.
const parallelDeadline = 30 * time.Second

// parallelCalls makes b.N SayHello calls, parallelCallers at a time, each
// named prefix and a number of its own and with parallelDeadline, after
// one warm-up call, and reports the CPU time the process spent per call.
func parallelCalls(b *testing.B, c hellov1.GreeterClient, prefix string) {
	if err := callOnce(c, prefix+"warm-up"); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(max(1, parallelCallers/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	start := testkit.CPUTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := callOnce(c, prefix+strconv.FormatInt(next.Add(1), 10)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	testkit.ReportCPU(b, start)
}

func BenchmarkProxiedHit(b *testing.B) { benchmarkHit(b, proxyConfig{}) }

// BenchmarkProxiedHitSchema is BenchmarkProxiedHit with SayHello's request
// descriptor known: each call's key is built from its parsed request, not
// from its bytes.
func BenchmarkProxiedHitSchema(b *testing.B) { benchmarkHit(b, proxyConfig{kinds: describedKinds}) }

// BenchmarkProxiedHitTraced is BenchmarkProxiedHit with every call traced
// (startTracing): the cost of a hit's span, its outcome and its link.
func BenchmarkProxiedHitTraced(b *testing.B) { benchmarkHit(b, proxyConfig{tracing: startTracing(b)}) }

func benchmarkHit(b *testing.B, cfg proxyConfig) {
	cfg.ttl = time.Hour
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, cfg)
	benchmarkCalls(b, s.client, func(int) string { return "hit" })
	if got := backend.Calls.SayHello.Load(); got != 1 {
		b.Fatalf("backend calls = %d, want 1: every call after the first must hit", got)
	}
	reportDropped(b, cfg.tracing)
}

func BenchmarkProxiedJoin(b *testing.B) { benchmarkJoin(b, proxyConfig{}) }

// BenchmarkProxiedJoinTraced is BenchmarkProxiedJoin with every call traced
// (startTracing).
func BenchmarkProxiedJoinTraced(b *testing.B) {
	benchmarkJoin(b, proxyConfig{tracing: startTracing(b)})
}

func benchmarkJoin(b *testing.B, cfg proxyConfig) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, cfg)
	ctx := context.Background()
	b.SetParallelism(16) // 16 callers per core keep identical calls overlapping
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := &hellov1.HelloRequest{Name: "join"}
		for pb.Next() {
			if _, err := s.client.SayHello(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	requests, _ := s.observed.snapshot()
	joined := 0
	for _, r := range requests {
		if r.outcome == "joined" {
			joined++
		}
	}
	b.ReportMetric(float64(joined)/float64(len(requests)), "joined/op")
	reportDropped(b, cfg.tracing)
}

// startTracing turns tracing on for a benchmark as the sidecar would with
// OTEL_TRACES_SAMPLER=always_on: every call sampled, spans exported in
// batches on the SDK's default schedule to an in-process receiver that
// keeps none of them.
func startTracing(b *testing.B) *tracing.Tracing {
	r := otlptest.Start(b)
	r.Discard()
	r.Setenv(b)
	b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "5000")
	return otlptest.NewTracing(b, tracing.Options{})
}

// reportDropped reports the spans tr dropped per call (a full queue, failed
// exports): the part of the trace the benchmark's pace cost.
func reportDropped(b *testing.B, tr *tracing.Tracing) {
	if tr != nil {
		st := tr.Stats()
		b.ReportMetric(float64(st.QueueFull+st.ExportFailed)/float64(b.N), "dropped/op")
	}
}

// benchmarkCalls makes b.N sequential SayHello calls, the i-th named name(i),
// after one warm-up call that opens the connections, and reports the CPU
// time the process spent per call.
func benchmarkCalls(b *testing.B, c hellov1.GreeterClient, name func(i int) string) {
	ctx := context.Background()
	if _, err := c.SayHello(ctx, &hellov1.HelloRequest{Name: name(-1)}); err != nil {
		b.Fatal(err)
	}
	reqs := make([]*hellov1.HelloRequest, b.N)
	for i := range reqs {
		reqs[i] = &hellov1.HelloRequest{Name: name(i)}
	}
	b.ReportAllocs()
	start := testkit.CPUTime(b)
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.SayHello(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	testkit.ReportCPU(b, start)
}

// streamMessages is the length of the streams of the stream benchmarks.
const streamMessages = 100

// BenchmarkStreamPassthrough forwards a server stream of streamMessages
// replies frame by frame: the baseline of the stream replay benchmarks.
func BenchmarkStreamPassthrough(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{})
	benchmarkStreams(b, s.client)
}

// BenchmarkStreamReplayed reads a kept stream of streamMessages replies,
// replayed from its record without the backend.
func BenchmarkStreamReplayed(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{policyFile: "methods:\n  - name: " + methodStreamHellos + "\n    stream: replay\n    cacheTTL: 1h\n"})
	benchmarkStreams(b, s.client)
	if got := len(s.observed.backend); got != 1 {
		b.Fatalf("backend streams = %d, want 1: every stream after the first is replayed", got)
	}
}

// ledPolicy replays StreamHellos and keeps no ended stream: every stream
// after another has ended leads a record of its own.
const ledPolicy = "methods:\n  - name: " + methodStreamHellos + "\n    stream: replay\n    cacheTTL: 0s\n"

// BenchmarkStreamLed reads b.N streams of streamMessages replies one after
// another, each led: read from the backend into a record and relayed.
func BenchmarkStreamLed(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{policyFile: ledPolicy})
	benchmarkStreams(b, s.client)
	if got := len(s.observed.backend); got != b.N+1 {
		b.Fatalf("backend streams = %d, want %d: every stream must be led", got, b.N+1)
	}
}

// BenchmarkStreamLedForwarded is BenchmarkStreamLed with each record read
// through the key's owner, a peer (here the proxy itself): one hop more.
func BenchmarkStreamLedForwarded(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{peered: true, policyFile: ledPolicy})
	benchmarkStreams(b, s.client)
	if got := len(s.observed.backend); got != b.N+1 {
		b.Fatalf("backend streams = %d, want %d: every stream must be led", got, b.N+1)
	}
	if got := len(s.observed.peerCalls); got != b.N+1 {
		b.Fatalf("forwarded streams = %d, want %d", got, b.N+1)
	}
}

// benchmarkStreams reads b.N identical streams of streamMessages replies,
// after one warm-up stream, and reports the cost per message.
func benchmarkStreams(b *testing.B, c hellov1.GreeterClient) {
	ctx := context.Background()
	req := &hellov1.HelloRequest{Name: "feed", Count: streamMessages}
	read := func() {
		stream, err := c.StreamHellos(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; ; n++ {
			if _, err := stream.Recv(); err != nil {
				if !errors.Is(err, io.EOF) || n != streamMessages {
					b.Fatalf("after %d replies: %v", n, err)
				}
				return
			}
		}
	}
	read()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streamMessages), "ns/msg")
}
