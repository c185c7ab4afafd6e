package peers

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// previousScheme is the resolver scheme of a Ring's previous ring.
const previousScheme = "collapser-previous-peers"

// lastRing makes a Ring's previous ring: the replicas as they were before
// they last changed. It follows the Ring's own resolutions (its main
// balancer tells it each one), so that both rings see a change at once and
// the replicas are resolved once, and gives its ring, through a manual
// resolver, the replicas before the latest change: until they change,
// those of the first resolution.
//
// A replica that starts is not ready, and the resolver does not name it (a
// headless Service's DNS name lists ready pods): it joins when it is
// ready, a change like any other, whose previous ring is the others', as
// they had it before it came.
type lastRing struct {
	resolver *manual.Resolver
	// changed is when the replicas last changed, in Unix nanoseconds; 0
	// while they never did.
	changed atomic.Int64

	mu       sync.Mutex
	resolved bool           // a resolution came
	seen     []string       // the replicas' addresses, sorted, as last resolved
	current  resolver.State // as last resolved
}

// newLastRing returns a lastRing whose ring has no replicas before the
// first resolution.
func newLastRing() *lastRing {
	r := manual.NewBuilderWithScheme(previousScheme)
	r.InitialState(resolver.State{})
	return &lastRing{resolver: r}
}

// follow is told the replicas st the Ring resolved, and gives the previous
// ring those before the latest change, when they are new.
func (l *lastRing) follow(st resolver.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := addressesOf(st)
	switch {
	case !l.resolved:
		l.resolved = true
		l.resolver.UpdateState(st)
	case !slices.Equal(now, l.seen):
		l.changed.Store(time.Now().UnixNano())
		l.resolver.UpdateState(l.current)
	}
	l.seen, l.current = now, st
}

// recent reports whether the replicas changed less than HandoffWindow ago.
func (l *lastRing) recent() bool {
	c := l.changed.Load()
	return c != 0 && time.Since(time.Unix(0, c)) < HandoffWindow
}

// addressesOf returns the addresses of st's replicas, sorted.
func addressesOf(st resolver.State) []string {
	var addrs []string
	for _, ep := range st.Endpoints {
		for _, a := range ep.Addresses {
			addrs = append(addrs, a.Addr)
		}
	}
	for _, a := range st.Addresses {
		addrs = append(addrs, a.Addr)
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}
