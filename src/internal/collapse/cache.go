package collapse

import "sync"

// shard is one independently locked part of a Group's key space.
type shard[V any] struct {
	mu sync.RWMutex
	m  map[string]*entry[V] // calls in flight and cached results, by key

	// Cached entries in completion order, oldest first. With one TTL for the
	// whole Group this is also expiry order, so expired entries are always a
	// prefix of the list.
	head, tail *entry[V]

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// complete publishes the result of e's call: it caches a success if admit
// allows, drops anything else from the map, then wakes every waiter.
func (g *Group[V]) complete(e *entry[V]) {
	e.fn = nil
	var size int64
	cacheable := e.err == nil && g.ttl > 0
	if cacheable && g.size != nil {
		size = g.size(e.val)
		cacheable = size <= g.maxEntryBytes
	}

	s := e.shard
	s.mu.Lock()
	if !cacheable || !g.admit(s, e, size) {
		if s.m[e.key] == e {
			delete(s.m, e.key)
		}
	}
	s.mu.Unlock()

	g.inflight.Add(-1)
	close(e.done)
}

// admit caches e while the Group's limits would be exceeded, evicting the
// oldest entries of its own shard first, then of other shards. It reports
// false, caching nothing, when no room can be made. The caller holds s.mu.
func (g *Group[V]) admit(s *shard[V], e *entry[V], size int64) bool {
	now := g.now() // under the lock, so expiry times follow list order
	g.sweep(s, now)
	for {
		entries := g.entries.Add(1)
		bytes := g.bytes.Add(size)
		if entries <= g.maxEntries && bytes <= g.maxBytes {
			break
		}
		g.entries.Add(-1)
		g.bytes.Add(-size)
		if s.head != nil {
			g.evictHead(s)
		} else if !g.evictElsewhere(s) {
			return false
		}
	}
	e.cached, e.expires, e.size = true, now+g.ttl, size
	if s.tail == nil {
		s.head = e
	} else {
		s.tail.next = e
	}
	s.tail = e
	return true
}

// evictElsewhere evicts the oldest entry of some other shard whose lock is
// free, and reports whether it found one. It only tries locks, so two shards
// making room at once cannot deadlock. The caller holds s.mu.
func (g *Group[V]) evictElsewhere(s *shard[V]) bool {
	for i := range g.shards {
		o := &g.shards[i]
		if o == s || !o.mu.TryLock() {
			continue
		}
		found := o.head != nil
		if found {
			g.evictHead(o)
		}
		o.mu.Unlock()
		if found {
			return true
		}
	}
	return false
}

// sweep evicts the shard's expired entries. The caller holds s.mu.
func (g *Group[V]) sweep(s *shard[V], now int64) {
	for s.head != nil && s.head.expires <= now {
		g.evictHead(s)
	}
}

// evictHead removes the shard's oldest cached entry. The caller holds s.mu.
func (g *Group[V]) evictHead(s *shard[V]) {
	e := s.head
	s.head = e.next
	if s.head == nil {
		s.tail = nil
	}
	e.next = nil
	e.cached = false
	if s.m[e.key] == e {
		delete(s.m, e.key)
	}
	g.entries.Add(-1)
	g.bytes.Add(-e.size)
}
