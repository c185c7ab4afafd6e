package collapse

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestGroup returns a Group closed at the end of the test, with a clock
// the test moves by hand.
func newTestGroup[V any](t *testing.T, opts Options[V]) (*Group[V], *atomic.Int64) {
	t.Helper()
	g := New(opts)
	var clock atomic.Int64
	g.now = clock.Load
	return g, &clock
}

// gate is a call the test controls: it counts its runs, reports each start
// and blocks until released (or until its context ends, which it reports).
type gate struct {
	val     string
	err     error
	calls   atomic.Int64
	started chan struct{}
	release chan struct{}
	ended   chan error  // the context error of a run that ended by its context
	check   func(*Call) // when set, called with the Call of each run
}

func newGate(val string, err error) *gate {
	return &gate{val: val, err: err, started: make(chan struct{}, 1024), release: make(chan struct{}), ended: make(chan error, 1024)}
}

func (g *gate) fn(c *Call) (string, error) {
	g.calls.Add(1)
	if g.check != nil {
		g.check(c)
	}
	g.started <- struct{}{}
	select {
	case <-g.release:
		return g.val, g.err
	case <-c.Context().Done():
		g.ended <- c.Context().Err()
		return "", c.Context().Err()
	}
}

// value returns a call that answers v at once and counts its runs in calls.
func value(v string, calls *atomic.Int64) func(*Call) (string, error) {
	return func(*Call) (string, error) {
		if calls != nil {
			calls.Add(1)
		}
		return v, nil
	}
}

// failing returns a call that fails with err at once and counts its runs.
func failing(err error, calls *atomic.Int64) func(*Call) (string, error) {
	return func(*Call) (string, error) {
		if calls != nil {
			calls.Add(1)
		}
		return "", err
	}
}

type result struct {
	val     string
	outcome Outcome
	err     error
}

// doAsync calls g.Do on a goroutine of its own and sends its result.
func doAsync(g *Group[string], ctx context.Context, key string, opts *CallOptions, fn func(*Call) (string, error)) <-chan result {
	return async(func() (string, Outcome, error) { return g.Do(ctx, key, opts, fn) })
}

// doFreshAsync is doAsync with g.DoCopy, asking for a fresh result.
func doFreshAsync(g *Group[string], ctx context.Context, key string, opts *CallOptions, fn func(*Call) (string, error)) <-chan result {
	return async(func() (string, Outcome, error) { return g.DoCopy(ctx, key, opts, fn, &Copy{Fresh: true}) })
}

// async runs do on a goroutine of its own and sends its result.
func async(do func() (string, Outcome, error)) <-chan result {
	c := make(chan result, 1)
	go func() {
		v, o, err := do()
		c <- result{v, o, err}
	}()
	return c
}

// do calls g.Do and returns its result as one value.
func do(g *Group[string], key string, opts *CallOptions, fn func(*Call) (string, error)) result {
	v, o, err := g.Do(context.Background(), key, opts, fn)
	return result{v, o, err}
}

// waitWaiters waits until n callers wait on the Group.
func waitWaiters(t *testing.T, g *Group[string], n int) {
	t.Helper()
	testkit.WaitFor(t, "waiters", func() bool { return g.Stats().Waiters == n })
}

// waiting returns how many callers wait for key's call in flight.
func waiting(g *Group[string], key string) int32 {
	s, _ := g.shardOf(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[key]; e != nil {
		return e.waiting.Load()
	}
	return 0
}

// times returns the times of the result g holds for key, when it holds
// one: its TTL's end and its early refresh (0: none).
func times(t *testing.T, g *Group[string], key string) (fresh, refresh int64) {
	t.Helper()
	s, _ := g.shardOf(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.m[key]
	if e == nil || e.state != stateHeld {
		t.Fatalf("no result held for %q", key)
	}
	return e.fresh, e.refresh
}

// refreshedKey loads keys k0, k1, ... into g with opts, each answered v
// (and counted in calls, when not nil), until one's first result is due
// for its early refresh after after, and returns that key.
func refreshedKey(t *testing.T, g *Group[string], opts *CallOptions, v string, calls *atomic.Int64, after int64) string {
	t.Helper()
	for i := 0; ; i++ {
		k := fmt.Sprint("k", i)
		do(g, k, opts, value(v, calls))
		if _, refresh := times(t, g, k); refresh > after {
			return k
		}
	}
}
