package proxy

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	// Registers the gzip compressor so gzip-compressed callers are understood
	// and answered in kind.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/forwarding"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/replay"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// Defaults for the zero values of Options.
const (
	// DefaultMaxMsgBytes bounds each message received or sent (grpc-go's
	// default receive limit).
	DefaultMaxMsgBytes = 4 << 20
	// DefaultReceiveTimeout bounds how long a collapsed call may take to
	// deliver its request message.
	DefaultReceiveTimeout = 10 * time.Second
	// DefaultMaxBackendCalls bounds the shared backend calls running at once.
	DefaultMaxBackendCalls = 1000
	// DefaultSoftPurgeRate paces the refreshes of what one soft purge of
	// many answers takes back, per second.
	DefaultSoftPurgeRate = 100
)

// Route says which series a request is counted in (Observer.ObserveRequest).
type Route uint8

const (
	// RouteCaller: a caller's call of a collapsed or passed-through method.
	RouteCaller Route = iota
	// RouteStream: a caller's call of a replayed method.
	RouteStream
	// RoutePeer: a call a peer forwarded to this sidecar, the key's owner.
	RoutePeer
)

// Outcomes of a request besides collapse.Outcome's and replay.Outcome's,
// as passed to Observer.ObserveRequest.
const (
	// OutcomePassthrough: the call was forwarded as a stream, not collapsed.
	OutcomePassthrough = "passthrough"
	// OutcomeError: the request failed before a path was chosen (for example
	// the request message could not be read).
	OutcomeError = "error"
)

// Rules decides per method what the proxy does (implemented by
// *policy.Decider).
type Rules interface {
	// Rule returns the rule of fullMethod ("/pkg.Service/Method"); it must
	// not block.
	Rule(fullMethod string) policy.Rule
}

// Observer is told about every request and backend call (implemented by
// *metrics.Recorder). Its methods must be safe for concurrent use.
type Observer interface {
	// ObserveRequest is called once per request, with the caller's call's
	// context (its span: the trace an exemplar names), the series it is
	// counted in, how it was served (a collapse.Outcome's or a
	// replay.Outcome's label, OutcomePassthrough or OutcomeError) and the
	// code the caller got.
	ObserveRequest(ctx context.Context, route Route, method, outcome string, code codes.Code)
	// ObserveBackendCall is called once per backend call of a unary method
	// (or of a method whose kind is unknown), when it ends, with the call's
	// context (its span's trace is the leader's) and how long the backend
	// took.
	ObserveBackendCall(ctx context.Context, method string, code codes.Code, d time.Duration)
	// ObserveBackendStream is called once per backend stream of a
	// streaming method, passed through or replayed, when it ends: its length
	// is the stream's, not the backend's latency.
	ObserveBackendStream(method string, code codes.Code)
	// ObservePeerCall is called once per call or replayed stream forwarded
	// to the key's owner, with who answered it (OwnerSelf, OwnerPeer, or
	// OwnerNone) and the owner's code (a stream's when it ends), or the code
	// of the failure to reach it and fellBack set when the call or stream
	// was made to the local backend instead.
	ObservePeerCall(method, owner string, code codes.Code, fellBack bool)
	// ObserveFreshness is called once per successful, shareable answer of
	// a collapsed unary call, with where the windows it is served for come
	// from (FreshnessPolicy, FreshnessBackend or FreshnessCapped).
	ObserveFreshness(method, source string)
	// ObserveRefresh is called once per background call that refreshes a
	// kept answer of a collapsed unary call, when it starts, with why it
	// runs (RefreshEarly, RefreshStale or RefreshPurge).
	ObserveRefresh(method, reason string)
	// ObserveHandoff is called once per key's previous owner asked for
	// the answer it holds (handoff.go), with the result (HandoffTaken,
	// HandoffNone or HandoffFailed).
	ObserveHandoff(method, result string)
}

// Settings are what an operator sets of a Proxy (the sidecar's flags).
// Zero fields take the defaults.
type Settings struct {
	// Cache bounds the results held; zero fields take collapse's defaults.
	Cache collapse.Limits
	// Streams bounds the records of replayed streams, each and all those
	// kept for replay; zero fields take replay's defaults.
	Streams replay.Limits
	// MaxBackendCalls bounds the shared backend calls running at once
	// (default DefaultMaxBackendCalls): one more waits within its timeout
	// and while a caller waits for it, then fails with RESOURCE_EXHAUSTED.
	MaxBackendCalls int
	// SoftPurgeRate paces the refreshes of the answers one soft purge of
	// a method or tag takes back, per second (collapse.Options): 0, all
	// at once.
	SoftPurgeRate float64
	// PrivateHeaders are response headers or trailers, besides
	// DefaultPrivateHeaders, that make a response private: it goes only to
	// the caller whose call produced it and is never cached.
	PrivateHeaders []string
	// TagsHeader is the response header an answer names its tags in (the
	// sidecar's default is DefaultTagsHeader); "": none, and an answer's
	// tags are its CacheGroupsHeader's alone. It is taken out of the answer
	// before callers see it, unless ForwardTagsHeader.
	TagsHeader        string
	ForwardTagsHeader bool
	// OmitCacheStatus leaves the answers without the proxy's RFC 9211
	// cache-status entry (CacheStatusHeader), which every answer a caller
	// is served carries otherwise.
	OmitCacheStatus bool
	// ReceiveTimeout bounds how long a collapsed call may take to deliver its
	// request message (default DefaultReceiveTimeout).
	ReceiveTimeout time.Duration
	// MaxRecvMsgBytes bounds each message received from callers or the
	// backend (default DefaultMaxMsgBytes).
	MaxRecvMsgBytes int
	// MaxSendMsgBytes bounds each message sent to callers or the backend
	// (default DefaultMaxMsgBytes).
	MaxSendMsgBytes int
}

// Options configures a Proxy: its Settings, and the parts it works with.
// Rules and KeyRule are required.
type Options struct {
	Settings
	// Backend is the connection calls are forwarded to; nil for the
	// library's engine, whose calls only its interceptors make (Call,
	// Pass): a call its own servers take is answered UNIMPLEMENTED.
	Backend grpc.ClientConnInterface
	// Peers, when set, is the connection to the replicas (see the peers
	// package): a collapsed call is made by its key's owner, while its
	// method's forwarded calls share there (the forwarding package).
	Peers Peers
	// Forwarding decides, with Peers, which methods' calls are forwarded;
	// nil: forwarding.New(nil).
	Forwarding *forwarding.Decider
	// Rules says which methods are collapsed and how.
	Rules Rules
	// KeyRule derives the collapse key of a unary request.
	KeyRule *requestkey.Rule
	// Observer is told about requests and backend calls; nil records nothing.
	Observer Observer
	// TracerProvider starts the spans of the calls the proxy makes for a
	// flight's callers, and lets it tell each caller's span (started by the
	// server's stats handler) how the call was served, with a link to the
	// call that answered it (trace.go). Nil: tracing is off, and the proxy
	// does nothing for it.
	TracerProvider trace.TracerProvider
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the answers' and records' windows (default
	// time.Now); a test moves its own.
	Now func() time.Time
}

// Proxy forwards calls to a backend, collapsing identical calls of the
// methods its rules say to collapse.
type Proxy struct {
	backend        grpc.ClientConnInterface
	rules          Rules
	keyRule        *requestkey.Rule
	group          *collapse.Group[*Response]
	streams        *replay.Streams
	private        headerSet
	receiveTimeout time.Duration
	maxRecv        int
	maxSend        int
	observer       Observer
	tracer         trace.Tracer // nil: tracing is off
	logger         *slog.Logger
	tagsHeader     string // "" for none
	forwardTags    bool
	cacheStatus    bool // callers are told how they were served (cachestatus.go)
	// invalidate takes back what a write's success invalidates; nil: none.
	// Written once, by InvalidateThrough, before the proxy serves.
	invalidate Invalidator
	codec      *codec
	// backendOptions are the options every backend call has (callOptions),
	// made once: grpc-go only reads them.
	backendOptions []grpc.CallOption
	// served is the trailer of every answer served for a peer: the owner's
	// mark, with this proxy's own token, by which a forwarder tells an
	// answer of its own from another replica's.
	served metadata.MD
	// forwarding decides which methods' calls are forwarded to their
	// key's owner; nil without peers.
	forwarding *forwarding.Decider
	// ring is the connection to the replicas; nil without peers.
	ring Peers
	// purgedAt is when the last purge the proxy took was taken (UnixNano
	// of now, less the purge's Age): no handoff for a while after
	// (handoff.go).
	purgedAt atomic.Int64
	// unreachedAt is when an ask for a handoff last failed on a
	// connection not made (UnixNano of now): no such ask for a while
	// after (handoff.go).
	unreachedAt atomic.Int64
	// now is the clock of the engine and the records.
	now func() time.Time
	// keptUntil is when the proxy stops serving what it keeps and sharing
	// calls (CoherentUntil), in UnixNano of now; math.MaxInt64 for never.
	keptUntil atomic.Int64
	// callers and forwarded are the origins of the calls of the sidecar's
	// own port and of the peer port; refreshed is forwarded's for the
	// calls that refresh a copy.
	callers, forwarded, refreshed origin
}

// New checks o and returns a Proxy.
func New(o Options) (*Proxy, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	private, err := newHeaderSet(o.PrivateHeaders)
	if err != nil {
		return nil, err
	}
	c, err := newCodec()
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		backend:        o.Backend,
		rules:          o.Rules,
		keyRule:        o.KeyRule,
		private:        private,
		receiveTimeout: cmp.Or(o.ReceiveTimeout, DefaultReceiveTimeout),
		maxRecv:        cmp.Or(o.MaxRecvMsgBytes, DefaultMaxMsgBytes),
		maxSend:        cmp.Or(o.MaxSendMsgBytes, DefaultMaxMsgBytes),
		observer:       o.Observer,
		tagsHeader:     strings.ToLower(o.TagsHeader),
		forwardTags:    o.ForwardTagsHeader,
		cacheStatus:    !o.OmitCacheStatus,
		logger:         o.Logger,
		codec:          c,
		served:         metadata.Pairs(peers.ServedHeader, rand.Text()),
	}
	if p.backend == nil {
		p.backend = noBackend{}
	}
	p.now = o.Now
	if p.now == nil {
		p.now = time.Now
	}
	p.keptUntil.Store(math.MaxInt64)
	p.backendOptions = []grpc.CallOption{grpc.ForceCodecV2(c), grpc.MaxCallRecvMsgSize(p.maxRecv), grpc.MaxCallSendMsgSize(p.maxSend)}
	if o.TracerProvider != nil {
		p.tracer = o.TracerProvider.Tracer(tracerName)
	}
	p.setOrigins(o.Peers, o.Forwarding)
	p.group = collapse.New(collapse.Options[*Response]{
		Limits:   o.Cache,
		Size:     responseSize,
		Private:  func(r *Response) bool { return r != nil && r.Private },
		Declared: declaredWindows,
		Copied:   func(r *Response) bool { return r != nil && r.aged && !r.handed },
		Handed:   handedOver,
		MaxCalls: cmp.Or(o.MaxBackendCalls, DefaultMaxBackendCalls),

		SoftPurgeRate: o.SoftPurgeRate,
		Now:           o.Now,
	})
	p.streams = replay.New(replay.Options{
		Limits:  o.Streams,
		Private: p.private.privateIn,
		Now:     o.Now,
	})
	if p.observer == nil {
		p.observer = nopObserver{}
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// check reports the first thing wrong with o: a required part missing, or
// one of its Settings.
func (o *Options) check() error {
	switch {
	case o.Rules == nil:
		return errors.New("proxy: Options.Rules is required")
	case o.KeyRule == nil:
		return errors.New("proxy: Options.KeyRule is required")
	}
	return o.Settings.check()
}

// check reports what is wrong with s: a limit that is negative, or a tags
// header that is no header name. Its private headers, newHeaderSet checks.
func (s *Settings) check() error {
	if err := errors.Join(s.Cache.Validate(), s.Streams.Validate()); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"MaxBackendCalls", int64(s.MaxBackendCalls)}, {"ReceiveTimeout", int64(s.ReceiveTimeout)},
		{"MaxRecvMsgBytes", int64(s.MaxRecvMsgBytes)}, {"MaxSendMsgBytes", int64(s.MaxSendMsgBytes)},
	} {
		if c.v < 0 {
			return fmt.Errorf("proxy: Options.%s %d is negative", c.name, c.v)
		}
	}
	if h := strings.ToLower(s.TagsHeader); h != "" {
		if err := requestkey.ValidateName(h); err != nil {
			return fmt.Errorf("proxy: TagsHeader %q: %w", s.TagsHeader, err)
		}
		if h == CacheGroupsHeader {
			return fmt.Errorf("proxy: TagsHeader %q: the answer's RFC 9875 groups are read from it already, as a Structured Fields list", s.TagsHeader)
		}
	}
	return nil
}

// setOrigins sets the origins of the calls of the callers' port and of the
// peer port: with a ring of peers, a caller's collapsed call goes through
// its key's owner when decider (nil: forwarding.New(nil)) says so.
func (p *Proxy) setOrigins(ring Peers, decider *forwarding.Decider) {
	p.callers = origin{calls: RouteCaller, streams: RouteStream, owners: noPeers{}, clientCert: true}
	if ring != nil {
		p.ring = ring
		p.callers.owners = peerRing{ring}
		p.forwarding = cmp.Or(decider, forwarding.New(nil))
	}
	p.forwarded = origin{calls: RoutePeer, streams: RoutePeer, keyPrefix: peerKeyPrefix, owners: noPeers{},
		mark: p.served, shared: metadata.Pairs(peers.SharedHeader, "1"), owned: true}
	p.refreshed = p.forwarded
	p.refreshed.fresh = true
}

// ServerOptions returns the options the proxy needs of the grpc.Server
// callers call: the raw codec (per server, never registered globally; it
// falls back to the standard proto codec for proto.Message values so
// grpc.health.v1 can be served on the same server), message size limits
// and the UnknownServiceHandler.
func (p *Proxy) ServerOptions() []grpc.ServerOption {
	return p.serverOptions(p.handle)
}

// PeerServerOptions returns the options of the peer listener's grpc.Server:
// as ServerOptions, with a handler that serves forwarded calls locally.
func (p *Proxy) PeerServerOptions() []grpc.ServerOption {
	return p.serverOptions(p.handlePeer)
}

func (p *Proxy) serverOptions(h grpc.StreamHandler) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(p.codec),
		grpc.MaxRecvMsgSize(p.maxRecv),
		grpc.MaxSendMsgSize(p.maxSend),
		grpc.UnknownServiceHandler(h),
	}
}

// Stats returns a snapshot of the collapse engine's state, for gauges.
func (p *Proxy) Stats() collapse.Stats {
	return p.group.Stats()
}

// CoherentUntil tells the proxy until when it may serve what it keeps and
// share calls: past until, every call is a call of its own, made where it
// would be made but neither shared nor kept, until it is told a later time.
// A replica whose lease from another ran out calls it with that time (see
// package coherence). By default the proxy shares and keeps for ever.
func (p *Proxy) CoherentUntil(until time.Time) {
	p.keptUntil.Store(until.UnixNano())
}

// coherent reports whether the proxy may serve what it keeps, and share
// calls, now (CoherentUntil).
func (p *Proxy) coherent() bool {
	until := p.keptUntil.Load()
	return until == math.MaxInt64 || p.now().UnixNano() < until
}

// Forwarded returns, with peers, whether each method whose calls were
// forwarded is forwarded still (forwarding.Decider.Forwarded); nil without.
func (p *Proxy) Forwarded() map[string]bool {
	if p.forwarding == nil {
		return nil
	}
	return p.forwarding.Forwarded()
}

// StreamStats returns a snapshot of the replayed streams' state, for gauges.
func (p *Proxy) StreamStats() replay.Stats {
	return p.streams.Stats()
}

// errNoMethod answers a stream grpc-go gave no method name, which it
// always does for a call it routed.
var errNoMethod = status.Error(codes.Internal, "proxy: no method name in server stream")

// handle serves every call to a method no service on the server registered.
// Its error path is a function of its own, so that handle's frame, under
// every call the proxy serves, holds no more than serving needs: a deeper
// stack may have to grow (a copy of it) on every call.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return p.noMethod(ss)
	}
	return p.serve(ss, method, &p.callers)
}

// noMethod answers, and counts, a call grpc-go gave no method name.
func (p *Proxy) noMethod(ss grpc.ServerStream) error {
	p.report(ss.Context(), RouteCaller, "", OutcomeError, codes.Internal, producer{})
	return errNoMethod
}

// serve serves a call from o as its method's rule says: collapsed,
// replayed, or passed through (for a peer too, when this replica's policy
// passes the method through: a reload the forwarder has not seen yet). Its
// answer carries o's mark, however it ends.
func (p *Proxy) serve(ss grpc.ServerStream, method string, o *origin) error {
	if o.mark != nil {
		ss.SetTrailer(o.mark)
	}
	rule := p.rules.Rule(method)
	switch rule.Action {
	case policy.Collapse:
		growStack() // a leader's backend call runs deep: grow once, here
		return p.unary(ss, method, rule, o)
	case policy.Replay:
		return p.replayStream(ss, method, rule, o, p.backend)
	}
	return p.passthrough(ss, method, rule, o)
}

// origin says where the calls the proxy serves came from, and so how each
// is counted, keyed, shared and marked: every path reads it rather than
// asking who called. There are two: a caller of the sidecar's own port
// (Proxy.callers) and a peer that forwarded a call to its key's owner
// (Proxy.forwarded).
type origin struct {
	// calls and streams are the series a request is counted in: of a
	// collapsed or passed-through method, and of a replayed one.
	calls, streams Route
	// keyPrefix starts every key: the calls peers forward share flights and
	// records of their own, since a replica owns some keys itself and this
	// replica's callers' flight for a key may be the very call that came here.
	keyPrefix string
	// owners says where a shared call is made: through the key's owner, or
	// here. A forwarded call is never forwarded again.
	owners owners
	// mark is the trailer every answer carries; nil for none.
	mark metadata.MD
	// shared is the trailer a collapsed call's answer carries when the call
	// shared another's backend call (it tells a forwarder that forwarding
	// paid); nil for none.
	shared metadata.MD
	// fresh: a call wants a fresh answer, never one past its TTL or
	// purged (collapse.Copy.Fresh): it refreshes a copy its peer holds.
	fresh bool
	// owned: every call's key is one this replica owns (a peer forwarded
	// it here), which it may have taken over (handoff.go).
	owned bool
	// clientCert: the caller's TLS certificate is named in
	// ClientCertHeader (callers' port); on the peer port the forwarder's
	// value is kept.
	clientCert bool
}

// noBackend stands in for a nil Options.Backend: the library's engine
// makes its calls with the application's handlers, never through a
// server of its own.
type noBackend struct{}

// errNoBackend answers a call to a proxy without a backend.
var errNoBackend = status.Error(codes.Unimplemented, "collapser: this engine has no backend: it serves the library's interceptors only")

func (noBackend) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errNoBackend
}

func (noBackend) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errNoBackend
}

// nopObserver records nothing; it stands in for a nil Options.Observer.
type nopObserver struct{}

func (nopObserver) ObserveRequest(context.Context, Route, string, string, codes.Code)     {}
func (nopObserver) ObserveBackendCall(context.Context, string, codes.Code, time.Duration) {}
func (nopObserver) ObserveBackendStream(string, codes.Code)                               {}
func (nopObserver) ObservePeerCall(string, string, codes.Code, bool)                      {}
func (nopObserver) ObserveFreshness(string, string)                                       {}
func (nopObserver) ObserveRefresh(string, string)                                         {}
func (nopObserver) ObserveHandoff(string, string)                                         {}
