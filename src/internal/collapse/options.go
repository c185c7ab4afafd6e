package collapse

import (
	"fmt"
	"time"
)

// Defaults for the zero values of Limits.
const (
	// DefaultMaxEntries bounds the number of results held.
	DefaultMaxEntries = 10_000
	// DefaultMaxBytes bounds the bytes held by results: each counts its key,
	// its value (Options.Size) and EntryOverhead.
	DefaultMaxBytes = 64 << 20
	// DefaultMaxEntryBytes is the size above which a result is shared with
	// the callers already waiting but not kept.
	DefaultMaxEntryBytes = 1 << 20
	// DefaultPassTTL is how long a key whose answer could not be shared
	// holds its pass marker, as Varnish's hit-for-miss objects live two
	// minutes: its callers meanwhile do not wait for one another, and the
	// first shareable answer ends it.
	DefaultPassTTL = 2 * time.Minute
)

// Limits bound the results a Group keeps. A zero field takes its default.
type Limits struct {
	// MaxEntries bounds the number of results held, fresh and stale
	// (default DefaultMaxEntries).
	MaxEntries int
	// MaxBytes bounds the bytes held by results (default DefaultMaxBytes).
	// A result counts its key, Options.Size of its value and EntryOverhead.
	MaxBytes int64
	// MaxEntryBytes: a result counting more is not kept
	// (default DefaultMaxEntryBytes).
	MaxEntryBytes int64
}

// Validate reports a negative limit.
func (l Limits) Validate() error {
	if l.MaxEntries < 0 || l.MaxBytes < 0 || l.MaxEntryBytes < 0 {
		return fmt.Errorf("collapse: a negative limit in %+v", l)
	}
	return nil
}

// Options configures a Group. The zero value shares calls in flight, keeps
// no result (a result is kept for its CallOptions.TTL) and runs any number
// of calls at once.
type Options[V any] struct {
	// Limits bound the results kept.
	Limits
	// Size reports the bytes a value holds. Nil counts every value as 0, so
	// a result counts its key and EntryOverhead only.
	Size func(V) int64
	// Private reports whether a value may go only to the caller whose call
	// produced it: it is never kept, and the callers that joined the call
	// make calls of their own. Nil: every value may be shared.
	Private func(V) bool
	// MaxCalls bounds the calls running at once. A call beyond it waits for
	// a slot within its CallOptions.Timeout and while a caller waits for it,
	// then fails with ErrOverloaded. 0: no bound.
	MaxCalls int
	// Declared reports the windows a value declares for itself, which
	// replace the windows of the CallOptions of the call that produced it
	// (an HTTP response's Cache-Control does this). Nil: no value declares
	// any.
	Declared func(V) (Windows, bool)
	// Copied reports whether a value is a copy of a result another cache
	// holds, such as the key's owner among replicas: it lives out what is
	// left of it (what Declared says), neither jittered nor refreshed early
	// here. Nil: no value is.
	Copied func(V) bool
	// Handed reports whether a value is a result another cache handed over
	// (Peek, handoff.go), and when its early refresh is due from now (0:
	// none): it is this cache's own from then on, refreshed early here,
	// but it lives out what is left of it (what Declared says), not
	// jittered again. Nil: no value is.
	Handed func(V) (refreshIn time.Duration, ok bool)
	// SoftPurgeRate paces the refreshes of the results one soft
	// PurgeMatching takes back: at most this many per second (each result
	// is served stale until its turn). 0: all at once.
	SoftPurgeRate float64
	// PassTTL is how long a pass marker lasts (default DefaultPassTTL).
	PassTTL time.Duration
	// Now is the clock (default time.Now); a test moves its own.
	Now func() time.Time
}

// Windows say how long a result is served after its call completes: fresh
// for TTL, then stale within StaleWhileRevalidate while one call refreshes
// it, and within StaleIfError instead of a failed call's error. A result
// whose windows are all zero is not kept.
type Windows struct {
	TTL                  time.Duration
	StaleWhileRevalidate time.Duration
	StaleIfError         time.Duration
}

// keeps reports whether a result served for w is kept at all.
func (w Windows) keeps() bool {
	return w.TTL > 0 || w.StaleWhileRevalidate > 0 || w.StaleIfError > 0
}

// CallOptions say how one key's call is shared and how long its result is
// served. Every caller passes the options of its key; the leader's apply to
// the call it starts. The zero value shares the call while it runs and keeps
// nothing. A Group only reads them: share one value among calls.
type CallOptions struct {
	// TTL is how long a successful result is served fresh (a Hit) after
	// its call completes.
	TTL time.Duration
	// StaleWhileRevalidate is how long after TTL a caller is answered with
	// the result at once (Stale) while one background call refreshes it.
	StaleWhileRevalidate time.Duration
	// StaleIfError is how long after TTL the callers of a call that failed
	// with an error StaleOn accepts get the result instead (StaleOnError).
	StaleIfError time.Duration
	// StaleOn reports whether a call's error may be answered with a stale
	// result; nil accepts every error.
	StaleOn func(error) bool
	// Finish keeps a running call going when every caller waiting for it
	// has left, so that its result is kept. By default the call's context is
	// cancelled then: nobody is left to want it, and finishing calls nobody
	// waits for lets callers who give up load the backend at no cost.
	Finish bool
	// Timeout bounds the call, its wait for a slot (Options.MaxCalls)
	// included; 0: no bound.
	Timeout time.Duration
	// MaxWaiters bounds the callers waiting for one key's call besides its
	// leader: one more makes a call of its own (Own), never kept, rather
	// than wait; 0: no bound.
	MaxWaiters int
	// WaitTimeout bounds how long a caller waits for a call it joined: then
	// it makes a call of its own (Own), never kept, as nginx's
	// proxy_cache_lock_timeout lets a request go; 0: no bound.
	WaitTimeout time.Duration
	// TTLJitter shortens the TTL of each result, the options' or one its
	// value declares, by up to this fraction of it (0 to 1), drawn from
	// its key: keys loaded together then do not expire together. 0: none.
	TTLJitter float64
	// EarlyRefresh refreshes a result that is still read before its TTL
	// ends, at a time drawn from its key (refresh.go): keys loaded together
	// are refreshed at times spread over their TTL, and a key read all the
	// time is never a miss. Its callers are served the result meanwhile.
	EarlyRefresh bool
}

// Windows returns the windows of the results of calls with these options.
func (o *CallOptions) Windows() Windows {
	return Windows{TTL: o.TTL, StaleWhileRevalidate: o.StaleWhileRevalidate, StaleIfError: o.StaleIfError}
}

// Outcome says how a call to Group.Do was served.
type Outcome uint8

const (
	// Lead means this caller started the shared call.
	Lead Outcome = iota + 1
	// Join means this caller waited for a call that was already in flight.
	Join
	// Hit means this caller was served a fresh result.
	Hit
	// Stale means this caller was served a result past its TTL, within
	// StaleWhileRevalidate, while one call refreshes it.
	Stale
	// StaleOnError means the call this caller waited for failed, and it was
	// served the key's last result, within StaleIfError, instead.
	StaleOnError
	// Private means the call this caller joined produced a private value,
	// so it made a call of its own.
	Private
	// Own means this caller made a call of its own rather than wait: the
	// key's waiting list was full (MaxWaiters), or its wait timed out
	// (WaitTimeout).
	Own
	// Pass means this caller made a call of its own because the key's last
	// answer could not be shared (hit-for-pass): waiting for another's
	// call would most likely have been for nothing.
	Pass
)

// String returns the outcome's metric label: "leader", "joined",
// "cache_hit", "stale", "stale_on_error", "private", "own" or "pass".
func (o Outcome) String() string {
	switch o {
	case Lead:
		return "leader"
	case Join:
		return "joined"
	case Hit:
		return "cache_hit"
	case Stale:
		return "stale"
	case StaleOnError:
		return "stale_on_error"
	case Private:
		return "private"
	case Own:
		return "own"
	case Pass:
		return "pass"
	}
	return "unknown"
}

// Outcomes lists every Outcome, for metrics that export each one up front.
var Outcomes = []Outcome{Lead, Join, Hit, Stale, StaleOnError, Private, Own, Pass}

// Stats is a snapshot of a Group's state, for gauges.
type Stats struct {
	// InFlight is the number of shared calls started and not completed,
	// background refreshes included.
	InFlight int
	// Queued is the number of those waiting for a slot (Options.MaxCalls).
	Queued int
	// Waiters is the number of callers waiting for a shared call now,
	// leaders included.
	Waiters int
	// Entries is the number of results held, fresh or stale, and of pass
	// markers.
	Entries int
	// Bytes is what those results count against Limits.MaxBytes.
	Bytes int64
}
