package proxy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// withHeader is a backend connection whose answers carry one more header,
// as a backend declaring something of its answers would send.
type withHeader struct {
	grpc.ClientConnInterface
	key, value string
}

func (w withHeader) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	err := w.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok {
			*h.HeaderAddr = metadata.Join(*h.HeaderAddr, metadata.Pairs(w.key, w.value))
		}
	}
	return err
}

func TestUnary_AnswerDeclaresHowLongItIsServed(t *testing.T) {
	// The rule keeps nothing (TTL 0): only a declared max-age keeps an answer.
	inFlightOnly := policy.Defaults{Collapse: policy.Always, Timeout: testkit.DefaultTimeout}
	ignoring, tinyMax := inFlightOnly, inFlightOnly
	ignoring.IgnoreCacheControl = true
	tinyMax.MaxTTL = time.Nanosecond // over by the second call
	tests := []struct {
		name         string
		cacheControl string
		defaults     policy.Defaults
		wantCalls    int64    // the backend's own count for two calls in a row
		wantSecond   string   // the second call's outcome
		wantSources  []string // what set each shared answer's windows
	}{
		{"max-age keeps the answer", "max-age=60", inFlightOnly, 1, "cache_hit", []string{proxy.FreshnessBackend}},
		{"nothing declared: the rule's windows", "", inFlightOnly, 2, "leader", []string{proxy.FreshnessPolicy, proxy.FreshnessPolicy}},
		{"ignored", "max-age=3600", ignoring, 2, "leader", []string{proxy.FreshnessPolicy, proxy.FreshnessPolicy}},
		{"cut to maxTTL", "max-age=60", tinyMax, 2, "leader", []string{proxy.FreshnessCapped, proxy.FreshnessCapped}},
		{"no-store is private", "no-store, max-age=3600", inFlightOnly, 2, "leader", nil},
		{"no-cache is private", "no-cache", inFlightOnly, 2, "leader", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := startProxy(t, b.addr, proxyConfig{
				policy: &tt.defaults,
				wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
					if tt.cacheControl == "" {
						return cc
					}
					return withHeader{cc, "cache-control", tt.cacheControl}
				},
			})
			ctx := testkit.Context(t)
			for range 2 {
				if r := sayHello(ctx, s.client, "fresh", ""); r.err != nil {
					t.Fatalf("SayHello: %v", r.err)
				}
			}
			if got := b.Calls.SayHello.Load(); got != tt.wantCalls {
				t.Errorf("backend calls = %d, want %d", got, tt.wantCalls)
			}
			if got := s.waitForRequests(t, 2); got[1].outcome != tt.wantSecond {
				t.Errorf("second call served %q, want %q", got[1].outcome, tt.wantSecond)
			}
			s.observed.mu.Lock()
			defer s.observed.mu.Unlock()
			if !slices.Equal(s.observed.freshness, tt.wantSources) {
				t.Errorf("freshness sources = %v, want %v", s.observed.freshness, tt.wantSources)
			}
		})
	}
}

// answering is a backend connection that makes the real call, then answers
// with status st and a trailer, as a backend whose record is missing would.
type answering struct {
	grpc.ClientConnInterface
	st *status.Status
}

func (a answering) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if err := a.ClientConnInterface.Invoke(ctx, method, args, reply, opts...); err != nil {
		return err
	}
	for _, o := range opts {
		if tr, ok := o.(grpc.TrailerCallOption); ok {
			*tr.TrailerAddr = metadata.Pairs("x-missing", "user 42")
		}
	}
	return a.st.Err()
}

func TestUnary_NegativeCachingKeepsTheErrorsTheRuleNames(t *testing.T) {
	notFound, err := status.New(codes.NotFound, "no user 42").WithDetails(&errdetails.ResourceInfo{ResourceType: "user", ResourceName: "42"})
	if err != nil {
		t.Fatal(err)
	}
	invalid := status.New(codes.InvalidArgument, "bad name")
	keepsNotFound := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, Timeout: testkit.DefaultTimeout}
	file := "default:\n  cacheCodes: [NOT_FOUND]\n"
	tests := []struct {
		name       string
		st         *status.Status
		policyFile string
		wantCalls  int64  // the backend's own count for two calls in a row
		wantSecond string // the second call's outcome
	}{
		{"a named code is kept", notFound, file, 1, "cache_hit"},
		{"no cacheCodes: never kept", notFound, "", 2, "leader"},
		{"another code: never kept", invalid, file, 2, "leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := startProxy(t, b.addr, proxyConfig{
				policy:      &keepsNotFound,
				policyFile:  tt.policyFile,
				wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface { return answering{cc, tt.st} },
			})
			ctx := testkit.Context(t)
			for i := range 2 {
				r := sayHello(ctx, s.client, "missing", "")
				got := status.Convert(r.err)
				// Every caller gets the backend's status as it was sent:
				// code, message, details, and its trailer.
				if !proto.Equal(got.Proto(), tt.st.Proto()) {
					t.Errorf("call %d: status %v, want %v", i, got.Proto(), tt.st.Proto())
				}
				if v := r.trailer.Get("x-missing"); len(v) != 1 || v[0] != "user 42" {
					t.Errorf("call %d: trailer x-missing = %q, want [user 42]", i, v)
				}
			}
			if got := b.Calls.SayHello.Load(); got != tt.wantCalls {
				t.Errorf("backend calls = %d, want %d", got, tt.wantCalls)
			}
			got := s.waitForRequests(t, 2)
			if got[1].outcome != tt.wantSecond || got[1].code != tt.st.Code() {
				t.Errorf("second call observed %+v, want outcome %q and code %v", got[1], tt.wantSecond, tt.st.Code())
			}
		})
	}
}

func TestUnary_AnswerWithoutALifetimeKeepsTheRulesTTL(t *testing.T) {
	// must-revalidate, proxy-revalidate and a stale window alone declare no
	// lifetime: the rule's TTL stays; what they do say changes the rule's
	// stale windows.
	rule := policy.Defaults{Collapse: policy.Always, CacheTTL: time.Hour, StaleWhileRevalidate: time.Hour, Timeout: testkit.DefaultTimeout}
	for _, cc := range []string{"must-revalidate", "proxy-revalidate", "stale-if-error=60", "max-age=60, stale-if-error=soon"} {
		t.Run(cc, func(t *testing.T) {
			b := startBackend(t, nil)
			s := startProxy(t, b.addr, proxyConfig{policy: &rule, wrapBackend: func(cc2 grpc.ClientConnInterface) grpc.ClientConnInterface {
				return withHeader{cc2, "cache-control", cc}
			}})
			ctx := testkit.Context(t)
			for range 2 {
				if r := sayHello(ctx, s.client, "ann", ""); r.err != nil {
					t.Fatal(r.err)
				}
			}
			if n := b.Calls.SayHello.Load(); n != 1 {
				t.Errorf("backend calls = %d, want 1: the second call a hit", n)
			}
		})
	}
}
