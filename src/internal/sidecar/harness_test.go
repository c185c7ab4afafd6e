package sidecar

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

const sayHello = "/hello.v1.Greeter/SayHello"

// sayHelloFunc is a Greeter's SayHello.
type sayHelloFunc = func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error)

// greet is the sidecar tests' SayHello: it greets the request's name, for
// the caller the authorization header names, with the backend's number of
// the call.
func greet(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	caller := strings.Join(md.Get("authorization"), ",")
	return &hellov1.HelloReply{Message: "Hello, " + req.GetName(), Caller: caller, Call: testkit.CallNumber(ctx)}, nil
}

// streamGreet answers StreamHellos with the replies asked for, each as
// greet answers, numbered by the backend's count of streams.
func streamGreet(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
	reply := &hellov1.HelloReply{Message: "Hello, " + req.GetName(), Call: testkit.CallNumber(stream.Context())}
	for range req.GetCount() {
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	return nil
}

// gated returns a SayHello that holds every call until gate is closed, then
// answers as greet does.
func gated(gate <-chan struct{}) sayHelloFunc { return gatedFrom(gate, 1) }

// gatedFrom is gated for the calls numbered from or later: the earlier ones
// answer at once. A call whose caller leaves first ends with its context's
// error.
func gatedFrom(gate <-chan struct{}, from int64) sayHelloFunc {
	return func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		if testkit.CallNumber(ctx) >= from {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return greet(ctx, req)
	}
}

// slow returns a SayHello that answers as greet does after latency. A call
// whose caller leaves first ends with its context's error.
func slow(latency time.Duration) sayHelloFunc {
	return func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
			return greet(ctx, req)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// startBackend serves g with server reflection on a loopback port until the
// test ends, and returns its address.
func startBackend(t testing.TB, g *testkit.Greeter) string {
	t.Helper()
	g.Services = registerReflection
	return g.Start(t)
}

// registerReflection registers server reflection on s, as most backends
// serve it: the sidecar learns its methods' kinds from it.
func registerReflection(s *grpc.Server) { reflection.Register(s) }

// runningSidecar is a Sidecar serving on loopback ports.
type runningSidecar struct {
	*Sidecar
	addr, metricsAddr string
	adminAddr         string             // its admin service's listener
	cancel            context.CancelFunc // what SIGTERM does
	served            <-chan error       // Serve's result
	stop              func() error       // cancel, then Serve's result; once
}

// startSidecar serves a Sidecar in front of backend, with the settings
// edit makes of the defaults (nil: none), on loopback ports until the test
// ends, and waits until its health service reports SERVING; opts change how
// it starts.
//
// One default is off unless edit turns it on: early refresh. Tests count
// the backend's calls, and a hit would make one more whenever its key's
// refresh point, drawn from the key over its TTL, fell between two reads:
// a count that would hang on the wall clock. The tests of early refresh
// (refresh_test.go, herd_test.go) run it on a fake clock or measure it.
func startSidecar(t testing.TB, backend string, edit func(*config.Settings), opts ...sidecarOption) *runningSidecar {
	t.Helper()
	o := sidecarOptions{logger: slog.New(slog.DiscardHandler), seams: seams{now: time.Now}}
	for _, opt := range opts {
		opt(&o)
	}
	cfg := config.Default()
	cfg.Backend = backend
	cfg.Policy.EarlyRefresh = false
	if edit != nil {
		edit(&cfg)
	}
	s, err := newWith(cfg, o.logger, o.seams)
	if err != nil {
		t.Fatal(err)
	}
	grpcLis, metricsLis := testkit.Listen(t, "127.0.0.1:0"), testkit.Listen(t, "127.0.0.1:0")
	adminLis := o.adminLis
	if adminLis == nil {
		adminLis = testkit.Listen(t, "127.0.0.1:0")
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ctx, Listeners{GRPC: grpcLis, Metrics: metricsLis, Peer: o.peerLis, Admin: adminLis})
	}()
	r := &runningSidecar{
		Sidecar: s, addr: grpcLis.Addr().String(), metricsAddr: metricsLis.Addr().String(), adminAddr: adminLis.Addr().String(),
		cancel: cancel, served: served,
	}
	r.stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-served:
			return err
		case <-time.After(testkit.DefaultTimeout):
			return errors.New("Serve did not return after cancel")
		}
	})
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if !o.backendDown {
		waitServing(t, dial(t, r.addr, o.callers...))
	}
	return r
}

// fakeClock returns a clock for a sidecar to run on (runOn).
func fakeClock() *testkit.Clock { return testkit.NewClock(time.Unix(1e9, 0)) }

// runOn starts a sidecar on clock.
func runOn(clock *testkit.Clock) sidecarOption { return withSeams(seams{now: clock.Now}) }

// advance moves clock, the one scs run on, d on once no call is in flight
// on any of them: an answer's life is counted from when its call ends.
func advance(t testing.TB, clock *testkit.Clock, d time.Duration, scs ...*runningSidecar) {
	t.Helper()
	testkit.WaitFor(t, "no call in flight", func() bool {
		for _, sc := range scs {
			if sc.proxy.Stats().InFlight > 0 || sc.proxy.StreamStats().Live > 0 {
				return false
			}
		}
		return true
	})
	clock.Advance(d)
}

// sidecarOptions are how startSidecar starts a sidecar, beside its settings.
type sidecarOptions struct {
	logger      *slog.Logger      // where it logs; default: nowhere
	peerLis     net.Listener      // its peer listener; default: none
	backendDown bool              // return without waiting for SERVING
	callers     []grpc.DialOption // how a caller dials it; default: plain text
	seams       seams             // default: the wall clock
	adminLis    net.Listener      // its admin listener; default: one on 127.0.0.1:0
}

// sidecarOption sets one of the sidecarOptions.
type sidecarOption func(*sidecarOptions)

// logTo makes the sidecar log to logger.
func logTo(logger *slog.Logger) sidecarOption {
	return func(o *sidecarOptions) { o.logger = logger }
}

// peerListener serves the sidecar's peer listener on lis.
func peerListener(lis net.Listener) sidecarOption {
	return func(o *sidecarOptions) { o.peerLis = lis }
}

// dialedWith is how callers dial the sidecar (its listener serves TLS).
func dialedWith(opts ...grpc.DialOption) sidecarOption {
	return func(o *sidecarOptions) { o.callers = opts }
}

// adminListener serves the sidecar's admin service on lis.
func adminListener(lis net.Listener) sidecarOption {
	return func(o *sidecarOptions) { o.adminLis = lis }
}

// withSeams starts the sidecar with sm.
func withSeams(sm seams) sidecarOption {
	return func(o *sidecarOptions) { o.seams = sm }
}

// backendDown starts a sidecar whose backend is down: startSidecar returns
// without waiting for a SERVING it would not report.
func backendDown(o *sidecarOptions) { o.backendDown = true }

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitServing polls the health service until it reports SERVING.
func waitServing(t testing.TB, conn *grpc.ClientConn) {
	t.Helper()
	client := healthpb.NewHealthClient(conn)
	testkit.WaitFor(t, "the sidecar SERVING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
}

// httpClient bounds every HTTP call of the tests.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// scrape returns the sidecar's /metrics page.
func (r *runningSidecar) scrape(t testing.TB) []byte {
	t.Helper()
	return r.scrapeAs(t, "")
}

// scrapeAs returns the sidecar's /metrics page in the format a scraper
// that accepts accept gets ("": any).
func (r *runningSidecar) scrapeAs(t testing.TB, accept string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.metricsAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	return page
}

// metricSum scrapes the sidecar's /metrics and returns the sum of the named
// counter or gauge over the series whose labels include all of labels.
func (r *runningSidecar) metricSum(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.scrape(t)))
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			found++
		}
	}
	return found == len(want)
}
