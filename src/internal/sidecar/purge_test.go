package sidecar

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	getGreeting = "/hello.v1.Greeter/GetGreeting"
	setGreeting = "/hello.v1.Greeter/SetGreeting"
)

// peerToken writes a release's peer token into a file and returns its path.
func peerToken(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPeers_PurgeReachesEveryReplica(t *testing.T) {
	alice, err := proto.Marshal(&hellov1.HelloRequest{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		token bool
		req   *adminv1.PurgeRequest
		// replicas and entries are what the purge reaches.
		replicas int32
		entries  int64
	}{
		// Each replica keeps its callers' copy; the owner keeps the one
		// it served its peers too.
		{"method", true, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}, 3, 4},
		{"tag", true, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "user:alice"}}, 3, 4},
		{"request", true, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Request{Request: &adminv1.Request{
			Method: sayHello, Payload: alice,
			Headers: []*adminv1.Header{{Name: ":authority", Values: []string{"hello.example"}}},
		}}}, 3, 4},
		{"tag, without a peer token", false, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "user:alice"}}, 1, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backends := make([]*testkit.Greeter, 3)
			addrs := make([]string, len(backends))
			for i := range backends {
				backends[i] = &testkit.Greeter{SayHello: taggedGreet("user:")}
				addrs[i] = startBackend(t, backends[i])
			}
			token := peerToken(t, "release-token")
			rs := startSidecars(t, addrs, true, func(c *config.Settings) {
				c.CollapseMethods = []string{sayHello}
				c.CacheTTL = time.Hour
				if tt.token {
					c.PeerTokenFile = token
				}
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
			if resp.GetReplicas() != tt.replicas || (tt.entries >= 0 && resp.GetEntries() != tt.entries) {
				t.Errorf("Purge reached %d replicas and %d answers; want %d replicas and %d answers", resp.GetReplicas(), resp.GetEntries(), tt.replicas, tt.entries)
			}
			// Replicas 1 and 2 serve their own copies unless the purge
			// reached them; then the owner calls its backend once more.
			read(rs[1:]...)
			want := int64(1)
			if tt.replicas == 3 {
				want = 2
			}
			if got := backendCalls(rs); got != want {
				t.Errorf("backend calls = %d after the purge and a read through the two other replicas, want %d", got, want)
			}
		})
	}
}

func TestPeers_PeerListenerTakesPurgesOnlyWithTheToken(t *testing.T) {
	lis := testkit.Listen(t, "127.0.0.1:0")
	token := peerToken(t, "release-token")
	startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
		c.Peers = lis.Addr().String()
		c.PeerTokenFile = token
	}, peerListener(lis))
	purger := adminv1.NewCacheClient(dial(t, lis.Addr().String()))
	req := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}
	for _, tt := range []struct {
		name  string
		token []string
		want  codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"another release's token", []string{"other-token"}, codes.Unauthenticated},
		{"two tokens", []string{"release-token", "other-token"}, codes.Unauthenticated},
		{"the release's token", []string{"release-token"}, codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testkit.Context(t)
			for _, v := range tt.token {
				ctx = metadata.AppendToOutgoingContext(ctx, admin.TokenHeader, v)
			}
			resp, err := purger.Purge(ctx, req)
			if status.Code(err) != tt.want {
				t.Fatalf("Purge with %s = %v, %v; want %v", tt.name, resp, err, tt.want)
			}
			if err == nil && resp.GetReplicas() != 1 {
				t.Errorf("Purge reached %d replicas, want 1: a replica takes a peer's purge to no one else", resp.GetReplicas())
			}
		})
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
	token := peerToken(t, "release-token")
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

// taggedGreet greets and tags the answer prefix+name.
func taggedGreet(prefix string) sayHelloFunc {
	return func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs("collapser-tags", prefix+req.GetName())); err != nil {
			return nil, err
		}
		return greet(ctx, req)
	}
}
