package sidecar

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

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
		c.CollapseMethods = []string{sayHello}
		c.CacheTTL = time.Hour
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
