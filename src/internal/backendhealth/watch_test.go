package backendhealth

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	interval = 10 * time.Millisecond
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is an in-process gRPC server, optionally with a health service.
type backend struct {
	srv    *grpc.Server
	health *health.Server // nil: no health service
	checks atomic.Int32   // health Checks received
	done   chan struct{}
}

func startBackend(t *testing.T, withHealth bool) (*backend, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{done: make(chan struct{})}
	b.srv = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.checks.Add(1)
		return h(ctx, req)
	}))
	if withHealth {
		b.health = health.NewServer()
		healthpb.RegisterHealthServer(b.srv, b.health)
	}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(lis) // returns nil after Stop
	}()
	t.Cleanup(b.stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return b, cc
}

// stop stops the backend; calling it again is harmless.
func (b *backend) stop() {
	b.srv.Stop()
	<-b.done
}

// watch runs Watch on a sidecar health server whose status starts as initial,
// until the returned stop is called; stop waits for Watch to return.
func watch(t *testing.T, cc grpc.ClientConnInterface, initial healthpb.HealthCheckResponse_ServingStatus, logs *logrecorder.Recorder) (*health.Server, func()) {
	t.Helper()
	return watchReady(t, cc, initial, nil, logs)
}

// watchReady is watch with the sidecar's own readiness.
func watchReady(t *testing.T, cc grpc.ClientConnInterface, initial healthpb.HealthCheckResponse_ServingStatus, ready func() error, logs *logrecorder.Recorder) (*health.Server, func()) {
	t.Helper()
	sidecar := health.NewServer()
	sidecar.SetServingStatus("", initial)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, cc, sidecar, interval, ready, slog.New(logs))
	}()
	stop := func() {
		cancel()
		testkit.Recv(t, "Watch to return after its context ended", done)
	}
	t.Cleanup(stop)
	return sidecar, stop
}

func sidecarStatus(t *testing.T, sidecar *health.Server) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := sidecar.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("sidecar Check: %v", err)
	}
	return resp.GetStatus()
}

// waitForStatus polls the sidecar's overall status until it is want.
func waitForStatus(t *testing.T, sidecar *health.Server, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	testkit.WaitFor(t, "sidecar status "+want.String(), func() bool { return sidecarStatus(t, sidecar) == want })
}

func TestWatch_ServingWhileBackendServing(t *testing.T) {
	logs := &logrecorder.Recorder{}
	b, cc := startBackend(t, true)
	sidecar, _ := watch(t, cc, healthpb.HealthCheckResponse_NOT_SERVING, logs)
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_SERVING)

	// Later probes that agree change nothing and log nothing.
	testkit.WaitFor(t, "five probes", func() bool { return b.checks.Load() >= 5 })
	if !slices.Contains(healthChanges(t, logs), true) {
		t.Errorf("over %d probes SERVING was not logged", b.checks.Load())
	}
}

// healthChanges returns the changes of health logs holds, in order (true:
// reachable, false: unreachable), and fails t unless each change was logged
// once: never twice alike in a row. A probe of the tests' 10 ms can time out
// on a loaded machine, which is a change too, the first probe's included.
func healthChanges(t *testing.T, logs *logrecorder.Recorder) []bool {
	t.Helper()
	var changes []bool
	for _, m := range logs.Messages() {
		switch {
		case strings.HasPrefix(m, "backend reachable"):
			changes = append(changes, true)
		case strings.HasPrefix(m, "backend unreachable"):
			changes = append(changes, false)
		}
	}
	for i := 1; i < len(changes); i++ {
		if changes[i] == changes[i-1] {
			t.Fatalf("health changes logged (true: reachable) %v: one logged twice in a row", changes)
		}
	}
	return changes
}

func TestWatch_NotServingWhenBackendReportsNotServing(t *testing.T) {
	b, cc := startBackend(t, true)
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	sidecar, _ := watch(t, cc, healthpb.HealthCheckResponse_SERVING, &logrecorder.Recorder{})
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestWatch_NotServingAfterBackendStops(t *testing.T) {
	logs := &logrecorder.Recorder{}
	b, cc := startBackend(t, true)
	sidecar, _ := watch(t, cc, healthpb.HealthCheckResponse_NOT_SERVING, logs)
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_SERVING)
	b.stop()
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_NOT_SERVING)
	if changes := healthChanges(t, logs); len(changes) < 2 || changes[len(changes)-1] || !changes[len(changes)-2] {
		t.Errorf("health changes logged (true: reachable) %v: want SERVING, then NOT_SERVING once", changes)
	}
}

func TestWatch_ServingWhenBackendHasNoHealthService(t *testing.T) {
	_, cc := startBackend(t, false)
	sidecar, _ := watch(t, cc, healthpb.HealthCheckResponse_NOT_SERVING, &logrecorder.Recorder{})
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_SERVING)
}

func TestWatch_ContextEndReturnsNotServing(t *testing.T) {
	logs := &logrecorder.Recorder{}
	_, cc := startBackend(t, true)
	sidecar, stop := watch(t, cc, healthpb.HealthCheckResponse_NOT_SERVING, logs)
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_SERVING)
	stop() // returns only after Watch returned
	if got := sidecarStatus(t, sidecar); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after Watch returned: status %v, want NOT_SERVING", got)
	}
	if n := logs.Count(slog.LevelInfo, "sidecar stopping", "", ""); n != 1 {
		t.Errorf("stop logged %d times, want once", n)
	}
}

func TestWatch_ServingOnlyOnceTheSidecarIsReady(t *testing.T) {
	b, cc := startBackend(t, true)
	var ready atomic.Bool
	sidecar, _ := watchReady(t, cc, healthpb.HealthCheckResponse_NOT_SERVING, func() error {
		if !ready.Load() {
			return errors.New("method kinds not learned yet")
		}
		return nil
	}, &logrecorder.Recorder{})
	// Three probes found the backend serving, and the sidecar not ready.
	testkit.WaitFor(t, "three probes", func() bool { return b.checks.Load() >= 3 })
	if got := sidecarStatus(t, sidecar); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("sidecar status %v before it is ready, want NOT_SERVING", got)
	}
	ready.Store(true)
	waitForStatus(t, sidecar, healthpb.HealthCheckResponse_SERVING)
}
