package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/forwarding"
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
		if got := readStream(t, s.client, "ann", count); got.Err != nil || len(got.Replies) != count {
			t.Fatalf("caller %d: %d messages, %v; want %d", i, len(got.Replies), got.Err, count)
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

// owners counts the calls recorder r saw forwarded or kept, by who owned
// them.
func owners(r *recorder) map[string]int {
	n := map[string]int{}
	for _, f := range r.forwarded() {
		n[f.owner]++
	}
	return n
}

func TestPeers_AKeyTheProxyOwnsIsServedWithoutAHop(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true, knowsItself: true})
	// The first call goes over the connection to itself, which it makes.
	for i := range 21 {
		if _, err := s.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: fmt.Sprint("own-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Calls.SayHello.Load(); n != 21 {
		t.Errorf("backend calls = %d, want 21", n)
	}
	if got := len(s.observed.routed(proxy.RoutePeer)); got != 1 {
		t.Errorf("calls served on its own peer port = %d, want 1: the first, while its connection to itself was made", got)
	}
	if got := owners(s.observed); got[proxy.OwnerSelf] != 21 || len(got) != 1 {
		t.Errorf("calls by owner = %v, want 21 of its own", got)
	}
}

func TestPeers_TheOwnerTellsAForwarderWhenItsCallShared(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{peered: true, ttl: time.Hour})
	conn, err := grpc.NewClient(s.peerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), peers.HopHeader, "1")
	for i, want := range []bool{false, true} { // a leader, then a hit
		var trailer metadata.MD
		if _, err := hellov1.NewGreeterClient(conn).SayHello(ctx, &hellov1.HelloRequest{Name: "ann"}, grpc.Trailer(&trailer)); err != nil {
			t.Fatal(err)
		}
		if got := len(trailer.Get(peers.SharedHeader)) > 0; got != want {
			t.Errorf("call %d: shared mark %v, want %v (trailer %v)", i, got, want, trailer)
		}
	}
}

func TestForwarding_CallsThatNeverShareAreMadeWhereTheyArrive(t *testing.T) {
	b := startBackend(t, nil)
	lisA, lisB := testkit.Listen(t, "127.0.0.1:0"), testkit.Listen(t, "127.0.0.1:0")
	ring := lisA.Addr().String() + "," + lisB.Addr().String()
	c := testkit.NewClock(time.Unix(0, 0))
	decider := forwarding.New(c.Now)
	a := startProxy(t, b.addr, proxyConfig{peered: true, peerLis: lisA, ring: ring, knowsItself: true,
		options: func(o *proxy.Options) { o.Forwarding = decider }})
	startProxy(t, b.addr, proxyConfig{peered: true, peerLis: lisB, ring: ring, knowsItself: true})
	calls := 0
	call := func(name string) {
		t.Helper()
		calls++
		if _, err := a.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	// Distinct keys: every one B owns leads there, shares nothing.
	for i := 0; owners(a.observed)[proxy.OwnerPeer] < 2*forwarding.MinCalls; i++ {
		call(fmt.Sprint("distinct-", i))
	}
	c.Advance(forwarding.Window)
	for i := 0; decider.Forwarded()[methodSayHello]; i++ {
		call(fmt.Sprint("closing-", i))
	}
	before := owners(a.observed)
	for i := range 200 {
		call(fmt.Sprint("kept-", i))
	}
	after := owners(a.observed)
	kept, forwarded := after[proxy.OwnerKept]-before[proxy.OwnerKept], after[proxy.OwnerPeer]-before[proxy.OwnerPeer]
	t.Logf("of 200 distinct calls after the decision: %d kept, %d forwarded (the sample), %d its own", kept, forwarded, after[proxy.OwnerSelf]-before[proxy.OwnerSelf])
	if kept == 0 || forwarded >= kept {
		t.Errorf("after the decision, %d calls of B's keys kept and %d forwarded; want most kept, a sample forwarded", kept, forwarded)
	}
	if n := b.Calls.SayHello.Load(); n != int64(calls) {
		t.Errorf("backend calls = %d for %d distinct calls, want one each", n, calls)
	}
}

func TestForwarding_AKeySharedWhereItArrivesIsForwardedAgain(t *testing.T) {
	b := startBackend(t, nil)
	lisA, lisB := testkit.Listen(t, "127.0.0.1:0"), testkit.Listen(t, "127.0.0.1:0")
	ring := lisA.Addr().String() + "," + lisB.Addr().String()
	c := testkit.NewClock(time.Unix(0, 0))
	decider := forwarding.New(c.Now)
	a := startProxy(t, b.addr, proxyConfig{peered: true, peerLis: lisA, ring: ring, knowsItself: true, ttl: time.Hour,
		options: func(o *proxy.Options) { o.Forwarding = decider }})
	startProxy(t, b.addr, proxyConfig{peered: true, peerLis: lisB, ring: ring, knowsItself: true, ttl: time.Hour})
	call := func(name string) string {
		t.Helper()
		before := owners(a.observed)
		if _, err := a.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
		for owner, n := range owners(a.observed) {
			if n > before[owner] {
				return owner
			}
		}
		return "" // served from A's cache
	}
	for i := 0; owners(a.observed)[proxy.OwnerPeer] < 2*forwarding.MinCalls; i++ {
		call(fmt.Sprint("distinct-", i))
	}
	c.Advance(forwarding.Window)
	for i := 0; decider.Forwarded()[methodSayHello]; i++ {
		call(fmt.Sprint("closing-", i))
	}
	// A key of B's, outside the sample, is made here.
	hot := ""
	for i := 0; hot == ""; i++ {
		if name := fmt.Sprint("hot-", i); call(name) == proxy.OwnerKept {
			hot = name
		}
	}
	// It is asked for again and served from A's cache: it is hot, and its
	// next call goes to its owner, although its method is kept.
	if owner := call(hot); owner != "" {
		t.Fatalf("second call of %s made by %q, want a hit", hot, owner)
	}
	a.proxy.PurgeMethod(methodSayHello, proxy.Purge{Scope: proxy.Callers})
	if owner := call(hot); owner != proxy.OwnerPeer {
		t.Errorf("call of a hot key after its copy went: made by %q, want forwarded to its owner", owner)
	}
	if decider.Forwarded()[methodSayHello] {
		t.Error("the method is forwarded, want it kept: only its hot key is")
	}
}
