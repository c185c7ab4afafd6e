// Package collapse shares one call among all callers that ask for the same key
// at about the same time, and serves its result for a short while after.
//
// A Group maps keys to entries. The first caller for a key (the leader) starts
// the call; callers arriving while it runs (followers) wait on the entry's one
// done channel; a successful result then stays in the entry for Options.TTL and
// is served as a cache hit. The call itself runs on a worker goroutine owned by
// the Group, not by any caller, so a caller that gives up (its context ends)
// leaves the others waiting for the same result. Errors and panics reach every
// waiter and are never cached.
//
// Keys are compared by their full content: the string is the map key, a hash
// only picks the shard. The package knows nothing of gRPC; the proxy package
// builds the keys and the calls.
//
// Seams for what comes next: the call is an opaque func, so a peer that owns
// the key on another replica can be called instead of the backend; the entry
// is the unit a recorded stream or a stale value would live in; admit decides
// what is cached and for how long.
package collapse
