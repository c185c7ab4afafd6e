package proxy

import (
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/requestkey"
)

// The purges the admin service asks for. Each takes back, hard or soft (see
// collapse.Group.Purge), the answers of its Scope, and the records of
// replayed streams of its Scope, keyed as replayStream keys them
// (replay.Streams.Purge), and reports how many answers and kept records it
// took back. A record has no stale window: a soft purge takes it back as a
// hard one does. A live record is detached, as a call in flight is: its
// callers read it to its end, the next caller starts a new one, and it is
// not kept. Once one returns, no caller of this proxy is served what it
// took back. They do not reach other replicas: each keeps copies of its
// own.

// Purge says how a purge takes answers back.
type Purge struct {
	// Soft makes them stale rather than gone.
	Soft bool
	// Scope says which of the proxy's answers it takes back.
	Scope Scope
	// Age is how long ago the purge was taken, by the replica whose
	// journal this proxy fetched it from late (coherence.Journal.Sync):
	// the while after a purge when no previous owner is asked for an
	// answer (handoff.go) counts from then. Zero: taken now.
	Age time.Duration
}

// Scope is which of a proxy's answers a purge takes back. With peers, a
// replica's callers are served through the owners of their keys, so a purge
// of every replica takes back the owners' answers first (Owned, on every
// replica), then the copies the replicas keep for their callers (Callers):
// a caller's call that starts between the two can only fetch a fresh
// answer from its owner, and one that started before is detached.
type Scope uint8

// The scopes.
const (
	// Everything: the answers kept for the proxy's callers and for its peers.
	Everything Scope = iota
	// Owned: the answers the proxy keeps for its peers, as their keys' owner.
	Owned
	// Callers: the answers the proxy keeps for its own callers.
	Callers
)

// PurgeRequest takes back the answer to one call: method with payload
// (in the codec of content-subtype sub) and request metadata md, keyed as
// the proxy keys a caller's call, credentials included (and the request's
// fields its rule leaves out left out).
func (p *Proxy) PurgeRequest(method, sub string, payload []byte, md metadata.MD, how Purge) int {
	p.tookPurge(how.Age)
	key := string(p.appendKey(nil, method, p.rules.Rule(method), sub, payload, md))
	n := 0
	for _, o := range p.origins(how.Scope) {
		if p.group.Purge(o.keyPrefix+key, how.Soft) {
			n++
		}
	}
	return n + p.streams.Purge(func(k string, _ metadata.MD, _ bool) bool {
		rest, ok := how.Scope.match(k)
		return ok && rest == key
	})
}

// PurgeMethod takes back every answer of method.
func (p *Proxy) PurgeMethod(method string, how Purge) int {
	p.tookPurge(how.Age)
	prefix := requestkey.MethodPrefix(method)
	ofMethod := func(key string) bool {
		rest, ok := how.Scope.match(key)
		return ok && strings.HasPrefix(rest, prefix)
	}
	return p.group.PurgeMatching(func(key string, _ *Response) bool { return ofMethod(key) }, ofMethod, how.Soft) +
		p.streams.Purge(func(key string, _ metadata.MD, _ bool) bool { return ofMethod(key) })
}

// PurgeTag takes back every answer that carried tag. A call in flight may
// carry it too, which is not known before it ends: every call in flight of
// the scope is detached. A stream's tags are in its header: a record is
// taken back when its header carries tag, or is not known yet, or named
// more tags than it could record.
func (p *Proxy) PurgeTag(tag string, how Purge) int {
	p.tookPurge(how.Age)
	inScope := func(key string) bool {
		_, ok := how.Scope.match(key)
		return ok
	}
	tagged := func(key string, header metadata.MD, known bool) bool {
		if !inScope(key) {
			return false
		}
		if !known {
			return true
		}
		t := p.streamTags(header)
		return t.overflow || t.has(tag)
	}
	return p.group.PurgeMatching(
		func(key string, r *Response) bool { return r.tags.has(tag) && inScope(key) },
		inScope,
		how.Soft) + p.streams.Purge(tagged)
}

// origins returns the proxy's origins of scope, whose key prefixes its
// answers are kept under.
func (p *Proxy) origins(scope Scope) []*origin {
	switch scope {
	case Owned:
		return []*origin{&p.forwarded}
	case Callers:
		return []*origin{&p.callers}
	}
	return []*origin{&p.callers, &p.forwarded}
}

// match reports whether key, kept by the proxy, is of an origin in scope s,
// and returns it without that origin's prefix: the keys of the calls peers
// forward start with peerKeyPrefix, and no other key does.
func (s Scope) match(key string) (string, bool) {
	rest, forwarded := strings.CutPrefix(key, peerKeyPrefix)
	switch s {
	case Owned:
		return rest, forwarded
	case Callers:
		return key, !forwarded
	}
	return rest, true
}

// PurgeAll takes back everything the proxy keeps, hard, and detaches
// every call in flight: what a replica does when purges it missed are
// gone from the journal that had them. It is a purge: for a while, no
// previous owner is asked for an answer (handoff.go).
func (p *Proxy) PurgeAll() int {
	p.tookPurge(0)
	return p.TakeBackAll()
}

// TakeBackAll takes back everything as PurgeAll does, but is no purge:
// what a replica does when a lease ran out, or it is not listed among the
// replicas (at its start, until the replicas' name lists it). It serves
// nothing it keeps, and asks no previous owner, until it syncs again with
// every replica, and then applies the purges it missed: those are the
// purges it took.
func (p *Proxy) TakeBackAll() int {
	all := func(string) bool { return true }
	return p.group.PurgeMatching(func(string, *Response) bool { return true }, all, false) +
		p.streams.Purge(func(string, metadata.MD, bool) bool { return true })
}

// tookPurge records a purge taken age ago (Purge.Age; negative counts as
// none), unless one was taken since: no previous owner is asked for an
// answer for a while after the last purge taken (handoff.go).
func (p *Proxy) tookPurge(age time.Duration) {
	at := p.now().Add(-max(age, 0)).UnixNano()
	for {
		last := p.purgedAt.Load()
		if at <= last || p.purgedAt.CompareAndSwap(last, at) {
			return
		}
	}
}
