package proxy

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/replay"
)

// peerKeyPrefix starts the keys of calls served for peers (origin). No key
// requestkey makes starts with it: a key starts with the method's length.
const peerKeyPrefix = "\x00"

// owners picks the connection that reaches the owner of a key, in
// groupcache's PeerPicker shape: ok is false when the key's shared call is
// made here, with the local backend.
type owners interface {
	pick(key string) (cc grpc.ClientConnInterface, ok bool)
}

// noPeers makes every shared call here: a sidecar without peers, and every
// call a peer forwarded.
type noPeers struct{}

func (noPeers) pick(string) (grpc.ClientConnInterface, bool) { return nil, false }

// peerRing reaches every key's owner through one connection to the
// replicas, whose ring_hash balancer picks the owner by the key's hash
// (toOwner): the owner may be this sidecar itself, over its own peer port.
type peerRing struct{ cc grpc.ClientConnInterface }

func (r peerRing) pick(string) (grpc.ClientConnInterface, bool) { return r.cc, true }

// Who answered a call forwarded to its key's owner, as passed to
// Observer.ObservePeerCall.
const (
	// OwnerSelf: this sidecar owns the key and answered on its own peer port.
	OwnerSelf = "self"
	// OwnerPeer: another replica owns the key and answered.
	OwnerPeer = "peer"
	// OwnerNone: no owner's answer came (for a stream, its end): the call
	// fell back to the local backend, its caller left first, or the owner
	// went away in the middle of a stream.
	OwnerNone = "none"
)

// errNotForwarded answers a call to the peer port that no peer forwarded.
var errNotForwarded = status.Error(codes.PermissionDenied, "collapser: the peer port serves only calls forwarded by peers")

// invokeOwner makes the shared call of key through the key's owner: the
// peer connection's ring_hash balancer picks it by the key's hash, and the
// hop marker makes the owner serve it with its own backend. The owner's
// answer, its backend's status included, is relayed as it came. A call
// that did not reach an owner (no owner's trailer on its error: the peer is
// gone, refused the connection, or the connection broke) is made to the
// local backend instead, with the time the call has left.
func (p *Proxy) invokeOwner(ctx context.Context, cc grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD, key string) (*Response, error) {
	var header, trailer metadata.MD
	var reply frame
	opts := append(p.callOptions(sub, authority(md)), grpc.Header(&header), grpc.Trailer(&trailer))
	err := cc.Invoke(toOwner(ctx, md, key), method, &frame{payload: payload}, &reply, opts...)
	if err != nil && !reachedOwner(ctx, trailer) {
		p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), true)
		return p.invoke(ctx, method, sub, payload, md)
	}
	p.observer.ObservePeerCall(method, p.owner(trailer), status.Code(err), false)
	return p.response(reply, header, trailer, err)
}

// openOwner opens a replayed stream's record through the key's owner, as
// invokeOwner makes a unary call: the owner serves the stream from its own
// record of the key, and its header, messages, trailer and status are
// relayed as they come. A stream that ended without a header and without
// the owner's trailer reached no owner: it is opened to the local backend
// instead.
func (p *Proxy) openOwner(ctx context.Context, cc grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD, key string) (replay.Upstream, error) {
	var cs grpc.ClientStream
	// The owner's mark is in the trailer, read once the stream has ended.
	ended := func(code codes.Code) { p.observer.ObservePeerCall(method, p.owner(cs.Trailer()), code, false) }
	cs, err := p.sendRequest(toOwner(ctx, md, key), cc, method, sub, payload, md)
	if err == nil {
		// Header blocks until the owner answers; nil means the stream
		// ended without a header, its status yet to be read.
		if header, _ := cs.Header(); header != nil {
			return &upstream{cs: cs, ended: ended}, nil
		}
		var none frame
		err = cs.RecvMsg(&none) // a stream without a header has no message
		if reachedOwner(ctx, cs.Trailer()) {
			return &upstream{cs: cs, ended: ended, end: err}, nil
		}
	} else if ctx.Err() != nil {
		p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), false)
		return nil, err
	}
	p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), true)
	return p.openUpstream(ctx, method, sub, payload, md)
}

// toOwner returns ctx with the metadata of a call forwarded to the owner of
// key: md's forwardable headers, the hop marker that makes the owner serve
// it with its own backend, and the key's hash, by which the peer
// connection's ring_hash balancer picks the owner.
func toOwner(ctx context.Context, md metadata.MD, key string) context.Context {
	out := forwardable(md)
	out[peers.HopHeader] = []string{"1"}
	out[peers.HashHeader] = []string{peers.KeyHash(key)}
	return metadata.NewOutgoingContext(ctx, out)
}

// reachedOwner reports whether a forwarded call that failed was answered
// by an owner (its trailer says so), or ended by its own context: in both
// cases its status is the answer. Otherwise the peer is gone, refused the
// connection, or the connection broke.
func reachedOwner(ctx context.Context, trailer metadata.MD) bool {
	return len(trailer.Get(peers.ServedHeader)) > 0 || ctx.Err() != nil
}

// owner says who answered a forwarded call by its trailer: this proxy, by
// its own mark, another replica, by another one, or no owner.
func (p *Proxy) owner(trailer metadata.MD) string {
	switch mark := trailer.Get(peers.ServedHeader); {
	case len(mark) == 0:
		return OwnerNone
	case mark[0] == p.served.Get(peers.ServedHeader)[0]:
		return OwnerSelf
	default:
		return OwnerPeer
	}
}

// handlePeer serves a call a peer forwarded because this sidecar owns its
// key: through the same collapse group as the callers' own calls (so the
// owner's callers and every peer's share one backend call), with the local
// backend, never forwarding it again (Proxy.forwarded). Every answer carries
// the owner's trailer.
func (p *Proxy) handlePeer(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errNoMethod
	}
	if md, _ := metadata.FromIncomingContext(ss.Context()); len(md.Get(peers.HopHeader)) == 0 {
		return errNotForwarded
	}
	return p.serve(ss, method, &p.forwarded)
}
