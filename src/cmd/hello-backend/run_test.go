package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// notifyingBuffer is a concurrency-safe buffer that signals every write.
type notifyingBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // capacity 1: "something was written since you last looked"
}

func newNotifyingBuffer() *notifyingBuffer {
	return &notifyingBuffer{written: make(chan struct{}, 1)}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *notifyingBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// await waits until re matches the buffer and returns the submatches.
func (b *notifyingBuffer) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(testkit.DefaultTimeout)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		select {
		case <-b.written:
		case <-timeout:
			t.Fatalf("no line matching %s; output so far:\n%s", re, b.String())
		}
	}
}

var servingLine = regexp.MustCompile(`serving gRPC on (\S+), metrics on (\S+),`)

// running is a run of the backend on loopback, with a client of it.
type running struct {
	addrs   []string // the serving line's submatches: gRPC and metrics addresses
	stderr  *notifyingBuffer
	conn    *grpc.ClientConn
	callCtx context.Context
	cancel  context.CancelFunc
	done    <-chan error
}

// startRun runs the backend on 127.0.0.1:0 with args more, until stop or
// the test's end, and connects to it.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	stderr := newNotifyingBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...), io.Discard, stderr)
	}()
	addrs := stderr.await(t, servingLine)
	conn, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	callCtx, callCancel := context.WithTimeout(ctx, testkit.DefaultTimeout)
	t.Cleanup(callCancel)
	return &running{addrs: addrs, stderr: stderr, conn: conn, callCtx: callCtx, cancel: cancel, done: done}
}

// stop cancels the run, and checks that it returns without an error.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := testkit.Recv(t, "run to return after its context was cancelled", r.done); err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}

func TestRun_ServesGreeterHealthReflectionMetricsAndHTTPHealthUntilCancelled(t *testing.T) {
	r := startRun(t, "--latency", "1ms")
	conn, callCtx, addrs := r.conn, r.callCtx, r.addrs
	var trailer metadata.MD
	reply, err := hellov1.NewGreeterClient(conn).SayHello(callCtx, &hellov1.HelloRequest{Name: "run"}, grpc.Trailer(&trailer))
	if err != nil || reply.GetCall() != 1 {
		t.Fatalf("SayHello = %v, %v; want call 1", reply, err)
	}
	if len(trailer.Get(hello.TrailerServedBy)) != 1 {
		t.Errorf("trailer %v lacks %s", trailer, hello.TrailerServedBy)
	}
	health, err := healthpb.NewHealthClient(conn).Check(callCtx, &healthpb.HealthCheckRequest{})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health Check = %v, %v; want SERVING", health, err)
	}
	if services := listServices(t, callCtx, conn); !strings.Contains(services, "hello.v1.Greeter") || !strings.Contains(services, "hello.v1.Stats") {
		t.Errorf("reflection lists %q, want hello.v1.Greeter and hello.v1.Stats", services)
	}
	body := get(t, callCtx, "http://"+addrs[2]+"/metrics")
	for _, want := range []string{`hello_requests_total{method="/hello.v1.Greeter/SayHello"} 1`, "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The HTTP health check reaches the gRPC health service through the gRPC listener.
	if body := get(t, callCtx, "http://"+addrs[2]+healthPath); strings.TrimSpace(body) != "SERVING" {
		t.Errorf("GET %s = %q, want SERVING", healthPath, body)
	}

	r.stop(t)
}

// collapsingLine is the line a collapsing backend starts with, with the
// collapser's metrics address.
var collapsingLine = regexp.MustCompile(`collapsing, its metrics on (\S+), peers on (\S+)`)

// startCollapsing runs the backend with --collapse and the sidecar's
// settings env, each on loopback, and returns the run and its collapser's
// metrics URL.
func startCollapsing(t *testing.T, env map[string]string) (*running, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("COLLAPSER_METRICS_LISTEN", "127.0.0.1:0")
	r := startRun(t, "--latency", "0", "--collapse")
	return r, "http://" + r.stderr.await(t, collapsingLine)[1] + "/metrics"
}

// collapserFiles writes a policy file that keeps answers an hour, and a
// release's peer token, and returns their paths.
func collapserFiles(t *testing.T) (policy, token string) {
	t.Helper()
	dir := t.TempDir()
	policy, token = filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "token")
	if err := os.WriteFile(policy, []byte("default:\n  cacheTTL: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte(strings.Repeat("release-token-", 4)), 0o600); err != nil {
		t.Fatal(err)
	}
	return policy, token
}

// metric returns the value of series in the metrics at url (0 when absent).
func metric(t *testing.T, ctx context.Context, url, series string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\d+)`).FindStringSubmatch(get(t, ctx, url))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// sayHelloCount is the backend's own count of SayHello calls.
const sayHelloCount = `hello_requests_total{method="/hello.v1.Greeter/SayHello"}`

func TestRun_CollapseServesIdenticalCallsWithOneHandlerRun(t *testing.T) {
	policy, _ := collapserFiles(t)
	r, collapserMetrics := startCollapsing(t, map[string]string{"COLLAPSER_POLICY_FILE": policy})
	for range 5 {
		if reply, err := hellov1.NewGreeterClient(r.conn).SayHello(r.callCtx, &hellov1.HelloRequest{Name: "run"}); err != nil || reply.GetCall() != 1 {
			t.Fatalf("SayHello = %v, %v; want call 1, every time", reply, err)
		}
	}
	// The backend's own count is the truth: one run. The collapser's
	// metrics are served on a port of their own, as a sidecar's are.
	if n := metric(t, r.callCtx, "http://"+r.addrs[2]+"/metrics", sayHelloCount); n != 1 {
		t.Errorf("the backend counted %d SayHello calls, want 1", n)
	}
	if n := metric(t, r.callCtx, collapserMetrics, `collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="cache_hit"}`); n != 4 {
		t.Errorf("the collapser counted %d hits, want 4", n)
	}
	r.stop(t)
}

func TestRun_PeeredBackendsRunEachKeysHandlerOnce(t *testing.T) {
	policy, token := collapserFiles(t)
	// Two free ports for the peer listeners, named to both before either runs.
	peerAddrs := make([]string, 2)
	for i := range peerAddrs {
		lis := testkit.Listen(t, "127.0.0.1:0")
		peerAddrs[i] = lis.Addr().String()
		lis.Close()
	}
	runs := make([]*running, len(peerAddrs))
	collapserMetrics := make([]string, len(peerAddrs))
	for i, addr := range peerAddrs {
		runs[i], collapserMetrics[i] = startCollapsing(t, map[string]string{"COLLAPSER_POLICY_FILE": policy,
			"COLLAPSER_PEERS": strings.Join(peerAddrs, ","), "COLLAPSER_PEER_LISTEN": addr, "COLLAPSER_PEER_TOKEN_FILE": token, "COLLAPSER_PEER_PLAINTEXT": "true"})
	}
	for i, r := range runs {
		testkit.WaitFor(t, "a lease from the other backend", func() bool { return metric(t, r.callCtx, collapserMetrics[i], "collapser_peer_coherent") == 1 })
	}
	// Callers address the backends by one name, as a Service's do: the
	// authority is part of the key.
	clients := make([]hellov1.GreeterClient, len(runs))
	for i, r := range runs {
		conn, err := grpc.NewClient(r.addrs[1], grpc.WithAuthority("hello.example"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		clients[i] = hellov1.NewGreeterClient(conn)
	}
	const keys = 12
	for k := range keys {
		for i, r := range runs {
			if _, err := clients[i].SayHello(r.callCtx, &hellov1.HelloRequest{Name: fmt.Sprint("key-", k)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The backends' own counts are the truth: one run per key, on its owner.
	handled := 0
	for _, r := range runs {
		handled += metric(t, r.callCtx, "http://"+r.addrs[2]+"/metrics", sayHelloCount)
	}
	if handled != keys {
		t.Errorf("%d keys called through both backends ran the handler %d times, want %d", keys, handled, keys)
	}
	for _, r := range runs {
		r.stop(t)
	}
}

func TestRun_BusyPortIsAnError(t *testing.T) {
	stderr := newNotifyingBuffer()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, io.Discard, stderr)
	}()
	addrs := stderr.await(t, servingLine)
	err := run(ctx, []string{"--listen", addrs[1], "--metrics-listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen for gRPC on "+addrs[1]) {
		t.Errorf("run on a busy port: err = %v, want a listen error naming it", err)
	}
	cancel()
	if err := testkit.Recv(t, "the first run to return after its context was cancelled", done); err != nil {
		t.Errorf("first run: %v", err)
	}
}

func listServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("ServerReflectionInfo: %v", err)
	}
	req := &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}
	if err := stream.Send(req); err != nil {
		t.Fatalf("reflection Send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection Recv: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("reflection CloseSend: %v", err)
	}
	return resp.GetListServicesResponse().String()
}

func get(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, read error %v", url, resp.StatusCode, err)
	}
	return string(body)
}
