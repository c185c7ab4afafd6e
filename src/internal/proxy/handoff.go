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

	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
)

// A warm handoff: when the replicas change (a rollout adds them one by one
// and takes the old ones away), keys move: to a replica that joins, and
// between the others, as ring_hash's ring is shared out again. A key's new
// owner does not hold its answer, which its previous owner still does. So
// for a while after a change (peers.HandoffWindow), the first call a
// replica would make for a key it owns asks the key's previous owner first
// (peers.Ring.Previous, nil where the key did not move), for the answer it
// holds as the key's owner, fresh, or nothing (handOver): the previous
// owner never makes a call for it. An answer it hands over is kept here
// for what is left of it, and refreshed early when it would have been
// refreshed there (collapse.Options.Handed); without one, the call is made
// here. A replica that leaves hands its keys over as long as it serves (a
// pod's preStop); once it is gone, the others keep the copies they were
// forwarded of its keys (peer.go) until its answers' early refreshes were
// due. A replayed stream's key moves alike: the record a new owner would
// open on its backend is asked of the previous owner first, which relays
// the record it keeps, if any (handOverRecord, takeOverRecord).
//
// The replicas see a change each in its own time (each resolves them every
// peers.ResolveInterval). A replica that sees it first forwards a moved
// key to its new owner, which may not see it yet: in the new owner's own
// ring, another replica owns the key, and holds its answer. So a call
// forwarded here for a key this replica's ring puts on another replica
// asks that one first, as it would a previous owner.
//
// A purge must not be undone by a handoff: the previous owner may not have
// taken it yet when this replica has (each replica takes it in its own
// time). So for coherence.Lease after a purge this replica took was
// taken, it asks no previous owner: by then every replica has taken the
// purge, or has taken back everything it held (package coherence). A purge
// fetched late from a journal (a pod that starts fetches every purge the
// journals still hold) was taken when the journal took it (Purge.Age), not
// when it is applied here: one older than a lease holds no ask back.
// Taking everything back because a lease ran out, or because the
// replicas' name does not list this replica yet (a pod that starts), is
// no purge (TakeBackAll): the purges missed meanwhile are taken when it
// syncs again, before it serves or asks anything.

// Why a handoff was asked for, as passed to Observer.ObserveHandoff.
const (
	// HandoffTaken: the previous owner handed its answer over.
	HandoffTaken = "taken"
	// HandoffNone: the previous owner held no fresh answer for the key.
	HandoffNone = "none"
	// HandoffFailed: the previous owner could not be asked (it is gone, or
	// its connection failed), or did not answer in time; the call was made
	// here.
	HandoffFailed = "failed"
)

// HandoffResults lists every result, for metrics that export each one up
// front.
var HandoffResults = []string{HandoffTaken, HandoffNone, HandoffFailed}

// handoffTimeout bounds the wait for the replica asked, which answers from
// memory: one slower than that is gone, and the call is made here. The
// wait for one whose connection is not made yet is shorter (it may never
// be made: the replica left): handoffConnectTimeout, time enough for a
// connection and its TLS handshake to a replica that is there. Once such
// a wait failed, the replica asked is most likely gone (a pod's address
// that is gone answers nothing, and each of its keys would wait again):
// for handoffUnreachedPause after, no key is asked of a replica whose
// connection is not made; those calls are made here at once.
const (
	handoffTimeout        = time.Second
	handoffConnectTimeout = 200 * time.Millisecond
	handoffUnreachedPause = time.Second
)

// errNoHandoff answers a handoff call for a key this replica holds no
// fresh answer of.
var errNoHandoff = status.Error(codes.NotFound, "collapser: no fresh answer held for the key")

// asking returns the replica to ask for what it holds of the key with
// hash, a key this replica owns or was forwarded as its owner (holder),
// and how long to wait for its answer; nil when there is none to ask, or
// this replica took a purge less than coherence.Lease ago, or the
// connection to the replica is not made and such an ask failed less than
// handoffUnreachedPause ago. ready is false while that connection is not
// made.
func (p *Proxy) asking(hash string, forwarded bool) (prev grpc.ClientConnInterface, timeout time.Duration, ready bool) {
	if p.now().Sub(time.Unix(0, p.purgedAt.Load())) < coherence.Lease {
		return nil, 0, false
	}
	prev, ready = p.holder(hash, forwarded)
	switch {
	case prev == nil:
		return nil, 0, false
	case ready:
		return prev, handoffTimeout, true
	case p.now().Sub(time.Unix(0, p.unreachedAt.Load())) < handoffUnreachedPause:
		return nil, 0, false
	}
	return prev, handoffConnectTimeout, false
}

// asked observes the result of an ask of method's key (asking): taken,
// none when the replica asked answered that it holds nothing (its trailer,
// or the caller's context ended), failed otherwise, which pauses the asks
// on connections not made when the one asked was not ready.
func (p *Proxy) asked(ctx context.Context, method string, handed, ready bool, trailer metadata.MD) {
	switch {
	case handed:
		p.observer.ObserveHandoff(method, HandoffTaken)
	case reachedOwner(ctx, trailer):
		p.observer.ObserveHandoff(method, HandoffNone)
	default:
		p.observer.ObserveHandoff(method, HandoffFailed)
		if !ready {
			p.unreachedAt.Store(p.now().UnixNano())
		}
	}
}

// takeOver asks the replica that may hold the answer of the key with hash
// (asking) for it, and returns it (with its status), to be kept for what
// is left of it there; nil when it holds none, or there is none to ask.
func (p *Proxy) takeOver(ctx context.Context, hash string, forwarded bool, c *unaryCall) (*Response, error) {
	prev, timeout, ready := p.asking(hash, forwarded)
	if prev == nil {
		return nil, nil
	}
	// The ask's own deadline passing is a failure to reach the replica;
	// the caller's context ending is the caller's.
	askCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var header, trailer metadata.MD
	var reply frame
	opts := append(p.callOptions(c.sub, authority(c.md)), grpc.Header(&header), grpc.Trailer(&trailer))
	err := prev.Invoke(toOwner(askCtx, c.md, hash, peers.HandoffHeader), c.method, &frame{payload: c.payload}, &reply, opts...)
	refreshIn, handed := parseRefreshIn(trailer.Get(peers.HandoffHeader))
	life, aged := parseLife(trailer.Get(peers.LifeHeader))
	p.asked(ctx, c.method, handed && aged, ready, trailer)
	if !handed || !aged {
		return nil, nil
	}
	resp, err := p.response(reply.payload, header, trailer, err)
	resp.life, resp.aged, resp.handed, resp.refreshIn = life, true, true, refreshIn
	return resp, err
}

// takeOverRecord asks the replica that may hold the kept record of a
// replayed stream's key with hash (asking) for it, and returns its stream,
// relayed as the record's upstream: the record is kept for what is left of
// it there (upstream.Left), and refreshed early at the point of the key's
// grid it had there. The wait for the replica's header is bounded as a
// unary ask is; the record it relays comes from its memory. nil when it
// holds none, or there is none to ask: the record's stream is then opened
// on the backend.
func (p *Proxy) takeOverRecord(ctx context.Context, hash string, forwarded bool, method, sub string, payload []byte, md metadata.MD) *upstream {
	prev, timeout, ready := p.asking(hash, forwarded)
	if prev == nil {
		return nil
	}
	askCtx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(timeout, cancel)
	cs, err := p.sendRequest(toOwner(askCtx, md, hash, peers.HandoffHeader), prev, method, sub, payload, md)
	var header metadata.MD
	if err == nil {
		header, err = cs.Header()
	}
	inTime := late.Stop()
	// A record without a header (a stream that ended at once, well) comes
	// as its end: the replica's trailer says whether it handed it over.
	var end error
	var trailer metadata.MD
	if err == nil && header == nil {
		end = cs.RecvMsg(&frame{})
	}
	if cs != nil && header == nil {
		trailer = cs.Trailer()
	}
	handed := inTime && err == nil && (header != nil || len(trailer.Get(peers.HandoffHeader)) > 0)
	p.asked(ctx, method, handed, ready, trailer)
	if !handed {
		cancel()
		return nil
	}
	return &upstream{p: p, cs: cs, ended: func(codes.Code) { cancel() }, end: end, owner: true}
}

// holder returns the connection to the replica that may hold the answer
// of the key with hash, which this replica is to call as its owner: for a
// call forwarded here of a key this replica's own ring puts on another
// replica, that one (the forwarder saw the replicas change first); else
// the key's previous owner, for a while after the replicas changed
// (Peers.Previous); nil when there is none. ready is false while the
// connection to it is not made.
func (p *Proxy) holder(hash string, forwarded bool) (conn grpc.ClientConnInterface, ready bool) {
	if forwarded {
		if self, known := p.ring.Owner(hash); known && !self {
			return p.ring, true
		}
	}
	return p.ring.Previous(hash)
}

// ownedHash returns the hash of key, as kept (placement.key), one this
// replica owns: a caller's placed on this replica, or one a peer forwarded
// here, kept under peerKeyPrefix; hash, its placement's, when known.
func ownedHash(hash, key string) string {
	if hash != "" {
		return hash
	}
	return peers.KeyHash([]byte(strings.TrimPrefix(key, peerKeyPrefix)))
}

// handOver answers a peer that took over a key this replica owned
// (peers.HandoffHeader): with the fresh answer it holds for the key as its
// owner, what is left of its windows and when its early refresh is due;
// NOT_FOUND when it holds none. It makes no call, joins none, and does not
// count as a read (collapse.Group.Peek). A replayed stream's key is
// answered with its kept record (handOverRecord).
func (p *Proxy) handOver(ss grpc.ServerStream, method string) error {
	o := &p.forwarded
	ss.SetTrailer(o.mark)
	rule := p.rules.Rule(method)
	route := o.calls
	if rule.Action == policy.Replay {
		route = o.streams
	}
	_, _, keyed, err := p.receiveKeyed(ss, method, rule, incoming(ss.Context(), o), o, route, nil)
	if err != nil {
		return err
	}
	key := string(keyed)
	switch {
	case !p.coherent():
		return errNoHandoff
	case rule.Action == policy.Replay:
		return p.handOverRecord(ss, key, o)
	}
	h, ok := p.group.Peek(key)
	if !ok || h.Value.Private || rule.Action != policy.Collapse {
		return errNoHandoff
	}
	ss.SetTrailer(metadata.MD{
		peers.LifeHeader:    []string{formatLife(h.Left)},
		peers.HandoffHeader: []string{strconv.FormatInt(int64(h.RefreshIn), 10)},
	})
	return p.reply(ss, method, collapse.Hit, h.Value, nil, o, "")
}

// handOverRecord answers a peer that took over key, a replayed stream's,
// with the record this replica keeps of it (replay.Streams.Kept), relayed
// as it is replayed, with what is left of its life and when its early
// refresh is due; NOT_FOUND when it keeps none. It opens and joins no
// stream.
func (p *Proxy) handOverRecord(ss grpc.ServerStream, key string, o *origin) error {
	rd, refreshIn, ok := p.streams.Kept(key)
	if !ok {
		return errNoHandoff
	}
	defer rd.Close()
	ss.SetTrailer(metadata.MD{
		peers.LifeHeader:    []string{formatLife(collapse.Windows{TTL: rd.Left()})},
		peers.HandoffHeader: []string{strconv.FormatInt(int64(refreshIn), 10)},
	})
	return p.relay(ss, rd, o, "")
}

// parseRefreshIn reads the value of peers.HandoffHeader a previous owner
// sent with the answer it handed over: when its early refresh is due from
// now (0: none). False when there is none it could read.
func parseRefreshIn(vs []string) (time.Duration, bool) {
	if len(vs) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n), true
}

// handedOver returns, for collapse.Options.Handed, when r's early refresh
// is due from now, and whether r was handed over by a previous owner.
func handedOver(r *Response) (time.Duration, bool) {
	if r == nil || !r.handed {
		return 0, false
	}
	return r.refreshIn, true
}
