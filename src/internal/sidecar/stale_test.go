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

// The stale tests run their sidecars on a fake clock, the one the answers'
// windows are read on (seams.now), and move it past a TTL or a window: what
// they check is how the sidecar answers once it has passed.

// fakeClock returns a clock for a sidecar to run on (runOn), standing still
// until a test moves it (advance).
func TestStale_WhileRevalidatingEveryCallerIsAnsweredAtOnceAndTheBackendSeesOneRefresh(t *testing.T) {
	const ttl, callers = 100 * time.Millisecond, 1000
	// The backend holds its second call, the refresh, until every caller has
	// its answer: none of them can have waited for it.
	gate := make(chan struct{})
	backend := &testkit.Greeter{SayHello: gatedFrom(gate, 2)}
	clock := fakeClock()
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CacheTTL = ttl
		c.Policy.StaleWhileRevalidate = time.Minute
		c.Policy.Timeout = time.Hour // the gate ends the refresh, however long the callers take
		c.Policy.CollapseMethods = []string{sayHello}
	}, runOn(clock))
	clients := make([]hellov1.GreeterClient, 4)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
	}
	ctx := testkit.Context(t)
	first, err := clients[0].SayHello(ctx, &hellov1.HelloRequest{Name: "feed"})
	if err != nil {
		t.Fatal(err)
	}
	advance(t, clock, ttl+10*time.Millisecond, sc) // TTL + ε: the result is stale

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
	testkit.WaitFor(t, "the refresh at the backend", func() bool { return backend.Calls.SayHello.Load() == 2 })
	for outcome, want := range map[string]float64{"leader": 1, "joined": 0, "stale": callers} {
		if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("requests with outcome %s = %v, want %v", outcome, got, want)
		}
	}
	close(gate)
	testkit.WaitFor(t, "the refresh", func() bool { return sc.proxy.Stats().InFlight == 0 })
	if got := backend.Calls.SayHello.Load(); got != 2 {
		t.Errorf("backend calls = %d, want 2: the first and one refresh", got)
	}
	if got := sc.metricSum(t, "collapser_refreshes_total", map[string]string{"reason": "stale"}); got != 1 {
		t.Errorf("stale refreshes counted = %v, want 1", got)
	}
	reply, err := clients[0].SayHello(ctx, &hellov1.HelloRequest{Name: "feed"})
	if err != nil || reply.GetCall() != 2 {
		t.Errorf("after the refresh: %v, %v; want the refreshed reply", reply, err)
	}
}

// answeredThenDown serves a sidecar on clock with ttl and a stale-if-error
// window in front of a backend that answers one call and is then killed,
// and returns the sidecar, a client of it and the backend's one answer.
func answeredThenDown(t *testing.T, clock *testkit.Clock, ttl, window time.Duration) (*runningSidecar, hellov1.GreeterClient, *hellov1.HelloReply) {
	t.Helper()
	backend := &testkit.Greeter{SayHello: greet}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CacheTTL = ttl
		c.Policy.StaleIfError = window
		c.Policy.Timeout = 500 * time.Millisecond
		c.Policy.CollapseMethods = []string{sayHello}
	}, runOn(clock))
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	good, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"})
	if err != nil {
		t.Fatal(err)
	}
	backend.Stop()
	return sc, client, good
}

func TestStale_IfErrorServesTheLastGoodAnswerWhileTheBackendIsDown(t *testing.T) {
	// A window the clock never leaves: every call below is inside it.
	const ttl = 50 * time.Millisecond
	clock := fakeClock()
	sc, client, good := answeredThenDown(t, clock, ttl, time.Hour)
	advance(t, clock, ttl, sc) // past the TTL: only the window serves the answer now
	for i := range 5 {
		reply, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"})
		if err != nil || reply.GetCall() != good.GetCall() {
			t.Errorf("call %d inside the window: %v, %v; want the last good reply", i, reply, err)
		}
	}
	if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": "stale_on_error", "code": "OK"}); got != 5 {
		t.Errorf("stale_on_error serves = %v, want 5", got)
	}
}

func TestStale_IfErrorWindowPassedTheBackendErrorReachesTheCaller(t *testing.T) {
	const ttl, window = 50 * time.Millisecond, 200 * time.Millisecond
	clock := fakeClock()
	sc, client, _ := answeredThenDown(t, clock, ttl, window)
	advance(t, clock, ttl+window, sc) // past the window
	if _, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "price"}); status.Code(err) != codes.Unavailable {
		t.Errorf("after the window: %v, want UNAVAILABLE", err)
	}
	if got := sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": "stale_on_error"}); got != 0 {
		t.Errorf("stale_on_error serves = %v, want none after the window", got)
	}
}
