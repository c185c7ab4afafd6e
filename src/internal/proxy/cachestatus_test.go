package proxy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// statusOf returns the cache-status entries a caller got: in its header,
// or in the trailer of a trailers-only answer.
func statusOf(header, trailer metadata.MD) []string {
	if v := header.Get(proxy.CacheStatusHeader); len(v) > 0 {
		return v
	}
	return trailer.Get(proxy.CacheStatusHeader)
}

// checkStatus checks entries against want, whose "ttl=*" stands for a ttl
// of the hour the answers are kept: more than 59 minutes.
func checkStatus(t *testing.T, what string, entries, want []string) {
	t.Helper()
	ok := len(entries) == len(want)
	for i := 0; ok && i < len(want); i++ {
		prefix, anyTTL := strings.CutSuffix(want[i], "*")
		switch {
		case !anyTTL:
			ok = entries[i] == want[i]
		case !strings.HasPrefix(entries[i], prefix):
			ok = false
		default:
			ttl, _, _ := strings.Cut(strings.TrimPrefix(entries[i], prefix), ";")
			n, err := strconv.Atoi(ttl)
			ok = err == nil && n > 59*60 && n <= 60*60
		}
	}
	if !ok {
		t.Errorf("%s: cache-status %q, want %q", what, entries, want)
	}
}

func TestCacheStatus_EveryAnswerSaysHowItWasServed(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policy: &keep})
	ctx := testkit.Context(t)
	for _, step := range []struct{ name, want string }{
		{"ann", "collapser; fwd=miss; stored; ttl=*"},
		{"ann", "collapser; hit; ttl=*"},
		{"cookie:x", "collapser; fwd=miss; detail=private"},
		{"error", "collapser; fwd=miss"},
	} {
		r := sayHello(ctx, s.client, step.name, "")
		checkStatus(t, step.name, statusOf(r.header, r.trailer), []string{step.want})
	}
}

func TestCacheStatus_AFollowerSaysItWasCollapsed(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{policy: &keep})
	ctx := testkit.Context(t)
	first, second := goSayHello(ctx, s.client, "ann", ""), goSayHello(ctx, s.client, "ann", "")
	s.waitForWaiters(t, 2)
	close(hold)
	var entries []string
	for _, ch := range []<-chan result{first, second} {
		r := <-ch
		entries = append(entries, statusOf(r.header, r.trailer)...)
	}
	slices.Sort(entries)
	checkStatus(t, "a leader and its follower", entries,
		[]string{"collapser; fwd=miss; collapsed; stored; ttl=*", "collapser; fwd=miss; stored; ttl=*"})
}

func TestCacheStatus_TheBackendsEntriesComeFirst(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policy: &keep,
		wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
			return withHeader{cc, proxy.CacheStatusHeader, `origin-cache; hit; ttl=30`}
		}})
	ctx := testkit.Context(t)
	for _, want := range []string{"collapser; fwd=miss; stored; ttl=*", "collapser; hit; ttl=*"} {
		r := sayHello(ctx, s.client, "ann", "")
		checkStatus(t, want, statusOf(r.header, r.trailer), []string{"origin-cache; hit; ttl=30", want})
	}
}

func TestCacheStatus_PassedThroughAndReplayedCallsSayHowToo(t *testing.T) {
	b := startBackend(t, nil)
	ctx := testkit.Context(t)
	pass := startProxy(t, b.addr, passthroughConfig)
	r := sayHello(ctx, pass.client, "ann", "")
	checkStatus(t, "passed through", statusOf(r.header, r.trailer), []string{"collapser; fwd=bypass"})

	replayed := startProxy(t, b.addr, proxyConfig{policyFile: replayPolicy("1h")})
	for _, want := range []string{"collapser; fwd=miss", "collapser; hit"} {
		got := readStream(t, replayed.client, "ann", 3)
		checkStatus(t, "replayed stream", statusOf(got.Header, got.Trailer), []string{want})
	}
}

func TestCacheStatus_OffLeavesAnswersAsTheyCame(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policy: &keep, options: func(o *proxy.Options) { o.OmitCacheStatus = true }})
	ctx := testkit.Context(t)
	for range 2 {
		if r := sayHello(ctx, s.client, "ann", ""); len(statusOf(r.header, r.trailer)) != 0 {
			t.Errorf("cache-status %q with OmitCacheStatus", statusOf(r.header, r.trailer))
		}
	}
}
