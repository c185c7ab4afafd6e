package sidecar

import (
	"fmt"
	"sync"
	"testing"
	"time"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// clockFleet is three replicas with peers on one fake clock, which the
// tests move in steps between bursts of reads once no call is in flight
// (step): a refresh is then over, its answer kept, before the clock moves.
type clockFleet struct {
	clock    *testkit.Clock
	rs       []*replica
	backends []*testkit.Greeter
}

// startClockFleet starts a clockFleet collapsing SayHello with the
// settings edit makes.
func startClockFleet(t *testing.T, edit func(*config.Settings)) *clockFleet {
	t.Helper()
	f := &clockFleet{clock: fakeClock()}
	addrs := make([]string, 3)
	for i := range addrs {
		f.backends = append(f.backends, &testkit.Greeter{SayHello: greet})
		addrs[i] = startBackend(t, f.backends[i])
	}
	f.rs = startSidecars(t, addrs, true, func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		edit(c)
	}, runOn(f.clock))
	for i, r := range f.rs {
		r.backend = f.backends[i]
	}
	return f
}

// readAll reads keys key-0 ... through every replica at once.
func (f *clockFleet) readAll(t *testing.T, keys int) {
	t.Helper()
	ctx := testkit.Context(t)
	var wg sync.WaitGroup
	for k := range keys {
		for i, r := range f.rs {
			wg.Go(func() {
				if _, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("key-", k)}); err != nil {
					t.Errorf("key-%d through replica %d: %v", k, i, err)
				}
			})
		}
	}
	wg.Wait()
}

// step moves the clock d once no call is in flight on any replica.
func (f *clockFleet) step(t *testing.T, d time.Duration) {
	t.Helper()
	scs := make([]*runningSidecar, len(f.rs))
	for i, r := range f.rs {
		scs[i] = r.sidecar
	}
	advance(t, f.clock, d, scs...)
}

// calls returns each replica's backend's own count.
func (f *clockFleet) calls() []int64 {
	n := make([]int64, len(f.backends))
	for i, b := range f.backends {
		n[i] = b.Calls.SayHello.Load()
	}
	return n
}

func TestRefresh_ThreeReplicasRefreshEachKeyOnItsOwnerAlone(t *testing.T) {
	const keys, ttl, step, steps = 30, time.Second, 50 * time.Millisecond, 80 // 4 TTLs
	f := startClockFleet(t, func(c *config.Settings) { c.Policy.CacheTTL, c.Policy.EarlyRefresh = ttl, true })
	f.readAll(t, keys)
	loaded := f.calls()
	for range steps {
		f.step(t, step)
		f.readAll(t, keys)
	}
	f.step(t, 0) // the last refreshes are over

	var early float64
	for i, r := range f.rs {
		refreshed := r.sidecar.metricSum(t, "collapser_refreshes_total", map[string]string{"reason": "early"})
		calls := f.calls()[i] - loaded[i]
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
	if got, most := backendCalls(f.rs)-int64(keys), int64(keys)*5; got > most {
		t.Errorf("backend calls after the load = %d, more than %d: one per key per TTL of %v (less its jitter) over 4", got, most, ttl)
	}
}

func TestRefresh_ASoftPurgeOfAMethodIsRefreshedAtEachReplicasPace(t *testing.T) {
	const keys, rate, replicas = 30, 10, 3 // a turn every 100ms, on each replica
	gap := time.Second / rate
	f := startClockFleet(t, func(c *config.Settings) {
		c.Policy.CacheTTL = time.Hour
		c.Proxy.SoftPurgeRate = rate
	})
	f.readAll(t, keys)
	resp, err := adminv1.NewCacheClient(dial(t, f.rs[0].sidecar.adminAddr)).Purge(testkit.Context(t),
		&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}, Soft: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("purged: %v", resp)
	// Every answer is stale now, but none is refreshed before its turn: a
	// read of every key through every replica makes no backend call.
	before := backendCalls(f.rs)
	f.readAll(t, keys)
	f.step(t, 0)
	if got := backendCalls(f.rs); got != before {
		t.Fatalf("reads right after the purge made %d backend calls, want none before the first turn", got-before)
	}
	// Then each replica refreshes at most one of the answers it holds per
	// turn, its owners' and its copies alike (a copy past its turn is
	// fetched again, from its owner or, for a method not forwarded lately,
	// here): at most three backend calls per turn over the fleet, and each
	// answer purged refreshed once, in its turn.
	turns := int(resp.GetEntries())/replicas + 10 // every replica's, and then some
	for turn := 1; turn <= turns; turn++ {
		last := backendCalls(f.rs)
		f.step(t, gap)
		f.readAll(t, keys)
		f.step(t, 0)
		if got := backendCalls(f.rs) - last; got > replicas {
			t.Fatalf("turn %d made %d backend calls, want at most %d: one per replica", turn, got, replicas)
		}
	}
	refreshed := backendCalls(f.rs) - before
	f.readAll(t, keys)
	if got := backendCalls(f.rs) - before; got != refreshed || got < keys || got > int64(resp.GetEntries()) {
		t.Errorf("backend calls after the purge = %d, then %d: want every key refreshed, each answer purged at most once (%d), and nothing left to refresh",
			refreshed, got, resp.GetEntries())
	}
}
