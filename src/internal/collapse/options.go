package collapse

import "time"

// Defaults for the zero values of Options.
const (
	// DefaultMaxEntries bounds the number of cached results.
	DefaultMaxEntries = 10_000
	// DefaultMaxBytes bounds the bytes held by cached results, as counted by Options.Size.
	DefaultMaxBytes = 64 << 20
	// DefaultMaxEntryBytes is the size above which a result is shared with the
	// callers already waiting but not cached.
	DefaultMaxEntryBytes = 1 << 20
)

// Options configures a Group. The zero value shares in-flight calls and caches nothing.
type Options[V any] struct {
	// TTL is how long a successful result is served from the cache after its
	// call completes. Zero disables the cache: only in-flight calls are shared.
	TTL time.Duration
	// MaxEntries bounds the number of cached results (default DefaultMaxEntries).
	MaxEntries int
	// MaxBytes bounds the sum of Size over cached results (default DefaultMaxBytes).
	MaxBytes int64
	// MaxEntryBytes: a result whose Size is above it is not cached
	// (default DefaultMaxEntryBytes).
	MaxEntryBytes int64
	// Size reports the bytes a cached value holds. Nil counts every value as 0,
	// so only MaxEntries bounds the cache.
	Size func(V) int64
}

// Outcome says how a call to Group.Do was served.
type Outcome uint8

const (
	// Lead means this caller started the shared call.
	Lead Outcome = iota + 1
	// Join means this caller waited for a call that was already in flight.
	Join
	// Hit means this caller was served from the result cache.
	Hit
)

// String returns the outcome's metric label: "leader", "joined" or "cache_hit".
func (o Outcome) String() string {
	switch o {
	case Lead:
		return "leader"
	case Join:
		return "joined"
	case Hit:
		return "cache_hit"
	}
	return "unknown"
}

// Stats is a snapshot of a Group's state, for gauges.
type Stats struct {
	// InFlight is the number of shared calls running now.
	InFlight int
	// Waiters is the number of callers waiting for a shared call now.
	Waiters int
	// Entries is the number of cached results that have not expired.
	Entries int
	// Bytes is the sum of Size over those results.
	Bytes int64
}
