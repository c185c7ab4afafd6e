package collapse

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
)

// The benchmarks measure each path of Do on its own, checking on every
// iteration that the path taken is the one named: an earlier prototype
// reported cache hits as collapsed calls.

var benchVal = []byte("hello")

func benchCall(*Call) ([]byte, error) { return benchVal, nil }

var benchOpts = &CallOptions{TTL: time.Hour}

func mustOutcome(b *testing.B, got, want Outcome, err error) {
	if got != want || err != nil {
		b.Fatalf("outcome %v, err %v; want %v", got, err, want)
	}
}

// BenchmarkBaseline is the call alone, with no collapsing around it.
func BenchmarkBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := benchCall(nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupHit serves a fresh cached result.
func BenchmarkGroupHit(b *testing.B) {
	g := New(Options[[]byte]{})
	ctx := context.Background()
	g.Do(ctx, "key", benchOpts, benchCall)
	b.ReportAllocs()
	for b.Loop() {
		_, o, err := g.Do(ctx, "key", benchOpts, benchCall)
		mustOutcome(b, o, Hit, err)
	}
}

// BenchmarkGroupStale serves a result past its TTL while its refresh is in
// flight: the stale-while-revalidate path every caller but the first takes.
func BenchmarkGroupStale(b *testing.B) {
	g := New(Options[[]byte]{})
	ctx := context.Background()
	opts := &CallOptions{TTL: time.Nanosecond, StaleWhileRevalidate: time.Hour}
	g.Do(ctx, "key", opts, benchCall)
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	refresh := func(*Call) ([]byte, error) {
		close(started)
		<-release
		return benchVal, nil
	}
	time.Sleep(time.Microsecond) // past the TTL
	_, o, err := g.Do(ctx, "key", opts, refresh)
	mustOutcome(b, o, Stale, err)
	<-started
	b.ReportAllocs()
	for b.Loop() {
		_, o, err := g.Do(ctx, "key", opts, benchCall)
		mustOutcome(b, o, Stale, err)
	}
}

// BenchmarkGroupHitParallel serves cached results from all CPUs over many
// keys; run it with -cpu 1,2 to see that no lock is shared by all keys.
func BenchmarkGroupHitParallel(b *testing.B) {
	g := New(Options[[]byte]{})
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
		g.Do(ctx, keys[i], benchOpts, benchCall)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, o, err := g.Do(ctx, keys[i&1023], benchOpts, benchCall); o != Hit || err != nil {
				b.Errorf("outcome %v, err %v; want a hit", o, err)
				return
			}
		}
	})
}

// BenchmarkGroupJoin finds a call in flight and starts waiting for it. Each
// follower's context is already done, so it leaves at once instead of
// blocking: the time is the follower's own cost, without the leader's call.
func BenchmarkGroupJoin(b *testing.B) {
	g := New(Options[[]byte]{})
	release := make(chan struct{})
	started := make(chan struct{})
	go g.Do(context.Background(), "key", nil, func(*Call) ([]byte, error) {
		close(started)
		<-release
		return benchVal, nil
	})
	<-started
	done, cancel := context.WithCancel(context.Background())
	cancel()
	b.ReportAllocs()
	for b.Loop() {
		_, o, err := g.Do(done, "key", nil, benchCall)
		if o != Join || err != context.Canceled {
			b.Fatalf("outcome %v, err %v; want joined, canceled", o, err)
		}
	}
	b.StopTimer()
	close(release)
}

// BenchmarkGroupLead starts a call on a worker and waits for it; with no TTL
// every call leads.
func BenchmarkGroupLead(b *testing.B) {
	g := New(Options[[]byte]{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, o, err := g.Do(ctx, "key", nil, benchCall)
		mustOutcome(b, o, Lead, err)
	}
}

// BenchmarkSingleflightLead is golang.org/x/sync/singleflight doing the same
// sequential calls for reference. It runs the call on the caller's goroutine,
// so a caller cannot leave before the call ends.
func BenchmarkSingleflightLead(b *testing.B) {
	var g singleflight.Group
	b.ReportAllocs()
	for b.Loop() {
		if _, err, shared := g.Do("key", func() (any, error) { return benchCall(nil) }); err != nil || shared {
			b.Fatalf("err %v, shared %v", err, shared)
		}
	}
}
