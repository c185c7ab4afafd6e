package sidecar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

const streamHellos = "/hello.v1.Greeter/StreamHellos"

// replaySidecar runs the real hello backend and a sidecar whose policy
// replays StreamHellos, keeping an ended stream for ttl; edit may change
// the sidecar's settings. It returns the sidecar, clients over conns
// connections, and the backend's own stream count.
func replaySidecar(t *testing.T, ttl time.Duration, conns int, edit func(*config.Settings)) (*runningSidecar, []hellov1.GreeterClient, func() int64) {
	t.Helper()
	backend := hellotest.Serve(t, hello.Options{})
	sc, clients := replayingSidecar(t, backend, ttl, conns, edit)
	return sc, clients, methodCount(t, backend, streamHellos)
}

// gatedReplaySidecar is replaySidecar in front of a backend whose
// StreamHellos sends the first half of the replies asked for, waits for gate
// to close, then sends the rest: a stream that stays open, half sent, until
// the test says so. It returns that backend, which counts its streams.
func gatedReplaySidecar(t *testing.T, gate <-chan struct{}, ttl time.Duration, conns int, edit func(*config.Settings)) (*runningSidecar, []hellov1.GreeterClient, *testkit.Greeter) {
	t.Helper()
	backend := &testkit.Greeter{StreamHellos: func(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
		reply := &hellov1.HelloReply{Message: "Hello, " + req.GetName(), Call: testkit.CallNumber(stream.Context())}
		n := int(req.GetCount())
		for i := range n {
			if i == n/2 {
				select {
				case <-gate:
				case <-stream.Context().Done():
					return stream.Context().Err()
				}
			}
			if err := stream.Send(reply); err != nil {
				return err
			}
		}
		return nil
	}}
	sc, clients := replayingSidecar(t, startBackend(t, backend), ttl, conns, edit)
	return sc, clients, backend
}

// replayingSidecar serves a sidecar in front of backend whose policy replays
// StreamHellos, keeping an ended stream for ttl (edit may change its
// settings), waits until it knows StreamHellos, and returns it and clients
// over conns connections.
func replayingSidecar(t *testing.T, backend string, ttl time.Duration, conns int, edit func(*config.Settings)) (*runningSidecar, []hellov1.GreeterClient) {
	t.Helper()
	policy := replayPolicy(t, ttl)
	sc := startSidecar(t, backend, func(c *config.Settings) {
		c.PolicyFile = policy
		if edit != nil {
			edit(c)
		}
	})
	waitStreamLearned(t, sc)
	clients := make([]hellov1.GreeterClient, conns)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
	}
	return sc, clients
}

// replayPolicy writes a policy file that replays StreamHellos, keeping an
// ended stream for ttl, and returns its path.
func replayPolicy(t testing.TB, ttl time.Duration) string {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	file := fmt.Sprintf("methods:\n  - name: %s\n    stream: replay\n    cacheTTL: %s\n", streamHellos, ttl)
	if err := os.WriteFile(policy, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return policy
}

// waitStreamLearned waits until sc knows StreamHellos as server-streaming:
// until then its calls pass through.
func waitStreamLearned(t testing.TB, sc *runningSidecar) {
	t.Helper()
	testkit.WaitFor(t, "StreamHellos learned", func() bool { return sc.resolver.Method(streamHellos).Kind.String() == "server_streaming" })
}

// methodCount returns the hello backend at addr's own count of the calls
// of method.
func methodCount(t *testing.T, addr, method string) func() int64 {
	t.Helper()
	stats := hellov1.NewStatsClient(dial(t, addr))
	return func() int64 {
		r, err := stats.GetCounts(testkit.Context(t), &hellov1.GetCountsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetByMethod()[method]
	}
}

// consistent reports whether s holds n replies of one backend call.
func consistent(s testkit.Streamed, n int, name string) bool {
	if s.Err != nil || len(s.Replies) != n {
		return false
	}
	for _, r := range s.Replies {
		if r.GetMessage() != "Hello, "+name || r.GetCall() != s.Replies[0].GetCall() {
			return false
		}
	}
	return true
}

// streams makes n concurrent identical StreamHellos calls, the i-th through
// clients[i%len(clients)], and returns what each caller read.
func streams(ctx context.Context, clients []hellov1.GreeterClient, n int, req *hellov1.HelloRequest) []testkit.Streamed {
	results := make([]testkit.Streamed, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = testkit.ReadStream(ctx, clients[i%len(clients)], req) })
	}
	wg.Wait()
	return results
}

func TestReplay_ThousandIdenticalStreamsReadOneBackendStream(t *testing.T) {
	const callers, n = 1000, 100
	gate := make(chan struct{})
	sc, clients, backend := gatedReplaySidecar(t, gate, 0, 4, nil)
	req := &hellov1.HelloRequest{Name: "feed", Count: n}
	// The backend holds its stream half sent until every caller reads it,
	// however long a loaded machine takes to make the calls: the waits
	// bound a stall of the callers, and they wait as long as the test does.
	results := make([]testkit.Streamed, callers)
	var ended atomic.Int64
	for i := range callers {
		go func() {
			results[i] = testkit.ReadStream(t.Context(), clients[i%len(clients)], req)
			ended.Add(1)
		}()
	}
	testkit.WaitForCount(t, "callers reading the stream", callers, func() int { return sc.proxy.StreamStats().Readers })
	close(gate)
	testkit.WaitForCount(t, "callers at their stream's end", callers, func() int { return int(ended.Load()) })
	for i, r := range results {
		if !consistent(r, n, "feed") {
			t.Fatalf("caller %d: %d replies, err %v; want %d replies of one call", i, len(r.Replies), r.Err, n)
		}
	}
	got := backend.Calls.StreamHellos.Load()
	t.Logf("%d identical StreamHellos calls of %d messages: %d backend streams", callers, n, got)
	if got != 1 {
		t.Errorf("backend streams = %d, want 1", got)
	}
	if led := sc.metricSum(t, "collapser_stream_requests_total", map[string]string{"outcome": "leader"}); led != 1 {
		t.Errorf("leaders counted = %v, want 1", led)
	}
}

func TestReplay_CallersJoiningMidStreamGetEveryMessage(t *testing.T) {
	const n, late = 100, 10
	gate := make(chan struct{})
	sc, clients, backend := gatedReplaySidecar(t, gate, 0, 1, nil)
	req := &hellov1.HelloRequest{Name: "late", Count: n}
	ctx := testkit.Context(t)
	first, err := clients[0].StreamHellos(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n / 2 { // the stream is at message 50, where the backend holds it
		if _, err := first.Recv(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	done := make(chan []testkit.Streamed, 1)
	go func() { done <- streams(ctx, clients[:1], late, req) }()
	testkit.WaitFor(t, "the late callers on the stream", func() bool { return sc.proxy.StreamStats().Readers == 1+late })
	close(gate)
	for i, r := range testkit.Recv(t, "the late callers' streams", done) {
		if !consistent(r, n, "late") {
			t.Errorf("caller %d, joined at message 50: %d replies, err %v; want all %d", i, len(r.Replies), r.Err, n)
		}
	}
	if got := backend.Calls.StreamHellos.Load(); got != 1 {
		t.Errorf("backend streams = %d, want 1", got)
	}
}

func TestReplay_AStalledCallerDoesNotDelayTheOthers(t *testing.T) {
	// 2,000 replies of 4 KiB: 8 MiB, far more than a caller's flow-control
	// window, so a caller that reads nothing stops its own sends at once.
	const n, readers = 2000, 5
	name := fmt.Sprintf("%04096d", 0)
	gate := make(chan struct{})
	sc, clients, backend := gatedReplaySidecar(t, gate, 0, 2, func(c *config.Settings) { c.Proxy.Streams.MaxBytes = 16 << 20 })
	req := &hellov1.HelloRequest{Name: name, Count: n}
	ctx := testkit.Context(t)
	stalled, err := clients[1].StreamHellos(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := stalled.Recv() // it leads the stream: then it reads nothing more
	if err != nil {
		t.Fatal(err)
	}
	// The readers come over a connection of their own: the stalled caller's
	// holds nothing of theirs.
	results := make(chan testkit.Streamed, readers)
	for range readers {
		go func() { results <- testkit.ReadStream(ctx, clients[0], req) }()
	}
	// The backend holds the stream half sent until all read the same record.
	testkit.WaitFor(t, "the readers on the stalled caller's stream", func() bool { return sc.proxy.StreamStats().Readers == 1+readers })
	close(gate)
	for i := range readers {
		r := testkit.Recv(t, "a reader's whole stream", results)
		if !consistent(r, n, name) || r.Replies[0].GetCall() != first.GetCall() {
			t.Errorf("reader %d: %d replies, err %v; want all %d of the stalled caller's call %d", i, len(r.Replies), r.Err, n, first.GetCall())
		}
	}
	if got := backend.Calls.StreamHellos.Load(); got != 1 {
		t.Errorf("backend streams = %d, want 1: the readers read the stalled caller's", got)
	}
}

func TestReplay_BackendErrorMidStreamReachesEveryCallerAfterItsMessages(t *testing.T) {
	_, clients, count := replaySidecar(t, time.Minute, 1, nil)
	req := &hellov1.HelloRequest{Name: "broken", Count: 100, IntervalMs: 1, FailAfter: 30}
	results := streams(testkit.Context(t), clients[:1], 20, req)
	for i, r := range results {
		if len(r.Replies) != 30 || status.Code(r.Err) != codes.Aborted {
			t.Errorf("caller %d: %d replies, err %v; want 30 then ABORTED", i, len(r.Replies), r.Err)
		}
	}
	// Errors are not kept: the next caller reads a new backend stream.
	before := count()
	testkit.ReadStream(testkit.Context(t), clients[0], req)
	if after := count(); after != before+1 {
		t.Errorf("backend streams %d then %d: a failed stream was replayed", before, after)
	}
}

func TestReplay_AStreamPastItsBoundsTakesNoNewCallerAndIsNotKept(t *testing.T) {
	// 500 replies 3 ms apart: the second caller comes while the first
	// stream has some 470 replies (1.4 s) to go.
	const n = 500
	sc, clients, count := replaySidecar(t, time.Minute, 1, func(c *config.Settings) { c.Proxy.Streams.MaxMessages = 20 })
	req := &hellov1.HelloRequest{Name: "big", Count: n, IntervalMs: 3}
	ctx := testkit.Context(t)
	first, err := clients[0].StreamHellos(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 { // past the record's 20 messages
		if _, err := first.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if r := testkit.ReadStream(ctx, clients[0], req); !consistent(r, n, "big") {
		t.Errorf("a caller after the bound: %d replies, err %v; want its own whole stream", len(r.Replies), r.Err)
	}
	if own := sc.metricSum(t, "collapser_stream_requests_total", map[string]string{"outcome": "own"}); own != 1 {
		t.Errorf("own streams counted %v, want 1", own)
	}
	for {
		if _, err := first.Recv(); err != nil {
			break
		}
	}
	before := count()
	testkit.ReadStream(ctx, clients[0], req)
	if after := count(); after != before+1 {
		t.Errorf("backend streams %d then %d: an outgrown stream was kept", before, after)
	}
}

func TestReplay_AnEndedStreamIsReplayedWholeWithoutTheBackend(t *testing.T) {
	sc, clients, count := replaySidecar(t, time.Minute, 1, nil)
	req := &hellov1.HelloRequest{Name: "report", Count: 50}
	first := testkit.ReadStream(testkit.Context(t), clients[0], req)
	again := testkit.ReadStream(testkit.Context(t), clients[0], req)
	if !consistent(first, 50, "report") || !consistent(again, 50, "report") || again.Replies[0].GetCall() != first.Replies[0].GetCall() {
		t.Errorf("first %d replies (%v), again %d (%v): want the same 50 replayed", len(first.Replies), first.Err, len(again.Replies), again.Err)
	}
	if got := count(); got != 1 {
		t.Errorf("backend streams = %d, want 1: the second was replayed", got)
	}
	if replayed := sc.metricSum(t, "collapser_stream_requests_total", map[string]string{"outcome": "replayed"}); replayed != 1 {
		t.Errorf("replays counted %v, want 1", replayed)
	}
}

func TestReplay_TheLastCallerLeavingCancelsTheBackendStream(t *testing.T) {
	sc, clients, _ := replaySidecar(t, time.Minute, 1, nil)
	req := &hellov1.HelloRequest{Name: "watch", Count: hello.MaxStreamCount, IntervalMs: 10} // 100 s
	ctx, cancel := context.WithCancel(testkit.Context(t))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { testkit.ReadStream(ctx, clients[0], req) })
	}
	testkit.WaitFor(t, "three readers", func() bool { return sc.proxy.StreamStats().Readers == 3 })
	cancel()
	wg.Wait()
	testkit.WaitFor(t, "the backend stream to end", func() bool { return sc.proxy.StreamStats().Live == 0 })
	testkit.WaitFor(t, "the cancelled backend stream counted", func() bool {
		return sc.metricSum(t, "collapser_backend_calls_total", map[string]string{"method": streamHellos, "code": "Canceled"}) == 1
	})
}

func TestReplay_OtherStreamsStillPassThrough(t *testing.T) {
	_, clients, _ := replaySidecar(t, 0, 1, nil)
	chat, err := clients[0].Chat(testkit.Context(t), grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Send(&hellov1.HelloRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if r, err := chat.Recv(); err != nil || r.GetMessage() != "Hello, x" {
		t.Errorf("Chat through a replaying sidecar: %v, %v", r, err)
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

func TestReplay_DemoClientStreamBurstReadsOneBackendStream(t *testing.T) {
	// Kept for a minute: a caller that starts after the stream has ended
	// (its 50 replies take 250 ms) replays it rather than reading another.
	var backend string
	sc, _, _ := replaySidecar(t, time.Minute, 1, func(c *config.Settings) { backend = c.Backend })
	r, err := demo.Run(testkit.Context(t), demo.Config{
		Target: sc.addr, Backend: backend, Requests: 200, Name: "demo",
		Stream: true, StreamMessages: 50, StreamIntervalMs: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bursts[0]
	if r.Errors != 0 || r.BackendCalls != 1 || b.Incomplete != 0 || b.DistinctCalls() != 1 {
		t.Errorf("demo --stream: errors %d, backend streams %d, incomplete %d, distinct calls %d; want 0, 1, 0, 1",
			r.Errors, r.BackendCalls, b.Incomplete, b.DistinctCalls())
	}
}
