package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// transportHeaders are the gRPC headers that describe one HTTP/2 hop rather
// than the call. grpc-go writes its own for the next hop (content-type from the
// codec, grpc-timeout from the context deadline, grpc-encoding from the
// compressor), so forwarding them would duplicate or contradict those. See
// https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md.
var transportHeaders = map[string]bool{
	"content-type":         true,
	"user-agent":           true,
	"te":                   true,
	"grpc-timeout":         true,
	"grpc-encoding":        true,
	"grpc-accept-encoding": true,
	"grpc-message-type":    true,
	"grpc-status":          true,
	"grpc-message":         true,
}

// forwardable returns the metadata to send on the next hop: md without
// HTTP/2 pseudo headers (":authority", ...), transport headers and the
// peers' own headers. Everything else, authorization included, is kept. md
// is only read: the result is a new map whose value slices are shared with
// md, so neither may be modified.
func forwardable(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if hopOnly(k) {
			continue
		}
		out[k] = v
	}
	return out
}

// strip is forwardable for metadata the proxy owns (a copy grpc-go made for
// it): it deletes in md itself and returns it, without allocating.
func strip(md metadata.MD) metadata.MD {
	for k := range md {
		if hopOnly(k) {
			delete(md, k)
		}
	}
	return md
}

// hopOnly reports whether header k describes one hop and is not forwarded.
func hopOnly(k string) bool {
	return strings.HasPrefix(k, ":") || transportHeaders[k] || peerHeaders[k]
}

// peerHeaders are the headers peers add (peers.Headers).
var peerHeaders = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range peers.Headers {
		m[h] = true
	}
	return m
}()

// incoming returns the metadata of a call the proxy serves, from o, without
// the peers' headers: they are never part of a key, whoever sent them. On
// the callers' port (o.clientCert), a caller that presented a certificate
// the listener verified is named by it in ClientCertHeader, whatever it
// wrote there; without one, the header is kept as sent (a mesh proxy in
// front sets it), a credential in the key either way. On the peer port the
// connection's certificate is a replica's: the forwarder's header is kept.
//
// The map is read-only: unless the proxy changes it (then it is a copy of
// its own), it is the call's own metadata as grpc-go keeps it (sharedIncoming),
// which every reader of the call's context sees.
func incoming(ctx context.Context, o *origin) metadata.MD {
	md, shared, peered := sharedIncoming(ctx)
	cert := o.callerCert(ctx)
	if cert == nil && !peered {
		return md
	}
	if shared {
		md = md.Copy()
	}
	for _, h := range peers.Headers {
		delete(md, h)
	}
	if cert != nil {
		sum := sha256.Sum256(cert.Raw)
		md[ClientCertHeader] = []string{"Hash=" + hex.EncodeToString(sum[:])}
	}
	return md
}

// sharedIncoming returns the incoming metadata of ctx and true when it is
// grpc-go's own map, shared by every reader of ctx and not to be changed;
// otherwise a copy (metadata.FromIncomingContext) and false. grpc-go hands
// out only copies of all of it (six allocations for a call with four
// headers, a third of a cache hit's), and a key reads every header. The
// map is shared only when its names are as grpc-go's transport writes them
// (lower case): one an interceptor attached could hold others, which
// FromIncomingContext lower-cases, so that no credential's name hides.
// peered reports whether it holds a peer's header (peers.Headers).
func sharedIncoming(ctx context.Context) (md metadata.MD, shared, peered bool) {
	if md, ok := ctx.Value(incomingKey).(metadata.MD); ok {
		if upper, peered := names(md); !upper {
			return md, true, peered
		}
	}
	md, _ = metadata.FromIncomingContext(ctx)
	_, peered = names(md)
	return md, false, peered
}

// names reports, in one pass over md's names, whether one has an
// upper-case letter and whether one is a peer's header: incoming changes
// a map with either (a copy of it).
func names(md metadata.MD) (upper, peered bool) {
	for k := range md {
		upper = upper || requestkey.HasUpper(k)
		peered = peered || peerHeader(k)
	}
	return upper, peered
}

// peerHeader reports whether the metadata name k is a peer's header
// (peers.Headers).
func peerHeader(k string) bool {
	return strings.HasPrefix(k, peers.HeaderPrefix) && peerHeaders[k]
}

// incomingKeyed returns what incoming returns for a call the library's
// server interceptor serves (from the callers' origin), with its
// content-subtype and its key under rule appended to dst (appendKey).
// Most calls need no change to their metadata (grpc-go's transport writes
// every name in lower case, a caller sends no peer's header, and only
// callers with certificates are named by them): such a call's names are
// checked in the pass that finds the headers of its key.
func (p *Proxy) incomingKeyed(ctx context.Context, dst []byte, method string, rule policy.Rule, payload []byte) (metadata.MD, string, []byte) {
	if md, ok := ctx.Value(incomingKey).(metadata.MD); ok && p.callers.callerCert(ctx) == nil {
		var h requestkey.Headers
		if p.keepUnchanged(&h, md) {
			sub := contentSubtype(md)
			return md, sub, p.appendKeyOf(dst, method, rule, sub, payload, &h)
		}
	}
	md := incoming(ctx, &p.callers)
	sub := contentSubtype(md)
	return md, sub, p.appendKey(dst, method, rule, sub, payload, md)
}

// keepUnchanged has the key rule keep md's headers in h, and reports
// whether md needs no change (names): no name in upper case (as Keep
// finds), no peer's header. It stops at the first name that needs one.
func (p *Proxy) keepUnchanged(h *requestkey.Headers, md metadata.MD) bool {
	for name, values := range md {
		if peerHeader(name) || p.keyRule.Keep(h, name, values) {
			return false
		}
	}
	return true
}

// incomingKey is the key grpc-go keeps a call's incoming metadata under in
// its context, an unexported type of its metadata package: asked to read a
// context that records what it is asked for, FromIncomingContext tells it.
// If a grpc-go to come read it otherwise, the key is nil, no context holds
// a value under it, and sharedIncoming copies as FromIncomingContext does.
var incomingKey = func() any {
	r := keyRecorder{Context: context.Background()}
	metadata.FromIncomingContext(&r)
	return r.key
}()

// keyRecorder is a context that records the key its value is asked for.
type keyRecorder struct {
	context.Context
	key any
}

// Value implements context.Context.
func (r *keyRecorder) Value(key any) any {
	r.key = key
	return nil
}

// ClientCertHeader names the caller's TLS certificate, when it presented
// one the listener verified, by its SHA-256 (Envoy's
// x-forwarded-client-cert, element Hash): a credential
// (requestkey.Credentials), so two callers' certificates never share an
// answer, and the owner of a forwarded call keys it alike. The backend
// receives it too.
const ClientCertHeader = "x-forwarded-client-cert"

// callerCert returns the certificate that names the caller of ctx on o's
// port (ClientCertHeader): the one it presented and the listener verified,
// on the callers' port; nil for none, and on the peer port.
func (o *origin) callerCert(ctx context.Context) *x509.Certificate {
	if !o.clientCert {
		return nil
	}
	return verifiedClientCert(ctx)
}

// verifiedClientCert returns the certificate the caller of ctx presented
// and the listener verified; nil for none.
func verifiedClientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return nil
	}
	return info.State.PeerCertificates[0]
}

// contentSubtype returns the codec content-subtype of the incoming call:
// "" for "application/grpc", "json" for "application/grpc+json" (lower case,
// parameters after ';' dropped).
func contentSubtype(md metadata.MD) string {
	ct := md["content-type"] // grpc-go's transport writes it in lower case, and incoming has it so
	if len(ct) == 0 || ct[0] == "application/grpc" {
		return "" // what every grpc-go client sends for protobuf
	}
	rest, ok := strings.CutPrefix(strings.ToLower(ct[0]), "application/grpc")
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, ";")
	sub, ok := strings.CutPrefix(rest, "+")
	if !ok {
		return ""
	}
	return sub
}

// authority returns the :authority the caller addressed, "" if none.
func authority(md metadata.MD) string {
	if v := md[requestkey.Authority]; len(v) > 0 {
		return v[0]
	}
	return ""
}
