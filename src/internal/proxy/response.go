package proxy

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/cachecontrol"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// DefaultPrivateHeaders are the response headers (or trailers) that make a
// response private, as they do for HTTP caches: a cookie being set belongs
// to the caller it was set for. Options.PrivateHeaders extends the list.
var DefaultPrivateHeaders = []string{"set-cookie", "set-cookie2"}

// Response is what one backend call for a unary method produced. Callers
// sharing it must treat every field as read-only.
type Response struct {
	// Payload is the response message as wire bytes; nil when Err is set.
	Payload []byte
	// Header and Trailer are the backend's response metadata, ready to forward.
	Header, Trailer metadata.MD
	// Err is the backend's status as a status error, nil for OK.
	Err error
	// Private means the response may go only to the caller whose call
	// produced it: it carries a private header (see DefaultPrivateHeaders).
	Private bool

	windows  collapse.Windows // what its cache-control declares, when declared
	declared bool
	life     collapse.Windows // what is left of its windows at the owner that sent it, when aged
	aged     bool
	// handed: its key's previous owner handed it over (handoff.go); its
	// early refresh is due refreshIn after it came (0: none).
	handed    bool
	refreshIn time.Duration
	forwarded bool // the key's owner, another replica, made the call

	tags     tagged   // what its tags header says, taken out of Header
	producer producer // the span of the call that produced it, for links; none when not traced
}

// responseSize returns the bytes r holds, for collapse.Options.Size: the
// Response (its producer span's IDs inline), its payload's array, its
// metadata maps, its tags and its status error (a kept error answer's), as
// allocated.
func responseSize(r *Response) int64 {
	if r == nil {
		return 0
	}
	// The tags are substrings of the tags header's values: their bytes are
	// counted once, with the header. An error answer's details are held
	// twice: decoded in its status, and encoded in its trailer's
	// grpc-status-details-bin, which grpc-go leaves in the metadata it
	// hands over. Both count.
	return heapsize.Of(int(unsafe.Sizeof(*r))) + heapsize.Bytes(r.Payload) + heapsize.MD(r.Header) + heapsize.MD(r.Trailer) +
		heapsize.Of(cap(r.tags.tags)*int(unsafe.Sizeof(""))) + heapsize.MD(r.tags.header) + heapsize.StatusErr(r.Err)
}

// kept is strip for metadata a response keeps: nil when nothing is left,
// and a map of its own size when stripping left the map holding more than
// what is left needs.
func kept(md metadata.MD) metadata.MD {
	before := len(md)
	md = strip(md)
	switch {
	case len(md) == 0:
		return nil
	case heapsize.Map(len(md), 1) == heapsize.Map(before, 1):
		return md
	}
	// maps.Clone would copy the tables as they are: a map made for what is
	// left holds only what it needs.
	out := make(metadata.MD, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}

// headerSet holds lower-case header names.
type headerSet map[string]bool

// newHeaderSet returns DefaultPrivateHeaders and extra, checked and
// lower-cased.
func newHeaderSet(extra []string) (headerSet, error) {
	s := headerSet{}
	for _, h := range DefaultPrivateHeaders {
		s[h] = true
	}
	for i, h := range extra {
		name := strings.ToLower(h)
		if err := requestkey.ValidateName(name); err != nil {
			return nil, fmt.Errorf("proxy: PrivateHeaders[%d] %q: %w", i, h, err)
		}
		s[name] = true
	}
	return s, nil
}

// privateIn reports whether md makes a response private: it has a header of
// s, or a cache-control whose directives say the answer is for its own
// caller (private) or may not be used for another request (no-store,
// no-cache): a collapser's waiters are other requests.
func (s headerSet) privateIn(md metadata.MD) bool {
	for k := range md {
		if s[k] {
			return true
		}
	}
	f := cachecontrol.Parse(md[cachecontrol.Header])
	return f.Private || f.NoStore
}
