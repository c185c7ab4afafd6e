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
// Membership comes from a gRPC resolver: dns:/// for a headless Service, or
// a fixed list of addresses. grpc-go's DNS resolver resolves again when a
// connection is lost, at most every ResolveInterval; the peer listener ends
// every connection after MaxConnectionAge, so a replica that joins is seen
// within MaxConnectionAge (+10 % jitter) + ResolveInterval.
package peers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	// Registers the ring_hash balancer the peer connection is configured with.
	_ "google.golang.org/grpc/balancer/ringhash"
	"google.golang.org/grpc/credentials/insecure"
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
)

// Headers lists HashHeader, HopHeader and ServedHeader.
var Headers = []string{HashHeader, HopHeader, ServedHeader}

// Defaults and fixed settings of peer connections.
const (
	// DefaultListen is the address of the peer listener.
	DefaultListen = ":50053"
	// MaxConnectionAge is how long the peer listener keeps a connection
	// before it asks the peer to reconnect (GOAWAY), which makes the
	// peer's resolver look for replicas again. The calls open on it go on
	// to their end, over the old connection.
	MaxConnectionAge = 20 * time.Second
	// ResolveInterval is the shortest interval between two DNS resolutions
	// of the peers (grpc-go's default is 30 s; the sidecar sets this one at
	// start-up with dns.SetMinResolutionInterval).
	ResolveInterval = 5 * time.Second
	// keepaliveTime and keepaliveTimeout detect a peer that has gone without
	// closing its connection: its calls fail and fall back.
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// MembershipBound is how long a replica that joins may go unseen by the
// others: one connection age with its jitter, and one resolution interval.
const MembershipBound = MaxConnectionAge + MaxConnectionAge/10 + ResolveInterval

// serviceConfig selects ring_hash, hashing HashHeader.
var serviceConfig = fmt.Sprintf(`{"loadBalancingConfig":[{"ring_hash_experimental":{"requestHashHeader":%q}}]}`, HashHeader)

// staticScheme is the resolver scheme of a fixed list of peers.
const staticScheme = "collapser-peers"

// reconnect paces reconnection attempts to a peer that went away.
var reconnect = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}

// Dial returns the connection to the peers at target: a gRPC target with a
// scheme ("dns:///collapser-peers.ns.svc.cluster.local:50053") or a comma
// list of host:port, with extra options besides its own (a stats handler
// that traces the calls). It connects lazily.
func Dial(target string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := append(connOptions(),
		grpc.WithDefaultServiceConfig(serviceConfig),
		// The resolver's service config is not looked up (ours is the default
		// above): grpc-go's DNS resolver would wait for a TXT record first,
		// seconds where names outside the cluster do not resolve.
		grpc.WithDisableServiceConfig(),
	)
	opts = append(opts, extra...)
	if !strings.Contains(target, "://") {
		addrs, err := parseList(target)
		if err != nil {
			return nil, err
		}
		r := manual.NewBuilderWithScheme(staticScheme)
		r.InitialState(resolver.State{Endpoints: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = staticScheme + ":///peers"
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("peers %s: %w", target, err)
	}
	return cc, nil
}

// connOptions are the options of every connection to peers: plain text
// inside the pod network, keepalive to notice a peer gone silently, and a
// paced reconnection.
func connOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
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
func KeyHash(key string) string {
	return strconv.FormatUint(xxhash.Sum64String(key), 16)
}
