package proxy

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/callstatus"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/policy"
)

// The library's way into the engine. The proxy's own server receives
// frames and makes backend calls; the library's interceptors (package
// collapser) receive calls grpc-go has decoded, and their backend is a
// connection of their own that reaches the application's handler in the
// process (a server's) or the call's invoker (a client's). Both go through
// the same paths (share, replayStream): the same rules, keys, collapse
// group, records, freshness, privacy, tags, purges, metrics and spans. The
// connection's messages are the engine's frames (Wire, SetWire). A unary
// handler's connection is a LocalBackend too: its calls take the request's
// bytes alone, with no outgoing metadata built for them.

// Wire returns the wire bytes of msg, a message the engine sends on a
// backend connection or to a caller's stream, and false when msg is none
// of the engine's. msg keeps them.
func Wire(msg any) ([]byte, bool) {
	switch f := msg.(type) {
	case *frame:
		return f.payload, true
	case *passFrame:
		if len(f.data) == 1 {
			return f.data[0].ReadOnlyData(), true
		}
		return f.data.Materialize(), true
	}
	return nil, false
}

// SetWire makes b the wire bytes of msg, a message the engine receives
// from a backend connection or a caller's stream (it keeps b), and reports
// false when msg is none of the engine's.
func SetWire(msg any, b []byte) bool {
	switch f := msg.(type) {
	case *frame:
		f.payload = b
	case *passFrame:
		f.data = mem.BufferSlice{mem.SliceBuffer(b)}
	default:
		return false
	}
	return true
}

// Rule returns the rule of calls of method, as the proxy's own calls get
// it: the policy in force, for what is known of the method. It never blocks.
func (p *Proxy) Rule(method string) policy.Rule {
	return p.rules.Rule(method)
}

// Call serves a unary call of method, whose rule (Rule) collapses it, for
// the library, on p: callers whose method, request message (payload, the
// wire bytes of the message) and metadata md (credentials always) are the
// same share one call, made on backend, and its answer is kept, served stale
// and purged as the rule and the answer's cache-control say, exactly as
// for a call the proxy serves itself. The call is made with md's
// forwardable headers as its outgoing metadata; md is only read, and must
// stay unchanged while the call runs.
//
// It returns the answer (nil when there is none: the call failed before it
// answered, and the error says why), what the caller gets and the status
// the caller gets: the answer's (Response.Err) or why there is no answer.
// Every caller of one answer gets the same *Response, which is read-only.
//
// Pass backend by value when it is made for this one call: it is copied to
// the heap only when the caller makes the call (share), not for a hit or a
// join.
func Call[B grpc.ClientConnInterface](p *Proxy, ctx context.Context, method string, rule policy.Rule, payload []byte, md metadata.MD, backend B) (*Response, Sent, error) {
	sub := contentSubtype(md)
	buf := keyBuffers.Get().(*[]byte)
	return call(p, ctx, method, rule, payload, md, sub, buf, p.appendKey((*buf)[:0], method, rule, sub, payload, md), backend)
}

// Serve is Call for a call the library's server interceptor serves: its
// metadata md is the call's incoming metadata, as the proxy keys a call on
// its own port (incoming), which Serve reads from ctx, most often in the
// same pass that finds the headers of its key (incomingKeyed).
func Serve[B grpc.ClientConnInterface](p *Proxy, ctx context.Context, method string, rule policy.Rule, payload []byte, backend B) (*Response, Sent, error) {
	buf := keyBuffers.Get().(*[]byte)
	md, sub, key := p.incomingKeyed(ctx, (*buf)[:0], method, rule, payload)
	return call(p, ctx, method, rule, payload, md, sub, buf, key, backend)
}

// call is Call and Serve, once the call's key is built in buf, a buffer of
// keyBuffers it gives back.
func call[B grpc.ClientConnInterface](p *Proxy, ctx context.Context, method string, rule policy.Rule, payload []byte, md metadata.MD, sub string, buf *[]byte, key []byte, backend B) (*Response, Sent, error) {
	c := unaryCall{method: method, rule: rule, sub: sub, payload: payload, md: md, key: key}
	resp, outcome, left, err := share(p, ctx, &c, backend, &p.callers)
	releaseKey(buf, c.key)
	p.logPanic(method, outcome, err)
	var sent Sent
	if resp != nil {
		err = resp.Err
		sent = sentWith(resp, p.answerEntry(&p.callers, outcome, left, resp))
	} else {
		err = callstatus.Of(err).Err()
	}
	p.report(ctx, RouteCaller, method, outcome.String(), callerCode(ctx, err), answeredBy(outcome, resp))
	return resp, sent, err
}

// Sent is the header and trailer a caller of the library is sent with an
// answer: the answer's, with the caller's cache-status entry after their
// own entries where the proxy puts it (sendsHeader). Both are read-only:
// they may be the answer's own, every caller's.
type Sent struct {
	Header, Trailer metadata.MD
}

// sentWith returns what a caller whose entry is entry is sent with resp.
func sentWith(resp *Response, entry string) Sent {
	if sendsHeader(resp, entry) {
		return Sent{Header: withStatus(resp.Header, entry), Trailer: resp.Trailer}
	}
	return Sent{Header: resp.Header, Trailer: withStatus(resp.Trailer, entry)}
}

// Pass runs call, a call of method that its rule (Rule) does not collapse,
// for the library's client interceptor, as the proxy passes such a call
// through: counted as a backend call and a request passed through, and,
// when it succeeds and its rule names what it invalidates, followed by the
// purge on write before its status is returned. call returns the header
// its answer came with (its tags are read from it; nil for a trailers-only
// answer), its trailer and its status. Pass returns the header and trailer
// the caller gets, the answer's with the caller's cache-status entry where
// the proxy's own pass-through puts it (passStatus), and that status.
func (p *Proxy) Pass(ctx context.Context, method string, rule policy.Rule, call func() (header, trailer metadata.MD, err error)) (metadata.MD, metadata.MD, error) {
	var header, trailer metadata.MD
	err := p.pass(ctx, method, rule, func() tagged { return p.streamTags(header) }, func() (err error) {
		header, trailer, err = call()
		return err
	})
	if entry := p.statusFor(&p.callers, statusBypass); entry != "" {
		if header != nil {
			header = withStatus(header, entry)
		} else {
			trailer = withStatus(trailer, entry)
		}
	}
	return header, trailer, err
}

// PassServer is Pass for the library's server interceptor: call runs the
// application's handler with the context it is given, whose stream takes
// the tags header out of the answer's header on its way to the caller
// (unless the proxy forwards it), reads its tags, and adds the caller's
// cache-status entry (passStatus), as the proxy does for a call it passes
// through.
func (p *Proxy) PassServer(ctx context.Context, method string, rule policy.Rule, call func(ctx context.Context) error) error {
	ts := grpc.ServerTransportStreamFromContext(ctx)
	if ts == nil {
		return p.pass(ctx, method, rule, func() tagged { return tagged{} }, func() error { return call(ctx) })
	}
	t := &tagTransport{ServerTransportStream: ts, p: p, status: passStatus{entry: p.statusFor(&p.callers, statusBypass)}}
	return p.pass(ctx, method, rule, func() tagged { return t.tags }, func() error {
		err := call(grpc.NewContextWithServerTransportStream(ctx, t))
		t.status.end(err == nil, ts.SetHeader, ts.SetTrailer)
		return err
	})
}

// PassStream is PassServer for a streaming call: call runs the
// application's handler on the stream it is given, which reads the tags
// of the header on its way to the caller and adds the caller's entry, as
// the proxy's does.
func (p *Proxy) PassStream(ss grpc.ServerStream, method string, rule policy.Rule, call func(grpc.ServerStream) error) error {
	ts := &tagStream{ServerStream: ss, p: p, status: passStatus{entry: p.statusFor(&p.callers, statusBypass)}}
	return p.pass(ss.Context(), method, rule, func() tagged { return ts.tags }, func() error {
		err := call(ts)
		ts.status.end(false, ss.SetHeader, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		return err
	})
}

// Replay serves a server-streaming call of method, whose rule (Rule)
// replays it, for the library, exactly as the proxy serves such a call
// itself: callers with the same key read one stream, from its first
// message to its end. ss receives the request and sends the messages as
// the engine's (Wire, SetWire); backend opens the stream a record reads,
// reaching the application's handler in the process.
func (p *Proxy) Replay(ss grpc.ServerStream, method string, rule policy.Rule, backend grpc.ClientConnInterface) error {
	return p.replayStream(ss, method, rule, &p.callers, backend)
}

// pass is Pass, PassServer and PassStream: tags says, once call has
// returned, what tags its answer carried.
func (p *Proxy) pass(ctx context.Context, method string, rule policy.Rule, tags func() tagged, call func() error) error {
	start := time.Now()
	err := call()
	if err == nil && rule.Invalidates != nil {
		p.invalidateAfter(ctx, method, rule.Invalidates, tags())
	}
	code := callerCode(ctx, err)
	if rule.Kind.Streams() {
		p.observer.ObserveBackendStream(method, code)
	} else {
		p.observer.ObserveBackendCall(ctx, method, code, time.Since(start))
	}
	p.report(ctx, RouteCaller, method, OutcomePassthrough, code, producer{})
	return err
}

// tagTransport is the stream of a call the library's server interceptor
// passes through: as tagStream, it reads the tags of the answer's header
// on the way, takes the tags header out unless the proxy forwards it, and
// adds the caller's cache-status entry.
type tagTransport struct {
	grpc.ServerTransportStream
	p      *Proxy
	tags   tagged
	status passStatus
}

// SetHeader implements grpc.ServerTransportStream.
func (t *tagTransport) SetHeader(md metadata.MD) error {
	return t.ServerTransportStream.SetHeader(t.status.header(t.p.takeTagsOf(md, &t.tags), false))
}

// SendHeader implements grpc.ServerTransportStream.
func (t *tagTransport) SendHeader(md metadata.MD) error {
	return t.ServerTransportStream.SendHeader(t.status.header(t.p.takeTagsOf(md, &t.tags), true))
}

// logPanic logs, once per flight (by its leader), a call that panicked.
func (p *Proxy) logPanic(method string, outcome collapse.Outcome, err error) {
	if outcome != collapse.Lead || err == nil {
		return
	}
	if pe, ok := errors.AsType[*collapse.PanicError](err); ok {
		p.logger.Error("proxy: backend call panicked", "method", method, "panic", pe.Value, "stack", string(pe.Stack))
	}
}
