package sidecar

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestPeers_AfterAPrivateAnswerNoCallerOfTheKeyWaitsOnAnyReplica(t *testing.T) {
	// Hit-for-pass on every replica: once the key's answers came back
	// private (a cookie set), a burst of it spread over three replicas
	// reaches the backends at once, each call its own.
	gates := []*switchGate{{}, {}, {}}
	backends := make([]*testkit.Greeter, len(gates))
	addrs := make([]string, len(gates))
	for i, g := range gates {
		backends[i] = &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			if err := grpc.SetHeader(ctx, metadata.Pairs("set-cookie", "session=s")); err != nil {
				return nil, err
			}
			return g.sayHello(ctx, req)
		}}
		addrs[i] = startBackend(t, backends[i])
	}
	rs := startSidecars(t, addrs, true, func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} })
	for i, r := range rs {
		r.backend = backends[i]
	}
	ctx := testkit.Context(t)
	for _, r := range rs {
		if _, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: "cookie"}); err != nil {
			t.Fatal(err)
		}
	}
	const burst = 30
	before := backendCalls(rs)
	gate := make(chan struct{})
	for _, g := range gates {
		g.gate.Store(&gate)
	}
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			if _, err := rs[i%len(rs)].client.SayHello(ctx, &hellov1.HelloRequest{Name: "cookie"}); err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	// Every caller's call is at a backend before any backend answers.
	testkit.WaitFor(t, "every call at a backend", func() bool { return backendCalls(rs)-before == burst })
	close(gate)
	wg.Wait()
	if got := backendCalls(rs) - before; got != burst {
		t.Errorf("backend calls = %d, want %d: one each, none waiting for another", got, burst)
	}
	var passed float64
	for _, r := range rs {
		passed += r.sidecar.metricSum(t, "collapser_requests_total", map[string]string{"outcome": "pass"}) +
			r.sidecar.metricSum(t, "collapser_peer_requests_total", map[string]string{"outcome": "pass"})
	}
	if passed == 0 {
		t.Error("no request counted as pass")
	}
}
