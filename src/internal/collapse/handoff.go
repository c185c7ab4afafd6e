package collapse

import "time"

// When a key moves to another cache (a replica joins the ring, and now
// owns keys another replica owned), the new cache would start without the
// key's result, and make a call the previous one had no need of. Instead,
// its first call for the key may ask the previous cache (Peek) and take
// the result over (Options.Handed): the result lives out what is left of
// it, is refreshed early when the previous cache would have refreshed it,
// and is this cache's own from then on. It is taken over by the call that
// would have made a backend call, so that a purge that takes the key back
// meanwhile keeps it from being held, as for any call.

// Handoff is a fresh result a Group holds, as Peek returns it to a cache
// that takes its key over.
type Handoff[V any] struct {
	// Value is the result.
	Value V
	// Left is what is left of the windows it is served for (not cut at its
	// early refresh, as a copy's are: Copy.Left).
	Left Windows
	// RefreshIn is how long from now its early refresh is due: at once
	// (1 ns) when it is due or running, 0 when it has none.
	RefreshIn time.Duration
}

// Peek returns the fresh result held for key, for a cache that takes the
// key over, without making a call, joining one or counting as a read (no
// early refresh starts). False when no result is fresh: none is held, it
// is past its TTL, purged, or the key's answers may not be shared.
func (g *Group[V]) Peek(key string) (Handoff[V], bool) {
	s, _ := g.shardOf(key)
	now := g.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.m[key]
	switch f := freshOf(e, now); f {
	case nil:
		return Handoff[V]{}, false
	case e:
		return Handoff[V]{Value: e.val, Left: e.until(now, e.fresh), RefreshIn: refreshIn(e.refresh, now)}, true
	default:
		// Refreshed early: the refresh that runs here is the one due.
		return Handoff[V]{Value: f.val, Left: f.until(now, f.fresh), RefreshIn: refreshIn(now, now)}, true
	}
}

// freshOf returns the entry whose result e, a key's entry, serves fresh
// at now: e itself, held and within its TTL, or, while e's call is in
// flight, the result it refreshes early; nil for none (none held, a pass
// marker, past its TTL or purged). The caller holds e's shard's lock.
func freshOf[V any](e *entry[V], now int64) *entry[V] {
	switch {
	case e == nil || e.pass:
	case e.state == stateHeld && now < e.fresh:
		return e
	case e.state == stateFlying && e.prev != nil && now < e.prev.fresh:
		return e.prev
	}
	return nil
}

// refreshIn returns how long from now an early refresh at refresh is due:
// at least 1 ns, so that a refresh due now stays due; 0 for none.
func refreshIn(refresh, now int64) time.Duration {
	if refresh == 0 {
		return 0
	}
	return time.Duration(max(1, refresh-now))
}
