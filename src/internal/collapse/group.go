package collapse

import (
	"cmp"
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"

	"github.com/collapser/collapser/src/internal/heapsize"
)

// shardCount spreads keys over independently locked maps so that callers of
// different keys never contend on one lock. A power of two.
const shardCount = 32

// Group shares calls by key and serves their results. Create one with New;
// it is safe for concurrent use.
type Group[V any] struct {
	maxEntries    int64
	maxBytes      int64
	maxEntryBytes int64
	size          func(V) int64
	private       func(V) bool
	declared      func(V) (Windows, bool)
	copied        func(V) bool
	handed        func(V) (time.Duration, bool)
	passTTL       time.Duration
	pace          pace
	slots         *semaphore.Weighted // nil: calls are not bounded

	seed       maphash.Seed
	epoch      time.Time
	epochNanos int64        // epoch since the Unix epoch: where keys' refresh grids start
	now        func() int64 // nanoseconds since epoch; replaced in tests
	shards     [shardCount]shard[V]

	inflight atomic.Int64
	queued   atomic.Int64
	waiters  atomic.Int64
	entries  atomic.Int64 // results held, across shards
	bytes    atomic.Int64 // what they count, across shards
}

// EntryOverhead is what every result counts against Limits.MaxBytes besides
// its key and value: the entry and its done channel as allocated, and its
// slots in its shard's map and heap, for a value type of a pointer's size.
// TestEntryOverhead_IsWhatTheHeapHolds checks it against the heap.
var EntryOverhead = heapsize.Of(int(unsafe.Sizeof(entry[*byte]{}))) + heapsize.Chan + heapsize.IndexSlot

// New returns a Group configured by opts, whose Limits must be valid
// (Limits.Validate).
func New[V any](opts Options[V]) *Group[V] {
	g := &Group[V]{
		maxEntries:    int64(cmp.Or(opts.MaxEntries, DefaultMaxEntries)),
		maxBytes:      cmp.Or(opts.MaxBytes, DefaultMaxBytes),
		maxEntryBytes: cmp.Or(opts.MaxEntryBytes, DefaultMaxEntryBytes),
		size:          opts.Size,
		private:       opts.Private,
		declared:      opts.Declared,
		copied:        opts.Copied,
		handed:        opts.Handed,
		passTTL:       cmp.Or(opts.PassTTL, DefaultPassTTL),
		seed:          maphash.MakeSeed(),
	}
	if opts.MaxCalls > 0 {
		g.slots = semaphore.NewWeighted(int64(opts.MaxCalls))
	}
	if clock := opts.Now; clock != nil {
		g.epoch = clock()
		g.now = func() int64 { return int64(clock().Sub(g.epoch)) }
	} else {
		g.epoch = time.Now()
		g.now = func() int64 { return int64(time.Since(g.epoch)) }
	}
	g.epochNanos = g.epoch.UnixNano()
	g.pace.gap = gapOf(opts.SoftPurgeRate)
	for i := range g.shards {
		g.shards[i].group = g
		g.shards[i].m = make(map[string]*entry[V])
	}
	return g
}

// Do returns the result for key, running fn at most once for all callers
// that ask for key while it runs, and not at all while a result for key is
// fresh (opts.TTL). Past its TTL a result may still be served: at once
// within opts.StaleWhileRevalidate, while one background call refreshes it;
// and within opts.StaleIfError, when the call failed.
//
// fn runs on the leader's goroutine with a Call whose context belongs to no
// caller: a caller whose ctx ends first gets ctx.Err() and the call goes on
// for the others; when the last of them leaves, the call's context is
// cancelled (unless opts.Finish). fn's error reaches every caller that waits
// for it and is never kept; a panic in fn reaches them as a *PanicError.
// opts may be nil (share the call while it runs, keep nothing).
func (g *Group[V]) Do(ctx context.Context, key string, opts *CallOptions, fn func(*Call) (V, error)) (V, Outcome, error) {
	return g.do(ctx, key, opts, fn, nil)
}

// Copy is what a caller that keeps a copy of the result asks of DoCopy,
// and learns: another cache, such as a replica that forwarded its call to
// the key's owner.
type Copy struct {
	// Fresh asks for a fresh result: the caller's own copy is stale or
	// purged, so a result past its TTL (or soft-purged) here is no answer;
	// the caller joins the call that refreshes it, or leads one. Only a call
	// that fails may still be answered with the last result, within
	// StaleIfError, as every caller of that call is.
	Fresh bool
	// Left is set to what is left, when DoCopy returns, of the windows the
	// value is served for here (a Hit's TTL less its age): the copy lives
	// no longer. Zero for a value not kept (an error, a private or own
	// call's value).
	Left Windows
}

// DoCopy is Do for a caller that keeps a copy of the result, as c says.
func (g *Group[V]) DoCopy(ctx context.Context, key string, opts *CallOptions, fn func(*Call) (V, error), c *Copy) (V, Outcome, error) {
	return g.do(ctx, key, opts, fn, c)
}

// Alone makes a call for the caller alone, with fn: nobody shares it, it
// shares nobody's and its result is never kept, as when a caller may share
// nothing now. It takes a slot as any call does, within opts.Timeout. Its
// outcome is Own; its Call is not Own (it is made as a shared call would
// be: where the caller's calls are made).
func (g *Group[V]) Alone(ctx context.Context, opts *CallOptions, fn func(*Call) (V, error)) (V, Outcome, error) {
	if opts == nil {
		opts = &noOptions
	}
	return g.call1(ctx, opts, Own, false, fn)
}

// do is Do, and DoCopy when c is not nil.
func (g *Group[V]) do(ctx context.Context, key string, opts *CallOptions, fn func(*Call) (V, error), c *Copy) (V, Outcome, error) {
	e, v, o, err := g.enter(ctx, key, opts, fn, c)
	if e == nil {
		return v, o, err
	}
	// The caller leads e's call, on its own goroutine and stack, below this
	// frame and call's alone: each frame more makes a deeper stack, likelier
	// to have to grow (a copy of it) on every call.
	g.waiters.Add(1)
	if g.slotFor(e) {
		g.call(e)
	}
	g.waiters.Add(-1)
	return g.led(ctx, e, c)
}

// enter is do's way to key's entry: it returns the entry of the call the
// caller is to lead, or nil and what the caller got (a result, or the
// outcome of the call it joined or made of its own).
func (g *Group[V]) enter(ctx context.Context, key string, opts *CallOptions, fn func(*Call) (V, error), c *Copy) (*entry[V], V, Outcome, error) {
	if opts == nil {
		opts = &noOptions
	}
	s, h := g.shardOf(key)
	now := g.now()

	s.mu.RLock()
	e := s.m[key]
	if v, ok := hit(e, now, c); ok {
		s.mu.RUnlock()
		return nil, v, Hit, nil
	}
	switch {
	case e == nil, e.state == stateHeld:
	case e.pass: // a call whose answer may not be shared, like the last one
		s.mu.RUnlock()
		v, o, err := g.own(ctx, opts, Pass, fn)
		return nil, v, o, err
	default: // a call in flight, maybe with an earlier result to serve meanwhile
		if p := e.prev; p != nil && now < p.swrEnd && !c.fresh() {
			v := p.val
			c.left(p, now)
			s.mu.RUnlock()
			return nil, v, Stale, nil
		}
		n := e.waiting.Add(1) // under the read lock: abandon cannot run meanwhile
		s.mu.RUnlock()
		v, o, err := g.join(ctx, e, n, opts, fn, c)
		return nil, v, o, err
	}
	s.mu.RUnlock()
	return g.doLocked(ctx, s, key, h, now, opts, fn, c)
}

// Hit returns the result a call of key would be served as a Hit that
// starts nothing (a fresh result whose early refresh is not due), for a
// caller that readies no call before it knows it needs one; false when
// there is none: Do (or DoCopy, with c) serves the call. c, when not nil,
// is told what is left of the result, as DoCopy tells it.
func (g *Group[V]) Hit(key []byte, c *Copy) (V, bool) {
	s := g.shardAt(maphash.Bytes(g.seed, key)) // shardOf's hash: maphash.String of the same bytes
	now := g.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return hit(s.m[string(key)], now, c)
}

// hit returns the result e, key's entry, serves at now as a Hit that
// starts nothing: a fresh held result whose early refresh is not due, or,
// while a call is in flight, the fresh result it refreshes early; and sets
// c.Left. The caller holds e's shard's lock.
func hit[V any](e *entry[V], now int64, c *Copy) (V, bool) {
	f := freshOf(e, now)
	if f == nil || (f == e && e.refreshDue(now)) {
		var zero V
		return zero, false
	}
	c.left(f, now)
	return f.val, true
}

// shardOf returns the shard of key, and key's hash.
func (g *Group[V]) shardOf(key string) (*shard[V], uint64) {
	h := maphash.String(g.seed, key)
	return g.shardAt(h), h
}

// shardAt returns the shard of the keys with hash h.
func (g *Group[V]) shardAt(h uint64) *shard[V] { return &g.shards[h&(shardCount-1)] }

// noOptions stands in for nil CallOptions.
var noOptions CallOptions

// doLocked is enter's path under the write lock: a result past its TTL or
// due for an early refresh, a pass marker, or no entry at all. h is key's
// hash.
func (g *Group[V]) doLocked(ctx context.Context, s *shard[V], key string, h uint64, now int64, opts *CallOptions, fn func(*Call) (V, error), c *Copy) (*entry[V], V, Outcome, error) {
	s.mu.Lock()
	g.sweep(s, now)
	e := s.m[key]
	var prev *entry[V]
	pass := false
	switch {
	case e == nil:
	case e.state == stateHeld && e.pass:
		// The key's last answer could not be shared: this caller's call is
		// not waited for, and a shareable answer replaces the marker.
		g.evict(s, e)
		pass = true
	case e.state == stateHeld && now < e.fresh:
		if e.refreshDue(now) {
			g.refreshEarly(s, e, h, opts, fn)
		}
		v := e.val
		c.left(e, now)
		s.mu.Unlock()
		return nil, v, Hit, nil
	case e.state == stateHeld && now < e.swrEnd && !c.fresh():
		// One background call refreshes the result, if a slot is free now:
		// refreshes never queue.
		if now >= e.turn {
			g.revalidate(s, e, h, e.background(), opts, fn)
		}
		v := e.val
		c.left(e, now)
		s.mu.Unlock()
		return nil, v, Stale, nil
	case e.state == stateHeld:
		prev = e // past its TTL: kept to serve stale meanwhile, or for StaleIfError
	case e.pass:
		s.mu.Unlock()
		v, o, err := g.own(ctx, opts, Pass, fn)
		return nil, v, o, err
	default:
		if p := e.prev; p != nil && now < p.fresh {
			v := p.val // refreshed early: still fresh
			c.left(p, now)
			s.mu.Unlock()
			return nil, v, Hit, nil
		}
		if p := e.prev; p != nil && now < p.swrEnd && !c.fresh() {
			v := p.val
			c.left(p, now)
			s.mu.Unlock()
			return nil, v, Stale, nil
		}
		n := e.waiting.Add(1)
		s.mu.Unlock()
		v, o, err := g.join(ctx, e, n, opts, fn, c)
		return nil, v, o, err
	}
	e = g.newEntry(s, key, h, opts, fn, prev)
	e.pass = pass
	e.waiting.Store(1)
	e.call.leader, e.call.leaver = ctx, e
	s.m[key] = e
	s.mu.Unlock()
	var zero V
	return e, zero, Lead, nil
}

// led returns what the leader of e's call gets once the call has
// completed. The call's context is not the leader's: when the leader's
// context ends first, its caller has its answer already (its client ended
// the call), and the goroutine went on with the call for the followers,
// until the last of them left too.
func (g *Group[V]) led(ctx context.Context, e *entry[V], c *Copy) (V, Outcome, error) {
	if err := ctx.Err(); err != nil {
		var zero V
		return zero, Lead, err
	}
	g.completed(e, c)
	if e.answer == answerStale {
		return e.val, StaleOnError, nil
	}
	return e.val, Lead, e.err // a private value is the leader's own
}

// completed sets c.Left, for a caller of e's completed call, when c is not
// nil: a result e holds may be purged (made stale) meanwhile, so its
// windows are read under its shard's lock.
func (g *Group[V]) completed(e *entry[V], c *Copy) {
	if c == nil {
		return
	}
	s := e.shard
	s.mu.RLock()
	defer s.mu.RUnlock()
	c.left(e, g.now())
}

// fresh reports whether c asks for a fresh result; a nil c does not.
func (c *Copy) fresh() bool { return c != nil && c.Fresh }

// left sets c.Left to what is left at now of e's windows, when c is not
// nil. The caller holds e.shard.mu, or e is done and out of the map.
func (c *Copy) left(e interface{ left(int64) Windows }, now int64) {
	if c != nil {
		c.Left = e.left(now)
	}
}

// newEntry returns the entry of a new call for key, of hash h. The caller
// holds s.mu.
func (g *Group[V]) newEntry(s *shard[V], key string, h uint64, opts *CallOptions, fn func(*Call) (V, error), prev *entry[V]) *entry[V] {
	g.inflight.Add(1)
	return &entry[V]{
		key:   key,
		hash:  h,
		shard: s,
		opts:  opts,
		fn:    fn,
		call:  Call{parent: context.Background(), timeout: opts.Timeout, refresh: prev != nil},
		done:  make(chan struct{}),
		prev:  prev,
		index: -1,
	}
}

// join waits for e's call as a follower, the n-th caller counted in
// e.waiting, and makes a call of its own with fn and its opts when e's
// waiting list is full, its wait times out or e's value turns out private.
func (g *Group[V]) join(ctx context.Context, e *entry[V], n int32, opts *CallOptions, fn func(*Call) (V, error), c *Copy) (V, Outcome, error) {
	if m := int32(e.opts.MaxWaiters); m > 0 && n > m+e.leaders() {
		e.leave()
		return g.own(ctx, opts, Own, fn)
	}
	v, o, err := g.wait(ctx, e, Join)
	switch o {
	case Private, Own:
		return g.own(ctx, opts, o, fn)
	case Join, StaleOnError:
		if ctx.Err() == nil {
			g.completed(e, c)
		}
	}
	return v, o, err
}

// own makes a call of the caller's own with fn, for outcome o: nobody
// shares it and its result is never kept.
func (g *Group[V]) own(ctx context.Context, opts *CallOptions, o Outcome, fn func(*Call) (V, error)) (V, Outcome, error) {
	return g.call1(ctx, opts, o, true, fn)
}

// call1 makes one caller's call with fn, for outcome o, whose Call reports
// own: nobody shares it and its result is never kept. Its slot and the
// call are bounded by opts.Timeout, as a shared call is.
func (g *Group[V]) call1(ctx context.Context, opts *CallOptions, o Outcome, own bool, fn func(*Call) (V, error)) (V, Outcome, error) {
	c := Call{parent: ctx, timeout: opts.Timeout, own: own}
	if err := g.slot(&c); err != nil {
		c.finish()
		var zero V
		return zero, o, err
	}
	defer g.release()
	v, err := protect(&c, fn)
	return v, o, err
}

// wait blocks until e's call completes, ctx ends or the wait times out
// (WaitTimeout), whichever is first, and returns what the caller gets: e's
// value with outcome o, a stale value, Private when e's value may not be
// shared, or Own when the wait timed out (the caller decides what those
// mean for it). The caller has counted itself in e.waiting.
func (g *Group[V]) wait(ctx context.Context, e *entry[V], o Outcome) (V, Outcome, error) {
	g.waiters.Add(1)
	defer g.waiters.Add(-1)
	var timeout <-chan time.Time
	if d := e.opts.WaitTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var zero V
	select {
	case <-e.done:
		e.waiting.Add(-1)
		switch e.answer {
		case answerPrivate:
			return zero, Private, nil
		case answerStale:
			return e.val, StaleOnError, nil
		}
		return e.val, o, e.err
	case <-timeout:
		e.leave()
		return zero, Own, nil
	case <-ctx.Done():
		e.leave()
		return zero, o, ctx.Err()
	}
}

// abandon cancels e's call when nobody waits for it any more, unless its
// options say to finish a call that has started. It leaves the key to the
// next caller at once: a new call, or the earlier result e was to replace.
func (g *Group[V]) abandon(e *entry[V]) {
	s := e.shard
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.waiting.Load() > 0 || e.state != stateFlying || e.call.background != 0 || e.opts.Finish && e.running.Load() {
		return
	}
	e.state = stateAbandoned
	g.unlink(s, e)
	e.call.abort()
}

// unlink takes e, a call in flight, out of its shard's map, giving the key
// back to the result e was to replace, if there is one. The caller holds s.mu.
func (g *Group[V]) unlink(s *shard[V], e *entry[V]) {
	if s.m[e.key] != e {
		return
	}
	if p := e.prev; p != nil && p.state == stateHeld {
		s.m[e.key] = p
	} else {
		delete(s.m, e.key)
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
		Queued:   int(g.queued.Load()),
		Waiters:  int(g.waiters.Load()),
		Entries:  int(g.entries.Load()),
		Bytes:    g.bytes.Load(),
	}
}
