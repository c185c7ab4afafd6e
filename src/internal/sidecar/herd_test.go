package sidecar

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// herd is a run of many distinct keys loaded at once, then read at a
// steady rate spread over them: the load where keys that expire together
// become misses together. The backend's own counter is sampled every
// sample and summed into windows of window.
type herd struct {
	keys              int
	ttl, swr, latency time.Duration
	rate              int // reads per second, over all keys
	duration          time.Duration
	sample, window    time.Duration
	edit              func(*config.Settings) // more settings, or nil
	purgeAt           time.Duration          // when a soft purge of the method is asked, into the steady load; 0: none
	replicas          int                    // sidecars with peers, each with its backend; 0 or 1: one sidecar alone
}

// herdResult is what a herd run measured: the backend's calls per window
// of the steady load (the load at once excluded), the reads of the steady
// load that waited for a backend call (misses: led or joined one), and
// the reads that failed.
type herdResult struct {
	windows  []int64
	purged   int // the window the purge was asked in; 0: none
	reads    int64
	misses   int64
	failures int64
}

// peakToMean is the largest window's calls over the windows' mean.
func (r herdResult) peakToMean() float64 {
	var sum int64
	for _, w := range r.windows {
		sum += w
	}
	if sum == 0 {
		return 0
	}
	return float64(slices.Max(r.windows)) * float64(len(r.windows)) / float64(sum)
}

// callsPerKeyPerTTL is the steady load's backend calls per key per TTL.
func (r herdResult) callsPerKeyPerTTL(h herd) float64 {
	var sum int64
	for _, w := range r.windows {
		sum += w
	}
	ttls := float64(len(r.windows)) * float64(h.window) / float64(h.ttl)
	return float64(sum) / float64(h.keys) / ttls
}

// runHerd makes the run h: it loads every key at once, then reads them at
// h.rate, a key drawn at random per read (and a replica, with several),
// for h.duration.
func runHerd(t testing.TB, h herd) herdResult {
	backends := make([]*testkit.Greeter, max(1, h.replicas))
	addrs := make([]string, len(backends))
	for i := range backends {
		backends[i] = &testkit.Greeter{SayHello: slow(h.latency)}
		addrs[i] = startBackend(t, backends[i])
	}
	edit := func(c *config.Settings) {
		c.Policy.EarlyRefresh = config.Default().Policy.EarlyRefresh // the defaults, unless h.edit says otherwise
		c.Policy.CacheTTL = h.ttl
		c.Policy.StaleWhileRevalidate = h.swr
		c.Policy.CollapseMethods = []string{sayHello}
		if h.edit != nil {
			h.edit(c)
		}
	}
	var scs []*runningSidecar
	var clients []hellov1.GreeterClient
	if h.replicas > 1 {
		for _, r := range startSidecars(t, addrs, true, edit) {
			scs, clients = append(scs, r.sidecar), append(clients, r.client)
		}
	} else {
		sc := startSidecar(t, addrs[0], edit)
		scs, clients = []*runningSidecar{sc}, []hellov1.GreeterClient{hellov1.NewGreeterClient(dial(t, sc.addr))}
	}
	calls := func() int64 {
		var n int64
		for _, b := range backends {
			n += b.Calls.SayHello.Load()
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.duration+testkit.DefaultTimeout)
	defer cancel()
	name := func(k int) string { return fmt.Sprintf("key-%d", k) }

	var failures, reads atomic.Int64
	read := func(k int) {
		if _, err := clients[rand.IntN(len(clients))].SayHello(ctx, &hellov1.HelloRequest{Name: name(k)}); err != nil {
			failures.Add(1)
		}
		reads.Add(1)
	}
	var wg sync.WaitGroup
	for k := range h.keys {
		wg.Go(func() { read(k) })
	}
	wg.Wait()

	// Reads are sent at the rate whatever their latency (an open loop):
	// a pacer hands them to enough workers to keep every one in flight.
	work := make(chan int, h.rate)
	for range h.rate * int(h.latency+100*time.Millisecond) / int(time.Second) {
		wg.Go(func() {
			for k := range work {
				read(k)
			}
		})
	}
	waited := func() int64 {
		var n float64
		for _, sc := range scs {
			for _, o := range []string{"leader", "joined"} {
				n += sc.metricSum(t, "collapser_requests_total", map[string]string{"outcome": o})
			}
		}
		return int64(n)
	}
	loaded := waited()
	var samples []int64
	sampler := time.NewTicker(h.sample)
	const tick = 10 * time.Millisecond
	pacer := time.NewTicker(tick)
	start := time.Now()
	samples = append(samples, calls())
	sent := 0
	purge := time.After(h.purgeAt)
	if h.purgeAt == 0 {
		purge = nil
	}
	purged := 0
	for now := time.Now(); now.Sub(start) < h.duration; {
		select {
		case now = <-purge:
			purged = len(samples) * int(h.sample) / int(h.window)
			if _, err := adminv1.NewCacheClient(dial(t, scs[0].adminAddr)).Purge(ctx,
				&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}, Soft: true}); err != nil {
				t.Errorf("purge: %v", err)
			}
		case now = <-pacer.C:
			due := int(now.Sub(start) * time.Duration(h.rate) / time.Second)
			for ; sent < due; sent++ {
				work <- rand.IntN(h.keys)
			}
		case now = <-sampler.C:
			samples = append(samples, calls())
		}
	}
	pacer.Stop()
	sampler.Stop()
	close(work)
	wg.Wait()

	per := int(h.window / h.sample)
	var windows []int64
	for i := per; i < len(samples); i += per {
		windows = append(windows, samples[i]-samples[i-per])
	}
	return herdResult{windows: windows, purged: purged, reads: reads.Load(), misses: waited() - loaded, failures: failures.Load()}
}

// issueLoad is issue 29's load on one sidecar: 500 keys, TTL 2 s, 2,000
// reads per second, a backend of 20 ms, for 20 s, the backend's counter
// sampled every 100 ms into windows of 500 ms.
func issueLoad() herd {
	return herd{
		keys: 500, ttl: 2 * time.Second, latency: 20 * time.Millisecond, rate: 2000,
		duration: 20 * time.Second, sample: 100 * time.Millisecond, window: 500 * time.Millisecond,
	}
}

// BenchmarkLoadHerd runs issue 29's load on one sidecar: 500 keys loaded
// at once, TTL 2 s, then 2,000 reads per second spread over them, against
// a backend of 20 ms, and reports the backend's calls per 500 ms window:
// their peak over their mean, and the calls per key per TTL. It runs with
// neither jitter nor early refresh ("plain"), then with the defaults
// ("spread"), each without and with a stale-while-revalidate window of
// 2 s. Run it once: make load.
func BenchmarkLoadHerd(b *testing.B) {
	base := issueLoad()
	plain := func(c *config.Settings) { c.Policy.TTLJitter, c.Policy.EarlyRefresh = 0, false }
	for b.Loop() {
		for _, run := range []struct {
			name string
			swr  time.Duration
			edit func(*config.Settings)
		}{{"plain", 0, plain}, {"plain-swr-2s", 2 * time.Second, plain}, {"spread", 0, nil}, {"spread-swr-2s", 2 * time.Second, nil}} {
			h := base
			h.swr, h.edit = run.swr, run.edit
			r := runHerd(b, h)
			if r.failures != 0 {
				b.Errorf("%s: %d of %d reads failed", run.name, r.failures, r.reads)
			}
			b.ReportMetric(r.peakToMean(), run.name+"-peak/mean")
			b.ReportMetric(r.callsPerKeyPerTTL(h), run.name+"-calls/key/ttl")
			b.ReportMetric(100*float64(r.misses)/float64(r.reads-int64(h.keys)), run.name+"-%misses")
			b.Logf("%s: backend calls per %v: %v", run.name, h.window, r.windows)
		}
	}
}

// BenchmarkLoadHerdFleet runs BenchmarkLoadHerd's load over three sidecars
// with peers, each read at random, each in front of a backend of its own
// (their counts summed), without jitter and early refresh ("plain") and
// with the defaults ("spread"): only a key's owner refreshes it, and the
// owners' refreshes spread as one sidecar's do. Run it once: make load.
func BenchmarkLoadHerdFleet(b *testing.B) {
	base := issueLoad()
	base.replicas = 3
	for b.Loop() {
		for _, run := range []struct {
			name string
			edit func(*config.Settings)
		}{{"plain", func(c *config.Settings) { c.Policy.TTLJitter, c.Policy.EarlyRefresh = 0, false }}, {"spread", nil}} {
			h := base
			h.edit = run.edit
			r := runHerd(b, h)
			if r.failures != 0 {
				b.Errorf("%s: %d of %d reads failed", run.name, r.failures, r.reads)
			}
			b.ReportMetric(r.peakToMean(), run.name+"-peak/mean")
			b.ReportMetric(r.callsPerKeyPerTTL(h), run.name+"-calls/key/ttl")
			b.Logf("%s: backend calls per %v: %v", run.name, h.window, r.windows)
		}
	}
}

// afterPurge is the largest window from the purge on over the mean of the
// windows before it (the first, which the refreshes ramp up in, left out).
func (r herdResult) afterPurge() float64 {
	var sum int64
	for _, w := range r.windows[1:r.purged] {
		sum += w
	}
	return float64(slices.Max(r.windows[r.purged:])) * float64(r.purged-1) / float64(sum)
}

// BenchmarkLoadHerdPurge runs BenchmarkLoadHerd's load (the defaults: TTL
// jitter and early refresh) and, 10 s into it, a soft purge of the method,
// which takes back all 500 answers, with the default pace of refreshes and
// without (0: all at once). It reports the backend's largest 500 ms window
// from the purge on over the mean of the windows before it. Run it once:
// make load.
func BenchmarkLoadHerdPurge(b *testing.B) {
	base := issueLoad()
	base.purgeAt = 10 * time.Second
	for b.Loop() {
		for _, run := range []struct {
			name string
			edit func(*config.Settings)
		}{{"paced", nil}, {"at-once", func(c *config.Settings) { c.Proxy.SoftPurgeRate = 0 }}} {
			h := base
			h.edit = run.edit
			r := runHerd(b, h)
			if r.failures != 0 {
				b.Errorf("%s: %d of %d reads failed", run.name, r.failures, r.reads)
			}
			b.ReportMetric(r.afterPurge(), run.name+"-peak/steady")
			b.Logf("%s: backend calls per %v, the purge in window %d: %v", run.name, h.window, r.purged, r.windows)
		}
	}
}
