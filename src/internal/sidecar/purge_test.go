package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	getGreeting = "/hello.v1.Greeter/GetGreeting"
	setGreeting = "/hello.v1.Greeter/SetGreeting"
)

// releaseToken is the peer token of the tests' releases; otherToken is
// another release's.
const (
	releaseToken = "release-token-0123456789abcdefghijklmnop"
	otherToken   = "other-token-0123456789abcdefghijklmnopqrs"
)

func TestPeers_PurgeReachesEveryReplica(t *testing.T) {
	alice, err := proto.Marshal(&hellov1.HelloRequest{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		req  *adminv1.PurgeRequest
	}{
		{"method", &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}},
		{"tag", &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "user:alice"}}},
		{"cache group", &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "group:alice"}}},
		{"request", &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Request{Request: &adminv1.Request{
			Method: sayHello, Payload: alice,
			Headers: []*adminv1.Header{{Name: ":authority", Values: []string{"hello.example"}}},
		}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backends := make([]*testkit.Greeter, 3)
			addrs := make([]string, len(backends))
			for i := range backends {
				backends[i] = &testkit.Greeter{SayHello: taggedGreet("user:")}
				addrs[i] = startBackend(t, backends[i])
			}
			rs := startSidecars(t, addrs, true, func(c *config.Settings) {
				c.Policy.CollapseMethods = []string{sayHello}
				c.Policy.CacheTTL = time.Hour
			})
			for i, r := range rs {
				r.backend = backends[i]
			}
			ctx := testkit.Context(t)
			read := func(rs ...*replica) {
				t.Helper()
				for i, r := range rs {
					if _, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: "alice"}); err != nil {
						t.Fatalf("SayHello through replica %d: %v", i, err)
					}
				}
			}
			read(rs...)
			if got := backendCalls(rs); got != 1 {
				t.Fatalf("backend calls = %d before the purge, want 1 (the owner's)", got)
			}
			resp, err := adminv1.NewCacheClient(dial(t, rs[0].sidecar.adminAddr)).Purge(ctx, tt.req)
			if err != nil {
				t.Fatalf("Purge: %v", err)
			}
			// The owner's answer, each forwarder's copy, and the owner's
			// own callers' copy when its first call took the hop to its
			// own peer port.
			if resp.GetReplicas() != 3 || resp.GetEntries() < 3 || resp.GetEntries() > 4 {
				t.Errorf("Purge reached %d replicas and %d answers; want 3 replicas and 3 or 4 answers", resp.GetReplicas(), resp.GetEntries())
			}
			// Replicas 1 and 2 serve their own copies unless the purge
			// reached them; then the owner calls its backend once more.
			read(rs[1:]...)
			if got := backendCalls(rs); got != 2 {
				t.Errorf("backend calls = %d after the purge and a read through the two other replicas, want 2", got)
			}
		})
	}
}

func TestPeerPort_EveryCallProvesItComesFromAReplica(t *testing.T) {
	// A forwarded call, a purge and a Sync alike: without the release's
	// token nothing reaches the cache or the backend.
	lis := testkit.Listen(t, "127.0.0.1:0")
	tokenFile := testkit.SecretFile(t, releaseToken)
	backend := &testkit.Greeter{SayHello: greet}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Peers = lis.Addr().String()
		c.PeerListen = lis.Addr().String()
		c.PeerTokenFile = tokenFile
		c.PeerPlaintext = true // the token alone is what this test calls with
		c.Policy.CollapseMethods = []string{sayHello}
	}, peerListener(lis))
	conn := dial(t, lis.Addr().String())
	check := func(t *testing.T, name string, tokens []string, want codes.Code) {
		t.Helper()
		for call, do := range peerCalls(conn) {
			ctx := testkit.Context(t)
			for _, v := range tokens {
				ctx = metadata.AppendToOutgoingContext(ctx, peers.TokenHeader, v)
			}
			if err := do(ctx); status.Code(err) != want {
				t.Errorf("%s with %s: %v, want %v", call, name, err, want)
			}
		}
	}
	for _, tt := range []struct {
		name   string
		tokens []string
		want   codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"another release's token", []string{otherToken}, codes.Unauthenticated},
		{"the token cut short", []string{releaseToken[:len(releaseToken)-1]}, codes.Unauthenticated},
		{"two tokens", []string{releaseToken, otherToken}, codes.Unauthenticated},
		{"the release's token", []string{releaseToken}, codes.OK},
	} {
		check(t, tt.name, tt.tokens, tt.want)
	}
	if n := backend.Calls.SayHello.Load(); n != 1 {
		t.Errorf("backend calls = %d, want 1: only the call with the token", n)
	}
	// A rotation: the new token and the one before it are let in, the one
	// before that no more.
	rotated := "rotated-token-0123456789abcdefghijklmnop"
	if err := os.WriteFile(tokenFile, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sc.fleet.Token().Reload(); err != nil {
		t.Fatal(err)
	}
	check(t, "the rotated token", []string{rotated}, codes.OK)
	check(t, "the token before the rotation", []string{releaseToken}, codes.OK)
	if err := os.WriteFile(tokenFile, []byte(otherToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sc.fleet.Token().Reload(); err != nil {
		t.Fatal(err)
	}
	check(t, "the token two rotations ago", []string{releaseToken}, codes.Unauthenticated)
}

func TestPeers_APeerTokenShorterThan32BytesIsRefusedAtStart(t *testing.T) {
	cfg := config.Default()
	cfg.Backend = "127.0.0.1:1"
	cfg.Peers = "127.0.0.1:2"
	cfg.PeerTokenFile = testkit.SecretFile(t, releaseToken[:31])
	cfg.PeerPlaintext = true
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "31 bytes, want at least 32") {
		t.Errorf("New with a 31-byte token: %v, want an error saying so", err)
	}
}

// TestPurgeOnWrite_ReadAfterWriteThroughAnyReplica writes a greeting through
// one replica and reads it through the next, 1,000 times, while readers
// keep every replica's cache warm: each read after a write returns what
// the write wrote, because the write's success purged the tag of its
// answer on every replica before its caller got the OK.
func TestPurgeOnWrite_ReadAfterWriteThroughAnyReplica(t *testing.T) {
	const writes, readers = 1000, 3
	backend := hellotest.Serve(t, hello.Options{})
	gets := methodCount(t, backend, getGreeting)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	file := fmt.Sprintf("methods:\n  - name: %s\n    collapse: true\n    cacheTTL: 1h\n  - name: %s\n    invalidates:\n      responseTags: true\n", getGreeting, setGreeting)
	if err := os.WriteFile(policy, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	token := testkit.SecretFile(t, releaseToken)
	rs := startSidecars(t, []string{backend, backend, backend}, true, func(c *config.Settings) {
		c.PolicyFile = policy
		c.PeerTokenFile = token
	})
	// A thousand writes under -race on a shared machine may well take more
	// than testkit's bound of one wait: the test's own deadline bounds them.
	ctx := t.Context()
	if _, err := rs[0].client.SetGreeting(ctx, &hellov1.Greeting{Name: "alice", Text: "v0"}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := rs[rand.IntN(len(rs))].client.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: "alice"}); err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				reads.Add(1)
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := 1; i <= writes; i++ {
		text := fmt.Sprint("v", i)
		set, err := rs[i%len(rs)].client.SetGreeting(ctx, &hellov1.Greeting{Name: "alice", Text: text})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := rs[(i+1)%len(rs)].client.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: "alice"})
		if err != nil {
			t.Fatalf("read after write %d: %v", i, err)
		}
		if got.GetText() != text || got.GetVersion() != set.GetVersion() {
			t.Fatalf("write %d set %q (version %d); the read after it through another replica got %q (version %d)", i, text, set.GetVersion(), got.GetText(), got.GetVersion())
		}
	}
	stop.Store(true)
	wg.Wait()
	var purges float64
	for _, r := range rs {
		purges += r.sidecar.metricSum(t, "collapser_purges_total", map[string]string{"kind": "tag", "result": "ok"})
	}
	t.Logf("%d writes, each read back through another replica; %d concurrent reads; %v purges by tag; the backend answered %d GetGreeting calls", writes, reads.Load(), purges, gets())
	if purges != writes+1 {
		t.Errorf("purges by tag = %v, want %d: one per successful write", purges, writes+1)
	}
}

// taggedGreet greets, tags the answer prefix+name and puts it in the RFC 9875
// cache group "group:"+name.
func taggedGreet(prefix string) sayHelloFunc {
	return func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs("collapser-tags", prefix+req.GetName(), "cache-groups", `"group:`+req.GetName()+`"`)); err != nil {
			return nil, err
		}
		return greet(ctx, req)
	}
}
