package sidecar

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/resolver"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/testkit"
)

// rollout is three sidecars with peers, each in front of a backend of its
// own, and three more to replace them one by one, as a Deployment's
// rolling update does (one more pod, none less). Each replica resolves
// the ready replicas through a resolver of its own, which the test updates
// after a delay of its own at each change (up to peers.ResolveInterval, as
// the replicas' DNS polls see a change each in its own time); callers
// reach the ready replicas, as a Service's do.
type rollout struct {
	f         *peerFleet
	edit      func(*config.Settings)
	backends  []*testkit.Greeter
	addrs     []string // the backends'
	resolvers []*laggedResolver
	rs        []*replica // started ones; nil until then

	mu      sync.Mutex
	ready   []int // the replicas callers reach, and every ring names
	seq     int   // of the latest change
	changes sync.WaitGroup
}

// laggedResolver is a replica's resolver, which gets each change late: a
// change that comes after a later one was applied is dropped, as a poll
// sees only the latest state.
type laggedResolver struct {
	*testkit.Resolver
	mu      sync.Mutex
	applied int // the latest change applied
}

// newRollout starts replicas 0 to 2 in front of backends of latency, with
// the settings edit makes.
func newRollout(t testing.TB, latency time.Duration, edit func(*config.Settings)) *rollout {
	ro := &rollout{f: newPeerFleet(t, 6), edit: edit, rs: make([]*replica, 6)}
	for range 6 {
		b := &testkit.Greeter{SayHello: slow(latency)}
		ro.backends, ro.addrs = append(ro.backends, b), append(ro.addrs, startBackend(t, b))
	}
	for i := 3; i < 6; i++ {
		ro.f.lis[i].Close() // listened on again when it starts
	}
	ro.ready = []int{0, 1, 2}
	for i := range 3 {
		ro.start(t, i)
	}
	waitLeases(t, ro.rs[:3])
	return ro
}

// start starts replica i, its resolver naming the ready replicas.
func (ro *rollout) start(t testing.TB, i int) {
	res := &laggedResolver{Resolver: testkit.NewResolver("rollout"+strings.ToLower(rand.Text()), testkit.Endpoints(ro.readyAddrs()...))}
	resolver.Register(res)
	ro.mu.Lock()
	res.applied = ro.seq
	ro.resolvers = append(ro.resolvers, res)
	ro.mu.Unlock()
	if i >= 3 {
		ro.f.lis[i] = testkit.Listen(t, ro.f.addrs[i])
	}
	ro.rs[i] = ro.f.start(t, i, ro.addrs[i], func(c *config.Settings) {
		c.Peers = res.Scheme() + ":///peers"
		c.Replicas = strings.Join(ro.f.addrs, ",")
		c.Policy.CollapseMethods = []string{sayHello}
		ro.edit(c)
	})
}

// readyAddrs returns the peer addresses of the ready replicas.
func (ro *rollout) readyAddrs() []string {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	addrs := make([]string, len(ro.ready))
	for k, i := range ro.ready {
		addrs[k] = ro.f.addrs[i]
	}
	return addrs
}

// client returns a ready replica's client, at random.
func (ro *rollout) client() hellov1.GreeterClient {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	return ro.rs[ro.ready[mrand.IntN(len(ro.ready))]].client
}

// change makes ready the ready replicas: callers reach them at once, and
// each ring names them after a delay of its own.
func (ro *rollout) change(ready []int) {
	ro.mu.Lock()
	ro.ready = ready
	ro.seq++
	seq, resolvers := ro.seq, ro.resolvers
	ro.mu.Unlock()
	state := testkit.Endpoints(ro.readyAddrs()...)
	for _, res := range resolvers {
		ro.changes.Go(func() {
			time.Sleep(mrand.N(peers.ResolveInterval))
			res.mu.Lock()
			defer res.mu.Unlock()
			if seq > res.applied {
				res.applied = seq
				res.UpdateState(state)
			}
		})
	}
}

// replace replaces replica old by replica new: new starts, and becomes
// ready; old is taken out of the ready replicas, serves on through a
// preStop, and stops.
func (ro *rollout) replace(t testing.TB, old, new int, preStop time.Duration) {
	ro.start(t, new)
	ro.change(append(ro.ready[:len(ro.ready):len(ro.ready)], new))
	var ready []int
	for _, i := range ro.ready {
		if i != old {
			ready = append(ready, i)
		}
	}
	ro.change(ready)
	time.Sleep(preStop)
	if err := ro.rs[old].sidecar.stop(); err != nil {
		t.Errorf("replica %d: %v", old, err)
	}
}

// calls sums the backends' own counts.
func (ro *rollout) calls() int64 {
	var n int64
	for _, b := range ro.backends {
		n += b.Calls.SayHello.Load()
	}
	return n
}

// BenchmarkLoadRollout replaces three sidecars with peers one by one under
// a steady load over many keys (the defaults: TTL jitter and early
// refresh), each replica seeing each change in its own time, and reports
// the backend calls of the restart's window over those of as long a
// window of the same load before it: the extra a rollout costs. A
// replica leaves 2 s after it is taken out of the ready ones (a preStop).
// Run it once: make load.
func BenchmarkLoadRollout(b *testing.B) {
	const (
		keys, rate     = 200, 400 // reads per second, over all keys
		ttl, latency   = 2 * time.Second, 5 * time.Millisecond
		window         = 18 * time.Second
		preStop, pause = 2 * time.Second, time.Second
	)
	for b.Loop() {
		ro := newRollout(b, latency, func(c *config.Settings) { c.Policy.CacheTTL = ttl })
		ctx, cancel := context.WithCancel(context.Background())
		var failures atomic.Int64
		var load sync.WaitGroup
		load.Go(func() {
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			var reads sync.WaitGroup
			defer reads.Wait()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					c, k := ro.client(), mrand.IntN(keys)
					reads.Go(func() {
						if _, err := c.SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("key-", k)}); err != nil && ctx.Err() == nil {
							failures.Add(1)
						}
					})
				}
			}
		})
		time.Sleep(2 * ttl) // warm
		start := ro.calls()
		time.Sleep(window)
		quiet := ro.calls() - start
		start = ro.calls()
		began := time.Now()
		for old := range 3 {
			ro.replace(b, old, old+3, preStop)
			time.Sleep(pause)
		}
		rolled := time.Since(began)
		time.Sleep(window - rolled)
		restart := ro.calls() - start
		cancel()
		load.Wait()
		ro.changes.Wait()
		taken, none, failed := handoffTotals(b, ro.rs[3:]...)
		b.Logf("%d keys, %d reads/s, TTL %v: quiet %d backend calls, restart (%v of %v) %d; the new replicas' handoffs: taken %v, none %v, failed %v; %d reads failed",
			keys, rate, ttl, quiet, rolled.Round(100*time.Millisecond), window, restart, taken, none, failed, failures.Load())
		b.ReportMetric(100*(float64(restart)/float64(quiet)-1), "%extra")
		if failures.Load() != 0 {
			b.Errorf("%d reads failed", failures.Load())
		}
	}
}
