package proxy_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestPurge_TakesAnswersBackByRequestMethodAndTag(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	tests := []struct {
		name  string
		purge func(p *proxy.Proxy, authority string) int
	}{
		{"request", func(p *proxy.Proxy, authority string) int {
			payload := []byte("\x0a\x05alice") // HelloRequest{Name: "alice"} as wire bytes
			return p.PurgeRequest("/hello.v1.Greeter/SayHello", "", payload, metadata.Pairs(":authority", authority), proxy.Purge{})
		}},
		{"method", func(p *proxy.Proxy, _ string) int { return p.PurgeMethod("/hello.v1.Greeter/SayHello", proxy.Purge{}) }},
		{"tag", func(p *proxy.Proxy, _ string) int { return p.PurgeTag("user:alice", proxy.Purge{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := startProxy(t, b.addr, proxyConfig{
				policy: &keep,
				options: func(o *proxy.Options) {
					o.TagsHeader = proxy.DefaultTagsHeader
				},
				wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
					return withHeader{cc, proxy.DefaultTagsHeader, "user:alice org:7"}
				},
			})
			ctx := testkit.Context(t)
			for range 2 {
				r := sayHello(ctx, s.client, "alice", "")
				if r.err != nil {
					t.Fatalf("SayHello: %v", r.err)
				}
				if v := r.header.Get(proxy.DefaultTagsHeader); v != nil {
					t.Errorf("caller saw the tags header %q: it is taken out", v)
				}
			}
			if got := b.Calls.SayHello.Load(); got != 1 {
				t.Fatalf("backend calls before the purge = %d, want 1 (the answer kept)", got)
			}
			if n := tt.purge(s.proxy, s.conn.Target()); n != 1 {
				t.Errorf("purge took back %d answers, want 1", n)
			}
			if r := sayHello(ctx, s.client, "alice", ""); r.err != nil {
				t.Fatalf("SayHello: %v", r.err)
			}
			if got := b.Calls.SayHello.Load(); got != 2 {
				t.Errorf("backend calls after the purge = %d, want 2: the purged answer was not served", got)
			}
			if n := tt.purge(s.proxy, s.conn.Target()); n != 1 {
				t.Errorf("second purge took back %d answers, want 1 (the new answer)", n)
			}
		})
	}
}

func TestPurge_TakesBackAnswersByTheirRFC9875CacheGroups(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	for _, tt := range []struct {
		name, groups string
		calls        int64 // backend calls of two identical callers
		purged       int   // answers a purge of "user:alice" takes back
	}{
		{"groups", `"user:alice", "org 7";p=1`, 1, 1},
		{"groups beside the tags header's", `"org 7"`, 1, 1},
		// A purge by the groups of an answer the proxy cannot read would
		// miss it: it is shared, never kept.
		{"groups it cannot read", `user:alice`, 2, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := startProxy(t, b.addr, proxyConfig{
				policy:  &keep,
				options: func(o *proxy.Options) { o.TagsHeader = proxy.DefaultTagsHeader },
				wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
					cc = withHeader{cc, proxy.CacheGroupsHeader, tt.groups}
					if tt.name == "groups beside the tags header's" {
						cc = withHeader{cc, proxy.DefaultTagsHeader, "user:alice"}
					}
					return cc
				},
			})
			ctx := testkit.Context(t)
			for range 2 {
				r := sayHello(ctx, s.client, "alice", "")
				if r.err != nil {
					t.Fatalf("SayHello: %v", r.err)
				}
				if got := r.header.Get(proxy.CacheGroupsHeader); len(got) != 1 || got[0] != tt.groups {
					t.Errorf("caller saw cache-groups %q, want the backend's %q: it stays for the caches after", got, tt.groups)
				}
			}
			if got := b.Calls.SayHello.Load(); got != tt.calls {
				t.Fatalf("backend calls = %d, want %d", got, tt.calls)
			}
			for _, tag := range []string{"user:alice", "org 7"} {
				if n := s.proxy.PurgeTag(tag, proxy.Purge{}); n != tt.purged {
					t.Errorf("a purge of %q took back %d answers, want %d", tag, n, tt.purged)
				}
				if tt.purged == 0 {
					break
				}
				if r := sayHello(ctx, s.client, "alice", ""); r.err != nil {
					t.Fatal(r.err)
				}
			}
		})
	}
}

func TestPurge_AnAnswerWithTooManyTagsIsNeverKept(t *testing.T) {
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	tags := ""
	for i := range proxy.MaxTags + 1 {
		tags += " t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{
		policy:  &keep,
		options: func(o *proxy.Options) { o.TagsHeader = proxy.DefaultTagsHeader },
		wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
			return withHeader{cc, proxy.DefaultTagsHeader, tags}
		},
	})
	ctx := testkit.Context(t)
	for range 2 {
		if r := sayHello(ctx, s.client, "many", ""); r.err != nil {
			t.Fatalf("SayHello: %v", r.err)
		}
	}
	if got := b.Calls.SayHello.Load(); got != 2 {
		t.Errorf("backend calls = %d, want 2: a purge by tag could not find such an answer, so it is not kept", got)
	}
}

func TestPurge_AllTakesBackEveryAnswerAndRecord(t *testing.T) {
	b := startBackend(t, nil)
	keep := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	s := startProxy(t, b.addr, proxyConfig{policy: &keep, policyFile: replayPolicy("1h")})
	ctx := testkit.Context(t)
	for range 2 {
		if r := sayHello(ctx, s.client, "ann", ""); r.err != nil {
			t.Fatal(r.err)
		}
		if got := readStream(t, s.client, "ann", 3); got.Err != nil {
			t.Fatal(got.Err)
		}
	}
	if n := s.proxy.PurgeAll(); n != 2 {
		t.Errorf("PurgeAll took back %d, want 2: the answer and the record", n)
	}
	if r := sayHello(ctx, s.client, "ann", ""); r.err != nil {
		t.Fatal(r.err)
	}
	if got := readStream(t, s.client, "ann", 3); got.Err != nil {
		t.Fatal(got.Err)
	}
	if calls, streams := b.Calls.SayHello.Load(), b.Calls.StreamHellos.Load(); calls != 2 || streams != 2 {
		t.Errorf("backend calls %d, streams %d after PurgeAll; want 2 and 2", calls, streams)
	}
}

// PurgeAll is a purge: for a lease after it, the proxy asks no replica for
// an answer it may hold (handoff.go), which may not have taken the purge
// yet. TakeBackAll is none: the proxy asks at once. A purge fetched late
// from a journal counts its lease from when it was taken there (its Age).
// The proxy's ring does not know it (agedProxy): its calls are forwarded
// to its own peer listener, which finds their keys on another replica of
// its ring, and asks that one (itself) first.
func TestPurge_HoldsTheAsksForAnAnswerForALeaseFromWhenItWasTaken(t *testing.T) {
	purgeTaken := func(age time.Duration) func(*proxy.Proxy) int {
		return func(p *proxy.Proxy) int { return p.PurgeMethod("/a.B/C", proxy.Purge{Age: age}) }
	}
	for _, tt := range []struct {
		name string
		take func(*proxy.Proxy) int
		asks int
	}{
		{"PurgeAll", (*proxy.Proxy).PurgeAll, 0},
		{"TakeBackAll", (*proxy.Proxy).TakeBackAll, 1},
		{"a purge taken now", purgeTaken(0), 0},
		{"a purge taken a moment less than a lease ago", purgeTaken(coherence.Lease - time.Millisecond), 0},
		{"a purge taken a lease ago", purgeTaken(coherence.Lease), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := agedProxy(t, b.addr, testkit.NewClock(time.Unix(1e9, 0)), time.Hour, 0)
			tt.take(s.proxy)
			if r := sayHello(testkit.Context(t), s.client, "ann", ""); r.err != nil {
				t.Fatal(r.err)
			}
			s.observed.mu.Lock()
			defer s.observed.mu.Unlock()
			if got := len(s.observed.handoffs); got != tt.asks {
				t.Errorf("%d asks for the answer (%v), want %d", got, s.observed.handoffs, tt.asks)
			}
		})
	}
}
