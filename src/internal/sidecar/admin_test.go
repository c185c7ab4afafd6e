package sidecar

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestSidecar_AdminServicePurgesWhatTheBackendTagged(t *testing.T) {
	backend := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs("collapser-tags", "user:"+req.GetName())); err != nil {
			return nil, err
		}
		return greet(ctx, req)
	}}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	admin := adminv1.NewCacheClient(dial(t, sc.adminAddr))
	ctx := testkit.Context(t)
	call := func(name string) {
		t.Helper()
		var header metadata.MD
		if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: name}, grpc.Header(&header)); err != nil {
			t.Fatalf("SayHello(%s): %v", name, err)
		}
		if v := header.Get("collapser-tags"); v != nil {
			t.Errorf("the caller saw the tags header %q", v)
		}
	}
	for _, name := range []string{"alice", "alice", "bob"} {
		call(name)
	}
	if got := backend.Calls.SayHello.Load(); got != 2 {
		t.Fatalf("backend calls = %d, want 2 (alice's answer kept)", got)
	}
	resp, err := admin.Purge(ctx, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "user:alice"}})
	if err != nil || resp.GetEntries() != 1 {
		t.Fatalf("Purge(tag user:alice) = %v, %v; want 1 entry", resp, err)
	}
	call("alice")
	call("bob")
	if got := backend.Calls.SayHello.Load(); got != 3 {
		t.Errorf("backend calls = %d, want 3: alice's answer purged, bob's still kept", got)
	}
}

func TestSidecar_AdminServiceWithATokenTakesPurgesOnlyWithIt(t *testing.T) {
	const token = "admin-token-0123456789abcdefghijklmnopq"
	sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
		c.AdminTokenFile = testkit.SecretFile(t, token)
	})
	admin := adminv1.NewCacheClient(dial(t, sc.adminAddr))
	req := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}
	for _, tt := range []struct {
		name string
		md   metadata.MD
		want codes.Code
	}{
		{"from loopback without the token", nil, codes.Unauthenticated},
		{"another token", metadata.Pairs("authorization", "Bearer "+releaseToken), codes.Unauthenticated},
		{"the token", metadata.Pairs("authorization", "Bearer "+token), codes.OK},
	} {
		_, err := admin.Purge(metadata.NewOutgoingContext(testkit.Context(t), tt.md), req)
		if status.Code(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if refused := sc.metricSum(t, "collapser_purges_total", map[string]string{"result": "refused"}); refused != 2 {
		t.Errorf("refused purges counted: %v, want 2", refused)
	}
}

func TestSidecar_AdminServiceOnAUnixSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "admin.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.AdminListen = "unix:" + socket
	}, adminListener(lis))
	if sc.adminAddr != socket {
		t.Fatalf("admin served on %s, want %s", sc.adminAddr, socket)
	}
	conn := dial(t, "unix:"+socket)
	if _, err := adminv1.NewCacheClient(conn).Purge(testkit.Context(t), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}); err != nil {
		t.Errorf("Purge over the Unix socket: %v", err)
	}
}
