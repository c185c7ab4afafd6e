package proxy

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/mdsize"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// DefaultPrivateHeaders are the response headers (or trailers) that make a
// response private, as they do for HTTP caches: a cookie being set belongs
// to the caller it was set for. Options.PrivateHeaders extends the list.
var DefaultPrivateHeaders = []string{"set-cookie", "set-cookie2"}

// cacheControl is the header whose "private" and "no-store" directives make
// a response private too.
const cacheControl = "cache-control"

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
}

// responseOverhead is what responseSize counts for the Response itself,
// besides its payload and metadata.
const responseOverhead = 96

// responseSize returns the bytes r holds, for collapse.Options.Size.
func responseSize(r *Response) int64 {
	if r == nil {
		return 0
	}
	return responseOverhead + int64(len(r.Payload)) + mdsize.Of(r.Header) + mdsize.Of(r.Trailer)
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
// s, or a cache-control header with a private or no-store directive.
func (s headerSet) privateIn(md metadata.MD) bool {
	for k, vs := range md {
		if s[k] {
			return true
		}
		if k != cacheControl {
			continue
		}
		for _, v := range vs {
			for d := range strings.SplitSeq(v, ",") {
				d, _, _ = strings.Cut(strings.TrimSpace(strings.ToLower(d)), "=")
				if d == "private" || d == "no-store" {
					return true
				}
			}
		}
	}
	return false
}
