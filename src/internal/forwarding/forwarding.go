// Package forwarding decides, per method, whether a leader's call of a key
// another replica owns is forwarded to that owner, from what forwarding
// has bought lately.
//
// Forwarding pays when calls from several replicas meet at the owner: a
// forwarded call that joins the owner's flight or hits its cache saves a
// backend call. One that leads there saves nothing and costs a second
// proxy pass. The owner tells the forwarder which it was (the peers
// package's SharedHeader), and a Decider counts both per method. While at
// least MinShared of a method's forwarded calls share, its calls are
// forwarded; below, they are made by the replica they arrive at, and only a
// sample of keys (one in SampleOneIn, the same keys on every replica) is
// still forwarded, to see whether sharing comes back. A method starts
// forwarded.
//
// A method that is not forwarded still sees every one of its keys that is
// repeated: a call of such a key that was shared on the replica it came to
// (it joined a flight or was served a kept answer there: the key is asked
// for again and again, and a Service spreads those calls over every
// replica) makes the key hot (Shared), and the calls of a hot key are
// forwarded again, whatever its method's counts say, for HotFor.
//
// What the first call of a burst costs: a burst of identical calls spread
// over N replicas makes one backend call while its method is forwarded, and
// up to N (one per replica) while it is not, unless its key is in the
// sample or hot; from then on the key is hot, its calls share at the owner,
// and its next burst makes one backend call.
package forwarding

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// The rule's constants.
const (
	// Window is how often a method's decision is made again, from its
	// counts, which then halve: older windows weigh less.
	Window = 10 * time.Second
	// MinCalls is how many forwarded calls a decision needs; with fewer,
	// the method keeps its decision and its counts.
	MinCalls = 50
	// MinShared is the share of forwarded calls that must have shared at
	// the owner (1 in 20) for a method to be forwarded.
	MinShared = 1.0 / 20
	// SampleOneIn sets the keys of a method that is not forwarded that are
	// forwarded still: those whose hash is a multiple of it.
	SampleOneIn = 16
	// MaxMethods bounds the methods a Decider counts; the calls of others
	// are forwarded.
	MaxMethods = 1000
	// HotFor is how long a key stays hot after a call of it was last shared
	// on this replica: between one and two windows.
	HotFor = Window
	// MaxHotKeys bounds the hot keys a Decider remembers in one HotFor;
	// more are not remembered until the next.
	MaxHotKeys = 4096
)

// Decider keeps, per method, whether its calls are forwarded. Its methods
// are safe for concurrent use.
type Decider struct {
	now     func() time.Time
	mu      sync.RWMutex
	methods map[string]*method

	hot hotKeys
}

// hotKeys are the hashes of the keys of methods not forwarded whose calls
// were shared lately, in two generations: those of the current HotFor and
// those of the one before. A key is hot while it is in either.
type hotKeys struct {
	mu        sync.Mutex
	since     time.Time           // the current generation's start
	cur, prev map[string]struct{} // guarded by mu
}

// method is one method's counts in the current window and its decision.
type method struct {
	keep   atomic.Bool // not forwarded (the zero value: forwarded)
	mu     sync.Mutex
	since  time.Time // the current window's start
	calls  float64
	shared float64
}

// New returns a Decider that forwards every method until it has counted
// otherwise. now is the clock (time.Now when nil).
func New(now func() time.Time) *Decider {
	if now == nil {
		now = time.Now
	}
	return &Decider{now: now, methods: map[string]*method{}}
}

// Forward reports whether the call of method whose key has hash (the
// peers package's KeyHash, the same on every replica) is forwarded to its
// owner.
func (d *Decider) Forward(fullMethod, hash string) bool {
	if !d.kept(fullMethod) || xxhash.Sum64String(hash)%SampleOneIn == 0 {
		return true
	}
	return d.hot.has(d.now(), hash)
}

// Shared is told of a call of method whose key has hash, of a key another
// replica owns, that was shared here: it joined a flight or was served a
// kept answer. When the method is not forwarded, the key is hot from now
// on: its calls are forwarded again for HotFor.
func (d *Decider) Shared(fullMethod, hash string) {
	if d.kept(fullMethod) {
		d.hot.add(d.now(), hash)
	}
}

// kept reports whether method's calls are made where they arrive.
func (d *Decider) kept(fullMethod string) bool {
	d.mu.RLock()
	m := d.methods[fullMethod]
	d.mu.RUnlock()
	return m != nil && m.keep.Load()
}

// has reports whether hash is hot at now.
func (h *hotKeys) has(now time.Time, hash string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.age(now)
	_, inCur := h.cur[hash]
	_, inPrev := h.prev[hash]
	return inCur || inPrev
}

// add makes hash hot at now, unless the current generation is full.
func (h *hotKeys) add(now time.Time, hash string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.age(now)
	if len(h.cur) < MaxHotKeys {
		h.cur[hash] = struct{}{}
	}
}

// age starts a new generation when the current one is HotFor old, and
// forgets everything when two are. The caller holds h.mu.
func (h *hotKeys) age(now time.Time) {
	switch since := now.Sub(h.since); {
	case since < HotFor:
		return
	case since < 2*HotFor:
		h.prev = h.cur
	default:
		h.prev = nil
	}
	h.cur, h.since = map[string]struct{}{}, now
}

// Observe counts one forwarded call of method that another replica
// answered as the owner: shared when it joined a flight there or was served
// from its cache.
func (d *Decider) Observe(fullMethod string, shared bool) {
	m := d.method(fullMethod)
	if m == nil {
		return
	}
	now := d.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.since.IsZero() {
		m.since = now
	}
	m.calls++
	if shared {
		m.shared++
	}
	if now.Sub(m.since) < Window {
		return
	}
	m.since = now
	if m.calls < MinCalls {
		return
	}
	m.keep.Store(m.shared < MinShared*m.calls)
	m.calls, m.shared = m.calls/2, m.shared/2
}

// method returns method's counts, made on first use; nil past MaxMethods.
func (d *Decider) method(fullMethod string) *method {
	d.mu.RLock()
	m := d.methods[fullMethod]
	d.mu.RUnlock()
	if m != nil {
		return m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m = d.methods[fullMethod]; m == nil && len(d.methods) < MaxMethods {
		m = &method{}
		d.methods[fullMethod] = m
	}
	return m
}

// Forwarded returns, for every method counted, whether its calls are
// forwarded (for a gauge).
func (d *Decider) Forwarded() map[string]bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]bool, len(d.methods))
	for name, m := range d.methods {
		out[name] = !m.keep.Load()
	}
	return out
}
