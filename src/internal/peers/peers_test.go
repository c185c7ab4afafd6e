package peers

import (
	"net"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHeaders_BeginWithTheirPrefix(t *testing.T) {
	for _, h := range Headers {
		if !strings.HasPrefix(h, HeaderPrefix) {
			t.Errorf("peer header %q does not begin with %q", h, HeaderPrefix)
		}
	}
}

// plain is the transport of the tests' connections to peers that ask for
// no credentials (the sidecar's tests try those).
var plain = grpc.WithTransportCredentials(insecure.NewCredentials())

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
func owner(t *testing.T, cc grpc.ClientConnInterface, key string) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), HashHeader, KeyHash([]byte(key)))
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	return p.Addr.String()
}
