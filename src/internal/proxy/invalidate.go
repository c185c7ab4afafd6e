package proxy

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/policy"
)

// InvalidateTimeout bounds the purge on write of one call: taking back, on
// every replica, what its success invalidates. It is longer than a peer
// lease (coherence.Lease), which bounds how long a purge waits for a
// replica it cannot reach: a purge on write ends, and the write's OK
// promises what it says, before it runs out.
const InvalidateTimeout = 15 * time.Second

// Invalidator takes back what the success of a write invalidates
// (implemented by *admin.Service, which takes the purge to every replica).
type Invalidator interface {
	// Invalidate takes back, on every replica, every answer of methods and
	// every answer carrying one of tags (policy.Invalidation).
	Invalidate(ctx context.Context, methods, tags []string) error
}

// InvalidateThrough makes inv take back what the success of a write
// invalidates: the purge on write of a method whose rule names what it
// invalidates. Until it is called, or with a nil inv, writes invalidate
// nothing. The admin service that purges is built on the proxy, so it is
// given here rather than in Options; call it before the proxy serves (its
// servers' Serve, which starts every call after it), never while it does.
func (p *Proxy) InvalidateThrough(inv Invalidator) {
	p.invalidate = inv
}

// invalidateAfter takes back what the success of a passed-through call of
// method invalidates, tags being its answer's, before the call's status
// goes to its caller: a caller whose write returned OK reads no answer it
// outdated, through any replica the purge reached. A purge that fails is
// logged and counted (purges by result), and the caller still gets the
// backend's OK: the write happened, and an error would invite a retry of
// it.
func (p *Proxy) invalidateAfter(ctx context.Context, method string, inv *policy.Invalidation, tags tagged) {
	if p.invalidate == nil {
		return
	}
	var byTag []string
	if inv.ResponseTags {
		byTag = tags.tags
		if tags.overflow {
			// Tags beyond the bound were not read; every answer of the
			// methods named still goes.
			p.logger.Warn("purge on write: the answer's tags exceed the bound; purging the tags read", "method", method, "max_tags", MaxTags, "max_tag_bytes", MaxTagBytes)
		}
	}
	if len(inv.Methods) == 0 && len(byTag) == 0 {
		return
	}
	// The caller's end must not cut the purge short: the write is done.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), InvalidateTimeout)
	defer cancel()
	if err := p.invalidate.Invalidate(ctx, inv.Methods, byTag); err != nil {
		p.logger.Warn("purge on write failed", "method", method, "methods", inv.Methods, "tags", byTag, "err", err)
	}
}

// tagStream is a passed-through call's stream to its caller: it reads the
// tags of the answer from its header on the way, and takes the tags header
// out unless the proxy forwards it, as for collapsed calls. For the
// library's stream interceptor, it adds the caller's cache-status entry
// too (the proxy's own pass-through adds it as it forwards the backend's
// header: its status has none).
type tagStream struct {
	grpc.ServerStream
	p      *Proxy
	tags   tagged
	status passStatus
}

// SetHeader implements grpc.ServerStream.
func (s *tagStream) SetHeader(md metadata.MD) error {
	return s.ServerStream.SetHeader(s.status.header(s.p.takeTagsOf(md, &s.tags), false))
}

// SendHeader implements grpc.ServerStream.
func (s *tagStream) SendHeader(md metadata.MD) error {
	return s.ServerStream.SendHeader(s.status.header(s.p.takeTagsOf(md, &s.tags), true))
}

// SendMsg implements grpc.ServerStream: the first message sends the
// header, with the entry.
func (s *tagStream) SendMsg(m any) error {
	if err := s.status.beforeMessage(s.ServerStream.SetHeader); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

// takeTagsOf reads into tags the tags of md, a header on its way to a
// caller, and returns md as it goes on: a copy without the tags header
// (unless the proxy forwards it) when md names tags, since its map may be
// a handler's own; md itself otherwise, and tags unchanged.
func (p *Proxy) takeTagsOf(md metadata.MD, tags *tagged) metadata.MD {
	if !p.hasTags(md) {
		return md
	}
	md = md.Copy()
	*tags = p.takeTags(md)
	return md
}
