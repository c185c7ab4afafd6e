package sidecar

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The memory tests hold what a real sidecar counts against its byte bounds
// (collapser_cache_bytes, collapser_stream_recorded_bytes) against what the
// Go heap really holds for it: a bound is only a bound if what it counts is
// what is held. Each makes many distinct calls through a sidecar in front of
// the hello backend (or one the load brings), collects the garbage, and
// compares the live heap's growth with the sidecar's count. Each load holds
// several MiB, so that what a test process holds besides the entries
// (connections, buffers, the backend's state) is lost in their sum.

// heldRatio bounds the heap's growth over what the sidecar counts, either
// way: at most heldRatio times the count, and at least the count over
// heldRatio.
const heldRatio = 1.25

// heldLoad is a load that leaves results held by a sidecar.
type heldLoad struct {
	name       string
	calls      int    // distinct calls of a round
	rounds     int    // times the round is made over the same names (0: once)
	callers    int    // callers of each name at once (0: one)
	replyBytes int    // the size of each answer's greeting
	count      int32  // messages per stream (streams only)
	method     string // sayHello or streamHellos
	// backend starts the backend and returns its address; nil: the hello
	// backend, its answers replyBytes long.
	backend func(testing.TB) string
	code    codes.Code // what each unary call ends with: OK unless set
	edit    func(*config.Settings)
}

// heldUsage is what a heldLoad left behind.
type heldUsage struct {
	counted int64 // what the sidecar counts against its bound
	held    int   // entries or records held
	grown   int64 // live heap growth over the load
}

func (u heldUsage) String() string {
	return fmt.Sprintf("%d held, counted %.1f MiB, heap grew %.1f MiB (%.2f× the count)",
		u.held, mib(u.counted), mib(u.grown), float64(u.grown)/float64(max(u.counted, 1)))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// run makes l's calls through a new sidecar, 16 at a time, and returns what
// they left held. The sidecar runs on a fake clock, which moves only past
// the TTL between two rounds. The sidecar and its connections are warmed up
// by one call of the method before the heap is first measured.
func (l heldLoad) run(t testing.TB) heldUsage {
	t.Helper()
	var backend string
	if l.backend != nil {
		backend = l.backend(t)
	} else {
		backend = hellotest.Serve(t, hello.Options{ReplyBytes: l.replyBytes})
	}
	clock := fakeClock()
	sc := startSidecar(t, backend, l.configure, runOn(clock))
	if l.method == streamHellos {
		waitStreamLearned(t, sc)
	} else {
		testkit.WaitFor(t, "SayHello learned as unary", func() bool { return sc.resolver.Method(sayHello).Kind.String() == "unary" })
	}
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	call := l.caller(t, client)
	call("warm-up")
	usage := func() (int64, int) {
		if l.method == streamHellos {
			st := sc.proxy.StreamStats()
			return st.Bytes, st.Held
		}
		st := sc.proxy.Stats()
		return st.Bytes, st.Entries
	}
	counted0, held0 := usage()
	before := testkit.LiveHeap()

	for round := range max(l.rounds, 1) {
		if round > 0 {
			// Past the TTL of every result of the round before.
			advance(t, clock, sc.cfg.Policy.CacheTTL, sc)
		}
		l.round(call)
	}
	testkit.WaitFor(t, "no call in flight", func() bool {
		return sc.proxy.Stats().InFlight == 0 && sc.proxy.StreamStats().Live == 0
	})
	grown := testkit.LiveHeap() - before
	counted, held := usage()
	return heldUsage{counted: counted - counted0, held: held - held0, grown: grown}
}

// round makes one call for each of l's names, l.callers at once for each,
// from 16 workers.
func (l heldLoad) round(call func(name string)) {
	const workers = 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < l.calls; i += workers {
				name := fmt.Sprintf("caller-%07d", i)
				var same sync.WaitGroup
				for range max(l.callers, 1) {
					same.Go(func() { call(name) })
				}
				same.Wait()
			}
		})
	}
	wg.Wait()
}

// configure applies l's settings to a sidecar's: a TTL of a minute unless
// l.edit says otherwise.
func (l heldLoad) configure(c *config.Settings) {
	c.Policy.CacheTTL = time.Minute
	if l.edit != nil {
		l.edit(c)
	}
}

// caller returns a function that makes l's call for name and reads its
// whole answer, each call bounded on its own: a load may outlast any one
// bound.
func (l heldLoad) caller(t testing.TB, client hellov1.GreeterClient) func(name string) {
	if l.method != streamHellos {
		return func(name string) {
			ctx, cancel := context.WithTimeout(t.Context(), testkit.DefaultTimeout)
			defer cancel()
			if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: name}); status.Code(err) != l.code {
				t.Errorf("SayHello(%s): %v, want code %v", name, err, l.code)
			}
		}
	}
	return func(name string) {
		ctx, cancel := context.WithTimeout(t.Context(), testkit.DefaultTimeout)
		defer cancel()
		stream, err := client.StreamHellos(ctx, &hellov1.HelloRequest{Name: name, Count: l.count})
		if err != nil {
			t.Errorf("StreamHellos(%s): %v", name, err)
			return
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if err != io.EOF {
					t.Errorf("StreamHellos(%s): %v", name, err)
				}
				return
			}
		}
	}
}

// checkHeld fails t when the load held fewer than want, or when the heap
// grew by more than heldRatio times what the sidecar counts (its bound lets
// memory grow past it) or by less than the count over heldRatio (its bound
// turns away what would fit).
func checkHeld(t *testing.T, u heldUsage, want int) {
	t.Helper()
	t.Log(u)
	if u.held < want {
		t.Fatalf("%d results held, want at least %d: the load did not fill the cache", u.held, want)
	}
	if ratio := float64(u.grown) / float64(u.counted); ratio > heldRatio || ratio < 1/heldRatio {
		t.Errorf("the heap grew by %.1f MiB for %.1f MiB counted (%.2f×), not within %.2f× either way: what a result holds is not what it counts",
			mib(u.grown), mib(u.counted), ratio, heldRatio)
	}
}

func TestMemory_CachedAnswersHoldWhatTheyCount(t *testing.T) {
	for _, l := range []heldLoad{
		{name: "small answers", calls: 6_000},
		{name: "8 KiB answers", calls: 2_000, replyBytes: 8 << 10},
		{name: "64 KiB answers", calls: 300, replyBytes: 64 << 10},
		// Each answer names eight tags of its own in the tags header: the
		// tags and the header kept for forwarders count too.
		{name: "tagged answers", calls: 6_000, backend: tagging(8)},
		// Each answer is NOT_FOUND, which the policy keeps, with 16 KiB
		// of details: the decoded status and the trailer count too.
		{name: "NOT_FOUND answers", calls: 600, backend: notFound(16 << 10), code: codes.NotFound, edit: keepNotFound(t)},
	} {
		t.Run(l.name, func(t *testing.T) {
			l.method = sayHello
			checkHeld(t, l.run(t), l.calls)
		})
	}
}

func TestMemory_RefreshedStaleAnswersHoldWhatTheyCount(t *testing.T) {
	// The second round asks for every name again past its millisecond TTL:
	// each is served stale while a background call refreshes it, and the
	// refreshed result is held.
	l := heldLoad{calls: 4_000, rounds: 2, method: sayHello, edit: func(c *config.Settings) {
		c.Policy.CacheTTL, c.Policy.StaleWhileRevalidate = time.Millisecond, time.Hour
	}}
	checkHeld(t, l.run(t), l.calls)
}

func TestMemory_PrivateAnswersHoldOnlyTheirPassMarkers(t *testing.T) {
	// Every answer carries the hello backend's served-by trailer, made
	// private here: none is kept, and the callers that joined a call make
	// their own. What each key holds is its pass marker (hit-for-pass):
	// its key and an entry, no answer, which hold what they count.
	l := heldLoad{calls: 2_000, callers: 2, method: sayHello, edit: func(c *config.Settings) {
		c.Proxy.PrivateHeaders = []string{hello.TrailerServedBy}
	}}
	u := l.run(t)
	checkHeld(t, u, l.calls)
	if per := u.counted / int64(u.held); per > collapse.EntryOverhead+maxMarkerKeyBytes {
		t.Errorf("a pass marker counts %d bytes, more than an entry (%d) and a key (%d): it holds part of an answer", per, collapse.EntryOverhead, maxMarkerKeyBytes)
	}
}

// maxMarkerKeyBytes bounds the key of a memory load's call, as the heap
// holds it.
const maxMarkerKeyBytes = 256

func TestMemory_ReplayedStreamsHoldWhatTheyCount(t *testing.T) {
	l := heldLoad{calls: 2_000, count: 50, method: streamHellos, edit: func(c *config.Settings) {
		c.PolicyFile = replayPolicy(t, time.Minute)
	}}
	checkHeld(t, l.run(t), l.calls)
}

// BenchmarkLoadHeld makes the loads of the memory issue (#15) through a
// real sidecar and reports, per load, what the sidecar counts against its
// bounds, the live heap's growth, their ratio and the process's resident
// memory (backend, sidecar and client together: an upper bound of the
// sidecar's). Run it with make load.
func BenchmarkLoadHeld(b *testing.B) {
	const mib32 = 32 << 20
	for _, l := range []heldLoad{
		{name: "10000x50B-defaults", calls: 10_000, method: sayHello},
		// The same answers, each tagged with its call number (the hello
		// backend's x-hello-call header read as the tags header).
		{name: "10000x50B-tagged", calls: 10_000, method: sayHello, edit: func(c *config.Settings) { c.Proxy.TagsHeader = hello.HeaderCall }},
		{name: "20000x1KiB-32MiB", calls: 20_000, replyBytes: 1 << 10, method: sayHello, edit: cacheMaxBytes(mib32)},
		{name: "20000x8KiB-32MiB", calls: 20_000, replyBytes: 8 << 10, method: sayHello, edit: cacheMaxBytes(mib32)},
		{name: "20000x64KiB-32MiB", calls: 20_000, replyBytes: 64 << 10, method: sayHello, edit: cacheMaxBytes(mib32)},
		{name: "100000x8KiB-defaults", calls: 100_000, replyBytes: 8 << 10, method: sayHello},
		{name: "6000streamsx50", calls: 6_000, count: 50, method: streamHellos},
	} {
		b.Run(l.name, func(b *testing.B) {
			if l.method == streamHellos {
				l.edit = func(c *config.Settings) { c.PolicyFile = replayPolicy(b, time.Minute) }
			}
			for b.Loop() {
				u := l.run(b)
				b.ReportMetric(float64(u.held), "held")
				b.ReportMetric(mib(u.counted), "counted-MiB")
				b.ReportMetric(mib(u.grown), "heap-MiB")
				b.ReportMetric(float64(u.grown)/float64(max(u.counted, 1)), "heap/counted")
				b.ReportMetric(float64(u.grown)/float64(max(u.held, 1)), "heap-B/held")
				b.ReportMetric(float64(rssKiB(b))/1024, "rss-MiB")
			}
		})
	}
}

// cacheMaxBytes returns an edit that bounds the result cache to n bytes.
func cacheMaxBytes(n int64) func(*config.Settings) {
	return func(c *config.Settings) { c.Proxy.Cache.MaxBytes = n }
}
