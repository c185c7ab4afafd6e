package proxy

import (
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/requestkey"
)

// The purges the admin service asks for. Each takes back, hard or soft (see
// collapse.Group.Purge), the answers this proxy keeps for its callers and
// for the peers it owns keys for, and reports how many it took back. Once
// one returns, no caller of this proxy is served what it took back. They do
// not reach other replicas: each keeps copies of its own.

// PurgeRequest takes back the answer to one call: method with payload
// (in the codec of content-subtype sub) and request metadata md, keyed as
// the proxy keys a caller's call, credentials included.
func (p *Proxy) PurgeRequest(method, sub string, payload []byte, md metadata.MD, soft bool) int {
	key := p.keyRule.Key(method, sub, payload, md)
	n := 0
	for _, o := range p.origins() {
		if p.group.Purge(o.keyPrefix+key, soft) {
			n++
		}
	}
	return n
}

// PurgeMethod takes back every answer of method.
func (p *Proxy) PurgeMethod(method string, soft bool) int {
	prefix := requestkey.MethodPrefix(method)
	ofMethod := func(key string) bool {
		for _, o := range p.origins() {
			if rest, ok := strings.CutPrefix(key, o.keyPrefix); ok && strings.HasPrefix(rest, prefix) {
				return true
			}
		}
		return false
	}
	return p.group.PurgeMatching(func(key string, _ *Response) bool { return ofMethod(key) }, ofMethod, soft)
}

// PurgeTag takes back every answer that carried tag. A call in flight may
// carry it too, which is not known before it ends: every call in flight is
// detached.
func (p *Proxy) PurgeTag(tag string, soft bool) int {
	return p.group.PurgeMatching(
		func(_ string, r *Response) bool { return r.tags.has(tag) },
		func(string) bool { return true },
		soft)
}

// origins returns the proxy's origins, whose key prefixes its answers are
// kept under.
func (p *Proxy) origins() [2]*origin {
	return [2]*origin{&p.callers, &p.forwarded}
}
