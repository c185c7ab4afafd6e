package sidecar

import (
	"context"
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
	gate := make(chan struct{})
	backend := &testkit.Greeter{SayHello: gated(gate)}
	sc := startSidecar(t, startBackend(t, backend), nil) // no explicit method list
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)

	// Until reflection has answered, calls pass through; wait for the kind.
	testkit.WaitFor(t, "SayHello learned as unary", func() bool { return sc.resolver.Method(sayHello).Kind.String() == "unary" })
	const n = 50
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "r"}); err != nil {
				t.Error(err)
			}
		})
	}
	testkit.WaitFor(t, "every caller waiting", func() bool { return sc.proxy.Stats().Waiters >= n })
	close(gate)
	wg.Wait()
	if got := backend.Calls.SayHello.Load(); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
}

func TestSidecar_HealthFollowsBackend(t *testing.T) {
	addr := testkit.ClosedAddr(t) // the backend is down

	sc := startSidecar(t, addr, nil, backendDown)
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
	backend := &testkit.Greeter{Services: registerReflection}
	backend.Serve(t, testkit.Listen(t, addr))
	testkit.WaitFor(t, "the sidecar SERVING after the backend came up", func() bool { return check() == healthpb.HealthCheckResponse_SERVING })
}

func TestSidecar_ShutdownLetsCallsInFlightFinish(t *testing.T) {
	gate := make(chan struct{})
	backend := &testkit.Greeter{SayHello: gated(gate)}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} })
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	replied := make(chan error, 1)
	go func() {
		_, err := client.SayHello(context.Background(), &hellov1.HelloRequest{Name: "last"})
		replied <- err
	}()
	testkit.WaitFor(t, "the call to reach the backend", func() bool { return backend.Calls.SayHello.Load() > 0 })
	sc.cancel() // SIGTERM
	select {
	case err := <-sc.served:
		t.Fatalf("Serve returned (%v) while a call was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := testkit.Recv(t, "the reply to the call in flight", replied); err != nil {
		t.Errorf("call in flight at shutdown: %v", err)
	}
	if err := sc.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestSidecar_LivenessServesWhileBackendIsDown(t *testing.T) {
	sc := startSidecar(t, "127.0.0.1:1", nil, backendDown) // nothing listens there
	health := healthpb.NewHealthClient(dial(t, sc.addr))
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":              healthpb.HealthCheckResponse_NOT_SERVING,
		LivenessService: healthpb.HealthCheckResponse_SERVING,
	} {
		resp, err := health.Check(testkit.Context(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("service %q: %v, %v; want %v", service, resp.GetStatus(), err, want)
		}
	}
}
