package sidecar

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestCacheStatus_ThreeReplicasTellTheirCallersWhoMadeTheCall(t *testing.T) {
	rs := startFleet(t, greeters(3), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
	})
	ctx := testkit.Context(t)
	status := func(r *replica) string {
		var header metadata.MD
		if _, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: "ann"}, grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		return strings.Join(header.Get("cache-status"), ", ")
	}
	var forwarded, owned int
	for i, r := range rs {
		// Each replica's first caller: a replica that does not own the key
		// leads a call its owner makes; the owner's first caller leads the
		// call, or, when another replica's call reached it first, is
		// answered from what the owner keeps.
		got := status(r)
		switch {
		case strings.HasPrefix(got, "collapser; fwd=miss; stored; ttl=") && strings.HasSuffix(got, "; detail=forwarded"):
			forwarded++
		case strings.HasPrefix(got, "collapser; fwd=miss; stored; ttl=") && !strings.Contains(got, "detail="),
			i > 0 && strings.HasPrefix(got, "collapser; hit; ttl="):
			owned++
		default:
			t.Errorf("replica %d's first caller: cache-status %q, want a call made, and its answer stored, or a hit on the owner", i, got)
		}
	}
	if forwarded != 2 || owned != 1 {
		t.Errorf("%d of 3 replicas said their call was forwarded and %d that it was not, want 2 and 1: every replica but the key's owner forwards", forwarded, owned)
	}
	for i, r := range rs {
		if got := status(r); !strings.HasPrefix(got, "collapser; hit; ttl=") {
			t.Errorf("replica %d's second caller: cache-status %q, want a hit", i, got)
		}
	}
	if got := backendCalls(rs); got != 1 {
		t.Errorf("backend calls = %d, want 1", got)
	}
}
