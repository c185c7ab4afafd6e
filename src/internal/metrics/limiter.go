package metrics

import (
	"strings"
	"sync"
	"sync/atomic"
)

// methodLimiter bounds the method label values. Methods the sidecar knows
// (its backend's descriptors and its policy name them, a set the operator
// controls) keep their names. Of the others, which callers choose, the
// first limit no longer than MaxMethodLabelBytes keep theirs; every later
// or longer one is reported as OtherMethod, so a client inventing method
// names cannot grow the series count or the size of a scrape.
//
// Reads are atomic loads of immutable sets; the unknown set is copied on
// each admission, which happens at most limit times.
type methodLimiter struct {
	limit int
	known atomic.Pointer[map[string]struct{}] // replaced by setKnown, never mutated
	mu    sync.Mutex                          // serialises admissions
	seen  atomic.Pointer[map[string]struct{}] // unknown methods admitted; replaced, never mutated, under mu
}

func newMethodLimiter(limit int) *methodLimiter {
	l := &methodLimiter{limit: limit}
	empty := map[string]struct{}{}
	l.known.Store(&empty)
	l.seen.Store(&empty)
	return l
}

// setKnown replaces the set of known methods.
func (l *methodLimiter) setKnown(methods []string) {
	known := make(map[string]struct{}, len(methods))
	for _, m := range methods {
		if len(m) <= MaxMethodLabelBytes {
			known[m] = struct{}{}
		}
	}
	l.known.Store(&known)
}

// label returns method when it is known or admitted, else OtherMethod.
func (l *methodLimiter) label(method string) string {
	if _, ok := (*l.known.Load())[method]; ok {
		return method
	}
	seen := *l.seen.Load()
	if _, ok := seen[method]; ok {
		return method
	}
	if len(seen) >= l.limit || len(method) > MaxMethodLabelBytes {
		return OtherMethod
	}
	return l.admit(method)
}

func (l *methodLimiter) admit(method string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := *l.seen.Load()
	if _, ok := seen[method]; ok {
		return method
	}
	if len(seen) >= l.limit {
		return OtherMethod
	}
	next := make(map[string]struct{}, len(seen)+1)
	for m := range seen {
		next[m] = struct{}{}
	}
	// Clone so a long-lived key does not pin the caller's buffer.
	next[strings.Clone(method)] = struct{}{}
	l.seen.Store(&next)
	return method
}
