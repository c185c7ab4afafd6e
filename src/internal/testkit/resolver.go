package testkit

import (
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/resolver"
)

// Resolver is a gRPC resolver whose state a test sets, and which reaches
// every connection built with it (grpc-go's manual resolver reaches only
// the last one built): a replica's ring makes two, and a test may register
// it for several replicas' rings at once.
type Resolver struct {
	scheme string
	asked  atomic.Int64 // ResolveNow calls

	mu    sync.Mutex
	state resolver.State
	ccs   []resolver.ClientConn
}

// NewResolver returns a Resolver of scheme, whose connections start with
// state.
func NewResolver(scheme string, state resolver.State) *Resolver {
	return &Resolver{scheme: scheme, state: state}
}

// Build implements resolver.Builder: the connection gets the state now,
// and every state the test sets after.
func (r *Resolver) Build(_ resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ccs = append(r.ccs, cc)
	return r, cc.UpdateState(r.state)
}

// Scheme implements resolver.Builder.
func (r *Resolver) Scheme() string { return r.scheme }

// ResolveNow implements resolver.Resolver: it counts the calls (Asked).
func (r *Resolver) ResolveNow(resolver.ResolveNowOptions) { r.asked.Add(1) }

// Close implements resolver.Resolver.
func (r *Resolver) Close() {}

// Asked returns how many times a connection asked to resolve again.
func (r *Resolver) Asked() int64 { return r.asked.Load() }

// UpdateState gives every connection built with r state.
func (r *Resolver) UpdateState(state resolver.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = state
	for _, cc := range r.ccs {
		cc.UpdateState(state)
	}
}

// Endpoints is the resolver state of one endpoint per address.
func Endpoints(addrs ...string) resolver.State {
	var s resolver.State
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	return s
}
