// Package logonce remembers which log lines were already written, within a
// bound of entries and bytes: callers choose method names, so neither the
// number of names nor their length may grow memory without limit. Past the
// bound nothing more is logged, which Set says once.
package logonce

import (
	"fmt"
	"sync"
)

// MaxValueBytes is the longest value Short keeps whole.
const MaxValueBytes = 128

// Set remembers up to a number of keys and a number of their bytes. The
// zero value remembers nothing; make one with New. It is safe for concurrent
// use.
type Set struct {
	maxKeys, maxBytes int

	mu    sync.Mutex
	seen  map[string]struct{} // guarded by mu
	bytes int                 // of the keys in seen; guarded by mu
	full  bool                // the bound was reached; guarded by mu
}

// New returns a Set bounded by maxKeys keys and maxBytes bytes of keys.
func New(maxKeys, maxBytes int) *Set {
	return &Set{maxKeys: maxKeys, maxBytes: maxBytes, seen: map[string]struct{}{}}
}

// First reports whether key is new and was remembered: the caller logs. It
// reports false for a key seen before, and for every new key once the bound
// is reached; full is true exactly once, on the first key refused, so the
// caller can say that it stops logging.
func (s *Set) First(key string) (first, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[key]; ok {
		return false, false
	}
	if len(s.seen) >= s.maxKeys || s.bytes+len(key) > s.maxBytes {
		full = !s.full
		s.full = true
		return false, full
	}
	s.seen[key] = struct{}{}
	s.bytes += len(key)
	return true, false
}

// Short returns s for a log line: whole up to MaxValueBytes, else its first
// MaxValueBytes bytes and how long it was.
func Short(s string) string {
	if len(s) <= MaxValueBytes {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:MaxValueBytes], len(s))
}
