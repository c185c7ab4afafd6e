package proxy

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/peers"
)

// peerKeyPrefix starts the keys of calls served for peers (origin). No key
// requestkey makes starts with it: a key starts with the method's length.
const peerKeyPrefix = "\x00"

// owners says where the shared call of a key is made, in groupcache's
// PeerPicker shape.
type owners interface {
	// place returns where key's shared call is made, and under which key
	// its flight and answer are kept. It reads key, the call's, only while
	// it runs.
	place(key []byte) placement
}

// placement is where a key's shared call is made.
type placement struct {
	// key is the key its flight and answer are kept under: a key this
	// replica owns shares the entries of the calls peers forward here. It
	// may be the call's key itself, in a buffer reused once the call is
	// served: what outlives that keeps string(key).
	key []byte
	// hash is the key's hash (peers.KeyHash); "" without peers.
	hash string
	// owner is the connection that reaches the key's owner; nil when the
	// call is made here: without peers, for a peer, or for a key this
	// replica owns.
	owner grpc.ClientConnInterface
	// owned: this replica owns the key (observed as OwnerSelf).
	owned bool
	// another: owner is known to reach another replica. False while the
	// ring's connection to the owner is being made: the owner may be this
	// replica itself, so the call goes through owner, whatever its
	// method's forwarding says, and meets the calls of the key there.
	another bool
}

// noPeers makes every shared call here: a sidecar without peers, and every
// call a peer forwarded.
type noPeers struct{}

func (noPeers) place(key []byte) placement { return placement{key: key} }

// Peers is the connection to the other replicas (implemented by
// *peers.Ring): its calls reach the owner of their key, by the hash in
// peers.HashHeader.
type Peers interface {
	grpc.ClientConnInterface
	// Owner reports whether this replica owns the key with hash (self):
	// its call is made here, without a call to its own peer port; and
	// whether that is known (known): false while the connection to the
	// owner, maybe this replica itself, is being made.
	Owner(hash string) (self, known bool)
	// Previous returns the connection to the owner the key with hash had
	// before the replicas last changed, while they changed recently and
	// that owner is another replica; nil otherwise (handoff.go). ready is
	// false while the connection to that owner is not made.
	Previous(hash string) (conn grpc.ClientConnInterface, ready bool)
}

// peerRing places every key on its owner among the replicas, by the
// connection's ring_hash balancer: a key this replica owns is served here,
// with the entries of the calls peers forward for it.
type peerRing struct{ ring Peers }

func (r peerRing) place(key []byte) placement {
	hash := peers.KeyHash(key)
	self, known := r.ring.Owner(hash)
	if self {
		owned := append(append(make([]byte, 0, len(peerKeyPrefix)+len(key)), peerKeyPrefix...), key...)
		return placement{key: owned, hash: hash, owned: true}
	}
	return placement{key: key, hash: hash, owner: r.ring, another: known}
}

// Who answered a call forwarded to its key's owner, as passed to
// Observer.ObservePeerCall.
const (
	// OwnerSelf: this sidecar owns the key, and made its call (on its own
	// peer port only while its ring's connection to itself was being made).
	OwnerSelf = "self"
	// OwnerPeer: another replica owns the key and answered.
	OwnerPeer = "peer"
	// OwnerNone: no owner's answer came (for a stream, its end): the call
	// fell back to the local backend, its caller left first, or the owner
	// went away in the middle of a stream.
	OwnerNone = "none"
	// OwnerKept: another replica owns the key, but the call was made here:
	// its method's forwarded calls rarely share (the forwarding package).
	OwnerKept = "kept"
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
//
// A refresh (the forwarder holds a stale or purged copy of the answer) asks
// the owner for a fresh answer. The answer is kept for no longer than the
// owner keeps it (its life trailer).
func (p *Proxy) invokeOwner(ctx context.Context, pl placement, c *unaryCall, refresh bool) (*Response, error) {
	var header, trailer metadata.MD
	var reply frame
	method := c.method
	opts := append(p.callOptions(c.sub, authority(c.md)), grpc.Header(&header), grpc.Trailer(&trailer))
	var marks []string
	if refresh {
		marks = []string{peers.RefreshHeader}
	}
	err := pl.owner.Invoke(toOwner(ctx, c.md, pl.hash, marks...), method, &frame{payload: c.payload}, &reply, opts...)
	if err != nil && !reachedOwner(ctx, trailer) {
		p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), true)
		return p.invokeHere(ctx, placement{}, c)
	}
	owner := p.owner(trailer)
	if owner == OwnerPeer {
		p.forwarding.Observe(method, len(trailer.Get(peers.SharedHeader)) > 0)
	}
	p.observer.ObservePeerCall(method, owner, status.Code(err), false)
	life, aged := parseLife(trailer.Get(peers.LifeHeader))
	resp, err := p.response(reply.payload, header, trailer, err)
	resp.life, resp.aged = life, aged
	resp.forwarded = owner == OwnerPeer
	return resp, err
}

// markForPeer sets the trailers of resp, the answer to a call a peer
// forwarded, served as outcome: that it shared another's backend call, when
// it did (the forwarding package counts it), and what is left of its life
// here.
func (p *Proxy) markForPeer(ss grpc.ServerStream, resp *Response, outcome collapse.Outcome, left collapse.Windows, o *origin) {
	if resp == nil {
		return
	}
	if shares(outcome) {
		ss.SetTrailer(o.shared)
	}
	ss.SetTrailer(metadata.MD{peers.LifeHeader: []string{formatLife(left)}})
}

// formatLife writes windows as the value of peers.LifeHeader: their
// nanoseconds, TTL, stale-while-revalidate and stale-if-error.
func formatLife(w collapse.Windows) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, int64(w.TTL), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(w.StaleWhileRevalidate), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(w.StaleIfError), 10)
	return string(b)
}

// parseLife reads the value of peers.LifeHeader an owner sent, and reports
// whether it sent one it could read. A value it cannot read counts as a
// life of zero: the answer is shared, not kept.
func parseLife(vs []string) (collapse.Windows, bool) {
	if len(vs) == 0 {
		return collapse.Windows{}, false
	}
	var d [3]time.Duration
	parts := strings.Split(vs[0], ",")
	if len(vs) != 1 || len(parts) != len(d) {
		return collapse.Windows{}, true
	}
	for i, part := range parts {
		n, err := strconv.ParseInt(part, 10, 64)
		if err != nil || n < 0 {
			return collapse.Windows{}, true
		}
		d[i] = time.Duration(n)
	}
	return collapse.Windows{TTL: d[0], StaleWhileRevalidate: d[1], StaleIfError: d[2]}, true
}

// invokeHere makes c's call placed by pl here, on its backend (the local
// one, or the application's handler, for a call the library serves), and
// counts it when the key is another replica's (kept, not forwarded) or
// this replica's own.
func (p *Proxy) invokeHere(ctx context.Context, pl placement, c *unaryCall) (*Response, error) {
	resp, err := p.invoke(ctx, c)
	switch {
	case pl.owned:
		p.observer.ObservePeerCall(c.method, OwnerSelf, status.Code(err), false)
	case pl.owner != nil:
		p.observer.ObservePeerCall(c.method, OwnerKept, status.Code(err), false)
	}
	return resp, err
}

// openOwner opens a replayed stream's record through the key's owner, as
// invokeOwner makes a unary call: the owner serves the stream from its own
// record of the key, and its header, messages, trailer and status are
// relayed as they come. The record is kept no longer than what the owner's
// trailer says is left of the life of its own (upstream.Left). A stream
// that ended without a header and without the owner's trailer reached no
// owner: it is opened on backend, the local one, instead.
func (p *Proxy) openOwner(ctx context.Context, pl placement, backend grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD) (*upstream, error) {
	var cs grpc.ClientStream
	// The owner's mark is in the trailer, read once the stream has ended.
	ended := func(code codes.Code) { p.observer.ObservePeerCall(method, p.owner(cs.Trailer()), code, false) }
	cs, err := p.sendRequest(toOwner(ctx, md, pl.hash), pl.owner, method, sub, payload, md)
	if err == nil {
		// Header blocks until the owner answers; nil means the stream
		// ended without a header, its status yet to be read.
		if header, _ := cs.Header(); header != nil {
			return &upstream{p: p, cs: cs, ended: ended, owner: true}, nil
		}
		var none frame
		err = cs.RecvMsg(&none) // a stream without a header has no message
		if reachedOwner(ctx, cs.Trailer()) {
			return &upstream{p: p, cs: cs, ended: ended, end: err, owner: true}, nil
		}
	} else if ctx.Err() != nil {
		p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), false)
		return nil, err
	}
	p.observer.ObservePeerCall(method, OwnerNone, status.Code(err), true)
	return p.openUpstream(ctx, backend, method, sub, payload, md)
}

// toOwner returns ctx with the metadata of a call forwarded to the owner of
// the key with hash: md's forwardable headers, the hop marker that makes the
// owner serve it with its own backend, the key's hash, by which the peer
// connection's ring_hash balancer picks the owner, and the markers of marks
// (peers.RefreshHeader for a refresh, peers.HandoffHeader for a handoff).
func toOwner(ctx context.Context, md metadata.MD, hash string, marks ...string) context.Context {
	out := forwardable(md)
	out[peers.HopHeader] = []string{"1"}
	out[peers.HashHeader] = []string{hash}
	for _, m := range marks {
		out[m] = []string{"1"}
	}
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
// backend, never forwarding it again (Proxy.forwarded; Proxy.refreshed for
// a refresh, never answered from a stale copy). Every answer carries the
// owner's trailer.
func (p *Proxy) handlePeer(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errNoMethod
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	switch {
	case len(md.Get(peers.HopHeader)) == 0:
		return errNotForwarded
	case len(md.Get(peers.HandoffHeader)) > 0:
		return p.handOver(ss, method)
	case len(md.Get(peers.RefreshHeader)) > 0:
		return p.serve(ss, method, &p.refreshed)
	}
	return p.serve(ss, method, &p.forwarded)
}
