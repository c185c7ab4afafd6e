package collapse

import "time"

// Keys loaded together expire together, and then all miss at once: a herd
// of distinct keys, which collapsing one key's callers does nothing
// against. Two rules spread them, both drawn from the key's hash, so that
// a key keeps its own times generation after generation:
//
//   - Jitter (CallOptions.TTLJitter): a result's TTL is shortened by up to
//     that fraction of it. A TTL, the policy's or one the answer declares,
//     is never exceeded.
//   - Early refresh (CallOptions.EarlyRefresh): a key's results are
//     refreshed on a grid of its own, one point per TTL, at an offset the
//     hash draws (uniform over the TTL). The first read of a fresh result
//     at or after the grid point before its end starts one background
//     call, as stale-while-revalidate does, and is served the result as a
//     Hit meanwhile, as every caller is until the new one replaces it. A
//     result nobody reads past its point is left to expire.
//
// So keys loaded at once are refreshed at times spread evenly over their
// TTL, from their first generation on, and in steady state a key read all
// the time is refreshed once per (jittered) TTL, at its grid point, where
// a cache without it refetches after each expiry. XFetch (Vattani et al.,
// VLDB 2015) draws each refresh near the end of the life from the
// recomputation's cost, which saves one key from its own stampede, but
// leaves keys loaded together refreshing within a few of those costs of one
// another; a grid drawn per key spreads them over the whole TTL at the cost
// of one early call per key, once, in the first generation.
//
// Only results of calls made here are refreshed early (Options.Copied):
// that cache, the key's owner, refreshes the original. A copy is fresh
// until the original's refresh is due (Copy.Left), so that its cache's
// next read asks the owner again and starts the refresh there, however
// few the owner's own readers; it then lives out what is left of the
// original.

// refreshDue reports whether a read at now of e, a fresh held result,
// starts its early refresh. The caller holds e.shard.mu.
func (e *entry[V]) refreshDue(now int64) bool {
	return e.refresh != 0 && now >= e.refresh
}

// refreshEarly starts the background call that refreshes e, a fresh held
// result of a key of hash h, if a slot is free now. The caller holds s.mu.
func (g *Group[V]) refreshEarly(s *shard[V], e *entry[V], h uint64, opts *CallOptions, fn func(*Call) (V, error)) {
	if g.revalidate(s, e, h, Early, opts, fn) {
		e.refresh = 0 // one refresh per result
	}
}

// revalidate starts one background call, for why, that replaces e, a held
// result of a key of hash h, if a slot is free now (refreshes never
// queue), and reports whether it did. The caller holds s.mu.
func (g *Group[V]) revalidate(s *shard[V], e *entry[V], h uint64, why Background, opts *CallOptions, fn func(*Call) (V, error)) bool {
	if !g.trySlot() {
		return false
	}
	r := g.newEntry(s, e.key, h, opts, fn, e)
	r.call.background = why
	s.m[e.key] = r
	go g.call(r) // nobody waits: the refresh has its own goroutine
	return true
}

// Jittered returns ttl shortened by up to frac of it, by an amount the
// hash h (of the key) draws: the jitter of CallOptions.TTLJitter, for
// what else a cache keeps by key (a replayed stream's record).
func Jittered(ttl time.Duration, frac float64, h uint64) time.Duration {
	if frac <= 0 || ttl <= 0 {
		return ttl
	}
	return ttl - time.Duration(float64(ttl)*frac*unit(h))
}

// refreshPoint returns when a result of a key of hash h, held from now
// for ttl, is due for its early refresh (RefreshPoint, on the Group's
// clock since the Unix epoch), in the Group's now; 0 when that point is
// the result's end itself.
func (g *Group[V]) refreshPoint(h uint64, now int64, ttl time.Duration) int64 {
	at := RefreshPoint(h, g.epochNanos+now, ttl)
	if at == 0 {
		return 0
	}
	return at - g.epochNanos
}

// RefreshPoint returns when a result of a key of hash h, kept from now
// (in nanoseconds since the Unix epoch) for ttl, is due for its early
// refresh: the point of the key's grid (one per ttl, at an offset h draws,
// from the Unix epoch, so that the grid stays where it is however the
// key's results come and go) at or before the result's end, which is after
// now. It returns 0 when that point is the end itself, and for no ttl.
// What else a cache keeps by key (a replayed stream's record) is
// refreshed on the same grid.
func RefreshPoint(h uint64, now int64, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	period := int64(ttl)
	offset := int64(mix(h) % uint64(period))
	end := now + period
	since := (end - offset) % period // of the grid point at or before end
	if since < 0 {
		since += period
	}
	if since == 0 {
		return 0
	}
	return end - since
}

// unit maps h to [0, 1).
func unit(h uint64) float64 {
	return float64(h>>11) / (1 << 53)
}

// mix scrambles h (a 64-bit finalizer), so that a key's grid offset does
// not follow its jitter, which h's high bits draw.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
