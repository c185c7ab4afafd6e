package collapse

import "sync/atomic"

// entry is one call for a key and, once it succeeded, the key's result.
//
// Its life: a call in flight (in its shard's map, held false), then either a
// result (held, in the shard's heap until it is gone) or nothing (out of the
// map). A later call for the key is a new entry that points at the held one
// as prev, so the result can be served stale meanwhile and replaced, or
// given back the key, when the call ends.
type entry[V any] struct {
	key   string
	shard *shard[V]

	// Set by the leader before the call starts, then only read.
	opts       *CallOptions
	fn         func(*Call) (V, error) // cleared by complete
	background bool                   // a refresh nobody waits for; its slot is already held
	call       Call

	waiting atomic.Int32 // callers waiting for the call now
	running atomic.Bool  // the call holds its slot and runs

	done chan struct{} // closed when the call has completed
	// Written once before done is closed.
	val          V
	err          error
	private      bool // val may go only to the leader
	staleOnError bool // val is prev's, served because the call failed

	// Guarded by shard.mu.
	completed bool
	abandoned bool      // every caller left and the call was cancelled
	prev      *entry[V] // while in flight: the key's earlier result, if held
	held      bool      // a result, in the shard's heap
	fresh     int64     // served as a hit before this (nanoseconds since the Group's epoch)
	swrEnd    int64     // served stale while refreshing before this
	sieEnd    int64     // served instead of an error before this
	size      int64     // what it counts against Options.MaxBytes
	index     int       // in the shard's heap; -1 when not held
}

// leave counts the leader out of the callers waiting for e's call, when its
// context ended during the call.
func (e *entry[V]) leave() {
	if e.waiting.Add(-1) == 0 {
		e.shard.group.abandon(e)
	}
}

// ExpiresBefore orders held results in their shard's heap by when they are
// gone (expiryheap.Item).
func (e *entry[V]) ExpiresBefore(o *entry[V]) bool { return e.gone() < o.gone() }

// HeapIndex is where the shard's heap keeps e's position (expiryheap.Item).
func (e *entry[V]) HeapIndex() *int { return &e.index }

// gone is when a held result stops being served at all.
func (e *entry[V]) gone() int64 {
	return max(e.swrEnd, e.sieEnd)
}
