// Package collapse shares one call among all callers that ask for the same key
// at about the same time, and serves its result for a while after.
//
// A Group maps keys to entries. The first caller for a key (the leader) starts
// the call; callers arriving while it runs (followers) wait on the entry's one
// done channel. A successful result then lives through the stages its
// CallOptions give it, each with its own expiry: fresh (served as a Hit),
// stale-while-revalidate (served at once while one background call refreshes
// it) and stale-if-error (served instead of a failed call's error), then gone.
// Keys with different options live side by side in one Group. A TTL may be
// cut by a jitter, and a fresh result still read refreshed early by one
// background call, both at times drawn from its key, so that keys loaded
// together neither expire nor refresh together (CallOptions.TTLJitter,
// EarlyRefresh).
//
// The call runs on the leader's goroutine, with a context that belongs to no
// caller: a caller that gives up (its context ends) leaves the others waiting
// for the same result, and when the last of them has left the call's context
// is cancelled (unless CallOptions.Finish says to keep it for the cache). A
// follower returns as soon as its own context ends; the leader's Do returns
// when the call does, which a gRPC caller never waits for: its client ends
// the call on its own deadline or cancellation, and so does grpc-go's server.
// Only a stale-while-revalidate refresh, which no caller waits for, gets a
// goroutine of its own. Errors and panics reach every waiter and are never kept. A
// value the Options call private goes only to its leader; the followers make
// calls of their own, and the key holds a pass marker for a while after
// (Varnish's hit-for-miss): its callers make calls of their own at once
// rather than queue behind a call whose answer they most likely cannot
// share, until an answer that may be shared replaces the marker.
//
// A caller that keeps a copy of the result, another cache, asks through
// DoCopy: it learns what is left of the windows of the value it got
// (Copy.Left), which it keeps its copy for, never a new life; and when it
// refreshes its copy it asks for a fresh result (Copy.Fresh), never served
// a stale one.
//
// Everything a client can make a Group hold is bounded where it is created:
// results and pass markers by count and by bytes (key, value and
// EntryOverhead), the calls running at once by Options.MaxCalls, a key's
// waiting callers by CallOptions.MaxWaiters, exactly.
//
// Keys are compared by their full content: the string is the map key, a hash
// only picks the shard. The package knows nothing of gRPC; the proxy package
// builds the keys and the calls.
package collapse
