package proxy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// agedStreams starts a proxy that replays StreamHellos and keeps an ended
// stream for 2 s, on clock, whose peer is ring ("": its own peer port, as
// agedProxy's in age_test.go).
func agedStreams(t *testing.T, b *testBackend, clock *testkit.Clock, ring string) *runningProxy {
	t.Helper()
	return startProxy(t, b.addr, proxyConfig{
		peered:     true,
		ring:       ring,
		policyFile: replayPolicy("2s"),
		options:    func(o *proxy.Options) { o.Now = clock.Now },
	})
}

// readAnn reads ann's stream of three messages through s, at the time the
// test says, and checks that it came whole, without the owner's life.
func readAnn(t *testing.T, s *runningProxy, at time.Duration) {
	t.Helper()
	got := readStream(t, s.client, "ann", 3)
	if got.Err != nil || len(got.Replies) != 3 {
		t.Fatalf("at %v: %d messages, %v; want 3", at, len(got.Replies), got.Err)
	}
	if v := got.Trailer.Get(peers.LifeHeader); v != nil {
		t.Errorf("at %v: the caller saw the owner's life trailer %q", at, v)
	}
}

func TestPeers_ACopyOfAStreamLivesOnlyWhatIsLeftOfTheOwnersRecord(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := agedStreams(t, b, clock, "")
	streams := func(at time.Duration, want int64) {
		t.Helper()
		if n := b.Calls.StreamHellos.Load(); n != want {
			t.Errorf("at %v: backend streams = %d, want %d", at, n, want)
		}
	}
	readAnn(t, s, 0)
	streams(0, 1)
	// At 1.2 s this replica copies the owner's record again: 0.8 s are left
	// of its life, and the copy lives no longer.
	clock.Advance(1200 * time.Millisecond)
	if n := s.proxy.PurgeMethod(methodStreamHellos, proxy.Purge{Scope: proxy.Callers}); n != 1 {
		t.Fatalf("purged %d copies, want 1", n)
	}
	readAnn(t, s, 1200*time.Millisecond)
	streams(1200*time.Millisecond, 1)
	clock.Advance(799 * time.Millisecond)
	readAnn(t, s, 1999*time.Millisecond)
	streams(1999*time.Millisecond, 1)
	clock.Advance(time.Millisecond)
	readAnn(t, s, 2*time.Second)
	streams(2*time.Second, 2) // the record's life is over everywhere
}

func TestPeers_ACopyOfAStreamFromAnOwnerThatSaysNothingLivesItsTTL(t *testing.T) {
	// The ring's one peer is the backend itself: an older owner, whose
	// streams carry no life trailer.
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := agedStreams(t, b, clock, b.addr)
	readAnn(t, s, 0)
	clock.Advance(2*time.Second - time.Millisecond)
	readAnn(t, s, 2*time.Second-time.Millisecond)
	if n := b.Calls.StreamHellos.Load(); n != 1 {
		t.Errorf("backend streams = %d, want 1: the copy is kept for its TTL", n)
	}
	clock.Advance(time.Millisecond)
	readAnn(t, s, 2*time.Second)
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2 after the TTL", n)
	}
}

// Records made together do not expire together: each is kept for its TTL
// less up to ttlJitter of it, an amount its key draws. None goes before
// the jitter's bound, about half have gone halfway through it, and every
// one by its TTL (those remade halfway through are kept on): one more
// backend stream each.
func TestReplay_RecordsMadeTogetherExpireSpreadOverTheirJitter(t *testing.T) {
	const keys = 40
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{
		policyFile: "methods:\n  - name: " + methodStreamHellos + "\n    stream: replay\n    cacheTTL: 10s\n    ttlJitter: 0.5\n",
		options:    func(o *proxy.Options) { o.Now = clock.Now },
	})
	readAll := func() int64 {
		t.Helper()
		for k := range keys {
			if got := readStream(t, s.client, fmt.Sprint("key-", k), 2); got.Err != nil {
				t.Fatal(got.Err)
			}
		}
		return b.Calls.StreamHellos.Load()
	}
	for _, step := range []struct {
		at       time.Duration
		min, max int64 // backend streams in all once every key was read
	}{
		{0, keys, keys},
		{5 * time.Second, keys, keys},                   // the jitter's bound: none went
		{7500 * time.Millisecond, keys + 1, 2*keys - 1}, // half of it: some went, not all
		{10 * time.Second, 2 * keys, 2 * keys},          // the TTL: the others went, none remade went
	} {
		clock.Advance(step.at - (clock.Now().Sub(time.Unix(1e9, 0))))
		if got := readAll(); got < step.min || got > step.max {
			t.Errorf("at %v: %d backend streams, want %d to %d", step.at, got, step.min, step.max)
		}
	}
}

// A record read near the end of its life is refreshed early: the read is
// served the kept record while one backend stream refreshes it, counted as
// an early refresh, and the new record serves the reads after the old one's
// end.
func TestReplay_ARecordStillReadIsRefreshedBeforeItExpires(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1e9, 0))
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{
		policyFile: "methods:\n  - name: " + methodStreamHellos + "\n    stream: replay\n    cacheTTL: 10s\n    ttlJitter: 0\n    earlyRefresh: true\n",
		options:    func(o *proxy.Options) { o.Now = clock.Now },
	})
	read := func() {
		t.Helper()
		if got := readStream(t, s.client, "ann", 3); got.Err != nil || len(got.Replies) != 3 {
			t.Fatalf("%d messages, %v; want 3", len(got.Replies), got.Err)
		}
	}
	read()
	// The key's refresh point is somewhere in its first 10 s; it is past
	// at the last millisecond.
	clock.Advance(10*time.Second - time.Millisecond)
	read()
	testkit.WaitFor(t, "the refresh's backend stream to end", func() bool {
		return b.Calls.StreamHellos.Load() == 2 && s.proxy.StreamStats().Live == 0
	})
	clock.Advance(2 * time.Millisecond)
	read()
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2: the first, and its refresh, which serves past the first's end", n)
	}
	s.observed.mu.Lock()
	defer s.observed.mu.Unlock()
	if want := []string{proxy.RefreshEarly}; !slices.Equal(s.observed.refreshes, want) {
		t.Errorf("refreshes observed %v, want %v", s.observed.refreshes, want)
	}
}
