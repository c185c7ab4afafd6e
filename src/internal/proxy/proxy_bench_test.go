package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
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
//	ProxiedJoin  parallel identical calls, no cache: as many as happen to
//	             overlap share a backend call; joined/op reports how many.
//
// The ...Traced variants run the same with tracing on, every call sampled.

func BenchmarkDirect(b *testing.B) {
	backend := startBackend(b, nil)
	conn, err := grpc.NewClient(backend.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	benchmarkCalls(b, hellov1.NewGreeterClient(conn), func(i int) string { return fmt.Sprint("direct-", i) })
}

func BenchmarkProxiedMiss(b *testing.B) { benchmarkMiss(b, proxyConfig{}) }

// BenchmarkProxiedMissTraced is BenchmarkProxiedMiss with every call traced
// (startTracing): the cost of tracing a leader.
func BenchmarkProxiedMissTraced(b *testing.B) {
	benchmarkMiss(b, proxyConfig{tracing: startTracing(b)})
}

func benchmarkMiss(b *testing.B, cfg proxyConfig) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, cfg)
	benchmarkCalls(b, s.client, func(i int) string { return fmt.Sprint("miss-", i) })
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
	benchmarkCalls(b, s.client, func(i int) string { return fmt.Sprint("forwarded-", i) })
	if got := backend.Calls.SayHello.Load(); got != int64(b.N)+1 {
		b.Fatalf("backend calls = %d, want %d: every call must miss", got, b.N+1)
	}
	if len(s.observed.peerCalls) != b.N+1 {
		b.Fatalf("forwarded calls = %d, want %d", len(s.observed.peerCalls), b.N+1)
	}
}

// BenchmarkPassthrough is a unary call the policy passes through (collapse
// none), distinct every time: the path of every call that is not collapsed.
func BenchmarkPassthrough(b *testing.B) {
	backend := startBackend(b, nil)
	s := startProxy(b, backend.addr, proxyConfig{policy: &policy.Defaults{Collapse: policy.Never, Timeout: testkit.DefaultTimeout}})
	benchmarkCalls(b, s.client, func(i int) string { return fmt.Sprint("pass-", i) })
	if got := backend.Calls.SayHello.Load(); got != int64(b.N)+1 {
		b.Fatalf("backend calls = %d, want %d: every call passes through", got, b.N+1)
	}
}

func BenchmarkProxiedHit(b *testing.B) { benchmarkHit(b, proxyConfig{}) }

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
// after one warm-up call that opens the connections.
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
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.SayHello(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
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
