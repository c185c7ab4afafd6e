package sidecar

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSidecar_LearnsUnaryMethodsFromReflectionAndCollapses(t *testing.T) {
	backend := &countingBackend{gate: make(chan struct{})}
	sc := startSidecar(t, startBackend(t, backend), nil) // no explicit method list
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.DefaultTimeout)
	defer cancel()

	// Until reflection has answered, calls pass through; wait for the kind.
	for sc.resolver.Method(sayHello).Kind.String() != "unary" {
		if ctx.Err() != nil {
			t.Fatal("SayHello never learned as unary")
		}
		time.Sleep(5 * time.Millisecond)
	}
	const n = 50
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "r"}); err != nil {
				t.Error(err)
			}
		})
	}
	for sc.proxy.Stats().Waiters < n && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	close(backend.gate)
	wg.Wait()
	if got := backend.calls.Load(); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
}

func TestSidecar_HealthFollowsBackend(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens: the backend is down

	sc := serveSidecar(t, addr, nil)
	health := healthpb.NewHealthClient(dial(t, sc.addr))
	check := func() healthpb.HealthCheckResponse_ServingStatus {
		c, done := context.WithTimeout(context.Background(), time.Second)
		defer done()
		resp, err := health.Check(c, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return resp.GetStatus()
	}
	if got := check(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("with the backend down: %v, want NOT_SERVING", got)
	}

	// Bring the backend up on that address: the sidecar turns SERVING.
	startBackendOn(t, addr, &countingBackend{})
	deadline := time.Now().Add(testkit.DefaultTimeout)
	for check() != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("sidecar never turned SERVING after the backend came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSidecar_ShutdownLetsCallsInFlightFinish(t *testing.T) {
	backend := &countingBackend{gate: make(chan struct{})}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Sidecar) { c.UnaryMethods = []string{sayHello} })
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	replied := make(chan error, 1)
	go func() {
		_, err := client.SayHello(context.Background(), &hellov1.HelloRequest{Name: "last"})
		replied <- err
	}()
	for backend.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	sc.cancel() // SIGTERM
	select {
	case err := <-sc.served:
		t.Fatalf("Serve returned (%v) while a call was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(backend.gate)
	if err := <-replied; err != nil {
		t.Errorf("call in flight at shutdown: %v", err)
	}
	if err := sc.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestSidecar_LivenessServesWhileBackendIsDown(t *testing.T) {
	sc := serveSidecar(t, "127.0.0.1:1", nil) // nothing listens there
	health := healthpb.NewHealthClient(dial(t, sc.addr))
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":              healthpb.HealthCheckResponse_NOT_SERVING,
		LivenessService: healthpb.HealthCheckResponse_SERVING,
	} {
		c, done := context.WithTimeout(context.Background(), testkit.DefaultTimeout)
		resp, err := health.Check(c, &healthpb.HealthCheckRequest{Service: service})
		done()
		if err != nil || resp.GetStatus() != want {
			t.Errorf("service %q: %v, %v; want %v", service, resp.GetStatus(), err, want)
		}
	}
}
