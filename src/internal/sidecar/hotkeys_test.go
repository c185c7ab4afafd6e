package sidecar

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/forwarding"
	"github.com/collapser/collapser/src/internal/testkit"
)

// switchGate is a SayHello that holds its calls while a gate is set, until
// that gate is closed, and answers as greet does.
type switchGate struct{ gate atomic.Pointer[chan struct{}] }

func (g *switchGate) sayHello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	if c := g.gate.Load(); c != nil {
		select {
		case <-*c:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return greet(ctx, req)
}

// syncReplicas makes every replica sync with the others now: after the
// test moved the clock, their leases are renewed on the moved clock.
func syncReplicas(t *testing.T, rs []*replica) {
	t.Helper()
	for _, r := range rs {
		r.sidecar.replicas.Sync(testkit.Context(t))
	}
}

// gatedBurst sends n identical calls of name spread over rs, once every one
// waits in a sidecar, lets the backends answer, and returns how many
// backend calls it made, by the backends' own counts.
func gatedBurst(t *testing.T, rs []*replica, gates []*switchGate, name string, n int) int64 {
	t.Helper()
	syncReplicas(t, rs)
	before := backendCalls(rs)
	gate := make(chan struct{})
	for _, g := range gates {
		g.gate.Store(&gate)
	}
	ctx := testkit.Context(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := rs[i%len(rs)].client.SayHello(ctx, &hellov1.HelloRequest{Name: name}); err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	testkit.WaitFor(t, "every caller waiting", func() bool {
		waiting := 0
		for _, r := range rs {
			waiting += r.sidecar.proxy.Stats().Waiters
		}
		return waiting >= n
	})
	close(gate)
	wg.Wait()
	for _, g := range gates {
		g.gate.Store(nil)
	}
	return backendCalls(rs) - before
}

func TestPeers_AHotKeyOfAKeptMethodMakesOneBackendCallAfterItShows(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	gates := []*switchGate{{}, {}, {}}
	backends := make([]*testkit.Greeter, len(gates))
	addrs := make([]string, len(gates))
	for i, g := range gates {
		backends[i] = &testkit.Greeter{SayHello: g.sayHello}
		addrs[i] = startBackend(t, backends[i])
	}
	rs := startSidecars(t, addrs, true, func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} },
		withSeams(seams{now: clock.Now, syncEvery: time.Hour})) // the test syncs them as it moves the clock
	for i, r := range rs {
		r.backend = backends[i]
	}
	ctx := testkit.Context(t)
	// Distinct keys: no forwarded call shares, and every replica keeps
	// SayHello's calls once a window has closed on enough of them.
	kept := func() bool {
		for _, r := range rs {
			if forwarded, counted := r.sidecar.proxy.Forwarded()[sayHello]; !counted || forwarded {
				return false
			}
		}
		return true
	}
	for i := 0; !kept(); i++ {
		if i%(3*2*forwarding.MinCalls) == 0 {
			clock.Advance(forwarding.Window)
			syncReplicas(t, rs)
		}
		if _, err := rs[i%len(rs)].client.SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("distinct-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	const burst = 60
	first := gatedBurst(t, rs, gates, "hot", burst)
	clock.Advance(time.Second) // the burst's answers are gone (TTL 100ms)
	second := gatedBurst(t, rs, gates, "hot", burst)
	t.Logf("SayHello kept on every replica; a burst of one key over three replicas made %d backend calls, the next %d", first, second)
	if first > int64(len(rs)) || second != 1 {
		t.Errorf("backend calls: %d for the first burst, %d for the second; want at most %d (one per replica), then 1: the key showed hot", first, second, len(rs))
	}
	if !kept() {
		t.Error("SayHello is forwarded again on some replica, want it kept: only its hot key is forwarded")
	}
}
