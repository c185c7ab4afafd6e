package replay

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/expiryheap"
)

// Streams maps keys to their records. Create one with New; it is safe for
// concurrent use.
type Streams struct {
	maxBytes     int64
	maxMessages  int
	maxHeldBytes int64
	private      func(metadata.MD) bool
	now          func() time.Time // the clock; replaced in tests

	mu        sync.Mutex
	m         map[string]*record       // live records and kept ones, by key; guarded by mu
	live      map[*record]struct{}     // every record reading its upstream, its key's or not; guarded by mu
	held      expiryheap.Heap[*record] // kept records, the first to expire first; guarded by mu
	heldBytes int64                    // what they count; guarded by mu
}

// New returns Streams configured by o, whose Limits must be valid
// (Limits.Validate).
func New(o Options) *Streams {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Streams{
		maxBytes:     cmp.Or(o.MaxBytes, DefaultMaxBytes),
		maxMessages:  cmp.Or(o.MaxMessages, DefaultMaxMessages),
		maxHeldBytes: cmp.Or(o.MaxHeldBytes, DefaultMaxHeldBytes),
		private:      o.Private,
		now:          o.Now,
		m:            map[string]*record{},
		live:         map[*record]struct{}{},
	}
}

// Join returns a Reader of key's record: a new one whose upstream open
// starts (Lead), a live one (Join), or an ended one kept for replay
// (Replay). A record that takes no new reader gives no Reader but Own: the
// caller makes a stream of its own. A stream that ends well is kept as life
// says; a kept record due for its early refresh starts it (refreshEarly).
// Close the Reader when done with it.
func (s *Streams) Join(key string, life Life, open Open) (*Reader, Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweep(now)
	if r := s.m[key]; r != nil {
		if rd, o, ok := s.joinRecord(r); ok {
			if o == Replay {
				s.refreshEarly(r, now, life, open)
			}
			return rd, o
		}
	}
	r, ctx := newRecord(context.Background(), s, key, life)
	s.m[key] = r
	s.live[r] = struct{}{}
	go r.pump(ctx, open)
	return &Reader{r: r, lead: true}, Lead
}

// Kept returns a Reader of key's record when it is kept (it ended well,
// within its bounds, and its life is not over), for a cache that takes
// the key over: it neither opens nor joins a stream, and is not a read (no
// early refresh starts). refreshIn is how long from now the record's early
// refresh is due: at least 1 ns when it is due or running, 0 when it has
// none.
func (s *Streams) Kept(key string) (rd *Reader, refreshIn time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweep(now)
	r := s.m[key]
	if r == nil || r.index < 0 {
		return nil, 0, false
	}
	switch {
	case r.refresher != nil:
		refreshIn = 1
	case !r.refresh.IsZero():
		refreshIn = max(1, r.refresh.Sub(now))
	}
	return &Reader{r: r}, refreshIn, true
}

// refreshEarly starts, when r, a kept record, is due for its early refresh
// at now, the record that refreshes it: opened with open, read in the
// background by no reader, under a context Refreshing reports, with life
// (the caller's, whose rule may have changed since r was made). finish
// puts it in r's place once its stream ended well; drop cancels it when r
// goes first. The caller holds s.mu.
func (s *Streams) refreshEarly(r *record, now time.Time, life Life, open Open) {
	if r.refresh.IsZero() || now.Before(r.refresh) {
		return
	}
	r.refresh = time.Time{} // one refresh per record: none while it runs
	n, ctx := newRecord(context.WithValue(context.Background(), refreshing{}, true), s, r.key, life)
	n.readers, n.replaces, r.refresher = 0, r, n
	s.live[n] = struct{}{}
	go n.pump(ctx, open)
}

// joinRecord returns a Reader of r, the key's record, or reports false when
// r has ended in a way that is never replayed (an error, or a private or
// closed stream), which finish takes out of the map as it records the end:
// should one be found there, the caller starts a new record. The caller
// holds s.mu.
func (s *Streams) joinRecord(r *record) (*Reader, Outcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ended && (r.err != nil || r.closed):
		return nil, 0, false
	case r.ended:
		return &Reader{r: r}, Replay, true
	case r.closed:
		return nil, Own, true
	}
	r.readers++
	return &Reader{r: r}, Join, true
}

// Stats returns a snapshot of the streams' state.
func (s *Streams) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
	st := Stats{Live: len(s.live), Held: s.held.Len(), Bytes: s.heldBytes}
	for r := range s.live {
		r.mu.Lock()
		st.Readers += r.readers
		st.Bytes += r.bytes
		r.mu.Unlock()
	}
	return st
}

// Purge takes back the records match reports true for, given each one's
// key and header, and returns how many kept records it dropped. known is
// false while a live record waits for its header: what the header will say
// is not known, and match decides without it. A kept record is dropped:
// the callers replaying it read it to its end. A live record is detached,
// and not counted, as a purge of answers detaches a call in flight: its
// readers read it to its end, and it is not kept when it ends. Either way
// the key's next caller starts a new record. match is called with the
// streams locked and must not call them. Purge visits every record: its
// cost grows with the records live and kept.
func (s *Streams) Purge(match func(key string, header metadata.MD, known bool) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
	n := 0
	for key, r := range s.m {
		r.mu.Lock()
		header, known := r.header, r.headerSet
		r.mu.Unlock()
		switch {
		case !match(key, header, known):
		case r.index >= 0:
			s.drop(r)
			n++
		default:
			delete(s.m, key) // finish keeps only the key's record
		}
	}
	return n
}

// finish records the end of r's upstream, told by its pump, with trailer
// and err: r is kept for replay for ttl when it ended well within its
// bounds, ttl is not 0 and it is still its key's record (not detached by a
// purge), or still refreshes the kept record that is, which it replaces;
// and dropped otherwise. Its end and that decision are made at
// once, under s.mu, before its readers wake: a reader that read the end
// and asks how long the record is kept (Reader.Left) is told. The
// upstream's context is released: an ended record keeps nothing of its
// stream. The caller holds neither lock.
func (s *Streams) finish(r *record, trailer metadata.MD, err error, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, r)
	r.update(func() {
		r.ended, r.trailer, r.err = true, trailer, err
		r.cancel()
		r.cancel = nil
		if s.private != nil && s.private(trailer) {
			r.private, r.closed = true, true
		}
		old := r.replaces
		if old != nil {
			r.replaces, old.refresher = nil, nil
		}
		if r.err != nil || r.closed || ttl <= 0 || (s.m[r.key] != r && (old == nil || s.m[r.key] != old)) {
			s.forget(r)
			return
		}
		if old != nil {
			s.drop(old)
			s.m[r.key] = r
		}
		// The messages' slices in an array of their own number: what
		// append grew for a live stream is not held for its TTL.
		r.frames = slices.Clone(r.frames)
		size := r.size()
		if size > s.maxHeldBytes {
			s.forget(r)
			return
		}
		for s.heldBytes+size > s.maxHeldBytes {
			s.drop(s.held.First())
		}
		now := s.now()
		r.expires = now.Add(ttl)
		if r.life.EarlyRefresh {
			if at := collapse.RefreshPoint(r.life.Hash, now.UnixNano(), ttl); at != 0 {
				r.refresh = time.Unix(0, at)
			}
		}
		s.heldBytes += size
		r.heldSize = size
		s.held.Push(r)
	})
}

// forget takes r out of the map, if it is its key's record. The caller
// holds s.mu.
func (s *Streams) forget(r *record) {
	if s.m[r.key] == r {
		delete(s.m, r.key)
	}
}

// leave is told that r's last reader left before its upstream ended: the
// key is free for a new record, and r's upstream is cancelled. The caller
// holds s.mu and r.mu.
func (s *Streams) leave(r *record) {
	s.forget(r)
	r.closed = true
	r.cancel()
}

// sweep drops the kept records that expired. The caller holds s.mu.
func (s *Streams) sweep(now time.Time) {
	for at := sinceEpoch(now); s.held.Len() > 0 && s.held.FirstExpiry() <= at; {
		s.drop(s.held.First())
	}
}

// drop forgets the kept record r, and cancels the record that refreshes
// it, if one does: what it would replace is gone (its life is over, or a
// purge took it back). The caller holds s.mu.
func (s *Streams) drop(r *record) {
	s.held.Remove(r)
	s.heldBytes -= r.heldSize
	s.forget(r)
	if n := r.refresher; n != nil {
		r.refresher, n.replaces = nil, nil
		n.cancel() // still live: its end (finish) unlinks the two under s.mu
	}
}
