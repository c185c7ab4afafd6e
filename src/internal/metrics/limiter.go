package metrics

import (
	"strings"
	"sync"
	"sync/atomic"
)

// methodLimiter bounds the number of distinct method label values. The first
// limit methods it sees keep their name; every later one is reported as
// OtherMethod, so a client inventing method names cannot grow the series count
// without limit.
//
// Reads are a single atomic load of an immutable set; the set is copied on
// each admission, which happens at most limit times.
type methodLimiter struct {
	limit int
	mu    sync.Mutex                          // serialises admissions
	seen  atomic.Pointer[map[string]struct{}] // replaced, never mutated, under mu
}

func newMethodLimiter(limit int) *methodLimiter {
	l := &methodLimiter{limit: limit}
	empty := map[string]struct{}{}
	l.seen.Store(&empty)
	return l
}

// label returns method when it is (or can still be) admitted, else OtherMethod.
func (l *methodLimiter) label(method string) string {
	seen := *l.seen.Load()
	if _, ok := seen[method]; ok {
		return method
	}
	if len(seen) >= l.limit {
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
	// Clone so a long-lived key does not pin the caller's (possibly large) buffer.
	next[strings.Clone(method)] = struct{}{}
	l.seen.Store(&next)
	return method
}
