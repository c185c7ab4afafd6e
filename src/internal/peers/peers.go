// Package peers connects a sidecar to the other replicas of its Deployment,
// so that each key has one owner that makes the backend call for everyone.
//
// The owner of a key is chosen by grpc-go's own ring_hash balancer, given
// the hash of the key in a request header (gRFC A76's request hash header,
// no xDS): every replica that sees the same peers puts a key on the same
// one. When the owner's connection fails, ring_hash picks the next peer on
// the ring, so a key moves only when its owner goes. A forwarded call
// carries a hop marker: the peer listener serves it locally and never
// forwards it again, so replicas that disagree about who is a peer cannot
// make a loop. The owner marks every answer it sends, so a forwarder tells
// the backend's own status (relayed) from a failure to reach the owner
// (which it may answer from its own backend).
//
// The balancer is ring_hash under a view (ring.go): before a call, the
// sidecar asks ring_hash's own picker for the key's owner, and a key whose
// pick is the connection to this replica itself is served here, without a
// call to its own peer port. Every replica keeps asking ring_hash, so they
// agree on each key's owner whenever they see the same replicas.
//
// When the replicas change, keys move: to a replica that joins, and, as
// ring_hash's ring is shared out again, between the others. Each Ring keeps
// a second connection whose ring is the replicas as they were before the
// last change (previous.go), through which, for HandoffWindow, a key's new
// owner asks its previous owner for the answer it holds (Previous).
//
// Membership comes from a gRPC resolver: dns:/// for a headless Service, or
// a fixed list of addresses. The balancer has the resolver resolve again
// every ResolveInterval, and grpc-go resolves again when a connection is
// lost, so a replica that joins or leaves is seen within ResolveInterval of
// the resolver's answer changing (for a headless Service, of the pod's
// readiness reaching the cluster's DNS).
//
// Replicas trust no one else (Trust, auth.go): every call between them
// carries the release's peer token, checked before anything of it is read,
// and runs over mutual TLS when the release has certificates
// (tlsfiles.Source.Mutual: the CA and the release's identity, both ways).
package peers

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	// Registers the ring_hash balancer the peer connection is configured with.
	_ "google.golang.org/grpc/balancer/ringhash"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Headers the peers add to calls and answers. None of them is ever part of a
// key, sent to a backend or returned to a caller.
const (
	// HashHeader carries the hash of a forwarded call's key: ring_hash
	// picks the owner by it.
	HashHeader = "collapser-key-hash"
	// HopHeader marks a forwarded call.
	HopHeader = "collapser-hop"
	// ServedHeader is the trailer an owner puts on every answer it sends.
	// Its value is a token of the owner's own, drawn at random when it
	// starts, by which a forwarder tells an answer of its own (it owns the
	// key) from another replica's.
	ServedHeader = "collapser-peer-served"
	// SharedHeader is the trailer an owner adds to an answer that a
	// forwarded call shared (it joined a flight or was served from the
	// cache): forwarding it saved a backend call (the forwarding package).
	SharedHeader = "collapser-peer-shared"
	// RefreshHeader marks a forwarded call made to refresh a copy the
	// forwarder holds, stale or purged: the owner answers it with a fresh
	// answer, never from a stale copy of its own.
	RefreshHeader = "collapser-peer-refresh"
	// TokenHeader carries the release's peer token on every call to a peer
	// (Credentials, Authenticate).
	TokenHeader = "collapser-peer-token"
	// LifeHeader is the trailer an owner puts on every answer to a
	// forwarded unary call: what is left of the windows it serves the
	// answer for, so that a forwarder keeps its copy no longer (the
	// answer's age travels with it, as RFC 9111's Age does for HTTP).
	LifeHeader = "collapser-peer-life"
	// HandoffHeader marks a call that asks a key's previous owner for the
	// answer it holds (Ring.Previous): it is answered from that replica's
	// cache or not at all, never with a backend call. On the answer, the
	// trailer says when the answer is due for its early refresh.
	HandoffHeader = "collapser-peer-handoff"
)

// HeaderPrefix begins every header above: a name without it is none of
// them.
const HeaderPrefix = "collapser-"

// Headers lists the headers above.
var Headers = []string{HashHeader, HopHeader, ServedHeader, SharedHeader, RefreshHeader, TokenHeader, LifeHeader, HandoffHeader}

// Defaults and fixed settings of peer connections.
const (
	// DefaultListen is the address of the peer listener.
	DefaultListen = ":50053"
	// ResolveInterval is how often the peer connection resolves the
	// replicas again, and the shortest interval between two DNS
	// resolutions (grpc-go's default is 30 s; the sidecar sets this one at
	// start-up with dns.SetMinResolutionInterval): one DNS query per
	// replica every 2 s.
	ResolveInterval = 2 * time.Second
	// HandoffWindow is how long after the replicas changed (one joined or
	// left) a replica asks a key's previous owner (Ring.Previous) before
	// it makes a call for a key it owns: the keys it took over were read
	// on the previous owner until then, and their hot answers are read
	// again within seconds; past the window, a miss is a key nobody read
	// since, which the previous owner does not hold either.
	HandoffWindow = 30 * time.Second
	// keepaliveTime and keepaliveTimeout detect a peer that has gone without
	// closing its connection: its calls fail and fall back.
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// serviceConfig selects the peer balancer (ring.go) with the view id.
func serviceConfig(id string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:{"view":%q}}]}`, balancerName, id)
}

// staticScheme is the resolver scheme of a fixed list of peers.
const staticScheme = "collapser-peers"

// reconnect paces reconnection attempts to a peer that went away.
var reconnect = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}

// Ring is the connection to the replicas: calls made on it reach the owner
// of their key (HashHeader), and Owner tells, without a call, the keys
// this replica owns itself.
type Ring struct {
	*grpc.ClientConn
	view *view
	// previous is the ring of the replicas before they last changed
	// (Previous), which last makes.
	previous     *grpc.ClientConn
	previousView *view
	last         *lastRing
}

// Dial returns the connection to the peers at target: a gRPC target with a
// scheme ("dns:///collapser-peers.ns.svc.cluster.local:50053") or a comma
// list of ip:port (a host:port works too, but is never taken for this
// replica itself), with extra options besides its own: the transport and
// token (Trust.DialOptions), a stats handler that traces the calls. listen is this replica's own peer listener, by which it
// knows itself among the peers. It resolves the peers at once; each
// connection is made when a call first needs it.
func Dial(target, listen string, extra ...grpc.DialOption) (*Ring, error) {
	isSelf, err := selfAddress(listen)
	if err != nil {
		return nil, err
	}
	// The previous ring first: the main one's resolutions make its own.
	last := newLastRing()
	previous, err := dialRing(previousScheme+":///peers", &view{id: rand.Text(), isSelf: isSelf},
		append(extra[:len(extra):len(extra)], grpc.WithResolvers(last.resolver)))
	if err != nil {
		return nil, err
	}
	all, err := dialRing(target, &view{id: rand.Text(), isSelf: isSelf, previous: last}, extra)
	if err != nil {
		previous.Close()
		return nil, err
	}
	return &Ring{ClientConn: all.ClientConn, view: all.view, previous: previous.ClientConn, previousView: previous.view, last: last}, nil
}

// ringConn is a connection to the replicas under the view of its ring.
type ringConn struct {
	*grpc.ClientConn
	view *view
}

// dialRing connects to the replicas at target under the ring balancer,
// which tells v what it does.
func dialRing(target string, v *view, extra []grpc.DialOption) (ringConn, error) {
	opts := append(connOptions(),
		grpc.WithDefaultServiceConfig(serviceConfig(v.id)),
		// The resolver's service config is not looked up (ours is the default
		// above): grpc-go's DNS resolver would wait for a TXT record first,
		// seconds where names outside the cluster do not resolve.
		grpc.WithDisableServiceConfig(),
		// The ring and its resolutions live as long as the connection, used
		// or not: Owner answers from them.
		grpc.WithIdleTimeout(0),
	)
	opts = append(opts, extra...)
	if !strings.Contains(target, "://") {
		addrs, err := parseList(target)
		if err != nil {
			return ringConn{}, err
		}
		r := manual.NewBuilderWithScheme(staticScheme)
		r.InitialState(resolver.State{Endpoints: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = staticScheme + ":///peers"
	}
	views.Store(v.id, v)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		views.Delete(v.id)
		return ringConn{}, fmt.Errorf("peers %s: %w", target, err)
	}
	// Resolve now, so that the ring knows its replicas before the first call.
	cc.Connect()
	return ringConn{ClientConn: cc, view: v}, nil
}

// Close closes the connection and forgets its view.
func (c ringConn) Close() error {
	defer views.Delete(c.view.id)
	return c.ClientConn.Close()
}

// Owner reports whether ring_hash's pick puts the key with hash (KeyHash)
// on this replica (self): its shared call is made here, with no call to
// its own peer port. known is false while the pick is not known: the
// connection to the owner, which may be this replica itself, is being
// made (the pick started it).
func (r *Ring) Owner(hash string) (self, known bool) { return r.view.owner(hash) }

// Members returns how many replicas the resolver last named, this one
// included.
func (r *Ring) Members() int { return int(r.view.members.Load()) }

// Previous returns the connection that reaches the owner the key with
// hash had before the replicas last changed, for a while after they did
// (HandoffWindow): the ring of the replicas as they were, on a connection
// of its own (for a replica that has just joined, the ring the others had
// before it came). It returns nil when that owner is this replica itself
// (the key did not move), when the replicas have not changed since this
// replica started, and once the window has passed. ready is false while
// the connection to that owner is not made (asking starts it): a call on
// it then waits for the connection, which never comes if the owner is
// gone, and should be given a short deadline.
func (r *Ring) Previous(hash string) (conn grpc.ClientConnInterface, ready bool) {
	if !r.last.recent() {
		return nil, false
	}
	self, known := r.previousView.owner(hash)
	if self {
		return nil, false
	}
	return r.previous, known
}

// Close closes the connections.
func (r *Ring) Close() error {
	return errors.Join(ringConn{r.ClientConn, r.view}.Close(), ringConn{r.previous, r.previousView}.Close())
}

// connOptions are the options of every connection to peers but their
// transport (Trust.DialOptions): keepalive to notice a peer gone silently,
// and a paced reconnection.
func connOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnect, MinConnectTimeout: 2 * time.Second}),
	}
}

// parseList reads a comma list of host:port, one endpoint each.
func parseList(list string) ([]resolver.Endpoint, error) {
	var eps []resolver.Endpoint
	for item := range strings.SplitSeq(list, ",") {
		addr := strings.TrimSpace(item)
		if addr == "" {
			continue
		}
		if i := strings.LastIndexByte(addr, ':'); i <= 0 || i == len(addr)-1 {
			return nil, fmt.Errorf("peers: %q is not host:port", addr)
		}
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}})
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("peers: %q names no peer", list)
	}
	return eps, nil
}

// KeyHash returns the hash header value of a key: the same on every replica.
func KeyHash(key []byte) string {
	return strconv.FormatUint(xxhash.Sum64(key), 16)
}
