package proxy

import (
	"hash/maphash"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/replay"
)

// CacheStatusHeader is RFC 9211's response header: how each cache on the
// way handled the call, one entry per cache, the backend's side first. The
// proxy appends its own entry to every answer it serves a caller (not a
// peer: the forwarder tells its own callers), after the entries the answer
// came with.
const CacheStatusHeader = "cache-status"

// cacheName is how the proxy names itself in its entries.
const cacheName = "collapser"

// The entries of what involved no kept answer.
const (
	// statusBypass: a call passed through, as the policy says.
	statusBypass = cacheName + "; fwd=bypass"
	// statusOwn: a call made for its caller alone: nothing shared, nothing
	// kept (a replayed stream's record took no new reader, or the proxy
	// serves nothing it keeps now).
	statusOwn = cacheName + "; fwd=miss; detail=own-call"
	// statusPrivate: an answer its caller alone gets, never kept.
	statusPrivate = cacheName + "; fwd=miss; detail=private"
)

// tells reports whether the proxy tells the callers of o how it served
// them: when cache-status is on, and they are callers, not peers.
func (p *Proxy) tells(o *origin) bool {
	return p.cacheStatus && o.mark == nil
}

// statusFor returns entry when the proxy tells the callers of o how it
// served them, "" otherwise.
func (p *Proxy) statusFor(o *origin, entry string) string {
	if p.tells(o) {
		return entry
	}
	return ""
}

// answerEntry returns the entry of a caller from o served resp (not nil)
// with outcome, of which left is left here; "" when the proxy tells that
// caller nothing.
func (p *Proxy) answerEntry(o *origin, outcome collapse.Outcome, left collapse.Windows, resp *Response) string {
	if !p.tells(o) {
		return ""
	}
	return served{outcome: outcome, left: left, forwarded: resp.forwarded, private: resp.Private}.entry()
}

// served is how an answer was served to one caller, for its entry.
type served struct {
	outcome   collapse.Outcome
	left      collapse.Windows // what is left of the answer kept here; zero when not kept
	forwarded bool             // the call was made by the key's owner, another replica
	private   bool             // the answer goes to its own caller only
}

// entry returns the caller's entry (RFC 9211 syntax):
//
//	hit; ttl=N                       a kept answer, fresh N seconds more
//	hit; ttl=0; detail=stale         a stale answer, while one call refreshes it
//	fwd=stale; detail=stale-if-error the call failed: the last answer instead
//	fwd=miss; stored; ttl=N          the call was made, its answer kept
//	fwd=miss; collapsed              the caller waited for another's call
//	fwd=miss; detail=private         the answer is its caller's alone, never kept
//	fwd=miss; detail=own-call        its own call, as the policy bounds waiting
//	fwd=bypass; detail=hit-for-pass  the key's last answer could not be shared
//
// with detail=forwarded on a call made by the key's owner.
func (s served) entry() string {
	switch s.outcome {
	case collapse.Stale:
		return cacheName + "; hit; ttl=0; detail=stale"
	case collapse.StaleOnError:
		return cacheName + "; fwd=stale; detail=stale-if-error"
	case collapse.Private:
		return statusPrivate
	case collapse.Own:
		return statusOwn
	case collapse.Pass:
		return cacheName + "; fwd=bypass; detail=hit-for-pass"
	}
	if s.outcome != collapse.Hit && s.private { // its leader's: the followers made calls of their own (Private)
		return statusPrivate
	}
	var buf [64]byte // on the stack: a kept header's entry (statusHeaders.entry) is no new string
	b := append(buf[:0], cacheName...)
	if s.outcome == collapse.Hit {
		return statusHeaders.entry(appendTTL(append(b, "; hit"...), s.left.TTL))
	}
	b = append(b, "; fwd=miss"...)
	if s.outcome == collapse.Join {
		b = append(b, "; collapsed"...)
	}
	if s.left != (collapse.Windows{}) {
		b = appendTTL(append(b, "; stored"...), s.left.TTL)
	}
	if s.forwarded {
		b = append(b, "; detail=forwarded"...)
	}
	return statusHeaders.entry(b)
}

// appendTTL appends ttl, in whole seconds.
func appendTTL(b []byte, ttl time.Duration) []byte {
	return strconv.AppendInt(append(b, "; ttl="...), int64(ttl/time.Second), 10)
}

// streamEntry returns the entry of a replayed stream's caller.
func streamEntry(outcome replay.Outcome) string {
	switch outcome {
	case replay.Replay:
		return cacheName + "; hit"
	case replay.Join:
		return cacheName + "; fwd=miss; collapsed"
	case replay.Own:
		return statusOwn
	}
	return cacheName + "; fwd=miss" // whether its record is kept is known at its end
}

// withStatus returns header, what a caller is sent, with entry after the
// entries it has: header itself when entry is "", the header that carries
// entry alone when header has none (statusHeaders.alone), a copy otherwise
// (the header of a kept answer is every caller's).
func withStatus(header metadata.MD, entry string) metadata.MD {
	if entry == "" {
		return header
	}
	if len(header) == 0 {
		return statusHeaders.alone(entry)
	}
	out := make(metadata.MD, len(header)+1)
	for k, v := range header {
		out[k] = v
	}
	theirs := header[CacheStatusHeader]
	out[CacheStatusHeader] = append(theirs[:len(theirs):len(theirs)], entry) // never into the shared array
	return out
}

// sendStatusHeader sends ss header, with entry after its entries, when
// send; otherwise entry goes in the trailer, and an answer that goes as a
// trailers-only response stays one.
func sendStatusHeader(ss grpc.ServerStream, header metadata.MD, entry string, send bool) error {
	if !send {
		if entry != "" {
			ss.SetTrailer(statusHeaders.alone(entry)) // merged into the stream's own copy
		}
		return nil
	}
	return ss.SendHeader(withStatus(header, entry))
}

// passStatus tells the caller of a call the library passes through how it
// was served (its entry, fwd=bypass), on the stream the handler answers
// on, where the proxy's own pass-through tells it: after the entries of the
// header the handler sends; when the handler sends none, in the header set
// when its first message goes or the call ends; in the trailer when no
// message went and no header was set, as a trailers-only answer stays one. The
// handler's stream is its own: a passStatus is used by one goroutine at a
// time.
type passStatus struct {
	entry     string // "": the caller is told nothing
	set, sent bool   // a header was set; the header was sent
}

// header returns md, a header the handler sets (or sends, when send), as
// it goes on: a header sent carries the entry.
func (s *passStatus) header(md metadata.MD, send bool) metadata.MD {
	if s.sent || !send {
		s.set = s.set || len(md) > 0
		return md
	}
	s.sent = true
	return withStatus(md, s.entry)
}

// beforeMessage sets the entry in the header, with setHeader, before the
// first message sends it.
func (s *passStatus) beforeMessage(setHeader func(metadata.MD) error) error {
	if s.sent || s.entry == "" {
		return nil
	}
	s.sent = true
	return setHeader(statusHeaders.alone(s.entry))
}

// end sets the entry where the caller gets it, once the handler returned,
// unless its header carried it: in the header (setHeader) when a message
// goes after it (message: a unary call that succeeded) or the handler set
// one, in the trailer (setTrailer) otherwise. A header the transport
// refuses has gone already.
func (s *passStatus) end(message bool, setHeader, setTrailer func(metadata.MD) error) {
	if s.sent || s.entry == "" {
		return
	}
	if message || s.set {
		_ = setHeader(statusHeaders.alone(s.entry))
		return
	}
	_ = setTrailer(statusHeaders.alone(s.entry))
}

// statusHeaders are the headers that carry one entry alone, the proxy's.
var statusHeaders entryHeaders

// entryHeaders keeps the last headers built to carry one entry alone,
// which most answers are sent with (the backend's answers rarely carry a
// header of their own), so that a call whose entry was sent before (a
// pass-through, a hit within the same second as the last, every call of
// an answer kept less than a second) builds no header again. It keeps
// entrySlots at most, the last built of those whose entries' hashes share
// a slot, and costs a call whose entry it does not hold nothing more than
// the header that call needs anyway. The headers it hands out are
// read-only, as every answer's header is: grpc-go reads the header a
// caller is sent, and merges one set on a stream into a copy of its own.
type entryHeaders struct {
	slots [entrySlots]atomic.Value // metadata.MD
}

// entrySlots is how many headers entryHeaders keeps: more than the entries
// of one steady load (a few outcomes, each with a ttl or none).
const entrySlots = 32

// entrySeed seeds the hashes that place entries in their slots.
var entrySeed = maphash.MakeSeed()

// entry returns b as a string: the one in the header its slot holds when
// that header carries b, or a new one, whose header then takes the slot.
func (e *entryHeaders) entry(b []byte) string {
	slot := &e.slots[maphash.Bytes(entrySeed, b)%entrySlots] // alone's slot: maphash.String of the same bytes
	if kept, ok := slot.Load().(metadata.MD); ok && kept[CacheStatusHeader][0] == string(b) {
		return kept[CacheStatusHeader][0]
	}
	entry := string(b)
	slot.Store(metadata.MD{CacheStatusHeader: {entry}})
	return entry
}

// alone returns a header that carries entry alone: the one its slot
// holds, or a new one, which takes the slot.
func (e *entryHeaders) alone(entry string) metadata.MD {
	slot := &e.slots[maphash.String(entrySeed, entry)%entrySlots]
	if kept, ok := slot.Load().(metadata.MD); ok && kept[CacheStatusHeader][0] == entry {
		return kept
	}
	header := metadata.MD{CacheStatusHeader: {entry}}
	slot.Store(header)
	return header
}
