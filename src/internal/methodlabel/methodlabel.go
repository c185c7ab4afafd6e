// Package methodlabel bounds the method names the sidecar reports: the
// method label of its metrics and the names of its spans. Callers choose
// method names (the proxy serves any method), so a name is reported as
// itself only while the set of names stays small and each name short;
// every other method is reported as Other. One Set serves the metrics and
// the traces, so a method has the same name in both.
package methodlabel

import (
	"strings"
	"sync"
	"sync/atomic"
)

const (
	// MaxUnknown is how many names of methods the sidecar does not know a
	// Set keeps.
	MaxUnknown = 100
	// MaxBytes is the longest name kept.
	MaxBytes = 256
	// Other is the name of every method beyond those bounds.
	Other = "other"
)

// Set bounds the method names reported. Methods the sidecar knows (its
// backend's descriptors and its policy name them, a set the operator
// controls) keep their names. Of the others, which callers choose, the
// first MaxUnknown no longer than MaxBytes keep theirs; every later or
// longer one is reported as Other, so a client inventing method names
// cannot grow the series count, the size of a scrape or the names of spans.
//
// Reads are atomic loads of immutable sets; the unknown set is copied on
// each admission, which happens at most limit times. It is safe for
// concurrent use.
type Set struct {
	limit int
	known atomic.Pointer[map[string]struct{}] // replaced by SetKnown, never mutated
	mu    sync.Mutex                          // serialises admissions
	seen  atomic.Pointer[map[string]struct{}] // unknown methods admitted; replaced, never mutated, under mu
}

// New returns a Set that keeps the names of up to limit methods it does not
// know (MaxUnknown in the sidecar).
func New(limit int) *Set {
	s := &Set{limit: limit}
	empty := map[string]struct{}{}
	s.known.Store(&empty)
	s.seen.Store(&empty)
	return s
}

// SetKnown replaces the set of known methods.
func (s *Set) SetKnown(methods []string) {
	known := make(map[string]struct{}, len(methods))
	for _, m := range methods {
		if len(m) <= MaxBytes {
			known[m] = struct{}{}
		}
	}
	s.known.Store(&known)
}

// Label returns method when it is known or admitted, else Other.
func (s *Set) Label(method string) string {
	if _, ok := (*s.known.Load())[method]; ok {
		return method
	}
	seen := *s.seen.Load()
	if _, ok := seen[method]; ok {
		return method
	}
	if len(seen) >= s.limit || len(method) > MaxBytes {
		return Other
	}
	return s.admit(method)
}

func (s *Set) admit(method string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := *s.seen.Load()
	if _, ok := seen[method]; ok {
		return method
	}
	if len(seen) >= s.limit {
		return Other
	}
	next := make(map[string]struct{}, len(seen)+1)
	for m := range seen {
		next[m] = struct{}{}
	}
	// Clone so a long-lived key does not pin the caller's buffer.
	next[strings.Clone(method)] = struct{}{}
	s.seen.Store(&next)
	return method
}
