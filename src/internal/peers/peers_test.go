package peers

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// servePeers starts n health servers on loopback and returns their
// addresses as a peer list.
func servePeers(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		var wg sync.WaitGroup
		wg.Go(func() { _ = s.Serve(lis) })
		t.Cleanup(func() { s.Stop(); wg.Wait() })
		addrs = append(addrs, lis.Addr().String())
	}
	return addrs
}

// owner returns the address a call with key's hash reaches over cc.
func owner(t *testing.T, cc *grpc.ClientConn, key string) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), HashHeader, KeyHash(key))
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	return p.Addr.String()
}

func TestDial_EveryReplicaSendsAKeyToTheSameOwner(t *testing.T) {
	addrs := servePeers(t, 3)
	var conns []*grpc.ClientConn
	for range 3 { // one connection per replica, each with its own ring
		cc, err := Dial(strings.Join(addrs, ","))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		conns = append(conns, cc)
	}
	owners := map[string]int{}
	for i := range 30 {
		key := fmt.Sprint("key-", i)
		want := owner(t, conns[0], key)
		for j, cc := range conns[1:] {
			if got := owner(t, cc, key); got != want {
				t.Errorf("%s: replica %d sends it to %s, replica 0 to %s", key, j+1, got, want)
			}
		}
		owners[want]++
	}
	if len(owners) != 3 {
		t.Errorf("30 keys went to %d owners (%v), want all 3 to own some", len(owners), owners)
	}
}
