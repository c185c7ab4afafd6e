package collapse

import (
	"sync"
	"time"

	"github.com/collapser/collapser/src/internal/expiryheap"
	"github.com/collapser/collapser/src/internal/heapsize"
)

// shard is one independently locked part of a Group's key space.
type shard[V any] struct {
	group *Group[V]
	mu    sync.RWMutex
	m     map[string]*entry[V]       // calls in flight and held results, by key
	heap  expiryheap.Heap[*entry[V]] // held results, the first to go first

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// complete publishes the outcome of e's call, then wakes every waiter.
//
// A success replaces the key's earlier result, and is kept if its windows
// (those it declares, or its options') and the limits allow; a private
// value is neither kept nor shared, and leaves a pass marker for the key. A
// failure gives the key back to the earlier result, and its waiters get that
// result instead of the error when it is within StaleIfError and StaleOn
// accepts the error. An abandoned call changes nothing: the key moved on.
func (g *Group[V]) complete(e *entry[V]) {
	e.fn = nil
	private := e.err == nil && g.private != nil && g.private(e.val)
	w := e.opts.Windows()
	if e.err == nil && g.declared != nil {
		if d, ok := g.declared(e.val); ok {
			w = d
		}
	}
	// A copy lives out what is left of its original, which its own cache
	// jitters and refreshes (refresh.go); a result handed over is this
	// cache's own, jittered and due for its refresh where it was.
	original := e.err == nil && (g.copied == nil || !g.copied(e.val))
	var handedRefresh time.Duration
	handed := false
	if original && g.handed != nil {
		handedRefresh, handed = g.handed(e.val)
	}
	if original && !handed {
		w.TTL = Jittered(w.TTL, e.opts.TTLJitter, e.hash)
	}
	var size int64
	keep := e.err == nil && !private && w.keeps()
	if keep {
		size = heapsize.String(e.key) + EntryOverhead
		if g.size != nil {
			size += g.size(e.val)
		}
		keep = size <= g.maxEntryBytes
	}
	if private {
		e.answer = answerPrivate
	}

	s := e.shard
	now := g.now()
	s.mu.Lock()
	g.sweep(s, now) // may drop e.prev
	switch {
	case e.state == stateAbandoned:
	case e.err == nil:
		if e.prev != nil {
			g.evict(s, e.prev) // clears e.prev
		}
		switch {
		case keep && !e.detached && g.admit(s, e, size, now, w):
			e.pass = false
			switch {
			case !original || !e.opts.EarlyRefresh:
			case handed && handedRefresh > 0:
				e.refresh = now + int64(handedRefresh)
			case !handed:
				e.refresh = g.refreshPoint(e.hash, now, w.TTL)
			}
		case private && !e.detached:
			g.unlink(s, e)
			g.mark(s, e.key, now)
		default:
			g.unlink(s, e)
		}
	default:
		if p := e.prev; p != nil && now < p.sieEnd && (e.opts.StaleOn == nil || e.opts.StaleOn(e.err)) {
			e.val, e.err, e.answer = p.val, nil, answerStale
			// e serves p's value for what is left of its stale-if-error
			// window (Copy.Left).
			e.fresh, e.swrEnd, e.sieEnd = now, now, p.sieEnd
		}
		g.unlink(s, e)
	}
	e.prev = nil
	if e.state != stateHeld {
		e.state = stateDone
	}
	s.mu.Unlock()

	g.inflight.Add(-1)
	close(e.done)
}

// mark holds a pass marker for key, whose call's answer could not be
// shared, for the Group's pass TTL, if the limits make room for it. The
// caller holds s.mu; key has no entry in s.m.
func (g *Group[V]) mark(s *shard[V], key string, now int64) {
	m := &entry[V]{key: key, shard: s, pass: true, index: -1}
	if g.admit(s, m, heapsize.String(key)+EntryOverhead, now, Windows{TTL: g.passTTL}) {
		s.m[key] = m
	}
}

// admit holds e's result, to be served for windows w, evicting while the
// Group's limits would be exceeded the results that go first, of its own
// shard first, then of other shards. It reports false, holding nothing, when
// no room can be made. The caller holds s.mu; e is the key's entry in s.m.
func (g *Group[V]) admit(s *shard[V], e *entry[V], size, now int64, w Windows) bool {
	for {
		entries := g.entries.Add(1)
		bytes := g.bytes.Add(size)
		if entries <= g.maxEntries && bytes <= g.maxBytes {
			break
		}
		g.entries.Add(-1)
		g.bytes.Add(-size)
		if s.heap.Len() > 0 {
			g.evict(s, s.heap.First())
		} else if !g.evictElsewhere(s) {
			return false
		}
	}
	e.fresh = now + int64(w.TTL)
	e.swrEnd = e.fresh + int64(w.StaleWhileRevalidate)
	e.sieEnd = e.fresh + int64(w.StaleIfError)
	e.size = size
	e.state = stateHeld
	s.heap.Push(e)
	return true
}

// evictElsewhere evicts the first result to go of some other shard whose
// lock is free, and reports whether it found one. It only tries locks, so
// two shards making room at once cannot deadlock. The caller holds s.mu.
func (g *Group[V]) evictElsewhere(s *shard[V]) bool {
	for i := range g.shards {
		o := &g.shards[i]
		if o == s || !o.mu.TryLock() {
			continue
		}
		found := o.heap.Len() > 0
		if found {
			g.evict(o, o.heap.First())
		}
		o.mu.Unlock()
		if found {
			return true
		}
	}
	return false
}

// sweep evicts the shard's results that are gone. The caller holds s.mu.
func (g *Group[V]) sweep(s *shard[V], now int64) {
	for s.heap.Len() > 0 && s.heap.FirstExpiry() <= now {
		g.evict(s, s.heap.First())
	}
}

// evict drops the held result e: from the heap, and from the map, or as the
// earlier result of the key's call in flight. The caller holds s.mu.
func (g *Group[V]) evict(s *shard[V], e *entry[V]) {
	if e.state != stateHeld {
		return
	}
	s.heap.Remove(e)
	e.state = stateDone
	e.fresh, e.swrEnd, e.sieEnd = 0, 0, 0 // nothing is left of it (Copy.Left)
	switch cur := s.m[e.key]; {
	case cur == e:
		delete(s.m, e.key)
	case cur != nil && cur.prev == e:
		cur.prev = nil
	}
	g.entries.Add(-1)
	g.bytes.Add(-e.size)
}
