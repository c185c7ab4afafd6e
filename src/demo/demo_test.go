package demo

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	channelzservice "google.golang.org/grpc/channelz/service"

	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestRun_DirectToBackendCostsOneBackendCallPerRequest(t *testing.T) {
	b := startBackend(t, 5*time.Millisecond)
	const n = 40
	r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: n, Name: "x", Authorization: "Bearer alice"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Requests != n || r.Errors != 0 || r.BackendCalls != n || r.CollapseRatio != 0 {
		t.Errorf("report requests=%d errors=%d backend_calls=%d ratio=%v; want %d, 0, %d, 0",
			r.Requests, r.Errors, r.BackendCalls, r.CollapseRatio, n, n)
	}
	if len(r.Bursts) != 1 {
		t.Fatalf("%d bursts, want 1", len(r.Bursts))
	}
	burst := r.Bursts[0]
	if burst.Caller != "alice" || burst.Mismatched != 0 || burst.DistinctCalls() != n || len(burst.Replies["alice"]) != n {
		t.Errorf("burst caller=%q mismatched=%d distinct=%d; want alice, 0, %d all from alice", burst.Caller, burst.Mismatched, burst.DistinctCalls(), n)
	}
	if r.Latency.P50 < 5*time.Millisecond || r.Latency.Max < r.Latency.P99 || r.Latency.P99 < r.Latency.P50 {
		t.Errorf("latency %+v: want p50 >= backend latency 5ms and p50 <= p99 <= max", r.Latency)
	}
}

func TestRun_SecondBurstRunsWithItsOwnCredential(t *testing.T) {
	b := startBackend(t, time.Millisecond)
	const n = 20
	r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: n, Authorization: "Bearer alice", SecondAuthorization: "bob"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Requests != 2*n || r.BackendCalls != 2*n || len(r.Bursts) != 2 {
		t.Fatalf("report requests=%d backend_calls=%d bursts=%d; want %d, %d, 2", r.Requests, r.BackendCalls, len(r.Bursts), 2*n, 2*n)
	}
	for i, want := range []string{"alice", "bob"} {
		burst := r.Bursts[i]
		if burst.Caller != want || burst.Mismatched != 0 || len(burst.Replies) != 1 || len(burst.Replies[want]) != n {
			t.Errorf("burst %d: caller=%q mismatched=%d replies by caller=%d; want %s, 0, only %s", i+1, burst.Caller, burst.Mismatched, len(burst.Replies), want, want)
		}
	}
}

func TestRun_ConcurrencyBoundsRequestsInFlight(t *testing.T) {
	b := startBackend(t, time.Millisecond)
	r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: 30, Concurrency: 2})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Errors != 0 || r.BackendCalls != 30 {
		t.Errorf("errors=%d backend_calls=%d, want 0, 30", r.Errors, r.BackendCalls)
	}
	if got := b.maxInFlight.Load(); got > 2 {
		t.Errorf("backend saw %d requests in flight, want at most 2", got)
	}
}

func TestRun_TimedOutRequestsAreErrorsByCode(t *testing.T) {
	b := startBackend(t, time.Hour)
	const n = 5
	r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: n, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Errors != n || r.ErrorsByCode["DeadlineExceeded"] != n || r.CollapseRatio != 0 {
		t.Errorf("errors=%d by code=%v ratio=%v; want %d DeadlineExceeded, ratio 0", r.Errors, r.ErrorsByCode, r.CollapseRatio, n)
	}
}

func TestRun_UnreachableTargetIsAClearError(t *testing.T) {
	addr := testkit.ClosedAddr(t)
	_, err := Run(testkit.Context(t), Config{Target: addr, Backend: addr, Requests: 1, ConnectTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "target "+addr+" is unreachable: not connected within 300ms") {
		t.Errorf("Run against closed port: err = %v, want one naming the unreachable target", err)
	}
}

// A Service that has just become ready can refuse connections for a moment
// (kube-proxy's rules lag its endpoints): the run waits for it to listen.
func TestRun_WaitsForATargetNotListeningYet(t *testing.T) {
	addr := testkit.ClosedAddr(t)
	type outcome struct {
		r   *Report
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := Run(testkit.Context(t), Config{Target: addr, Backend: addr, Requests: 3, ConnectTimeout: 20 * time.Second})
		done <- outcome{r, err}
	}()
	testkit.WaitFor(t, "the first attempts to connect refused", func() bool { return refused(t, addr) })
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	hellotest.ServeOn(t, lis, hello.Options{})
	got := testkit.Recv(t, "Run to return", done)
	if got.err != nil {
		t.Fatalf("Run against a target listening after its first attempts were refused: %v", got.err)
	}
	if got.r.Errors != 0 || got.r.BackendCalls != 3 {
		t.Errorf("errors=%d backend_calls=%d, want 0, 3", got.r.Errors, got.r.BackendCalls)
	}
}

// refused reports whether the client channel to addr has been refused: it
// is in TRANSIENT_FAILURE, as channelz reports it.
func refused(t *testing.T, addr string) bool {
	t.Helper()
	resp, err := channelz.GetTopChannels(t.Context(), &channelzpb.GetTopChannelsRequest{})
	if err != nil {
		t.Fatalf("channelz GetTopChannels: %v", err)
	}
	for _, ch := range resp.GetChannel() {
		data := ch.GetData()
		if strings.HasSuffix(data.GetTarget(), addr) && data.GetState().GetState() == channelzpb.ChannelConnectivityState_TRANSIENT_FAILURE {
			return true
		}
	}
	return false
}

// channelz is grpc-go's channelz service, called in process: importing it
// turns channelz on, so that this test binary's client channels report
// their state.
var channelz = func() channelzpb.ChannelzServer {
	var r serviceOf
	channelzservice.RegisterChannelzServiceToServer(&r)
	return r.impl.(channelzpb.ChannelzServer)
}()

// serviceOf is a grpc.ServiceRegistrar that keeps the service registered
// on it.
type serviceOf struct{ impl any }

func (r *serviceOf) RegisterService(_ *grpc.ServiceDesc, impl any) { r.impl = impl }

func TestRun_ProgressEndsWithFinalCounts(t *testing.T) {
	b := startBackend(t, 0)
	var progress bytes.Buffer
	if _, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: 10, Progress: &progress}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.HasSuffix(progress.String(), "sent 10/10, done 10/10\n") {
		t.Errorf("progress = %q, want it to end with the final counts", progress.String())
	}
}

func TestRun_RejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no target", Config{Backend: "b", Requests: 1}, "target is empty"},
		{"no backend", Config{Target: "t", Requests: 1}, "set exactly one of backend and backend metrics URL"},
		{"two backends", Config{Target: "t", Backend: "b", BackendMetrics: "http://b/metrics", Requests: 1}, "set exactly one"},
		{"zero requests", Config{Target: "t", Backend: "b"}, "requests must be positive"},
		{"negative concurrency", Config{Target: "t", Backend: "b", Requests: 1, Concurrency: -1}, "concurrency"},
		{"negative timeout", Config{Target: "t", Backend: "b", Requests: 1, Timeout: -time.Second}, "timeout"},
		{"negative rate", Config{Target: "t", Backend: "b", Rate: -1}, "rate must not be negative"},
		{"rate without duration", Config{Target: "t", Backend: "b", Rate: 10}, "needs a positive duration"},
		{"steady stream", Config{Target: "t", Backend: "b", Rate: 10, Duration: time.Second, Stream: true, StreamMessages: 1}, "no stream"},
		{"keys without rate", Config{Target: "t", Backend: "b", Requests: 1, Keys: 3}, "set rate too"},
		{"negative keys", Config{Target: "t", Backend: "b", Rate: 10, Duration: time.Second, Keys: -1}, "keys must not be negative"},
	}
	for _, tt := range tests {
		_, err := Run(testkit.Context(t), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestRun_StreamModeChecksEveryCallersReplies(t *testing.T) {
	b := startBackend(t, time.Millisecond)
	const n = 10
	r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: n, Name: "feed", Stream: true, StreamMessages: 7})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Requests != n || r.Errors != 0 || r.BackendCalls != n || r.Bursts[0].Incomplete != 0 || r.Bursts[0].DistinctCalls() != n {
		t.Errorf("report requests=%d errors=%d backend_calls=%d incomplete=%d distinct=%d; want %d, 0, %d (StreamHellos), 0, %d",
			r.Requests, r.Errors, r.BackendCalls, r.Bursts[0].Incomplete, r.Bursts[0].DistinctCalls(), n, n, n)
	}
	if _, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: 1, Stream: true}); err == nil || !strings.Contains(err.Error(), "stream messages") {
		t.Errorf("no messages asked for: err %v", err)
	}
}

func TestRun_TextNamesTheMethodTheBackendCounted(t *testing.T) {
	b := startBackend(t, 0)
	for _, tt := range []struct {
		stream bool
		method string
	}{{false, "SayHello"}, {true, "StreamHellos"}} {
		r, err := Run(testkit.Context(t), Config{Target: b.addr, Backend: b.addr, Requests: 3, Stream: tt.stream, StreamMessages: 2})
		if err != nil {
			t.Fatalf("Run with stream %v: %v", tt.stream, err)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
		want := "backend calls   3 (the backend's own " + tt.method + " count)\n"
		if r.Method != "/hello.v1.Greeter/"+tt.method || !strings.Contains(text.String(), want) {
			t.Errorf("stream %v: method %q, text report:\n%s\nwant method %s and the line %q", tt.stream, r.Method, text.String(), tt.method, want)
		}
	}
}
