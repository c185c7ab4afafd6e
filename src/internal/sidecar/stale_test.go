package sidecar

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The stale tests wait for TTLs to pass in real time: what they check is
// how the sidecar answers once they have.

func TestStale_WhileRevalidatingEveryCallerIsAnsweredAtOnceAndTheBackendSeesOneRefresh(t *testing.T) {
	// The refresh takes longer than the callers' burst can, even on a loaded
	// machine: every one of them must get the stale result.
	const latency, ttl, callers = 3 * time.Second, 100 * time.Millisecond, 1000
	backend := &countingBackend{latency: latency}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Sidecar) {
		c.CacheTTL = ttl
		c.StaleWhileRevalidate = time.Minute
		c.UnaryMethods = []string{sayHello}
	})
	clients := make([]hellov1.GreeterClient, 4)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
	}
	ctx := testkit.Context(t)
	first, err := clients[0].SayHello(ctx, &hellov1.HelloRequest{Name: "feed"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 10*time.Millisecond) // TTL + ε: the result is stale

	start := time.Now()
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			reply, err := clients[i%len(clients)].SayHello(ctx, &hellov1.HelloRequest{Name: "feed"})
			if err != nil || reply.GetCall() != first.GetCall() {
				t.Errorf("caller %d: %v, %v; want the stale reply of call %d", i, reply, err, first.GetCall())
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d callers at TTL+ε answered in %v, backend calls %d", callers, took, backend.calls.Load())
	if took >= latency {
		t.Errorf("callers took %v, want them answered without waiting for the backend (%v)", took, latency)
	}
	testkit.WaitFor(t, "the refresh", func() bool { return sc.proxy.Stats().InFlight == 0 })
	if got := backend.calls.Load(); got != 2 {
		t.Errorf("backend calls = %d, want 2: the first and one refresh", got)
	}
	if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": "stale"}); got != callers {
		t.Errorf("stale serves counted = %v, want %d", got, callers)
	}
	reply, err := clients[0].SayHello(ctx, &hellov1.HelloRequest{Name: "feed"})
	if err != nil || reply.GetCall() != 2 {
		t.Errorf("after the refresh: %v, %v; want the refreshed reply", reply, err)
	}
}

func TestStale_IfErrorServesTheLastGoodAnswerWhileTheBackendIsDown(t *testing.T) {
	const ttl, window = 50 * time.Millisecond, 2 * time.Second
	backend := &countingBackend{}
	addr, kill := serveBackend(t, "127.0.0.1:0", backend)
	sc := startSidecar(t, addr, func(c *config.Sidecar) {
		c.CacheTTL = ttl
		c.StaleIfError = window
		c.BackendTimeout = 500 * time.Millisecond
		c.UnaryMethods = []string{sayHello}
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	good, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"})
	if err != nil {
		t.Fatal(err)
	}
	primed := time.Now()
	kill()

	time.Sleep(ttl)
	for i := range 5 {
		reply, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"})
		if time.Since(primed) >= window { // too slow a machine to be inside the window
			t.Skip("the window passed before the calls were made")
		}
		if err != nil || reply.GetCall() != good.GetCall() {
			t.Errorf("call %d inside the window: %v, %v; want the last good reply", i, reply, err)
		}
	}
	if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": "stale_on_error", "code": "OK"}); got != 5 {
		t.Errorf("stale_on_error serves = %v, want 5", got)
	}
	time.Sleep(time.Until(primed.Add(ttl + window)))
	if _, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"}); status.Code(err) != codes.Unavailable {
		t.Errorf("after the window: %v, want UNAVAILABLE", err)
	}
}
