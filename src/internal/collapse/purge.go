package collapse

import (
	"sync"
	"time"
)

// Purge takes back what the Group holds for key, as an HTTP cache's purge
// does, and reports whether it held a result for it. Hard, the result is
// gone; soft, it is stale from now: served within its stale-while-revalidate
// window while one call refreshes it, as a soft purge does. A call in flight
// for key may have read what the purge is for, so it is detached: its
// callers get its answer, which is not kept, and the next caller starts a
// call of its own. Once Purge returns, no caller is served what it took back
// (except stale within its window, when soft). It is never paced
// (PurgeMatching).
func (g *Group[V]) Purge(key string, soft bool) bool {
	s, _ := g.shardOf(key)
	now := g.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil {
		return false
	}
	return g.purge(s, e, heldOf(e), now, soft, true)
}

// PurgeMatching takes back, as Purge does, the results whose key and value
// match reports true for, and detaches every call in flight whose key
// flying reports true for (its value is not known yet). It reports how many
// results it took back. It visits every key held: its cost grows with the
// entries held, which Limits.MaxEntries bounds.
//
// Soft, it paces their refreshes (Options.SoftPurgeRate), so that a purge
// of a whole method does not send every caller of it to the backend at
// once: each fresh result it makes stale is given a turn, one per
// 1/SoftPurgeRate, and is served stale until its turn, then within its
// stale-while-revalidate window (at least until its turn) while the
// first caller's background call refreshes it. A hard purge is never
// paced: what it takes back is gone at once.
func (g *Group[V]) PurgeMatching(match func(key string, v V) bool, flying func(key string) bool, soft bool) int {
	now := g.now()
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		for key, e := range s.m {
			h := heldOf(e)
			if h != nil && !match(key, h.val) {
				h = nil
			}
			fresh := h != nil && now < h.fresh
			if g.purge(s, e, h, now, soft, e.state == stateFlying && flying(key)) {
				n++
				if soft && fresh {
					g.paced(s, h, now)
				}
			}
		}
		s.mu.Unlock()
	}
	return n
}

// paced gives e, a result a soft purge made stale at now, its turn to be
// refreshed, and serves it stale until then. The caller holds s.mu.
func (g *Group[V]) paced(s *shard[V], e *entry[V], now int64) {
	turn, ok := g.pace.next(now)
	if !ok {
		return
	}
	e.turn = turn
	if turn > e.swrEnd {
		e.swrEnd = turn
		s.heap.Fix(e)
	}
}

// heldOf returns the result e's key holds: e, or the result e's call is to
// replace; nil when there is none (a pass marker holds no result).
func heldOf[V any](e *entry[V]) *entry[V] {
	if e.pass {
		return nil
	}
	if e.state == stateHeld {
		return e
	}
	if p := e.prev; p != nil && p.state == stateHeld {
		return p
	}
	return nil
}

// purge takes back held (when not nil), a result of e's key, and detaches
// e's call in flight when detach is true. It reports whether it took a
// result back. The caller holds s.mu; e is its key's entry in s.m.
func (g *Group[V]) purge(s *shard[V], e, held *entry[V], now int64, soft, detach bool) bool {
	if held != nil {
		if soft {
			g.stale(s, held, now)
		} else {
			g.evict(s, held) // clears e.prev when held is it
		}
	}
	if detach && e.state == stateFlying {
		g.unlink(s, e) // the key goes back to the result e was to replace, if any is left
		e.prev = nil
		e.detached = true
	}
	return held != nil
}

// stale makes the held result e stale from now: its stale windows, as
// long as they were, start now, and never end later than they did. The
// caller holds s.mu.
func (g *Group[V]) stale(s *shard[V], e *entry[V], now int64) {
	if now >= e.fresh {
		return
	}
	swr, sie := e.swrEnd-e.fresh, e.sieEnd-e.fresh
	e.fresh = now
	e.swrEnd = min(e.swrEnd, now+swr)
	e.sieEnd = min(e.sieEnd, now+sie)
	s.heap.Fix(e)
}

// pace hands out the turns of paced refreshes: one per gap, each after the
// last and after the time it is asked at.
type pace struct {
	gap  int64 // nanoseconds between turns; 0: not paced
	mu   sync.Mutex
	last int64 // the last turn handed out
}

// gapOf returns the gap between turns at rate a second; 0 for a rate of 0.
func gapOf(rate float64) int64 {
	if rate <= 0 {
		return 0
	}
	return max(1, int64(float64(time.Second)/rate))
}

// next returns the next turn at now, or false when refreshes are not
// paced.
func (p *pace) next(now int64) (int64, bool) {
	if p.gap == 0 {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = max(p.last, now) + p.gap
	return p.last, true
}
