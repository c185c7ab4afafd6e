package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	// Registers the gzip compressor so gzip-compressed callers are understood
	// and answered in kind.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// Defaults for the zero values of Options.
const (
	// DefaultBackendTimeout bounds each shared backend call.
	DefaultBackendTimeout = 10 * time.Second
	// DefaultMaxMsgBytes bounds each message received or sent (grpc-go's
	// default receive limit).
	DefaultMaxMsgBytes = 4 << 20
)

// Outcomes of a request besides collapse.Outcome's "leader", "joined" and
// "cache_hit", as passed to Observer.ObserveRequest.
const (
	// OutcomePassthrough: the call was forwarded as a stream, not collapsed.
	OutcomePassthrough = "passthrough"
	// OutcomeError: the request failed before a path was chosen (for example
	// the request message could not be read).
	OutcomeError = "error"
)

// Response is what one backend call for a unary method produced. Callers
// sharing it must treat every field as read-only.
type Response struct {
	// Payload is the response message as wire bytes; nil when Err is set.
	Payload []byte
	// Header and Trailer are the backend's response metadata, ready to forward.
	Header, Trailer metadata.MD
	// Err is the backend's status as a status error, nil for OK.
	Err error
}

// ResponseSize returns the bytes r holds, for collapse.Options.Size.
func ResponseSize(r *Response) int64 {
	if r == nil {
		return 0
	}
	return int64(len(r.Payload)) + mdSize(r.Header) + mdSize(r.Trailer)
}

func mdSize(md metadata.MD) int64 {
	var n int64
	for k, vs := range md {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// MethodKinds tells which methods are unary and may be collapsed.
type MethodKinds interface {
	// Kind returns the kind of fullMethod ("/pkg.Service/Method"); it must not block.
	Kind(fullMethod string) methodkind.Kind
}

// Observer is told about every request and backend call (implemented by
// *metrics.Sidecar). Its methods must be safe for concurrent use.
type Observer interface {
	// ObserveRequest is called once per request with how it was served and
	// the code the caller got.
	ObserveRequest(method, outcome string, code codes.Code)
	// ObserveBackendCall is called once per backend call, when it ends.
	ObserveBackendCall(method string, code codes.Code, d time.Duration)
}

// Options configures a Proxy. Backend, Group, Kinds and KeyRule are required.
type Options struct {
	// Backend is the connection calls are forwarded to.
	Backend grpc.ClientConnInterface
	// Group shares backend calls and caches their results for unary methods.
	Group *collapse.Group[*Response]
	// Kinds tells which methods are unary.
	Kinds MethodKinds
	// KeyRule derives the collapse key of a unary request.
	KeyRule *requestkey.Rule
	// BackendTimeout bounds each shared backend call (default DefaultBackendTimeout).
	BackendTimeout time.Duration
	// MaxRecvMsgBytes bounds each message received from callers or the
	// backend (default DefaultMaxMsgBytes).
	MaxRecvMsgBytes int
	// MaxSendMsgBytes bounds each message sent to callers or the backend
	// (default DefaultMaxMsgBytes).
	MaxSendMsgBytes int
	// Observer is told about requests and backend calls; nil records nothing.
	Observer Observer
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Proxy forwards calls to a backend, collapsing identical unary calls.
type Proxy struct {
	backend        grpc.ClientConnInterface
	group          *collapse.Group[*Response]
	kinds          MethodKinds
	keyRule        *requestkey.Rule
	backendTimeout time.Duration
	maxRecv        int
	maxSend        int
	observer       Observer
	logger         *slog.Logger
	codec          *codec
}

// New checks o and returns a Proxy.
func New(o Options) (*Proxy, error) {
	switch {
	case o.Backend == nil:
		return nil, errors.New("proxy: Options.Backend is required")
	case o.Group == nil:
		return nil, errors.New("proxy: Options.Group is required")
	case o.Kinds == nil:
		return nil, errors.New("proxy: Options.Kinds is required")
	case o.KeyRule == nil:
		return nil, errors.New("proxy: Options.KeyRule is required")
	case o.BackendTimeout < 0:
		return nil, fmt.Errorf("proxy: Options.BackendTimeout %v is negative", o.BackendTimeout)
	case o.MaxRecvMsgBytes < 0:
		return nil, fmt.Errorf("proxy: Options.MaxRecvMsgBytes %d is negative", o.MaxRecvMsgBytes)
	case o.MaxSendMsgBytes < 0:
		return nil, fmt.Errorf("proxy: Options.MaxSendMsgBytes %d is negative", o.MaxSendMsgBytes)
	}
	c, err := newCodec()
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		backend:        o.Backend,
		group:          o.Group,
		kinds:          o.Kinds,
		keyRule:        o.KeyRule,
		backendTimeout: orDefault(o.BackendTimeout, DefaultBackendTimeout),
		maxRecv:        orDefault(o.MaxRecvMsgBytes, DefaultMaxMsgBytes),
		maxSend:        orDefault(o.MaxSendMsgBytes, DefaultMaxMsgBytes),
		observer:       o.Observer,
		logger:         o.Logger,
		codec:          c,
	}
	if p.observer == nil {
		p.observer = nopObserver{}
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// ServerOptions returns the options to build the sidecar's grpc.Server: the
// raw codec (per server, never registered globally; it falls back to the
// standard proto codec for proto.Message values so grpc.health.v1 can be
// served on the same server), message size limits and the
// UnknownServiceHandler.
func (p *Proxy) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(p.codec),
		grpc.MaxRecvMsgSize(p.maxRecv),
		grpc.MaxSendMsgSize(p.maxSend),
		grpc.UnknownServiceHandler(p.handle),
	}
}

// handle serves every call to a method no service on the server registered.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		p.observer.ObserveRequest("", OutcomeError, codes.Internal)
		return status.Error(codes.Internal, "proxy: no method name in server stream")
	}
	if p.kinds.Kind(method) != methodkind.Unary {
		return p.passthrough(ss, method)
	}
	return p.unary(ss, method)
}

// nopObserver records nothing; it stands in for a nil Options.Observer.
type nopObserver struct{}

func (nopObserver) ObserveRequest(string, string, codes.Code)            {}
func (nopObserver) ObserveBackendCall(string, codes.Code, time.Duration) {}
