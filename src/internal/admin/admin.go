// Package admin serves the sidecar's admin service (collapser.admin.v1):
// purges of the result cache, which a backend calls after a write, and the
// purge on write the proxy asks for itself (Invalidate). It checks each
// request, calls the proxy's purge methods, takes the purge to the other
// replicas when there are peers, and reports what it took back; it knows
// nothing of keys or entries itself.
//
// The sidecar serves it twice. On its admin listener (New), bound to
// loopback by default, its Tap checks every caller before its call is read:
// with a Token, every call must carry it as "authorization: Bearer
// <token>", from any address; without one, only callers on loopback or a
// Unix socket may purge (the pod's own containers), unless AllowRemote.
// From there a purge goes to every other replica, ready or not, when the
// sidecar has Replicas: through their peer listeners, with the release's
// peer token, and it waits for the replicas it could not reach to fetch it
// from this sidecar's journal or for their leases to run out (replicas.go,
// package coherence). Without Replicas a purge stays on this replica. On the
// peer listener (NewPeer), whose server lets in only calls that carry the
// release's peer token (peers.Authenticate), it takes purges from the other
// replicas and takes them to no one else; there it also serves the journal
// the other replicas fetch the purges they missed from.
package admin

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/secretfile"
)

// DefaultListen is the admin listener's address: loopback, so that only the
// pod's own containers can reach it.
const DefaultListen = "127.0.0.1:50054"

// MinTokenBytes is the shortest admin token a sidecar takes.
const MinTokenBytes = 32

// MaxConnections bounds the admin listener's connections: a few of the
// pod's own containers call it, and no one may hold it down.
const MaxConnections = 16

// Purger takes answers back (implemented by *proxy.Proxy).
type Purger interface {
	PurgeRequest(method, sub string, payload []byte, md metadata.MD, how proxy.Purge) int
	PurgeMethod(method string, how proxy.Purge) int
	PurgeTag(tag string, how proxy.Purge) int
	// PurgeAll takes back everything, hard, and detaches every call in
	// flight: a purge of everything.
	PurgeAll() int
	// TakeBackAll takes back everything as PurgeAll does, for a replica
	// that may have missed purges it applies once it syncs again: no
	// purge itself.
	TakeBackAll() int
}

// Observer is told about every purge (implemented by *metrics.Recorder).
type Observer interface {
	// ObservePurge is called once per purge request with its kind
	// (KindRequest, KindMethod, KindTag, or KindNone when it named none or
	// was refused before it was read), its
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
	// ResultPartial: taken back everywhere, but some replica neither took
	// nor fetched it: it took back everything instead (its lease ran out),
	// or it could not be waited for (the call's deadline came first).
	ResultPartial = "partial"
)

// Options configures a Service. Purger is required.
type Options struct {
	Purger   Purger
	Observer Observer
	// AllowRemote lets callers from other addresses than loopback purge.
	AllowRemote bool
	// Replicas, when set, are the other replicas every purge is taken to.
	Replicas *Replicas
	// Token, when set, is what every caller must present, as
	// "authorization: Bearer <token>", from any address: a source
	// address proves nothing in a mesh that forwards inbound traffic from
	// loopback. Nil: only callers on loopback or a Unix socket may purge,
	// unless AllowRemote.
	Token *secretfile.Value
}

// Service implements adminv1.CacheServer.
type Service struct {
	adminv1.UnimplementedCacheServer
	o      Options
	access func(ctx context.Context, md metadata.MD) error // nil: the caller may purge
	peer   bool                                            // serves the peer listener (NewPeer)
}

// New returns the Service of the admin listener; it panics without a Purger.
// Serve it on a server with its Tap, which checks every caller before its
// call is read; Purge checks it again, so that a server without the Tap
// (the application's own, for the library) serves it safely too.
func New(o Options) *Service {
	if o.Purger == nil {
		panic("admin: Options.Purger is required")
	}
	return &Service{o: o, access: func(ctx context.Context, md metadata.MD) error {
		switch token, ok := strings.CutPrefix(firstOf(md.Get("authorization")), "Bearer "); {
		case o.Token != nil && ok && len(md.Get("authorization")) == 1 && o.Token.Matches(token):
			return nil
		case o.Token != nil:
			return status.Error(codes.Unauthenticated, "admin: a purge must carry the admin token (COLLAPSER_ADMIN_TOKEN_FILE) as authorization: Bearer <token>")
		case o.AllowRemote || fromLocal(ctx):
			return nil
		}
		return status.Error(codes.PermissionDenied,
			"admin: purges are taken from loopback or a Unix socket only (the pod's own containers); see COLLAPSER_ADMIN_TOKEN_FILE")
	}}
}

// Tap returns the server option that checks every caller before anything
// of its call is read (grpc.InTapHandle), and counts each refusal as a
// purge of kind none, mode hard, result refused (what it asked for is not
// read). The peer listener's Service has none: its server lets in only
// the release's own sidecars (peers.Authenticate).
func (s *Service) Tap() grpc.ServerOption {
	return grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if err := s.admit(ctx, info.Header); err != nil {
			return nil, err
		}
		return ctx, nil
	})
}

// admit checks a caller with request headers md, and counts a refusal.
func (s *Service) admit(ctx context.Context, md metadata.MD) error {
	if s.access == nil {
		return nil
	}
	err := s.access(ctx, md)
	if err != nil && s.o.Observer != nil {
		s.o.Observer.ObservePurge(KindNone, ModeHard, ResultRefused, 0)
	}
	return err
}

// NewPeer returns the Service of the peer listener, of replicas: it takes
// purges from the other replicas, skips those this sidecar sent itself,
// and takes them to no one else. It checks no access itself: serve it only
// on the peer listener, whose server lets in only the release's own
// sidecars (peers.Authenticate). It observes nothing: the replica that
// took the purge to the others counts it once, with every answer it took
// back on each. It panics without a Purger or Replicas.
func NewPeer(purger Purger, replicas *Replicas) *Service {
	if purger == nil || replicas == nil {
		panic("admin: a Purger and Replicas are required")
	}
	return &Service{o: Options{Purger: purger, Replicas: replicas}, peer: true}
}

// Register registers s on srv; the peer listener's Service registers the
// journal's Sync service beside it, when it has Replicas.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	adminv1.RegisterCacheServer(srv, s)
	if s.peer {
		s.o.Replicas.register(srv)
	}
}

// Purge implements adminv1.CacheServer.
func (s *Service) Purge(ctx context.Context, req *adminv1.PurgeRequest) (*adminv1.PurgeResponse, error) {
	// The Tap checked the caller already, on the admin listener's server;
	// on a server of the application's (the library's RegisterAdmin) this
	// is the check.
	md, _ := metadata.FromIncomingContext(ctx)
	if err := s.admit(ctx, md); err != nil {
		return nil, err
	}
	resp, err := s.run(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Invalidate implements proxy.Invalidator: it purges, hard, every answer
// of methods and every answer that carried one of tags, here and on every
// replica: the purge on write of a method whose policy names what its
// success invalidates. It is called by the proxy itself, so no access is
// checked.
func (s *Service) Invalidate(ctx context.Context, methods, tags []string) error {
	var reqs []*adminv1.PurgeRequest
	for _, m := range methods {
		reqs = append(reqs, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: m}})
	}
	for _, t := range tags {
		reqs = append(reqs, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: t}})
	}
	var errs []error
	for _, req := range reqs {
		_, err := s.run(ctx, req)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run checks req, runs it everywhere and observes it with its result. Who
// may ask, the server's Tap has checked.
func (s *Service) run(ctx context.Context, req *adminv1.PurgeRequest) (*adminv1.PurgeResponse, error) {
	kind, err := check(req)
	result, resp := ResultInvalid, &adminv1.PurgeResponse{}
	if err == nil {
		result, resp, err = s.everywhere(ctx, kind, req)
	}
	if s.o.Observer != nil {
		mode := ModeHard
		if req.GetSoft() {
			mode = ModeSoft
		}
		s.o.Observer.ObservePurge(kind, mode, result, int(resp.GetEntries()))
	}
	return resp, err
}

// everywhere runs a checked request of kind here and, with Replicas, on
// every other replica: first on the answers each keeps as the owner of
// their keys, then on those each keeps for its callers (see proxy.Scope).
// The peer listener's Service runs one scope, the one asked, and skips the
// purges this sidecar sent itself.
func (s *Service) everywhere(ctx context.Context, kind string, req *adminv1.PurgeRequest) (string, *adminv1.PurgeResponse, error) {
	resp := &adminv1.PurgeResponse{}
	r := s.o.Replicas
	switch {
	case s.peer:
		if !slices.Equal(metadata.ValueFromIncomingContext(ctx, OriginHeader), []string{r.journal.ID()}) {
			r.pushed(ctx, func() { resp.Entries = int64(s.purge(kind, req, scopeOf(ctx))) })
			resp.Replicas = 1
		}
		return ResultOK, resp, nil
	case r == nil:
		resp.Entries, resp.Replicas = int64(s.purge(kind, req, proxy.Everything)), 1
		return ResultOK, resp, nil
	}
	for _, scope := range []proxy.Scope{proxy.Owned, proxy.Callers} {
		phase := &adminv1.PurgeResponse{Entries: int64(s.purge(kind, req, scope)), Replicas: 1}
		missed, err := r.purge(ctx, req, scope, phase)
		resp.Entries, resp.Replicas = resp.Entries+phase.Entries, phase.Replicas
		for _, addr := range missed {
			if !slices.Contains(resp.Missed, addr) {
				resp.Missed = append(resp.Missed, addr)
			}
		}
		if err != nil {
			return ResultPartial, resp, status.Errorf(codes.Unavailable,
				"admin: purged %d answers on %d replicas, this one included, but %v could neither be reached nor waited out before the deadline (call again: a purge may be repeated): %v",
				resp.Entries, resp.Replicas, missed, err)
		}
	}
	if len(resp.Missed) > 0 {
		s.o.Replicas.logger.Warn("purge: some replicas neither took the purge nor fetched it; their leases ran out, so they took back everything they kept", "missed", resp.Missed)
		return ResultPartial, resp, nil
	}
	return ResultOK, resp, nil
}

// purge runs a checked request of kind.
func (s *Service) purge(kind string, req *adminv1.PurgeRequest, scope proxy.Scope) int {
	return purgeWith(s.o.Purger, kind, req, proxy.Purge{Soft: req.GetSoft(), Scope: scope})
}

// purgeWith runs a checked request of kind on p.
func purgeWith(p Purger, kind string, req *adminv1.PurgeRequest, how proxy.Purge) int {
	switch kind {
	case KindRequest:
		r := req.GetRequest()
		md := metadata.MD{}
		for _, h := range r.GetHeaders() {
			md[h.GetName()] = append(md[h.GetName()], h.GetValues()...)
		}
		return p.PurgeRequest(r.GetMethod(), r.GetContentSubtype(), r.GetPayload(), md, how)
	case KindMethod:
		return p.PurgeMethod(req.GetMethod(), how)
	}
	return p.PurgeTag(req.GetTag(), how)
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

// fromLocal reports whether ctx's caller connected from a loopback address
// or over a Unix socket (which its file's permissions guard).
func fromLocal(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	if p.Addr.Network() == "unix" {
		return true
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
