// Package admin serves the sidecar's admin service (collapser.admin.v1):
// purges of the result cache, which a backend calls after a write. It checks
// each request, calls the proxy's purge methods and reports what they took
// back; it knows nothing of keys or entries itself.
//
// The sidecar serves it on its own listener, bound to loopback by default,
// and the service refuses callers from other addresses unless told
// otherwise (AllowRemote): the pod's own backend is the one that knows when
// an answer is out of date.
package admin

import (
	"context"
	"net/netip"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// DefaultListen is the admin listener's address: loopback, so that only the
// pod's own containers can reach it.
const DefaultListen = "127.0.0.1:50054"

// Purger takes answers back (implemented by *proxy.Proxy).
type Purger interface {
	PurgeRequest(method, sub string, payload []byte, md metadata.MD, soft bool) int
	PurgeMethod(method string, soft bool) int
	PurgeTag(tag string, soft bool) int
}

// Observer is told about every purge (implemented by *metrics.Recorder).
type Observer interface {
	// ObservePurge is called once per purge request with its kind
	// (KindRequest, KindMethod, KindTag, or KindNone when it named none), its
	// mode (ModeHard or ModeSoft), its result (ResultOK, ResultInvalid or
	// ResultRefused) and the answers it took back.
	ObservePurge(kind, mode, result string, entries int)
}

// The kinds, modes and results of purges, as passed to Observer.ObservePurge.
const (
	KindRequest = "request"
	KindMethod  = "method"
	KindTag     = "tag"
	KindNone    = "none"

	ModeHard = "hard"
	ModeSoft = "soft"

	ResultOK      = "ok"
	ResultInvalid = "invalid"
	ResultRefused = "refused"
)

// Options configures a Service. Purger is required.
type Options struct {
	Purger   Purger
	Observer Observer
	// AllowRemote lets callers from other addresses than loopback purge.
	AllowRemote bool
}

// Service implements adminv1.CacheServer.
type Service struct {
	adminv1.UnimplementedCacheServer
	o Options
}

// New returns a Service; it panics without a Purger.
func New(o Options) *Service {
	if o.Purger == nil {
		panic("admin: Options.Purger is required")
	}
	return &Service{o: o}
}

// Register registers s on srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	adminv1.RegisterCacheServer(srv, s)
}

// Purge implements adminv1.CacheServer.
func (s *Service) Purge(ctx context.Context, req *adminv1.PurgeRequest) (*adminv1.PurgeResponse, error) {
	kind, err := check(req)
	result, n := ResultInvalid, 0
	switch {
	case err != nil:
	case !s.o.AllowRemote && !fromLoopback(ctx):
		result, err = ResultRefused, status.Error(codes.PermissionDenied,
			"admin: purges are taken from loopback only (the pod's own containers); see COLLAPSER_ADMIN_ALLOW_REMOTE")
	default:
		result, n = ResultOK, s.purge(kind, req)
	}
	if s.o.Observer != nil {
		mode := ModeHard
		if req.GetSoft() {
			mode = ModeSoft
		}
		s.o.Observer.ObservePurge(kind, mode, result, n)
	}
	if err != nil {
		return nil, err
	}
	return &adminv1.PurgeResponse{Entries: int64(n)}, nil
}

// purge runs a checked request of kind.
func (s *Service) purge(kind string, req *adminv1.PurgeRequest) int {
	soft := req.GetSoft()
	switch kind {
	case KindRequest:
		r := req.GetRequest()
		md := metadata.MD{}
		for _, h := range r.GetHeaders() {
			md[h.GetName()] = append(md[h.GetName()], h.GetValues()...)
		}
		return s.o.Purger.PurgeRequest(r.GetMethod(), r.GetContentSubtype(), r.GetPayload(), md, soft)
	case KindMethod:
		return s.o.Purger.PurgeMethod(req.GetMethod(), soft)
	}
	return s.o.Purger.PurgeTag(req.GetTag(), soft)
}

// check returns the kind of purge req asks for, or an INVALID_ARGUMENT
// error saying what is wrong with it.
func check(req *adminv1.PurgeRequest) (string, error) {
	invalid := func(kind, format string, args ...any) (string, error) {
		return kind, status.Errorf(codes.InvalidArgument, "admin: "+format, args...)
	}
	switch sel := req.GetSelector().(type) {
	case *adminv1.PurgeRequest_Request:
		r := sel.Request
		if r == nil {
			return invalid(KindRequest, "request: missing")
		}
		if err := methodkind.ValidateMethod(r.GetMethod()); err != nil {
			return invalid(KindRequest, "request.method %q: %v", r.GetMethod(), err)
		}
		for i, h := range r.GetHeaders() {
			// :authority is in every key, as the caller sent it.
			if name := h.GetName(); name != ":authority" {
				if err := requestkey.ValidateName(name); err != nil || strings.ToLower(name) != name {
					return invalid(KindRequest, "request.headers[%d].name %q: want a lower-case header name or :authority", i, name)
				}
			}
		}
		return KindRequest, nil
	case *adminv1.PurgeRequest_Method:
		if err := methodkind.ValidateMethod(sel.Method); err != nil {
			return invalid(KindMethod, "method %q: %v", sel.Method, err)
		}
		return KindMethod, nil
	case *adminv1.PurgeRequest_Tag:
		if sel.Tag == "" || len(sel.Tag) > proxy.MaxTagBytes {
			return invalid(KindTag, "tag %q: want 1 to %d bytes", sel.Tag, proxy.MaxTagBytes)
		}
		return KindTag, nil
	}
	return invalid(KindNone, "no selector: set one of request, method or tag")
}

// fromLoopback reports whether ctx's caller connected from a loopback
// address.
func fromLoopback(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
