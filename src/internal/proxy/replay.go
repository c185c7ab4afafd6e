package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/replay"
)

// serverStreamDesc is the backend stream of a replayed call: one request,
// any number of replies.
var serverStreamDesc = &grpc.StreamDesc{ServerStreams: true}

// replayStream serves a server-streaming call whose rule says replay:
// callers with the same key read one backend stream, from its first message
// (replayed from its record) to its end. A caller whose key's record takes
// no new reader (it outgrew its bounds, or its header is private) gets a
// stream of its own. The record reads its stream where o's owners say:
// through the key's owner (openOwner), or from the local backend. Streams
// are always forwarded: their callers share a record for as long as the
// stream lasts. A stream whose header names more tags than an answer may
// have is shared but not kept, and a copy of the owner's record is kept no
// longer than what the owner said is left of its life (upstream.Left): a
// stream served to a peer carries that in its trailer. A stream read here
// is opened on backend: the proxy's, or for the library, one that reaches
// the application's handler.
func (p *Proxy) replayStream(ss grpc.ServerStream, method string, rule policy.Rule, o *origin, backend grpc.ClientConnInterface) error {
	ctx := ss.Context()
	md := incoming(ctx, o)
	buf := keyBuffers.Get().(*[]byte)
	payload, sub, keyed, err := p.receiveKeyed(ss, method, rule, md, o, o.streams, (*buf)[:0])
	if err != nil {
		return err
	}
	if !p.coherent() {
		err = p.ownStream(ss, backend, method, sub, payload, md, p.statusFor(o, statusOwn))
		p.report(ctx, o.streams, method, replay.Own.String(), callerCode(ctx, err), producer{})
		return err
	}
	pl := o.owners.place(keyed)
	life := recordLife(pl, rule)
	key := string(pl.key)
	pl.key = nil // the stream may outlive the call: it holds key
	releaseKey(buf, keyed)
	owned := o.owned && p.ring != nil
	rd, outcome := p.streams.Join(key, life, func(rctx context.Context) (replay.Upstream, error) {
		// The record's stream is the child of the span of the caller that
		// opened it, to which the spans of its other readers link.
		ctx := p.underCaller(ctx, rctx)
		refreshing := replay.Refreshing(rctx)
		if refreshing {
			p.observer.ObserveRefresh(method, RefreshEarly)
		}
		var up *upstream
		var err error
		switch {
		case pl.owner != nil:
			up, err = p.openOwner(ctx, pl, backend, method, sub, payload, md)
		case (pl.owned || owned) && !refreshing:
			// A key this replica may have taken over: who may hold its
			// record first (handoff.go).
			if up = p.takeOverRecord(ctx, ownedHash(pl.hash, key), owned, method, sub, payload, md); up != nil {
				break
			}
			fallthrough
		default:
			up, err = p.openUpstream(ctx, backend, method, sub, payload, md)
			if pl.owned {
				p.observer.ObservePeerCall(method, OwnerSelf, status.Code(err), false)
			}
		}
		if err != nil {
			return nil, err
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
			return sourced{up, &producer{traceID: sc.TraceID(), spanID: sc.SpanID(), flags: sc.TraceFlags()}}, nil
		}
		return up, nil
	})
	var from producer
	if outcome != replay.Own {
		err = p.relay(ss, rd, o, p.statusFor(o, streamEntry(outcome)))
		if opener, ok := rd.Source().(*producer); ok && outcome != replay.Lead {
			from = *opener
		}
		rd.Close()
	}
	if outcome == replay.Own || errors.Is(err, replay.ErrPrivate) {
		outcome, from = replay.Own, producer{}
		err = p.ownStream(ss, backend, method, sub, payload, md, p.statusFor(o, statusOwn))
	}
	if o.mark != nil {
		// What is left of the record's life here, which the forwarder's
		// copy does not outlive: nothing of a stream of its own.
		var left time.Duration
		if outcome != replay.Own {
			left = rd.Left()
		}
		ss.SetTrailer(metadata.MD{peers.LifeHeader: []string{formatLife(collapse.Windows{TTL: left})}})
	}
	p.report(ctx, o.streams, method, outcome.String(), callerCode(ctx, err), from)
	return err
}

// recordLife returns how a record of the key placed by pl is kept when its
// stream ends well: for the rule's TTL, jittered as an answer's is (policy
// TTLJitter), and refreshed early on the key's grid when the rule says
// (EarlyRefresh), so that records made together neither expire nor come
// back to the backend together. A copy of the owner's record is neither:
// it lives no longer than what is left of the owner's (upstream.Left),
// which the owner refreshes.
func recordLife(pl placement, rule policy.Rule) replay.Life {
	if pl.owner != nil {
		return replay.Life{TTL: rule.Call.TTL}
	}
	h := xxhash.Sum64(pl.key)
	return replay.Life{TTL: collapse.Jittered(rule.Call.TTL, rule.Call.TTLJitter, h), EarlyRefresh: rule.Call.EarlyRefresh, Hash: h}
}

// sourced is a record's upstream that names the span of the caller that
// opened it (replay.Sourced): the readers that join or replay the record
// link to it. Only sampled opening spans are named; a kept record holds the
// pointer (a producer, 32 bytes).
type sourced struct {
	*upstream
	from *producer
}

// Source implements replay.Sourced.
func (s sourced) Source() any { return s.from }

// relay writes what rd reads to the caller, from o: the header (with
// entry, its cache-status entry, "" for none), every message, the trailer
// and the status. The tags header is taken out of the
// header, as it is of an answer's, unless the proxy forwards it or the
// caller is a peer: a forwarder keeps a record of its own, which a purge by
// tag must find too.
func (p *Proxy) relay(ss grpc.ServerStream, rd *replay.Reader, o *origin, entry string) error {
	ctx := ss.Context()
	header, err := rd.Header(ctx)
	if err != nil {
		if errors.Is(err, replay.ErrPrivate) {
			return err
		}
		return status.FromContextError(err).Err()
	}
	var out metadata.MD
	if header != nil {
		out = forwardable(header)
		if p.tagsHeader != "" && !p.forwardTags && o.mark == nil {
			delete(out, p.tagsHeader)
		}
	}
	if err := sendStatusHeader(ss, out, entry, header != nil); err != nil {
		return fmt.Errorf("proxy: send header to caller: %w", refusedWrite(ss.Context(), err))
	}
	for {
		msg, err := rd.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			trailer, err := rd.End()
			ss.SetTrailer(forwardable(trailer))
			return status.Convert(err).Err()
		case errors.Is(err, replay.ErrBehind):
			return status.Error(codes.ResourceExhausted, "collapser: this call fell behind the shared stream by more than its record holds")
		case err != nil:
			return status.FromContextError(err).Err()
		}
		if err := ss.SendMsg(&frame{payload: msg}); err != nil {
			return fmt.Errorf("proxy: send to caller: %w", refusedWrite(ss.Context(), err))
		}
	}
}

// openUpstream opens the stream of a record on backend and sends it the
// request. Its context belongs to no caller; the caller's authority and
// headers go with it.
func (p *Proxy) openUpstream(ctx context.Context, backend grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD) (*upstream, error) {
	ended := func(code codes.Code) { p.observer.ObserveBackendStream(method, code) }
	cs, err := p.sendRequest(metadata.NewOutgoingContext(ctx, forwardable(md)), backend, method, sub, payload, md)
	if err != nil {
		ended(status.Code(err))
		return nil, err
	}
	return &upstream{p: p, cs: cs, ended: ended}, nil
}

// sendRequest opens a stream on cc, the backend's connection or the
// peers', for one request and sends it; ctx carries the outgoing headers.
func (p *Proxy) sendRequest(ctx context.Context, cc grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD) (grpc.ClientStream, error) {
	cs, err := cc.NewStream(ctx, serverStreamDesc, method, p.callOptions(sub, authority(md))...)
	if err != nil {
		return nil, fmt.Errorf("proxy: open stream: %w", err)
	}
	if err := cs.SendMsg(&frame{payload: payload}); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("proxy: send request: %w", err)
	}
	// CloseSend never fails in grpc-go; a stream that already ended
	// reports its status to RecvMsg.
	_ = cs.CloseSend()
	return cs, nil
}

// ownStream serves a replayed method's call with a stream of its own on
// backend, its request already read, under the caller's context.
func (p *Proxy) ownStream(ss grpc.ServerStream, backend grpc.ClientConnInterface, method, sub string, payload []byte, md metadata.MD, entry string) error {
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), forwardable(md)))
	defer cancel()
	cs, err := p.sendRequest(ctx, backend, method, sub, payload, md)
	if err == nil {
		err = backendToCaller(cs, ss, entry)
	}
	p.observer.ObserveBackendStream(method, callerCode(ss.Context(), err))
	return err
}

// upstream is a stream a record reads: from the backend, or through the
// key's owner. ended is told the stream's code once, when it ends; end,
// when set, is how a stream whose status was read already ends.
type upstream struct {
	p     *Proxy
	cs    grpc.ClientStream
	ended func(codes.Code)
	end   error
	once  sync.Once
	// owner: the stream is the key's owner's, relayed (openOwner); its
	// trailer says what is left of the life of the owner's record.
	owner bool
	// overflow: the header named more tags than an answer may have; set by
	// Header, read by Left, both in the record's one reading goroutine.
	overflow bool
}

func (u *upstream) Header() (metadata.MD, error) {
	header, err := u.cs.Header()
	u.overflow = u.p.streamTags(header).overflow
	return header, err
}

func (u *upstream) Trailer() metadata.MD { return u.cs.Trailer() }

// Left implements replay.Aged: a stream whose header names more tags than
// an answer may have (MaxTags, MaxTagBytes) is not kept, as such an answer
// is not: a purge by a tag it could not record would miss it. A stream
// from the key's owner is kept no longer than what is left of the owner's
// record (its life trailer, as a unary answer's: only the TTL counts); one
// without that trailer (an older owner) says nothing.
func (u *upstream) Left() (time.Duration, bool) {
	if u.overflow || !u.owner {
		return 0, u.overflow
	}
	life, aged := parseLife(u.cs.Trailer().Get(peers.LifeHeader))
	return life.TTL, aged
}

// streamTags returns what the tags header of a stream's header says,
// leaving the header as it is (a record's header is shared by its readers).
func (p *Proxy) streamTags(header metadata.MD) tagged {
	if !p.hasTags(header) {
		return tagged{}
	}
	md := metadata.MD{}
	for _, h := range []string{p.tagsHeader, CacheGroupsHeader} {
		if vs, ok := header[h]; ok && h != "" {
			md[h] = vs
		}
	}
	return p.takeTags(md)
}

func (u *upstream) Recv() ([]byte, error) {
	var f frame
	err := u.end
	if err == nil {
		err = u.cs.RecvMsg(&f)
	}
	if err != nil {
		u.once.Do(func() {
			code := codes.OK
			if !errors.Is(err, io.EOF) {
				code = status.Code(err)
			}
			u.ended(code)
		})
		return nil, err
	}
	return f.payload, nil
}
