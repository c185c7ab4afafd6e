package proxy_test

import (
	"cmp"
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/internal/tracing"
)

// Full method names of the hello Greeter.
const (
	methodSayHello      = "/hello.v1.Greeter/SayHello"
	methodStreamHellos  = "/hello.v1.Greeter/StreamHellos"
	methodCollectHellos = "/hello.v1.Greeter/CollectHellos"
	methodChat          = "/hello.v1.Greeter/Chat"
)

// kinds is a fixed methodkind table; missing methods are unknown.
type kinds map[string]methodkind.Method

func (k kinds) Method(fullMethod string) methodkind.Method { return k[fullMethod] }
func (k kinds) Methods() []string                          { return slices.Collect(maps.Keys(k)) }
func (k kinds) Generation() uint64                         { return 0 } // never changes

// greeterKinds knows the hello Greeter's methods, as hello.proto declares them.
var greeterKinds = kinds{
	methodSayHello:      {Kind: methodkind.Unary, Idempotency: methodkind.NoSideEffects},
	methodStreamHellos:  {Kind: methodkind.ServerStreaming},
	methodCollectHellos: {Kind: methodkind.ClientStreaming},
	methodChat:          {Kind: methodkind.BidiStreaming},
}

// describedKinds is greeterKinds with SayHello's request descriptor, as
// reflection teaches it: its keys are built from the parsed request.
var describedKinds = func() kinds {
	k := maps.Clone(greeterKinds)
	m := k[methodSayHello]
	m.Request = (&hellov1.HelloRequest{}).ProtoReflect().Descriptor()
	k[methodSayHello] = m
	return k
}()

// requestRecord and backendRecord are what the recorder was told.
type requestRecord struct {
	method, outcome string
	code            codes.Code
}

type backendRecord struct {
	method string
	code   codes.Code
	stream bool // told as a stream: counted, its length no latency
}

// peerRecord is one call forwarded to an owner.
type peerRecord struct {
	method, owner string
	code          codes.Code
	fellBack      bool
}

// recorder is a proxy.Observer that remembers every observation.
type recorder struct {
	mu        sync.Mutex
	requests  [proxy.RoutePeer + 1][]requestRecord // by route
	backend   []backendRecord
	peerCalls []peerRecord
	freshness []string // the source of each shared answer's windows
	refreshes []string // the reason of each background refresh
	handoffs  []string // the result of each handoff asked
}

func (r *recorder) ObserveHandoff(_, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handoffs = append(r.handoffs, result)
}

func (r *recorder) ObserveRefresh(_, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshes = append(r.refreshes, reason)
}

func (r *recorder) ObserveFreshness(_, source string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freshness = append(r.freshness, source)
}

func (r *recorder) ObservePeerCall(method, owner string, code codes.Code, fellBack bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peerCalls = append(r.peerCalls, peerRecord{method, owner, code, fellBack})
}

func (r *recorder) ObserveRequest(_ context.Context, route proxy.Route, method, outcome string, code codes.Code) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[route] = append(r.requests[route], requestRecord{method, outcome, code})
}

func (r *recorder) ObserveBackendCall(_ context.Context, method string, code codes.Code, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backend = append(r.backend, backendRecord{method, code, false})
}

func (r *recorder) ObserveBackendStream(method string, code codes.Code) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backend = append(r.backend, backendRecord{method, code, true})
}

// routed returns a copy of the requests observed on route so far.
func (r *recorder) routed(route proxy.Route) []requestRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests[route])
}

// forwarded returns a copy of the calls forwarded to owners so far.
func (r *recorder) forwarded() []peerRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.peerCalls)
}

// snapshot returns copies of the records so far: callers' requests and
// backend calls.
func (r *recorder) snapshot() ([]requestRecord, []backendRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests[proxy.RouteCaller]), slices.Clone(r.backend)
}

// proxyConfig is what a test varies about the proxy it starts.
type proxyConfig struct {
	ttl   time.Duration
	kinds kinds // nil: greeterKinds
	// policy, when set, replaces the default policy: collapse every unary
	// method with ttl.
	policy *policy.Defaults
	// options, when set, edits the proxy's options.
	options func(*proxy.Options)
	// wrapBackend, when set, wraps the connection to the backend.
	wrapBackend func(grpc.ClientConnInterface) grpc.ClientConnInterface
	// peered makes the proxy a replica with a peer listener: its ring lists
	// ring, or only its own peer listener when ring is "". Unless
	// knowsItself, the ring does not know the proxy's own listener as its
	// own: every collapsed call it owns is forwarded to its peer listener,
	// one hop more.
	peered      bool
	peerLis     net.Listener // the peer listener; one on 127.0.0.1:0 when nil
	ring        string
	knowsItself bool
	// policyFile, when set, is the policy file's content.
	policyFile string
	// tracing, when set, traces the proxy's server and connections as the
	// sidecar does, with tracing's stats handlers and provider.
	tracing *tracing.Tracing
	// invalidator, when set, takes back what writes invalidate
	// (Proxy.InvalidateThrough).
	invalidator proxy.Invalidator
}

// runningProxy is a proxy.Proxy serving on a grpc.Server on 127.0.0.1:0,
// with a client connected to it: the proxy's part of a sidecar, without the
// sidecar's wiring.
type runningProxy struct {
	client   hellov1.GreeterClient
	conn     *grpc.ClientConn
	proxy    *proxy.Proxy
	observed *recorder
	health   *health.Server
	peerAddr string // the peer listener's address; "" unless peered
}

// startProxy serves a proxy.Proxy forwarding to backendAddr, with the
// options cfg makes, until the test ends.
func startProxy(t testing.TB, backendAddr string, cfg proxyConfig) *runningProxy {
	t.Helper()
	backendConn, err := grpc.NewClient(backendAddr, append(cfg.tracing.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatalf("dial backend: %v", err)
	}
	t.Cleanup(func() { _ = backendConn.Close() })
	var backend grpc.ClientConnInterface = backendConn
	if cfg.wrapBackend != nil {
		backend = cfg.wrapBackend(backend)
	}
	rule, err := requestkey.NewRule(requestkey.RuleOptions{})
	if err != nil {
		t.Fatalf("key rule: %v", err)
	}
	if cfg.kinds == nil {
		cfg.kinds = greeterKinds
	}
	defaults := policy.Defaults{Collapse: policy.Always, CacheTTL: cfg.ttl, Timeout: testkit.DefaultTimeout}
	if cfg.policy != nil {
		defaults = *cfg.policy
	}
	var policyPath string
	if cfg.policyFile != "" {
		policyPath = filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(policyPath, []byte(cfg.policyFile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store, err := policy.NewStore(defaults, policyPath, nil, nil, nil)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	observed := &recorder{}
	opts := proxy.Options{
		Backend:        backend,
		Rules:          policy.NewDecider(store, cfg.kinds, nil),
		KeyRule:        rule,
		Observer:       observed,
		TracerProvider: cfg.tracing.TracerProvider(),
	}
	var peerLis net.Listener
	if cfg.peered {
		peerLis = cfg.peerLis
		if peerLis == nil {
			peerLis = testkit.Listen(t, "127.0.0.1:0")
		}
		// Port 0 is no peer's: the ring does not know itself.
		listen := "127.0.0.1:0"
		if cfg.knowsItself {
			listen = peerLis.Addr().String()
		}
		peerConn, err := peers.Dial(cmp.Or(cfg.ring, peerLis.Addr().String()), listen,
			append(cfg.tracing.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatalf("peers: %v", err)
		}
		t.Cleanup(func() { _ = peerConn.Close() })
		opts.Peers = peerConn
	}
	if cfg.options != nil {
		cfg.options(&opts)
	}
	p, err := proxy.New(opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if cfg.invalidator != nil {
		p.InvalidateThrough(cfg.invalidator)
	}
	if peerLis != nil {
		peerSrv := grpc.NewServer(append(p.PeerServerOptions(), cfg.tracing.ServerOptions()...)...)
		go func() { _ = peerSrv.Serve(peerLis) }()
		t.Cleanup(peerSrv.Stop)
	}
	srv := grpc.NewServer(append(p.ServerOptions(), cfg.tracing.ServerOptions()...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	lis := testkit.Listen(t, "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &runningProxy{client: hellov1.NewGreeterClient(conn), conn: conn, proxy: p, observed: observed, health: hs}
	if peerLis != nil {
		s.peerAddr = peerLis.Addr().String()
	}
	return s
}

// waitForWaiters waits until n callers wait in the proxy's engine.
func (s *runningProxy) waitForWaiters(t testing.TB, n int) {
	t.Helper()
	testkit.WaitFor(t, "engine waiters", func() bool { return s.proxy.Stats().Waiters == n })
}

// waitForRequests waits until the proxy observed n requests and returns them.
func (s *runningProxy) waitForRequests(t testing.TB, n int) []requestRecord {
	t.Helper()
	var got []requestRecord
	testkit.WaitFor(t, "observed requests", func() bool {
		got, _ = s.observed.snapshot()
		return len(got) >= n
	})
	return got
}
