package collapse

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// shardCount spreads keys over independently locked maps so that callers of
// different keys never contend on one lock. A power of two.
const shardCount = 32

// Group shares calls by key. Create one with New; it is safe for concurrent use.
type Group[V any] struct {
	ttl           int64 // nanoseconds; 0 disables the cache
	maxEntries    int64
	maxBytes      int64
	maxEntryBytes int64
	size          func(V) int64

	seed   maphash.Seed
	epoch  time.Time
	now    func() int64 // nanoseconds since epoch; replaced in tests
	shards [shardCount]shard[V]

	inflight atomic.Int64
	waiters  atomic.Int64
	entries  atomic.Int64 // cached entries, across shards
	bytes    atomic.Int64 // their Size, across shards

	handoff chan *entry[V] // idle workers receive new calls here
	closed  chan struct{}  // closed by Close: idle workers exit
}

// entry is one key's call and, once it succeeded, its cached result.
type entry[V any] struct {
	key   string
	shard *shard[V]
	fn    func() (V, error) // the call; set by the leader, cleared by the worker

	done chan struct{} // closed when the call has completed
	val  V             // written once before done is closed
	err  error         // written once before done is closed

	// Guarded by shard.mu.
	cached  bool
	expires int64 // nanoseconds since epoch
	size    int64
	next    *entry[V] // the next cached entry in completion order
}

// New returns a Group configured by opts.
func New[V any](opts Options[V]) *Group[V] {
	g := &Group[V]{
		ttl:           int64(opts.TTL),
		maxEntries:    int64(orDefault(opts.MaxEntries, DefaultMaxEntries)),
		maxBytes:      orDefault(opts.MaxBytes, DefaultMaxBytes),
		maxEntryBytes: orDefault(opts.MaxEntryBytes, DefaultMaxEntryBytes),
		size:          opts.Size,
		seed:          maphash.MakeSeed(),
		epoch:         time.Now(),
		handoff:       make(chan *entry[V]),
		closed:        make(chan struct{}),
	}
	g.now = func() int64 { return int64(time.Since(g.epoch)) }
	for i := range g.shards {
		g.shards[i].m = make(map[string]*entry[V])
	}
	return g
}

func orDefault[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Do returns the result for key, calling fn at most once for all callers that
// ask for key while it runs, and not at all while a cached result for key is
// fresh. fn runs on a goroutine of the Group, detached from every caller: a
// caller whose ctx ends first gets ctx.Err() and the call goes on for the
// others. fn's error reaches every caller that waits for it and is never
// cached; a panic in fn reaches them as a *PanicError.
func (g *Group[V]) Do(ctx context.Context, key string, fn func() (V, error)) (V, Outcome, error) {
	s := &g.shards[maphash.String(g.seed, key)&(shardCount-1)]
	now := g.now()

	s.mu.RLock()
	e := s.m[key]
	switch {
	case e == nil:
	case !e.cached:
		s.mu.RUnlock()
		v, err := g.wait(ctx, e)
		return v, Join, err
	case now < e.expires:
		v := e.val
		s.mu.RUnlock()
		return v, Hit, nil
	}
	s.mu.RUnlock()

	s.mu.Lock()
	g.sweep(s, now) // drops key's entry too if it has expired
	if e = s.m[key]; e != nil {
		if e.cached {
			v := e.val
			s.mu.Unlock()
			return v, Hit, nil
		}
		s.mu.Unlock()
		v, err := g.wait(ctx, e)
		return v, Join, err
	}
	e = &entry[V]{key: key, shard: s, fn: fn, done: make(chan struct{})}
	s.m[key] = e
	s.mu.Unlock()

	g.inflight.Add(1)
	g.start(e)
	v, err := g.wait(ctx, e)
	return v, Lead, err
}

// wait blocks until e's call completes or ctx ends, whichever is first.
func (g *Group[V]) wait(ctx context.Context, e *entry[V]) (V, error) {
	g.waiters.Add(1)
	defer g.waiters.Add(-1)
	select {
	case <-e.done:
		return e.val, e.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Stats drops expired results and returns a snapshot of the Group's state.
func (g *Group[V]) Stats() Stats {
	now := g.now()
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		g.sweep(s, now)
		s.mu.Unlock()
	}
	return Stats{
		InFlight: int(g.inflight.Load()),
		Waiters:  int(g.waiters.Load()),
		Entries:  int(g.entries.Load()),
		Bytes:    g.bytes.Load(),
	}
}

// Close lets idle worker goroutines exit. Calls in flight complete; Do keeps
// working after Close, without reusing workers. Call it once.
func (g *Group[V]) Close() {
	close(g.closed)
}
