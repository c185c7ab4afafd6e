package collapse

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	t.Cleanup(g.Close)
	return g, &clock
}

// gatedCall returns a call that counts its runs and blocks until release is
// closed, and a channel that receives once per run when it starts.
func gatedCall(val string, err error, calls *atomic.Int64, release <-chan struct{}) (func() (string, error), <-chan struct{}) {
	started := make(chan struct{}, 16)
	return func() (string, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return val, err
	}, started
}

func recv(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(testkit.DefaultTimeout):
		t.Fatal("timed out waiting")
	}
}

type result struct {
	val     string
	outcome Outcome
	err     error
}

func doAsync(g *Group[string], ctx context.Context, key string, fn func() (string, error)) <-chan result {
	c := make(chan result, 1)
	go func() {
		v, o, err := g.Do(ctx, key, fn)
		c <- result{v, o, err}
	}()
	return c
}

func get(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(testkit.DefaultTimeout):
		t.Fatal("timed out waiting for Do")
		return result{}
	}
}

func TestGroup_DuplicateCallsShareOneCall(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	var calls atomic.Int64
	release := make(chan struct{})
	fn, started := gatedCall("v", nil, &calls, release)

	const n = 100
	leader := doAsync(g, context.Background(), "k", fn)
	recv(t, started)
	var followers []<-chan result
	for range n - 1 {
		followers = append(followers, doAsync(g, context.Background(), "k", fn))
	}
	testkit.WaitFor(t, "the condition", func() bool { return g.Stats().Waiters == n })
	close(release)

	if r := get(t, leader); r.val != "v" || r.outcome != Lead || r.err != nil {
		t.Errorf("leader got %+v, want v/leader/nil", r)
	}
	for _, f := range followers {
		if r := get(t, f); r.val != "v" || r.outcome != Join || r.err != nil {
			t.Errorf("follower got %+v, want v/joined/nil", r)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}
}

func TestGroup_DifferentKeysDoNotShare(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	var calls atomic.Int64
	for _, k := range []string{"a", "b", "a\x00", ""} {
		v, o, err := g.Do(context.Background(), k, func() (string, error) { calls.Add(1); return k, nil })
		if v != k || o != Lead || err != nil {
			t.Errorf("Do(%q) = %q, %v, %v", k, v, o, err)
		}
	}
	if calls.Load() != 4 {
		t.Errorf("calls = %d, want 4", calls.Load())
	}
}

func TestGroup_ResultCachedForTTL(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{TTL: 100 * time.Millisecond})
	var calls atomic.Int64
	fn := func() (string, error) { return "v", nil }
	counted := func() (string, error) { calls.Add(1); return fn() }

	steps := []struct {
		at      time.Duration
		outcome Outcome
	}{
		{0, Lead},
		{99 * time.Millisecond, Hit},
		{100 * time.Millisecond, Lead}, // expired exactly at TTL
		{150 * time.Millisecond, Hit},
	}
	for _, s := range steps {
		clock.Store(int64(s.at))
		v, o, err := g.Do(context.Background(), "k", counted)
		if v != "v" || o != s.outcome || err != nil {
			t.Errorf("at %v: got %q, %v, %v; want v, %v", s.at, v, o, err, s.outcome)
		}
	}
	if calls.Load() != 2 {
		t.Errorf("calls = %d, want 2", calls.Load())
	}
}

func TestGroup_ErrorsReachFollowersAndAreNotCached(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{TTL: time.Hour})
	var calls atomic.Int64
	release := make(chan struct{})
	boom := errors.New("boom")
	fn, started := gatedCall("", boom, &calls, release)

	leader := doAsync(g, context.Background(), "k", fn)
	recv(t, started)
	follower := doAsync(g, context.Background(), "k", fn)
	testkit.WaitFor(t, "the condition", func() bool { return g.Stats().Waiters == 2 })
	close(release)
	for _, c := range []<-chan result{leader, follower} {
		if r := get(t, c); !errors.Is(r.err, boom) {
			t.Errorf("got err %v, want boom", r.err)
		}
	}
	if _, o, _ := g.Do(context.Background(), "k", func() (string, error) { return "ok", nil }); o != Lead {
		t.Errorf("call after an error: outcome %v, want leader (errors are not cached)", o)
	}
}

func TestGroup_PanicReachesEveryWaiterAndWorkerSurvives(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	release := make(chan struct{})
	started := make(chan struct{})
	fn := func() (string, error) {
		close(started)
		<-release
		panic("kaboom")
	}
	leader := doAsync(g, context.Background(), "k", fn)
	recv(t, started)
	follower := doAsync(g, context.Background(), "k", fn)
	testkit.WaitFor(t, "the condition", func() bool { return g.Stats().Waiters == 2 })
	close(release)
	for _, c := range []<-chan result{leader, follower} {
		var pe *PanicError
		if r := get(t, c); !errors.As(r.err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
			t.Errorf("got err %v, want a *PanicError with kaboom and a stack", r.err)
		}
	}
	if v, _, err := g.Do(context.Background(), "k", func() (string, error) { return "after", nil }); v != "after" || err != nil {
		t.Errorf("Do after a panic = %q, %v", v, err)
	}
}

func TestGroup_GoexitReachesEveryWaiter(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	_, _, err := g.Do(context.Background(), "k", func() (string, error) {
		runtime.Goexit()
		return "", nil
	})
	if !errors.Is(err, ErrGoexit) {
		t.Errorf("err = %v, want ErrGoexit", err)
	}
	if g.Stats().InFlight != 0 {
		t.Errorf("call still in flight after Goexit")
	}
}

func TestGroup_LeaderCancellationDoesNotFailFollowers(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	var calls atomic.Int64
	release := make(chan struct{})
	fn, started := gatedCall("v", nil, &calls, release)

	ctx, cancel := context.WithCancel(context.Background())
	leader := doAsync(g, ctx, "k", fn)
	recv(t, started)
	follower := doAsync(g, context.Background(), "k", fn)
	testkit.WaitFor(t, "the condition", func() bool { return g.Stats().Waiters == 2 })

	cancel()
	if r := get(t, leader); !errors.Is(r.err, context.Canceled) || r.outcome != Lead {
		t.Errorf("leader got %+v, want canceled", r)
	}
	close(release)
	if r := get(t, follower); r.val != "v" || r.err != nil {
		t.Errorf("follower got %+v, want v", r)
	}
}

func TestGroup_EachFollowerStopsAtItsOwnDeadline(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{})
	var calls atomic.Int64
	release := make(chan struct{})
	fn, started := gatedCall("v", nil, &calls, release)

	leader := doAsync(g, context.Background(), "k", fn)
	recv(t, started)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	short := doAsync(g, ctx, "k", fn)
	if r := get(t, short); !errors.Is(r.err, context.DeadlineExceeded) || r.outcome != Join {
		t.Errorf("short follower got %+v, want deadline exceeded", r)
	}
	close(release)
	if r := get(t, leader); r.val != "v" || r.err != nil {
		t.Errorf("leader got %+v, want v", r)
	}
}

func TestGroup_CacheLimits(t *testing.T) {
	size := func(s string) int64 { return int64(len(s)) }
	tests := []struct {
		name        string
		opts        Options[string]
		vals        []string
		wantEntries int
		wantBytes   int64
	}{
		{"max entries evicts oldest", Options[string]{TTL: time.Hour, MaxEntries: 2, Size: size}, []string{"a", "b", "c"}, 2, 2},
		{"max bytes evicts oldest", Options[string]{TTL: time.Hour, MaxBytes: 5, Size: size}, []string{"aaa", "bbb"}, 1, 3},
		{"oversize entry not cached", Options[string]{TTL: time.Hour, MaxEntryBytes: 3, Size: size}, []string{"abcd", "abc"}, 1, 3},
		{"no TTL caches nothing", Options[string]{Size: size}, []string{"a", "b"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGroup(t, tt.opts)
			for _, v := range tt.vals {
				if _, _, err := g.Do(context.Background(), "k"+v, func() (string, error) { return v, nil }); err != nil {
					t.Fatal(err)
				}
			}
			st := g.Stats()
			if st.Entries > tt.wantEntries || st.Bytes > tt.wantBytes {
				t.Errorf("stats = %+v, want at most %d entries, %d bytes", st, tt.wantEntries, tt.wantBytes)
			}
			last := tt.vals[len(tt.vals)-1]
			_, o, _ := g.Do(context.Background(), "k"+last, func() (string, error) { return last, nil })
			if wantHit := tt.wantEntries > 0; (o == Hit) != wantHit {
				t.Errorf("latest value: outcome %v, want hit=%v", o, wantHit)
			}
		})
	}
}

func TestGroup_StatsDropExpiredEntries(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{TTL: time.Second, Size: func(s string) int64 { return int64(len(s)) }})
	for _, k := range []string{"a", "b", "c"} {
		if _, _, err := g.Do(context.Background(), k, func() (string, error) { return k + k, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.Stats(); st.Entries != 3 || st.Bytes != 6 {
		t.Fatalf("stats = %+v, want 3 entries, 6 bytes", st)
	}
	clock.Store(int64(time.Second))
	if st := g.Stats(); st != (Stats{}) {
		t.Errorf("stats after expiry = %+v, want zero", st)
	}
}

func TestGroup_ConcurrentMixedKeys(t *testing.T) {
	g := New(Options[int]{TTL: time.Millisecond, MaxEntries: 50})
	defer g.Close()
	var calls [8]atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (w + i) % len(calls)
				v, _, err := g.Do(context.Background(), string(rune('a'+k)), func() (int, error) {
					calls[k].Add(1)
					return k, nil
				})
				if err != nil || v != k {
					t.Errorf("key %d: got %d, %v", k, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := g.Stats(); st.InFlight != 0 || st.Waiters != 0 {
		t.Errorf("stats after all calls = %+v", st)
	}
}
