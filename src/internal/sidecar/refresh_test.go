package sidecar

import (
	"fmt"
	"sync"
	"testing"
	"time"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The early refresh tests run their replicas on one fake clock, moved in
// steps between bursts of reads once no call is in flight (advance): a
// refresh is then over, its answer kept, before the clock moves on.

func TestRefresh_ThreeReplicasRefreshEachKeyOnItsOwnerAlone(t *testing.T) {
	const keys, ttl, step, steps = 30, time.Second, 50 * time.Millisecond, 80 // 4 TTLs
	clock := fakeClock()
	backends := []*testkit.Greeter{{SayHello: greet}, {SayHello: greet}, {SayHello: greet}}
	addrs := make([]string, len(backends))
	for i, b := range backends {
		addrs[i] = startBackend(t, b)
	}
	rs := startSidecars(t, addrs, true, func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = ttl
	}, runOn(clock))
	scs := make([]*runningSidecar, len(rs))
	for i, r := range rs {
		r.backend, scs[i] = backends[i], r.sidecar
	}
	ctx := testkit.Context(t)
	readAll := func() {
		var wg sync.WaitGroup
		for k := range keys {
			for i, r := range rs {
				wg.Go(func() {
					if _, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("key-", k)}); err != nil {
						t.Errorf("key-%d through replica %d: %v", k, i, err)
					}
				})
			}
		}
		wg.Wait()
	}
	readAll()
	loaded := make([]int64, len(rs))
	for i, b := range backends {
		loaded[i] = b.Calls.SayHello.Load()
	}
	for range steps {
		advance(t, clock, step, scs...)
		readAll()
	}
	advance(t, clock, 0, scs...) // the last refreshes are over

	var early float64
	for i, r := range rs {
		refreshed := r.sidecar.metricSum(t, "collapser_refreshes_total", map[string]string{"reason": "early"})
		calls := backends[i].Calls.SayHello.Load() - loaded[i]
		t.Logf("replica %d: %v early refreshes, %d backend calls after the load", i, refreshed, calls)
		// A replica refreshes the keys it owns, each with a call of its own
		// backend; a copy of another's answer is never refreshed here.
		if refreshed > float64(calls) {
			t.Errorf("replica %d refreshed %v times early, with %d calls of its backend: it refreshed answers it does not own", i, refreshed, calls)
		}
		early += refreshed
	}
	if early < keys {
		t.Errorf("%v early refreshes of %d keys read all the time for 4 TTLs: want at least one per key", early, keys)
	}
	if got, most := backendCalls(rs)-int64(keys), int64(keys)*5; got > most {
		t.Errorf("backend calls after the load = %d, more than %d: one per key per TTL of %v (less its jitter) over 4", got, most, ttl)
	}
}
