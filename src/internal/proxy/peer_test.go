package proxy_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The peered proxy of these tests is its own only peer: every shared call
// of a caller goes through its peer port and is served there as the owner's.

func TestPeers_ACallIsMadeByItsOwnerAndAnsweredWithoutTheMark(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true})
	var trailer metadata.MD
	reply, err := s.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "ann"}, grpc.Trailer(&trailer))
	if err != nil || reply.GetMessage() != "hello ann" {
		t.Fatalf("SayHello = %v, %v", reply, err)
	}
	if len(trailer.Get(peers.ServedHeader)) != 0 || !mdEqual(trailer, metadata.Pairs(backendTrailerKey, "t-ann"), backendTrailerKey) {
		t.Errorf("trailer = %v, want the backend's and no owner's mark", trailer)
	}
	if n := b.Calls.SayHello.Load(); n != 1 {
		t.Errorf("backend calls = %d, want 1", n)
	}
	testkit.WaitFor(t, "the owner's request observed", func() bool { return len(s.observed.routed(proxy.RoutePeer)) == 1 })
	if got := s.observed.routed(proxy.RoutePeer)[0]; got != (requestRecord{methodSayHello, "leader", codes.OK}) {
		t.Errorf("served for the peer: %v, want a leader", got)
	}
	if got := s.observed.forwarded(); len(got) != 1 || got[0] != (peerRecord{methodSayHello, proxy.OwnerSelf, codes.OK, false}) {
		t.Errorf("forwarded = %v, want one call answered by this proxy itself", got)
	}
}

func TestPeers_TheOwnersFailureIsRelayedNotRetriedLocally(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true})
	_, err := s.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: nameError})
	if status.Code(err) != codes.FailedPrecondition || len(status.Convert(err).Details()) != 1 {
		t.Errorf("SayHello = %v, want the backend's FAILED_PRECONDITION with its details", err)
	}
	if n := b.Calls.SayHello.Load(); n != 1 {
		t.Errorf("backend calls = %d, want 1: an owner's answer is never made again here", n)
	}
	if got := s.observed.forwarded(); len(got) != 1 || got[0] != (peerRecord{methodSayHello, proxy.OwnerSelf, codes.FailedPrecondition, false}) {
		t.Errorf("forwarded = %v, want one call the owner answered with FAILED_PRECONDITION", got)
	}
}

func TestPeers_AReplayedStreamIsReadThroughItsOwner(t *testing.T) {
	const count = 10
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true, policyFile: replayPolicy("1h")})
	for i := range 3 {
		if got := readStream(t, s.client, "ann", count); got.err != nil || len(got.messages) != count {
			t.Fatalf("caller %d: %d messages, %v; want %d", i, len(got.messages), got.err, count)
		}
	}
	if n := b.Calls.StreamHellos.Load(); n != 1 {
		t.Errorf("backend streams = %d, want 1", n)
	}
	if got := s.observed.forwarded(); len(got) != 1 || got[0].owner != proxy.OwnerSelf {
		t.Errorf("forwarded = %v, want the one record's stream through this proxy's own peer port", got)
	}
}

func TestPeerPort_RefusesCallsNoPeerForwarded(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true})
	conn, err := grpc.NewClient(s.peerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = hellov1.NewGreeterClient(conn).SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "ann"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a call to the peer port without the hop header: %v, want PERMISSION_DENIED", err)
	}
	if n := b.Calls.SayHello.Load(); n != 0 {
		t.Errorf("backend calls = %d, want 0", n)
	}
}
