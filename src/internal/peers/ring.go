package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/ringhash"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// balancerName is the balancer of the peer connection: grpc-go's ring_hash,
// watched by a view (below) so that the sidecar can ask it, without making
// a call, whether a key is its own.
const balancerName = "collapser_peer_ring"

func init() { balancer.Register(ringBuilder{}) }

// views holds the view of every open Ring by its id, which the Ring's
// service config names: a balancer finds its view when its config is parsed.
var views sync.Map // string → *view

// view is what a Ring's balancer tells the sidecar: its latest picker, which
// of its SubConns reach this replica's own peer listener, and how many
// replicas the resolver last named.
type view struct {
	id string
	// isSelf reports whether a peer address is this replica's own listener.
	isSelf func(addr string) bool
	// previous, on a Ring's main view, is told each of its resolutions,
	// and makes the Ring's previous ring of them (previous.go); nil on the
	// previous ring's own view.
	previous *lastRing
	// picker is the balancer's latest picker; nil while it has none (before
	// the first resolution, after it closed).
	picker atomic.Pointer[balancer.Picker]
	// self is the SubConns to this replica itself, copied on write: read
	// on every call, changed when a connection to itself comes or goes.
	self    atomic.Pointer[[]balancer.SubConn]
	selfMu  sync.Mutex
	members atomic.Int64
}

// owner reports whether ring_hash puts the key with hash (KeyHash) on this
// replica (self), by picking as it would for a call: the pick is a
// connection to the replica itself or to another. known is false when the
// pick is not known yet (its connection is being made, or the ring has no
// peers).
func (v *view) owner(hash string) (self, known bool) {
	p := v.picker.Load()
	if p == nil {
		return false, false
	}
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.MD{HashHeader: {hash}})
	res, err := (*p).Pick(balancer.PickInfo{Ctx: ctx})
	if err != nil {
		return false, false
	}
	if res.Done != nil {
		res.Done(balancer.DoneInfo{}) // no call is made on this pick
	}
	if s := v.self.Load(); s != nil {
		return slices.Contains(*s, res.SubConn), true
	}
	return false, true
}

// addSelf records a SubConn to this replica itself; dropSelf forgets it
// once it is shut down.
func (v *view) addSelf(sc balancer.SubConn) {
	v.selfMu.Lock()
	defer v.selfMu.Unlock()
	var next []balancer.SubConn
	if cur := v.self.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, sc)
	v.self.Store(&next)
}

func (v *view) dropSelf(sc balancer.SubConn) {
	v.selfMu.Lock()
	defer v.selfMu.Unlock()
	if cur := v.self.Load(); cur != nil {
		next := slices.DeleteFunc(slices.Clone(*cur), func(s balancer.SubConn) bool { return s == sc })
		v.self.Store(&next)
	}
}

// selfAddress returns the test of whether a peer address ("ip:port") is
// this replica's own peer listener at listen: the same port, on one of
// the host's own addresses (every interface's when listen names none).
// A peer named by a host name is never taken for this replica: it is
// reached over its peer port, as any other.
func selfAddress(listen string) (func(addr string) bool, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("peers: listen address %q: %w", listen, err)
	}
	var own []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
		own = []netip.Addr{ip.Unmap()}
	} else {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("peers: this host's addresses: %w", err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					own = append(own, ip.Unmap())
				}
			}
		}
	}
	return func(addr string) bool {
		ap, err := netip.ParseAddrPort(addr)
		return err == nil && fmt.Sprint(ap.Port()) == port && slices.Contains(own, ap.Addr().Unmap())
	}, nil
}

// ringBuilder builds the peer connection's balancer.
type ringBuilder struct{}

// ringConfig is the balancer's parsed config: its Ring's view, and
// ring_hash's own config, hashing HashHeader.
type ringConfig struct {
	serviceconfig.LoadBalancingConfig
	view  *view
	child serviceconfig.LoadBalancingConfig
}

// Name implements balancer.Builder.
func (ringBuilder) Name() string { return balancerName }

// ParseConfig implements balancer.ConfigParser: {"view": id}.
func (ringBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	var c struct {
		View string `json:"view"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		return nil, fmt.Errorf("%s config: %w", balancerName, err)
	}
	v, ok := views.Load(c.View)
	if !ok {
		return nil, fmt.Errorf("%s config: no open ring %q", balancerName, c.View)
	}
	child, err := balancer.Get(ringhash.Name).(balancer.ConfigParser).ParseConfig(
		json.RawMessage(fmt.Sprintf(`{"requestHashHeader":%q}`, HashHeader)))
	if err != nil {
		return nil, fmt.Errorf("%s config: %w", balancerName, err)
	}
	return &ringConfig{view: v.(*view), child: child}, nil
}

// Build implements balancer.Builder: ring_hash, under a ClientConn that
// tells the view what it does, and a resolution every ResolveInterval.
func (ringBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	b := &ringBalancer{cc: cc, stop: make(chan struct{})}
	b.Balancer = balancer.Get(ringhash.Name).Build(&viewConn{ClientConn: cc, b: b}, opts)
	b.polling.Go(b.poll)
	return b
}

// ringBalancer is ring_hash, which it embeds, with the view of its Ring.
type ringBalancer struct {
	balancer.Balancer
	cc      balancer.ClientConn
	view    atomic.Pointer[view]
	stop    chan struct{}
	polling sync.WaitGroup
}

// UpdateClientConnState passes the resolver's replicas to ring_hash, with
// its own config, and counts them.
func (b *ringBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	cfg, ok := s.BalancerConfig.(*ringConfig)
	if !ok {
		return fmt.Errorf("%s: config %T is not its own", balancerName, s.BalancerConfig)
	}
	b.view.Store(cfg.view)
	if last := cfg.view.previous; last != nil {
		last.follow(s.ResolverState)
	}
	n := len(s.ResolverState.Endpoints)
	if n == 0 {
		n = len(s.ResolverState.Addresses)
	}
	cfg.view.members.Store(int64(n))
	s.BalancerConfig = cfg.child
	return b.Balancer.UpdateClientConnState(s)
}

// Close stops the resolutions and ring_hash; the view has no picker until
// the next balancer gives it one.
func (b *ringBalancer) Close() {
	close(b.stop)
	b.polling.Wait()
	if v := b.view.Load(); v != nil {
		v.picker.Store(nil)
	}
	b.Balancer.Close()
}

// poll asks the resolver to resolve again every ResolveInterval, so that a
// replica that joins is seen within about that long: nothing else tells
// the others (a replica that leaves closes its connections, on which
// grpc-go resolves again by itself). A fixed list ignores it.
func (b *ringBalancer) poll() {
	t := time.NewTicker(ResolveInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.cc.ResolveNow(resolver.ResolveNowOptions{})
		}
	}
}

// viewConn is the ClientConn ring_hash is given: gRPC's own, which it
// embeds, and which it tells the view about every picker and every
// SubConn to this replica itself.
type viewConn struct {
	balancer.ClientConn
	b *ringBalancer
}

// NewSubConn creates a SubConn, and records it in the view when it reaches
// this replica itself, until it is shut down.
func (c *viewConn) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	v := c.b.view.Load()
	if v == nil || len(addrs) != 1 || !v.isSelf(addrs[0].Addr) {
		//lint:ignore SA1019 ring_hash's children call it; this only passes it on
		return c.ClientConn.NewSubConn(addrs, opts)
	}
	var mu sync.Mutex // orders the listener after the SubConn is known
	mu.Lock()
	var sc balancer.SubConn
	listener := opts.StateListener
	opts.StateListener = func(s balancer.SubConnState) {
		if s.ConnectivityState == connectivity.Shutdown {
			mu.Lock()
			v.dropSelf(sc)
			mu.Unlock()
		}
		if listener != nil {
			listener(s)
		}
	}
	//lint:ignore SA1019 ring_hash's children call it; this only passes it on
	sc, err := c.ClientConn.NewSubConn(addrs, opts)
	if err == nil {
		v.addSelf(sc)
	}
	mu.Unlock()
	return sc, err
}

// UpdateState gives the view ring_hash's latest picker before gRPC.
func (c *viewConn) UpdateState(s balancer.State) {
	if v := c.b.view.Load(); v != nil {
		v.picker.Store(&s.Picker)
	}
	c.ClientConn.UpdateState(s)
}
