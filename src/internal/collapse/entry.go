package collapse

import (
	"sync/atomic"
	"time"
)

// entry is one call for a key and, once it succeeded, the key's result.
//
// Its life (state): flying while its call runs, the key's entry in its
// shard's map; then held, a result in the shard's map and heap until it is
// gone (then done), or done at once, out of the map; or abandoned when every
// caller left first, out of the map while its cancelled call ends (then
// done). A later call for the key is a new entry that points at the held one
// as prev, so the result can be served stale meanwhile and replaced, or
// given back the key, when the call ends. A purge may detach a flying
// entry: out of the map, it answers its waiters and keeps nothing. A held
// entry keeps nothing of the call that made it: its answer, its key and its
// windows.
//
// A pass marker is a held entry without a value: the key's last answer
// could not be shared (Options.Private), so until it is gone the key's
// callers do not wait for one another's calls (hit-for-pass). The call of
// the first of them is a pass call (flying, pass set): the callers that
// come meanwhile make calls of their own, and its answer replaces the
// marker, with a result when it may be shared, with a new marker when not.
type entry[V any] struct {
	key   string
	hash  uint64 // of key: picks its shard, and draws its jitter and refresh time
	shard *shard[V]

	// Set by the leader before the call starts, then only read.
	opts *CallOptions
	fn   func(*Call) (V, error) // cleared by complete
	pass bool                   // a pass call or marker (guarded by shard.mu once in the map)
	call Call                   // lets go of what it was made with when the call ends

	waiting atomic.Int32 // callers waiting for the call now
	running atomic.Bool  // the call holds its slot and runs

	done chan struct{} // closed when the call has completed
	// Written once before done is closed.
	val    V
	err    error
	answer answer // what val is to the waiters

	// Guarded by shard.mu.
	state    state
	detached bool      // a purge took the key from its call in flight: its result is not kept
	prev     *entry[V] // while flying: the key's earlier result, if held
	fresh    int64     // served as a hit before this (nanoseconds since the Group's epoch)
	refresh  int64     // a read from this until fresh refreshes it early; 0: none (refresh.go)
	turn     int64     // soft-purged: refreshed no sooner than this; 0: not paced (purge.go)
	swrEnd   int64     // served stale while refreshing before this
	sieEnd   int64     // served instead of an error before this
	size     int64     // what it counts against Limits.MaxBytes
	index    int       // in the shard's heap; -1 when not held
}

// state is where an entry is in its life.
type state uint8

const (
	stateFlying    state = iota // its call runs, or waits for a slot
	stateAbandoned              // every caller left; its call is cancelled and the key moved on
	stateHeld                   // its call's result, served until it is gone
	stateDone                   // its call completed and nothing of it is held
)

// answer says what a completed call's value is to the callers that waited.
type answer uint8

const (
	answerShared  answer = iota // val and err go to every waiter
	answerPrivate               // val may go only to the leader: the others make calls of their own
	answerStale                 // val is prev's, served because the call failed
)

// leave counts a caller out of the callers waiting for e's call (the leader
// whose context ended during the call, or a follower that stops waiting),
// and abandons the call when it was the last.
func (e *entry[V]) leave() {
	if e.waiting.Add(-1) == 0 {
		e.shard.group.abandon(e)
	}
}

// Expiry orders held results in their shard's heap by when they are gone
// (expiryheap.Item).
func (e *entry[V]) Expiry() int64 { return e.gone() }

// HeapIndex is where the shard's heap keeps e's position (expiryheap.Item).
func (e *entry[V]) HeapIndex() *int { return &e.index }

// gone is when a held result stops being served at all.
func (e *entry[V]) gone() int64 {
	return max(e.swrEnd, e.sieEnd)
}

// leaders is how many of the callers counted in e.waiting led e's call: a
// background refresh has no leader.
func (e *entry[V]) leaders() int32 {
	if e.call.background != 0 {
		return 0
	}
	return 1
}

// background is why a refresh of e, a held result past its TTL, runs:
// Purged when a soft purge paced it, Revalidate otherwise.
func (e *entry[V]) background() Background {
	if e.turn != 0 {
		return Purged
	}
	return Revalidate
}

// left returns what is left at now of the windows the result e is served
// for: nothing once it is not held (its windows are zero, or end at once,
// as complete leaves them), except the stale-if-error window of the result
// a failed call e served instead of its error. The caller holds
// e.shard.mu, or e is done and out of the map.
//
// A result due for an early refresh is fresh for a copy until that refresh
// is due, no longer: the copy's cache then asks again, and its reads are
// those that start the refresh here (refresh.go), however few this cache's
// own readers are.
func (e *entry[V]) left(now int64) Windows {
	fresh := e.fresh
	if e.refresh != 0 {
		fresh = min(fresh, e.refresh)
	}
	return e.until(now, fresh)
}

// until returns what is left at now of the windows of e, were it fresh
// until fresh. The caller holds e.shard.mu, or e is done and out of the
// map.
func (e *entry[V]) until(now, fresh int64) Windows {
	from := max(now, fresh) // the stale windows start when it goes stale
	return Windows{
		TTL:                  time.Duration(from - now),
		StaleWhileRevalidate: time.Duration(max(0, e.swrEnd-from)),
		StaleIfError:         time.Duration(max(0, e.sieEnd-from)),
	}
}
