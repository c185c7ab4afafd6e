package collapser

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/sidecar"
	"github.com/collapser/collapser/src/internal/testkit"
)

// fleetIdentity is the identity of the test release's replicas.
const fleetIdentity = "spiffe://cluster.local/ns/test/collapser/hello"

// fleetReplica is one pod of a release on loopback: a sidecar in front of
// its greeter, or a greeter serving with the library.
type fleetReplica struct {
	name     string
	greeter  *testkit.Greeter
	client   hellov1.GreeterClient
	conn     *grpc.ClientConn
	coherent func() bool // it serves what it keeps: it holds a lease from every other
}

// startFleet starts one replica for each of kinds ("sidecar" or
// "library"), in front of a greeter of its own made by newGreeter, each
// with the policy file policyYAML, peered over mutual TLS with one release
// token, and waits until each holds a lease from every other.
func startFleet(t *testing.T, policyYAML string, newGreeter func() *testkit.Greeter, kinds ...string) []*fleetReplica {
	t.Helper()
	return startFleetWith(t, policyYAML, newGreeter, nil, kinds)
}

// startFleetWith is startFleet with the library replicas' options changed
// by edit (when not nil), and their servers' options opts.
func startFleetWith(t *testing.T, policyYAML string, newGreeter func() *testkit.Greeter, edit func(*Options), kinds []string, opts ...grpc.ServerOption) []*fleetReplica {
	t.Helper()
	peerLis := make([]net.Listener, len(kinds))
	addrs := make([]string, len(kinds))
	for i := range kinds {
		peerLis[i] = testkit.Listen(t, "127.0.0.1:0")
		addrs[i] = peerLis[i].Addr().String()
	}
	token := testkit.SecretFile(t, strings.Repeat("release-token-", 4))
	ca, certs := testkit.NewCA(t, "release CA"), t.TempDir()
	rs := make([]*fleetReplica, len(kinds))
	for i, kind := range kinds {
		cert := ca.Issue(t, filepath.Join(certs, fmt.Sprint(i)), fleetIdentity)
		peers := Peers{Target: strings.Join(addrs, ","), Listen: addrs[i], TokenFile: token, CertFile: cert.Cert, KeyFile: cert.Key, CAFile: cert.CA}
		r := &fleetReplica{name: fmt.Sprintf("%s %d", kind, i), greeter: newGreeter()}
		var addr string
		switch kind {
		case "sidecar":
			addr, r.coherent = startFleetSidecar(t, r.greeter, policyYAML, peers, peerLis[i])
		case "library":
			addr, r.coherent = startFleetLibrary(t, r.greeter, policyYAML, peers, peerLis[i], edit, opts...)
		default:
			t.Fatalf("no replica kind %q", kind)
		}
		// Callers address the replicas by one name, as a Service's do: the
		// authority is part of the key.
		r.conn = dial(t, addr, grpc.WithAuthority("hello.example"))
		r.client = hellov1.NewGreeterClient(r.conn)
		rs[i] = r
	}
	for _, r := range rs {
		testkit.WaitFor(t, r.name+" holds a lease from every other replica", r.coherent)
	}
	return rs
}

// fleetPolicy keeps SayHello's answers an hour: every call after the
// first is answered from a replica's copy or its owner's.
const fleetPolicy = "methods:\n  - name: " + sayHello + "\n    collapse: true\n    cacheTTL: 1h\n"

// greeter answers SayHello at once.
func greeter() *testkit.Greeter {
	return &testkit.Greeter{SayHello: func(_ context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		return &hellov1.HelloReply{Message: "Hello, " + req.GetName()}, nil
	}}
}

// startFleetLibrary serves g with a Collapser of peers (its options
// changed by edit, when not nil) on a server with opts, its peer port on
// lis, until the test ends; it returns the server's address and whether
// the Collapser is coherent.
func startFleetLibrary(t *testing.T, g *testkit.Greeter, policyYAML string, peers Peers, lis net.Listener, edit func(*Options), opts ...grpc.ServerOption) (string, func() bool) {
	t.Helper()
	c, reg := newCollapser(t, policyYAML, func(o *Options) {
		o.Peers = peers
		if edit != nil {
			edit(o)
		}
	})
	srv := grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(c.StreamServerInterceptor()))...)
	hellov1.RegisterGreeterServer(c.Registrar(srv), g.Service())
	c.RegisterAdmin(srv)
	appLis := testkit.Listen(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(appLis) })
	wg.Go(func() {
		if err := c.ServePeers(lis); err != nil {
			t.Errorf("ServePeers: %v", err)
		}
	})
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		srv.Stop()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		wg.Wait()
	})
	return appLis.Addr().String(), func() bool { return gauge(t, reg, "collapser_peer_coherent") == 1 }
}

// startFleetSidecar runs a sidecar of peers in front of g, its peer port
// on lis, until the test ends; it returns its address and whether it is
// coherent.
func startFleetSidecar(t *testing.T, g *testkit.Greeter, policyYAML string, peers Peers, lis net.Listener) (string, func() bool) {
	t.Helper()
	cfg := config.Default()
	// The sidecar learns the methods' kinds from its backend's reflection.
	g.Services = func(s *grpc.Server) { reflection.Register(s) }
	cfg.Backend = g.Start(t)
	cfg.PolicyFile = filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg.PolicyFile, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Peers, cfg.PeerListen, cfg.PeerTokenFile = peers.Target, peers.Listen, peers.TokenFile
	cfg.PeerTLSCertFile, cfg.PeerTLSKeyFile, cfg.PeerTLSCAFile = peers.CertFile, peers.KeyFile, peers.CAFile
	s, err := sidecar.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	grpcLis, metricsLis := testkit.Listen(t, "127.0.0.1:0"), testkit.Listen(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, sidecar.Listeners{GRPC: grpcLis, Metrics: metricsLis, Peer: lis}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("sidecar Serve: %v", err)
		}
	})
	metricsURL := "http://" + metricsLis.Addr().String() + "/metrics"
	return grpcLis.Addr().String(), func() bool { return scrape(t, metricsURL, "collapser_peer_coherent") == 1 }
}

// gauge returns the value of the gauge name on reg (0 when absent).
func gauge(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	var v float64
	for _, m := range series(t, reg, name) {
		v += m.GetGauge().GetValue()
	}
	return v
}

// scrape returns the value of the unlabelled series name at url (0 when
// absent).
func scrape(t testing.TB, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		var v float64
		if n, _ := fmt.Sscanf(lines.Text(), name+" %g", &v); n == 1 {
			return v
		}
	}
	return 0
}

// TestFleet_SidecarAndLibraryReplicasKeepOneCallPerKey runs a release
// mid-way through a move from sidecar to library, pod by pod: one sidecar
// replica and two replicas that serve with the library, on one ring, with
// mutual TLS and the release's token between them. Callers of every
// replica at once make one backend call per key, whichever replica owns
// it; a purge taken on a library replica reaches the sidecar's copies too.
func TestFleet_SidecarAndLibraryReplicasKeepOneCallPerKey(t *testing.T) {
	rs := startFleet(t, fleetPolicy, greeter, "sidecar", "library", "library")
	ctx := testkit.Context(t)
	const keys, callers = 12, 5 // callers per replica and key, all at once
	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, keys*callers*len(rs))
		for k := range keys {
			for _, r := range rs {
				for range callers {
					wg.Go(func() {
						name := fmt.Sprint("key-", k)
						reply, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: name})
						if err == nil && reply.GetMessage() != "Hello, "+name {
							err = fmt.Errorf("%s answered %q to %s", r.name, reply.GetMessage(), name)
						}
						errs <- err
					})
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := func() (total int64, by []string) {
		for _, r := range rs {
			n := r.greeter.Calls.SayHello.Load()
			total += n
			by = append(by, fmt.Sprintf("%s: %d", r.name, n))
		}
		return total, by
	}
	burst()
	if got, by := calls(); got != keys {
		t.Fatalf("%d callers of %d keys over a sidecar and two library replicas made %d backend calls (%v), want %d: one per key",
			keys*callers*len(rs), keys, got, by, keys)
	}
	owners := 0
	for _, r := range rs {
		if r.greeter.Calls.SayHello.Load() > 0 {
			owners++
		}
	}
	if owners < 2 {
		t.Errorf("the backend calls were made by %d replica(s): the keys did not spread over the ring", owners)
	}

	// A purge taken by a library replica's admin service reaches every
	// replica: each key is called once more, wherever it was kept.
	purge, err := adminv1.NewCacheClient(dial(t, rs[1].conn.Target())).Purge(ctx,
		&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}})
	if err != nil {
		t.Fatal(err)
	}
	if purge.GetReplicas() != int32(len(rs)) {
		t.Errorf("the purge reached %d replicas, want %d", purge.GetReplicas(), len(rs))
	}
	burst()
	if got, by := calls(); got != 2*keys {
		t.Errorf("after a purge, the same burst made %d backend calls in all (%v), want %d: one more per key", got, by, 2*keys)
	}
}

// TestFleet_StreamsAreReplayedByTheirOwners: a replayed stream is run
// once per key in a mixed release, by its owner, and read through every
// replica in whole, replayed from the owner's record.
func TestFleet_StreamsAreReplayedByTheirOwners(t *testing.T) {
	rs := startFleet(t, replayAnHour, func() *testkit.Greeter {
		return &testkit.Greeter{StreamHellos: func(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
			stream.SetTrailer(metadata.Pairs("x-done", "yes"))
			for i := range 3 {
				if err := stream.Send(&hellov1.HelloReply{Message: req.GetName(), Call: int64(i)}); err != nil {
					return err
				}
			}
			return nil
		}}
	}, "sidecar", "library", "library")
	ctx := testkit.Context(t)
	const keys = 12
	for k := range keys {
		name := fmt.Sprint("key-", k)
		for _, r := range rs {
			got := readStream(ctx, r.client, name)
			if got.Err != nil || !slices.Equal(got.Messages(), []string{name, name, name}) || got.Trailer.Get("x-done") == nil {
				t.Fatalf("%s read %s: %v, %q, trailer %v; want 3 messages and the trailer", r.name, name, got.Err, got.Messages(), got.Trailer)
			}
		}
	}
	var runs int64
	var by []string
	for _, r := range rs {
		n := r.greeter.Calls.StreamHellos.Load()
		runs += n
		by = append(by, fmt.Sprintf("%s: %d", r.name, n))
	}
	if runs != keys {
		t.Errorf("%d streams of %d keys read through every replica ran %d times (%v), want %d: once per key, by its owner", keys*len(rs), keys, runs, by, keys)
	}
}

// TestFleet_AForwardedCallRunsInItsCallersTrace: the calls between
// library replicas carry the trace context, so the handler a peer's call
// runs on its key's owner runs in the trace of the caller who made it.
func TestFleet_AForwardedCallRunsInItsCallersTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w3c := otelgrpc.WithPropagators(propagation.TraceContext{})
	var mu sync.Mutex
	handlerTraces := map[string]trace.TraceID{} // name → the trace its handler ran in
	traced := func() *testkit.Greeter {
		return &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			mu.Lock()
			defer mu.Unlock()
			handlerTraces[req.GetName()] = trace.SpanContextFromContext(ctx).TraceID()
			return &hellov1.HelloReply{Message: "Hello, " + req.GetName()}, nil
		}}
	}
	rs := startFleetWith(t, fleetPolicy, traced, func(o *Options) { o.TracerProvider = tp }, []string{"library", "library"},
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), w3c)))
	client := hellov1.NewGreeterClient(dial(t, rs[0].conn.Target(), grpc.WithAuthority("hello.example"),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), w3c))))
	// Keys called through the first replica until one is owned by the second.
	var forwarded trace.TraceID
	for k := 0; rs[1].greeter.Calls.SayHello.Load() == 0; k++ {
		if k == 64 {
			t.Fatal("64 keys called through one replica, none owned by the other")
		}
		name := fmt.Sprint("key-", k)
		ctx, span := tp.Tracer("test").Start(testkit.Context(t), "caller")
		_, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: name})
		span.End()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ran, ok := handlerTraces[name]
		mu.Unlock()
		if want := span.SpanContext().TraceID(); !ok || ran != want {
			t.Errorf("%s: the handler ran in trace %v, want its caller's %v", name, ran, want)
		}
		forwarded = span.SpanContext().TraceID()
	}
	// The owner's server span is the child of the forwarder's call to it,
	// not of the caller's call, whose trace context the caller's headers
	// carry too.
	kinds := map[trace.SpanID]trace.SpanKind{}
	var servers []sdktrace.ReadOnlySpan
	// A server span ends once its status is sent: the owner's may end after
	// the caller has its answer.
	testkit.WaitFor(t, "the forwarded call's server spans to end", func() bool {
		clear(kinds)
		servers = servers[:0]
		for _, s := range spans.Ended() {
			if s.SpanContext().TraceID() == forwarded {
				kinds[s.SpanContext().SpanID()] = s.SpanKind()
				if s.SpanKind() == trace.SpanKindServer {
					servers = append(servers, s)
				}
			}
		}
		return len(servers) >= 2
	})
	if len(servers) != 2 || servers[0].Parent().SpanID() == servers[1].Parent().SpanID() ||
		kinds[servers[0].Parent().SpanID()] != trace.SpanKindClient || kinds[servers[1].Parent().SpanID()] != trace.SpanKindClient {
		t.Errorf("the forwarded call's trace has %d server spans; want 2, each the child of a client span of its own (the caller's, the forwarder's)", len(servers))
	}
}

// TestFleet_ForwardedCallsNeedTheServiceRegistered: a call a peer forwards
// for a method no service registered through Registrar serves is refused
// UNIMPLEMENTED, naming it; and a Collapser without peers serves no peer
// port.
func TestFleet_ForwardedCallsNeedTheServiceRegistered(t *testing.T) {
	c, _ := newCollapser(t, "", nil)
	err := c.services.Invoke(testkit.Context(t), sayHello, nil, nil)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(fmt.Sprint(err), "no service registered through Registrar serves "+sayHello) {
		t.Errorf("Invoke of an unregistered method: %v", err)
	}
	if err := c.ServePeers(testkit.Listen(t, "127.0.0.1:0")); err == nil {
		t.Error("ServePeers without peers served")
	}
}
