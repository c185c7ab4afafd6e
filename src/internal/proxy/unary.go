package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/callstatus"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// The statuses grpc-go answers a unary call with that does not carry
// exactly one request message; the proxy answers the same.
var (
	errNoRequest = status.Error(codes.Internal,
		"cardinality violation: received no request message from non-client-streaming RPC")
	errManyRequests = status.Error(codes.Internal,
		"cardinality violation: received multiple request messages for non-client-streaming RPC")
)

// unary serves a call through the collapse group: callers with the same key
// share one backend call, and each gets exactly what that call produced.
func (p *Proxy) unary(ss grpc.ServerStream, method string, rule policy.Rule, o *origin) error {
	ctx := ss.Context()
	md := incoming(ctx, o)
	buf := keyBuffers.Get().(*[]byte)
	payload, sub, key, err := p.receiveKeyed(ss, method, rule, md, o, o.calls, (*buf)[:0])
	if err != nil {
		return err
	}
	c := unaryCall{method: method, rule: rule, sub: sub, payload: payload, md: md, key: key}
	resp, outcome, left, err := share(p, ctx, &c, p.backend, o)
	releaseKey(buf, key)
	var entry string
	if o.mark != nil {
		p.markForPeer(ss, resp, outcome, left, o)
	} else if resp != nil {
		entry = p.answerEntry(o, outcome, left, resp)
	}
	err = p.reply(ss, method, outcome, resp, err, o, entry)
	p.report(ctx, o.calls, method, outcome.String(), callerCode(ctx, err), answeredBy(outcome, resp))
	return err
}

// unaryCall is one unary call on its way through the engine, whichever
// front received it: the proxy's own server, or an interceptor of the
// library (Call).
type unaryCall struct {
	method string
	rule   policy.Rule
	// sub, payload and md are the call's content-subtype, request message
	// and the metadata its key is derived from (incoming).
	sub     string
	payload []byte
	md      metadata.MD
	// key is the call's key, which starts with its origin's prefix, only
	// read while share serves the call (its buffer is reused after).
	key []byte
	// backend is the connection its call is made on when it is made here
	// (share sets it for the call it makes): the proxy's backend, or for a
	// call the library serves, one that reaches the application's own
	// handler in the process (Call).
	backend grpc.ClientConnInterface
}

// share serves c, a call from o, through the collapse group: callers with
// the same key share one call, made where o's owners say (through the
// key's owner, or here, on backend); a call of its own (the one it joined
// was private) is always made here. It returns the answer, how it was
// served, and what is left of the answer's windows when a peer keeps a
// copy of it.
//
// It is generic in backend's type so that a backend passed by value (the
// library's, one per call) becomes an interface, a copy on the heap, only
// in a call the caller makes: hits and joins do not pay for it.
func share[B grpc.ClientConnInterface](p *Proxy, ctx context.Context, c *unaryCall, backend B, o *origin) (*Response, collapse.Outcome, collapse.Windows, error) {
	pl := o.owners.place(c.key)
	if resp, left, ok := p.hit(pl.key, o); ok {
		if pl.owner != nil {
			p.forwarding.Shared(c.method, pl.hash) // a key asked for again and again
		}
		return resp, collapse.Hit, left, nil
	}
	// A hit is looked up by the key's bytes; what may outlive the call
	// (the flight, the answer kept, a refresh) holds a string of its own.
	key := string(pl.key)
	pl.key = nil // the call, which may outlive the buffer, holds key
	// The call captures c's fields rather than c: a closure holds values
	// this small itself, where c would be one more allocation per call,
	// hits and joins included.
	method, rule, sub, payload, md := c.method, c.rule, c.sub, c.payload, c.md
	owned := o.owned && p.ring != nil
	call := func(cc *collapse.Call) (resp *Response, err error) {
		// Only a call this caller makes runs this: hits and joins skip the copy.
		p.observeRefresh(method, cc)
		c := &unaryCall{method: method, rule: rule, sub: sub, payload: payload, md: md, backend: backend}
		callCtx, span := p.startCall(ctx, cc.Context())
		defer func() { endCall(span, resp, err) }()
		switch {
		case cc.Own():
			// For this caller alone: made here, nothing to share or keep.
			return p.invokeHere(callCtx, placement{}, c)
		case pl.owner != nil && (!pl.another || p.forwarding.Forward(c.method, pl.hash)):
			resp, err = p.invokeOwner(callCtx, pl, c, cc.Refresh())
		case (pl.owned || owned) && !cc.Refresh() && cc.Background() == collapse.Foreground:
			// A key this replica may have taken over: who may hold it first.
			if resp, err = p.takeOver(callCtx, ownedHash(pl.hash, key), owned, c); resp == nil {
				resp, err = p.invokeHere(callCtx, pl, c)
			}
		default:
			resp, err = p.invokeHere(callCtx, pl, c)
		}
		return p.answer(c.method, c.rule, resp, err)
	}
	var (
		resp    *Response
		outcome collapse.Outcome
		left    collapse.Windows
		err     error
	)
	switch {
	case !p.coherent():
		resp, outcome, err = p.group.Alone(ctx, c.rule.Call, call)
	case o.mark != nil || p.cacheStatus: // a peer keeps a copy, or a caller is told what is left of it
		cp := collapse.Copy{Fresh: o.fresh}
		resp, outcome, err = p.group.DoCopy(ctx, key, c.rule.Call, call, &cp)
		left = cp.Left
	default:
		resp, outcome, err = p.group.Do(ctx, key, c.rule.Call, call)
	}
	if pl.owner != nil && shares(outcome) {
		p.forwarding.Shared(c.method, pl.hash) // a key asked for again and again
	}
	return resp, outcome, left, err
}

// hit returns the answer kept under key (placement.key) that a call from o
// is served as a Hit that starts nothing (collapse.Group.Hit), and what is
// left of it when a peer keeps a copy of it; false when there is none, or
// the proxy serves nothing it keeps now. A hit readies no call: share
// builds one only for the calls that may need it.
func (p *Proxy) hit(key []byte, o *origin) (*Response, collapse.Windows, bool) {
	if !p.coherent() {
		return nil, collapse.Windows{}, false
	}
	if o.mark == nil && !p.cacheStatus {
		resp, ok := p.group.Hit(key, nil)
		return resp, collapse.Windows{}, ok
	}
	cp := collapse.Copy{Fresh: o.fresh}
	resp, ok := p.group.Hit(key, &cp)
	return resp, cp.Left, ok
}

// shares reports whether a call served with outcome shared another's backend
// call: it joined a flight, or was served a kept answer.
func shares(outcome collapse.Outcome) bool {
	switch outcome {
	case collapse.Join, collapse.Hit, collapse.Stale, collapse.StaleOnError:
		return true
	}
	return false
}

// receiveKeyed reads the call's one request message (receive) and returns
// it with its codec subtype and its key under rule, which starts with o's
// prefix, appended to dst. A request that cannot be read is counted on
// route, as an error.
func (p *Proxy) receiveKeyed(ss grpc.ServerStream, method string, rule policy.Rule, md metadata.MD, o *origin, route Route, dst []byte) (payload []byte, sub string, key []byte, err error) {
	payload, err = p.receive(ss.Context(), ss)
	if err != nil {
		p.report(ss.Context(), route, method, OutcomeError, callerCode(ss.Context(), err), producer{})
		return nil, "", nil, err
	}
	sub = contentSubtype(md)
	key = p.appendKey(append(dst, o.keyPrefix...), method, rule, sub, payload, md)
	return payload, sub, key, nil
}

// appendKey appends to dst the key of a call of method under rule, with
// payload in the codec of content-subtype sub and metadata md: the
// request's fields as its rule's schema encodes them (or its bytes,
// without one), and the headers the proxy's key rule keeps, credentials
// always.
func (p *Proxy) appendKey(dst []byte, method string, rule policy.Rule, sub string, payload []byte, md metadata.MD) []byte {
	var h requestkey.Headers
	for name, values := range md {
		p.keyRule.Keep(&h, name, values)
	}
	return p.appendKeyOf(dst, method, rule, sub, payload, &h)
}

// appendKeyOf is appendKey for a call whose headers the key rule kept are
// h.
func (p *Proxy) appendKeyOf(dst []byte, method string, rule policy.Rule, sub string, payload []byte, h *requestkey.Headers) []byte {
	if rule.Schema == nil {
		return h.AppendKey(dst, method, sub, payload)
	}
	buf := keyBuffers.Get().(*[]byte)
	*buf = rule.Schema.AppendKeyed((*buf)[:0], sub, payload)
	dst = h.AppendKey(dst, method, sub, *buf) // its own copy
	releaseKey(buf, *buf)
	return dst
}

// keyBuffers hold keys being built and used, and the request bytes they
// are built of (*[]byte).
var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// releaseKey gives buf back to keyBuffers, with used, what was appended to
// it, as its content: a buffer longer than maxKeyBuffer, which a large
// request grew, is left to the collector rather than kept.
func releaseKey(buf *[]byte, used []byte) {
	if cap(used) <= maxKeyBuffer {
		*buf = used
		keyBuffers.Put(buf)
	}
}

const maxKeyBuffer = 64 << 10

// receive reads the call's one request message, and checks that no second
// one follows, as grpc-go does for a unary method. It waits at most the
// receive timeout, or the caller's deadline when that comes first.
func (p *Proxy) receive(ctx context.Context, ss grpc.ServerStream) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= p.receiveTimeout {
		return receivePayload(ss) // the caller's deadline bounds the wait
	}
	type received struct {
		payload []byte
		err     error
	}
	done := make(chan received, 1)
	go func() {
		// Returning from the handler ends the stream, which ends this
		// receive: the goroutine never outlives the call.
		payload, err := receivePayload(ss)
		done <- received{payload, err}
	}()
	timer := time.NewTimer(p.receiveTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.payload, r.err
	case <-timer.C:
		return nil, status.Errorf(codes.DeadlineExceeded,
			"collapser: request message not received within %v (COLLAPSER_RECEIVE_TIMEOUT)", p.receiveTimeout)
	}
}

// receivePayload is receiveOne for a request the proxy keeps: a copy of
// its bytes, which may be shared and outlive the call.
func receivePayload(ss grpc.ServerStream) ([]byte, error) {
	var req frame
	if err := receiveOne(ss, &req); err != nil {
		return nil, err
	}
	return req.payload, nil
}

// receiveOne reads the one request message of a call into req (a *frame or
// a *passFrame), then expects the caller's half-close, as grpc-go's own
// handler of a unary method does: no message or a second one is the
// cardinality violation grpc-go answers.
func receiveOne(ss grpc.ServerStream, req any) error {
	if err := ss.RecvMsg(req); err != nil {
		if errors.Is(err, io.EOF) {
			return errNoRequest
		}
		return fmt.Errorf("proxy: receive request from caller: %w", err)
	}
	var extra passFrame
	switch err := ss.RecvMsg(&extra); {
	case err == nil:
		extra.free()
		return errManyRequests
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("proxy: receive request from caller: %w", err)
	}
	return nil
}

// invoke makes c's one backend call, on its backend. Its context is the
// collapse call's: it belongs to no caller, ends with the call's timeout
// and is cancelled when every caller waiting for it has left. The caller's
// authority and headers go with it (outgoing), unless the backend is a
// LocalBackend, which reads them itself. The error is the backend's status
// when it is not OK, so the group never keeps it; the Response carries it
// too, with the metadata the backend sent alongside.
func (p *Proxy) invoke(ctx context.Context, c *unaryCall) (*Response, error) {
	var (
		reply           []byte
		header, trailer metadata.MD
		err             error
	)
	start := time.Now()
	if local, ok := c.backend.(LocalBackend); ok {
		reply, header, trailer, err = local.RunLocal(ctx, c.method, c.payload)
	} else {
		reply, header, trailer, err = p.invokeRemote(ctx, c)
	}
	p.observer.ObserveBackendCall(ctx, c.method, status.Code(err), time.Since(start))
	return p.response(reply, header, trailer, err)
}

// LocalBackend is a backend in the process that finds its caller's
// metadata itself: the library's handler runs in the context of the call
// that led it. The proxy makes a call on it with the request's wire bytes
// alone, building no outgoing metadata and no call options for it.
type LocalBackend interface {
	grpc.ClientConnInterface
	// RunLocal runs method on request (its wire bytes) in ctx, the
	// collapse call's, and returns the reply's wire bytes and the header
	// and trailer set with it (maps of their own), or the call's error.
	RunLocal(ctx context.Context, method string, request []byte) (reply []byte, header, trailer metadata.MD, err error)
}

// invokeRemote makes c's call on its backend, a connection: with the
// caller's authority and forwardable headers (outgoing).
func (p *Proxy) invokeRemote(ctx context.Context, c *unaryCall) ([]byte, metadata.MD, metadata.MD, error) {
	x := &exchange{request: frame{payload: c.payload}}
	ctx, opts := p.outgoing(ctx, c.sub, c.md, x)
	err := c.backend.Invoke(ctx, c.method, &x.request, &x.reply, opts...)
	return x.reply.payload, x.header, x.trailer, err
}

// exchange is what a backend call sends and receives, in one allocation
// rather than one for each.
type exchange struct {
	request, reply  frame
	header, trailer metadata.MD
}

// outgoing returns the context and options of a backend call for a caller
// that sent md with content subtype sub: its authority and its forwardable
// headers, with x to receive the backend's. md is only read (incoming may
// return grpc-go's own map): the call gets a map of its own. It is a
// function of its own so that what it
// holds is off the stack while the call runs: the call runs deep in the
// caller's stack, below the collapse group's frames, and a deeper stack may
// have to grow (a copy of it) on every call.
func (p *Proxy) outgoing(ctx context.Context, sub string, md metadata.MD, x *exchange) (context.Context, []grpc.CallOption) {
	opts := append(p.callOptions(sub, authority(md)), grpc.Header(&x.header), grpc.Trailer(&x.trailer))
	return metadata.NewOutgoingContext(ctx, forwardable(md)), opts
}

// response is what a backend call that answered out (its wire bytes) with
// header and trailer, or failed with err, produced.
func (p *Proxy) response(out []byte, header, trailer metadata.MD, err error) (*Response, error) {
	tags := p.takeTags(header)
	resp := &Response{Header: kept(header), Trailer: kept(trailer), tags: tags}
	resp.Private = p.private.privateIn(resp.Header) || p.private.privateIn(resp.Trailer)
	if err != nil {
		resp.Err = status.Convert(err).Err()
		return resp, resp.Err
	}
	resp.Payload = out
	return resp, nil
}

// reply sends the caller, from o, what the shared call produced, or the
// status of why there is nothing to send: the caller's own context ended, or the call
// panicked (logged once, by its leader), found no slot, or exited.
func (p *Proxy) reply(ss grpc.ServerStream, method string, outcome collapse.Outcome, resp *Response, err error, o *origin, entry string) error {
	p.logPanic(method, outcome, err)
	if resp == nil { // no backend answer: the status says why
		return callstatus.Of(err).Err()
	}
	if err := p.sendHeader(ss, resp, o, entry); err != nil {
		return err
	}
	if resp.Err == nil {
		if err := ss.SendMsg(&frame{payload: resp.Payload}); err != nil {
			return fmt.Errorf("proxy: send response to caller: %w", refusedWrite(ss.Context(), err))
		}
	}
	ss.SetTrailer(resp.Trailer) // merged into the stream's own copy
	return resp.Err
}

// sendHeader sends the caller, from o, resp's header, if it has one (an
// answer without one may go as a trailers-only response), with entry, the
// caller's cache-status entry ("" for none), after its entries. The
// metadata maps are shared by every caller, and grpc-go only reads them:
// SendHeader writes a map as it is when the stream has no header set yet,
// where SetHeader would merge it into a copy of its own first.
func (p *Proxy) sendHeader(ss grpc.ServerStream, resp *Response, o *origin, entry string) error {
	if o.mark != nil && resp.tags.header != nil {
		// A forwarder keeps copies of its own: it needs the tags to find them.
		if err := ss.SetHeader(resp.tags.header); err != nil {
			return fmt.Errorf("proxy: set header for caller: %w", refusedWrite(ss.Context(), err))
		}
	}
	if err := sendStatusHeader(ss, resp.Header, entry, sendsHeader(resp, entry)); err != nil {
		return fmt.Errorf("proxy: send header to caller: %w", refusedWrite(ss.Context(), err))
	}
	return nil
}

// sendsHeader reports whether resp goes to a caller whose entry is entry
// (its cache-status entry, "" for none) with a header: when it has one, or
// a message to carry the entry in; an error answer without one goes as a
// trailers-only response, the entry in its trailer.
func sendsHeader(resp *Response, entry string) bool {
	return len(resp.Header) > 0 || (resp.Err == nil && entry != "")
}

// refusedWrite is the status of a write to the caller's stream (its
// header or a message) that failed. The transport refuses a write when the
// stream has ended: the caller has left or lost its connection, and what it
// got is its own call's end, so that is the status returned. grpc-go says
// so with the stream context's error, or, when it has marked the stream
// done a moment before it cancels that context, with INTERNAL ("SendHeader
// called multiple times", "Unexpected error from context packet"). A
// message over the send limit is the one refusal the caller is told of,
// with RESOURCE_EXHAUSTED, and it is returned as it is.
func refusedWrite(ctx context.Context, err error) error {
	if status.Code(err) == codes.ResourceExhausted {
		return err
	}
	return status.Errorf(callstatus.Ended(ctx), "%v", err)
}

// callerCode is the code of the status the caller got for err. An error
// that says the call was cancelled or ran out of time, when the caller's own
// context has ended, takes the code its client reported (callstatus.Ended):
// a caller whose deadline passed was told DEADLINE_EXCEEDED, whichever of
// its cancellation and its deadline the server saw first.
func callerCode(ctx context.Context, err error) codes.Code {
	code := callstatus.Code(err)
	if (code == codes.Canceled || code == codes.DeadlineExceeded) && ctx.Err() != nil {
		return callstatus.Ended(ctx)
	}
	return code
}
