package peers

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestNewFanout_Targets(t *testing.T) {
	for _, tt := range []struct {
		target, err string
		host, port  string
		fixed       []string
	}{
		{target: "dns:///collapser-pods.ns.svc.cluster.local:50053", host: "collapser-pods.ns.svc.cluster.local", port: "50053"},
		{target: "10.0.0.1:50053, 10.0.0.2:50053", fixed: []string{"10.0.0.1:50053", "10.0.0.2:50053"}},
		{target: "dns://8.8.8.8/peers:50053", err: "must be dns:///name:port or a list"},
		{target: "passthrough:///10.0.0.1:50053", err: "must be dns:///name:port or a list"},
		{target: "dns:///peers", err: "want dns:///name:port"},
		{target: "10.0.0.1", err: `"10.0.0.1" is not host:port`},
	} {
		f, err := NewFanout(tt.target, ":50053")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NewFanout(%q) = %v, want an error with %q", tt.target, err, tt.err)
			}
			continue
		}
		if err != nil || f.host != tt.host || f.port != tt.port || !slices.Equal(f.fixed, tt.fixed) {
			t.Errorf("NewFanout(%q) = host %q port %q list %v, %v; want %q %q %v", tt.target, f.host, f.port, f.fixed, err, tt.host, tt.port, tt.fixed)
		}
	}
}

func TestFanout_EachReachesEveryReplicaAndNamesThoseItCannot(t *testing.T) {
	addrs := servePeers(t, 3)
	gone := testkit.ClosedAddr(t)
	f, err := NewFanout(strings.Join(append(slices.Clone(addrs), gone), ","), "127.0.0.1:0", plain)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	var reached []string
	err = f.Each(testkit.Context(t), func(ctx context.Context, _ string, cc grpc.ClientConnInterface) error {
		var p peer.Peer
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(false)); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		reached = append(reached, p.Addr.String())
		return nil
	})
	slices.Sort(reached)
	slices.Sort(addrs)
	if !slices.Equal(reached, addrs) {
		t.Errorf("reached %v, want every serving replica %v", reached, addrs)
	}
	if err == nil || !strings.Contains(err.Error(), "replica "+gone) {
		t.Errorf("Each: %v, want an error naming %s", err, gone)
	}
}

func TestFanout_EachSkipsThisReplica(t *testing.T) {
	addrs := servePeers(t, 2)
	f, err := NewFanout(strings.Join(addrs, ","), addrs[0], plain)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	var reached []string
	err = f.Each(testkit.Context(t), func(_ context.Context, addr string, _ grpc.ClientConnInterface) error {
		mu.Lock()
		defer mu.Unlock()
		reached = append(reached, addr)
		return nil
	})
	if err != nil || !slices.Equal(reached, addrs[1:]) || !f.Self(addrs[0]) || f.Self(addrs[1]) {
		t.Errorf("Each reached %v (%v), want only %v, the other replica", reached, err, addrs[1:])
	}
}

func TestFanout_TellsAReplicaThatIsGone(t *testing.T) {
	addrs := servePeers(t, 1)
	gone := testkit.ClosedAddr(t)
	f, err := NewFanout(addrs[0]+","+gone, "127.0.0.1:0", plain)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for _, addr := range []string{addrs[0], gone} {
		cc, err := f.Conn(addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = healthpb.NewHealthClient(cc).Check(testkit.Context(t), &healthpb.HealthCheckRequest{})
	}
	if f.Gone(addrs[0]) || !f.Gone(gone) {
		t.Errorf("Gone(serving) = %v, Gone(closed) = %v; want false, true", f.Gone(addrs[0]), f.Gone(gone))
	}
}
