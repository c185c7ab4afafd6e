package sidecar

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// replica is one pod of a Deployment on loopback: a backend and its sidecar.
type replica struct {
	backend *countingBackend
	sidecar *runningSidecar
	client  hellov1.GreeterClient
}

// startReplicas starts n replicas whose sidecars are each other's peers
// (a static list, every replica included) when peered, or alone.
func startReplicas(t *testing.T, n int, peered bool, newBackend func() *countingBackend) []*replica {
	t.Helper()
	peerLis := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range peerLis {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peerLis[i], addrs[i] = lis, lis.Addr().String()
	}
	rs := make([]*replica, n)
	for i := range rs {
		b := newBackend()
		cfg := config.Default()
		cfg.Backend = startBackend(t, b)
		cfg.UnaryMethods = []string{sayHello}
		var lis net.Listener
		if peered {
			cfg.Peers, lis = strings.Join(addrs, ","), peerLis[i]
		} else {
			peerLis[i].Close()
		}
		sc := serveConfig(t, cfg, slog.New(slog.DiscardHandler), lis)
		// Callers address the replicas by one name, as a Service's are:
		// the authority is part of the key.
		conn := dial(t, sc.addr, grpc.WithAuthority("hello.example"))
		waitServing(t, conn)
		rs[i] = &replica{backend: b, sidecar: sc, client: hellov1.NewGreeterClient(conn)}
	}
	return rs
}

// backendCalls sums the replicas' backends' own counts.
func backendCalls(rs []*replica) int64 {
	var n int64
	for _, r := range rs {
		n += r.backend.calls.Load()
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
			rs := startReplicas(t, 3, tt.peered, func() *countingBackend { return &countingBackend{gate: gate} })
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
			// Every caller waits in its sidecar before any backend answers:
			// the burst fits in one backend latency by construction.
			testkit.WaitFor(t, "every caller waiting", func() bool {
				var waiting int
				for _, r := range rs {
					waiting += r.sidecar.proxy.Stats().Waiters
				}
				return waiting >= burst
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
				var forwarded, served float64
				for _, r := range rs {
					forwarded += r.sidecar.metricSum(t, "collapser_peer_calls_total", map[string]string{"code": "OK"})
					served += r.sidecar.metricSum(t, "collapser_peer_requests_total", nil)
				}
				// Each sidecar's leader forwarded its one call, the owner's
				// to itself, and the owner served all three.
				if forwarded != 3 || served != 3 {
					t.Errorf("peer calls forwarded %v, served %v; want 3 and 3", forwarded, served)
				}
			}
		})
	}
}

func TestPeers_ReplicaKilledMidBurstLosesNoCaller(t *testing.T) {
	// Each call takes 100 ms: at any moment about 20 calls wait on the
	// replica that is killed, so some are cut off in flight.
	const keys, rounds = 30, 5
	rs := startReplicas(t, 3, true, func() *countingBackend { return &countingBackend{latency: 100 * time.Millisecond} })
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
	time.Sleep(250 * time.Millisecond) // mid-burst: the rounds run for about 5 × 100 ms
	killed := rs[2].sidecar
	killed.peer.Stop() // abrupt: calls in flight on it fail
	killed.server.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each distinct call is one backend call when its owner answers it;
	// each call that failed over to its forwarder's backend may add one.
	var fallbacks float64
	for _, r := range survivors {
		fallbacks += r.sidecar.metricSum(t, "collapser_peer_fallbacks_total", nil)
	}
	calls, most := backendCalls(rs), int64(keys*rounds)+int64(fallbacks)
	t.Logf("%d distinct calls from 2 sidecars, the third killed mid-burst: %d backend calls, %v fallbacks", keys*rounds, calls, fallbacks)
	if calls > most {
		t.Errorf("backend calls = %d, want at most %d", calls, most)
	}
	if fallbacks == 0 {
		t.Error("no call fell back to the local backend: the kill came too late to test anything")
	}
}
