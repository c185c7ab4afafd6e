package sidecar

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

// replica is one pod of a Deployment on loopback: a backend and its sidecar.
type replica struct {
	backend *testkit.Greeter // nil in front of the hello backend
	sidecar *runningSidecar
	client  hellov1.GreeterClient
}

// startReplicas starts a replica in front of each of backends; the
// sidecars collapse SayHello and are each other's peers when peered.
func startReplicas(t *testing.T, peered bool, backends ...*testkit.Greeter) []*replica {
	t.Helper()
	addrs := make([]string, len(backends))
	for i, b := range backends {
		addrs[i] = startBackend(t, b)
	}
	rs := startSidecars(t, addrs, peered, func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} })
	for i, r := range rs {
		r.backend = backends[i]
	}
	return rs
}

// startSidecars starts a sidecar in front of each backend, with the
// settings edit makes; the sidecars are each other's peers (a static list,
// every replica included) when peered, or alone.
func startSidecars(t testing.TB, backends []string, peered bool, edit func(*config.Settings), opts ...sidecarOption) []*replica {
	t.Helper()
	f := newPeerFleet(t, len(backends))
	rs := make([]*replica, len(backends))
	for i, backend := range backends {
		if !peered {
			f.lis[i].Close()
			rs[i] = startReplica(t, backend, edit, opts...)
			continue
		}
		rs[i] = f.start(t, i, backend, edit, opts...)
	}
	if peered {
		waitLeases(t, rs)
	}
	return rs
}

// peerFleet is the peer listeners and secrets of a test's replicas, each
// of which lists all of them as its peers: the test starts them one by
// one, and may start one late (closing its listener until then: a
// replica that has not started refuses connections).
type peerFleet struct {
	lis   []net.Listener
	addrs []string
	token string
	certs *release
}

// newPeerFleet reserves the peer listeners of n replicas.
func newPeerFleet(t testing.TB, n int) *peerFleet {
	f := &peerFleet{token: testkit.SecretFile(t, releaseToken), certs: newRelease(t)}
	for range n {
		lis := testkit.Listen(t, "127.0.0.1:0")
		f.lis, f.addrs = append(f.lis, lis), append(f.addrs, lis.Addr().String())
	}
	return f
}

// start starts replica i in front of backend, with the settings edit
// makes: its peers are every replica of f, and it knows itself among them
// by its peer address, as a pod does by its IP.
func (f *peerFleet) start(t testing.TB, i int, backend string, edit func(*config.Settings), opts ...sidecarOption) *replica {
	t.Helper()
	opts = append(opts[:len(opts):len(opts)], peerListener(f.lis[i]))
	return startReplica(t, backend, func(c *config.Settings) {
		c.Peers = strings.Join(f.addrs, ",")
		c.PeerListen = f.addrs[i]
		c.PeerTokenFile = f.token
		f.certs.certify(t, c)
		edit(c)
	}, opts...)
}

// startReplica starts a sidecar in front of backend and connects a client
// to it. Callers address the replicas by one name, as a Service's are:
// the authority is part of the key.
func startReplica(t testing.TB, backend string, edit func(*config.Settings), opts ...sidecarOption) *replica {
	t.Helper()
	sc := startSidecar(t, backend, edit, opts...)
	conn := dial(t, sc.addr, grpc.WithAuthority("hello.example"))
	waitServing(t, conn) // connected
	return &replica{sidecar: sc, client: hellov1.NewGreeterClient(conn)}
}

// waitLeases waits until every replica holds a lease from every other: each
// reached the others over mutual TLS, and serves what it keeps. A replica
// started before the others' peer ports served waited its handshakes out,
// and syncs again here (a test's replicas may sync only when it says).
func waitLeases(t testing.TB, rs []*replica) {
	t.Helper()
	for _, r := range rs {
		testkit.WaitFor(t, "a lease from every other replica", func() bool {
			if r.sidecar.metricSum(t, "collapser_peer_leases", nil) == float64(len(rs)-1) &&
				r.sidecar.metricSum(t, "collapser_peer_coherent", nil) == 1 {
				return true
			}
			r.sidecar.replicas.Sync(testkit.Context(t))
			return false
		})
	}
}

// release is the CA of a test's release, which issues each of its
// replicas a certificate of the release's identity, as the chart does.
type release struct {
	ca  *testkit.CA
	dir string
}

// releaseIdentity is the identity of the tests' releases.
const releaseIdentity = "spiffe://cluster.local/ns/test/collapser/hello"

// newRelease makes a release's CA.
func newRelease(t testing.TB) *release {
	return &release{ca: testkit.NewCA(t, "release CA"), dir: t.TempDir()}
}

// certify issues a replica a certificate of identity ("" for the
// release's) in a directory of its own, and sets c to use it between
// replicas.
func (r *release) certify(t testing.TB, c *config.Settings, identity ...string) testkit.CertFiles {
	t.Helper()
	id := releaseIdentity
	if len(identity) > 0 {
		id = identity[0]
	}
	f := r.ca.Issue(t, filepath.Join(r.dir, rand.Text()), id)
	if c != nil {
		c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = f.Cert, f.Key, f.CA
	}
	return f
}

// backendCalls sums the replicas' backends' own counts.
func backendCalls(rs []*replica) int64 {
	var n int64
	for _, r := range rs {
		n += r.backend.Calls.SayHello.Load()
	}
	return n
}

func TestPeers_BurstOverThreeReplicasMakesOneBackendCall(t *testing.T) {
	const burst = 300
	for _, tt := range []struct {
		peered bool
		want   int64
	}{{true, 1}, {false, 3}} {
		t.Run(fmt.Sprint("peered=", tt.peered), func(t *testing.T) {
			gate := make(chan struct{})
			backends := []*testkit.Greeter{{SayHello: gated(gate)}, {SayHello: gated(gate)}, {SayHello: gated(gate)}}
			addrs := make([]string, len(backends))
			for i, b := range backends {
				addrs[i] = startBackend(t, b)
			}
			// The answer is kept an hour: a caller the wait below let come
			// after the call ended (see there) is a hit, however loaded
			// the machine.
			rs := startSidecars(t, addrs, tt.peered, func(c *config.Settings) {
				c.Policy.CollapseMethods = []string{sayHello}
				c.Policy.CacheTTL = time.Hour
			})
			for i, r := range rs {
				r.backend = backends[i]
			}
			ctx := testkit.Context(t)
			replies := make([]*hellov1.HelloReply, burst)
			var wg sync.WaitGroup
			for i := range burst {
				wg.Go(func() {
					reply, err := rs[i%len(rs)].client.SayHello(ctx, &hellov1.HelloRequest{Name: "burst"})
					if err != nil {
						t.Errorf("caller %d: %v", i, err)
					}
					replies[i] = reply
				})
			}
			// The callers wait in their sidecars before any backend
			// answers: the burst fits in one backend latency by
			// construction. Peered, the owner's count of waiters holds
			// the two calls the other replicas forwarded too, and, while
			// its connection to itself was being made, one more of its
			// own: a caller or two may still be on its way when the gate
			// opens, and is then a hit.
			waiters := burst
			if tt.peered {
				waiters += len(rs) - 1
			}
			testkit.WaitFor(t, "the callers and the forwarded calls waiting", func() bool {
				var waiting int
				for _, r := range rs {
					waiting += r.sidecar.proxy.Stats().Waiters
				}
				return waiting >= waiters
			})
			close(gate)
			wg.Wait()
			got := backendCalls(rs)
			t.Logf("peered=%v: %d callers over 3 sidecars, %d backend calls in total", tt.peered, burst, got)
			if got != tt.want {
				t.Errorf("backend calls over the three backends = %d, want %d", got, tt.want)
			}
			if tt.peered {
				for i, reply := range replies {
					if reply.GetCall() != 1 || reply.GetMessage() != "Hello, burst" {
						t.Fatalf("caller %d got %v, want the owner's one reply", i, reply)
					}
				}
				var toSelf, toPeer, served float64
				for _, r := range rs {
					toSelf += r.sidecar.metricSum(t, "collapser_peer_calls_total", map[string]string{"owner": "self", "code": "OK"})
					toPeer += r.sidecar.metricSum(t, "collapser_peer_calls_total", map[string]string{"owner": "peer", "code": "OK"})
					served += r.sidecar.metricSum(t, "collapser_peer_requests_total", nil)
				}
				// The two other sidecars' leaders forwarded their calls to
				// the owner, which served them. The owner's own callers
				// share one flight with those two calls: its leader made
				// the call without a hop (counted self), or, while its
				// connection to itself was being made, over its own peer
				// port (self, and served for peers once more), or joined
				// a forwarded call that came first (not counted at all).
				if toPeer != 2 || toSelf > 2 || served < 2 || served > 2+toSelf {
					t.Errorf("peer calls answered by the forwarder itself %v, by another replica %v, served %v; want at most 2, 2, and 2 plus one per hop to itself", toSelf, toPeer, served)
				}
			}
		})
	}
}

func TestPeers_ReplicaKilledMidBurstLosesNoCaller(t *testing.T) {
	// Each call takes 100 ms: at any moment about 20 calls wait on the
	// replica that is killed, so some are cut off in flight.
	const keys, rounds, latency = 30, 5, 100 * time.Millisecond
	// The third replica is killed; its backend counts the calls it answered.
	var answered atomic.Int64
	victim := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		reply, err := slow(latency)(ctx, req)
		if err == nil {
			answered.Add(1)
		}
		return reply, err
	}}
	rs := startReplicas(t, true, &testkit.Greeter{SayHello: slow(latency)}, &testkit.Greeter{SayHello: slow(latency)}, victim)
	survivors := rs[:2]
	ctx := testkit.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, keys*rounds*len(survivors))
	start := make(chan struct{})
	for k := range keys {
		for _, r := range survivors {
			wg.Go(func() {
				<-start
				for round := range rounds {
					name := fmt.Sprintf("key-%d-%d", k, round)
					reply, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: name})
					if err != nil || reply.GetMessage() != "Hello, "+name {
						errs <- fmt.Errorf("%s: %v, %v", name, reply, err)
					}
				}
			})
		}
	}
	close(start)
	// Mid-burst, and while calls wait on the replica: a fixed sleep could
	// land between two rounds, when none is in flight there.
	testkit.WaitFor(t, "a round answered and calls in flight on the replica to kill", func() bool {
		done := answered.Load()
		return done > 0 && victim.Calls.SayHello.Load() > done
	})
	killed := rs[2].sidecar
	killed.peer.Stop() // abrupt: calls in flight on it fail
	killed.server.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each distinct call is one backend call when its owner answers it.
	// Each call that failed over to its forwarder's backend may add one,
	// and so may each key the killed replica had called its backend for:
	// the other survivor's call for it may already reach the key's new
	// owner, whose flight for peers is not the fallen-back one.
	var fallbacks float64
	for _, r := range survivors {
		fallbacks += r.sidecar.metricSum(t, "collapser_peer_fallbacks_total", nil)
	}
	calls, killedCalls := backendCalls(rs), victim.Calls.SayHello.Load()
	most := int64(keys*rounds) + int64(fallbacks) + killedCalls
	t.Logf("%d distinct calls from 2 sidecars, the third killed mid-burst: %d backend calls (%d by the killed replica's backend), %v fallbacks", keys*rounds, calls, killedCalls, fallbacks)
	if calls > most {
		t.Errorf("backend calls = %d, want at most %d", calls, most)
	}
	if fallbacks == 0 {
		t.Error("no call fell back to the local backend: the kill came too late to test anything")
	}
}

func TestPeers_IdenticalStreamsOverThreeReplicasReadOneBackendStream(t *testing.T) {
	const callers, replies = 90, 20
	// 200 ms: the burst's callers join the stream, or replay its record.
	req := &hellov1.HelloRequest{Name: "feed", Count: replies, IntervalMs: 10}
	for _, tt := range []struct {
		peered bool
		want   int64
	}{{true, 1}, {false, 3}} {
		t.Run(fmt.Sprint("peered=", tt.peered), func(t *testing.T) {
			backends := make([]string, 3)
			counts := make([]func() int64, len(backends))
			for i := range backends {
				backends[i] = hellotest.Serve(t, hello.Options{})
				counts[i] = methodCount(t, backends[i], streamHellos)
			}
			policy := replayPolicy(t, time.Minute)
			rs := startSidecars(t, backends, tt.peered, func(c *config.Settings) { c.PolicyFile = policy })
			for _, r := range rs {
				waitStreamLearned(t, r.sidecar)
			}
			clients := make([]hellov1.GreeterClient, len(rs))
			for i, r := range rs {
				clients[i] = r.client
			}
			results := streams(testkit.Context(t), clients, callers, req)
			for i, r := range results {
				if !consistent(r, replies, "feed") {
					t.Fatalf("caller %d: %d replies, err %v; want %d of one stream", i, len(r.Replies), r.Err, replies)
				}
			}
			var total int64
			for _, count := range counts {
				total += count()
			}
			t.Logf("peered=%v: %d identical streams over 3 sidecars, %d backend streams in total", tt.peered, callers, total)
			if total != tt.want {
				t.Errorf("backend streams over the three backends = %d, want %d", total, tt.want)
			}
			if !tt.peered {
				return
			}
			// Each sidecar's record read its stream through the owner, which
			// served both from its one record of the key, its own record
			// being that one (read over its own peer port too, once more
			// served and once more counted as its own, while its connection
			// to itself was being made).
			sum := func(name string, labels map[string]string) float64 {
				var n float64
				for _, r := range rs {
					n += r.sidecar.metricSum(t, name, labels)
				}
				return n
			}
			testkit.WaitFor(t, "three streams forwarded and served", func() bool {
				self := sum("collapser_peer_calls_total", map[string]string{"owner": "self", "code": "OK"})
				return self >= 1 && self <= 2 &&
					sum("collapser_peer_calls_total", map[string]string{"owner": "peer", "code": "OK"}) == 2 &&
					sum("collapser_peer_requests_total", map[string]string{"code": "OK"}) >= 2 &&
					sum("collapser_peer_requests_total", map[string]string{"code": "OK"}) <= 3
			})
			if fellBack := sum("collapser_peer_fallbacks_total", nil); fellBack != 0 {
				t.Errorf("fallbacks = %v, want 0", fellBack)
			}
		})
	}
}

func TestPeers_AStreamWhoseOwnerIsGoneIsReadFromTheLocalBackend(t *testing.T) {
	const callers, replies = 20, 10
	backend := hellotest.Serve(t, hello.Options{})
	count := methodCount(t, backend, streamHellos)
	own := testkit.Listen(t, "127.0.0.1:0")
	sc := startSidecar(t, backend, func(c *config.Settings) {
		c.PolicyFile = replayPolicy(t, time.Minute)
		c.Peers = testkit.ClosedAddr(t)  // the only owner there is, gone
		c.Replicas = own.Addr().String() // the replicas purges reach: this one alone
		c.PeerListen = own.Addr().String()
		c.PeerTokenFile = testkit.SecretFile(t, releaseToken)
		c.PeerPlaintext = true
	}, peerListener(own)) // its own, not in the ring
	waitStreamLearned(t, sc)
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	req := &hellov1.HelloRequest{Name: "feed", Count: replies, IntervalMs: 10}
	results := streams(testkit.Context(t), []hellov1.GreeterClient{client}, callers, req)
	for i, r := range results {
		if !consistent(r, replies, "feed") {
			t.Fatalf("caller %d: %d replies, err %v; want %d of one stream", i, len(r.Replies), r.Err, replies)
		}
	}
	if n := count(); n != 1 {
		t.Errorf("backend streams = %d, want 1: the record falls back once, for every caller", n)
	}
	if got := sc.metricSum(t, "collapser_peer_fallbacks_total", map[string]string{"code": "Unavailable"}); got != 1 {
		t.Errorf("fallbacks with UNAVAILABLE = %v, want 1", got)
	}
	if got := sc.metricSum(t, "collapser_peer_calls_total", map[string]string{"owner": "none", "code": "Unavailable"}); got != 1 {
		t.Errorf("forwarded streams no owner answered = %v, want 1", got)
	}
}
