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
	"sync/atomic"
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

// countingBackend is a Greeter that counts its SayHello calls: its count is
// the truth the tests compare the sidecar's behaviour with.
type countingBackend struct {
	hellov1.UnimplementedGreeterServer
	calls     atomic.Int64 // calls received
	completed atomic.Int64 // calls answered after their whole latency
	cancelled atomic.Int64 // calls their caller cancelled before the answer
	latency   time.Duration
	gate      chan struct{} // when not nil, calls numbered gateFrom or later wait for it to close
	gateFrom  int64         // the first call gate holds; 0 or 1: every call
}

func (b *countingBackend) SayHello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	n := b.calls.Add(1)
	if b.gate != nil && n >= b.gateFrom {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, b.left(ctx)
		}
	}
	if b.latency > 0 {
		t := time.NewTimer(b.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, b.left(ctx)
		}
	}
	b.completed.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	caller := strings.Join(md.Get("authorization"), ",")
	return &hellov1.HelloReply{Message: "Hello, " + req.GetName(), Caller: caller, Call: n}, nil
}

// left returns the error of a call whose ctx ended before its answer,
// counting it when its caller cancelled it.
func (b *countingBackend) left(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		b.cancelled.Add(1)
	}
	return ctx.Err()
}

// startBackend serves b with reflection on a loopback port until the test ends.
func startBackend(t testing.TB, b hellov1.GreeterServer) string {
	t.Helper()
	return startBackendOn(t, "127.0.0.1:0", b)
}

// startBackendOn is startBackend on a given address.
func startBackendOn(t testing.TB, addr string, b hellov1.GreeterServer) string {
	t.Helper()
	addr, _ = serveBackend(t, addr, b)
	return addr
}

// serveBackend is startBackendOn that also returns the stop of the backend's
// server, to kill it before the test ends.
func serveBackend(t testing.TB, addr string, b hellov1.GreeterServer) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hellov1.RegisterGreeterServer(s, b)
	reflection.Register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String(), s.Stop
}

// runningSidecar is a Sidecar serving on loopback ports.
type runningSidecar struct {
	*Sidecar
	addr, metricsAddr string
	cancel            context.CancelFunc // what SIGTERM does
	served            <-chan error       // Serve's result
	stop              func() error       // cancel, then Serve's result; once
}

// serveSidecar serves a Sidecar in front of backend until the test ends.
func serveSidecar(t testing.TB, backend string, edit func(*config.Settings)) *runningSidecar {
	t.Helper()
	return serveSidecarLogging(t, backend, slog.New(slog.DiscardHandler), edit)
}

// serveSidecarLogging is serveSidecar logging to logger.
func serveSidecarLogging(t testing.TB, backend string, logger *slog.Logger, edit func(*config.Settings)) *runningSidecar {
	t.Helper()
	cfg := config.Default()
	cfg.Backend = backend
	if edit != nil {
		edit(&cfg)
	}
	return serveConfig(t, cfg, logger, nil)
}

// serveConfig serves a Sidecar of cfg on loopback ports, its peer listener
// on peerLis (nil: none), until the test ends.
func serveConfig(t testing.TB, cfg config.Settings, logger *slog.Logger, peerLis net.Listener) *runningSidecar {
	t.Helper()
	s, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, Listeners{GRPC: grpcLis, Metrics: metricsLis, Peer: peerLis}) }()
	r := &runningSidecar{Sidecar: s, addr: grpcLis.Addr().String(), metricsAddr: metricsLis.Addr().String(), cancel: cancel, served: served}
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
	return r
}

// startSidecar is serveSidecar that waits until the sidecar's health
// service reports SERVING.
func startSidecar(t testing.TB, backend string, edit func(*config.Settings)) *runningSidecar {
	t.Helper()
	return startSidecarLogging(t, backend, slog.New(slog.DiscardHandler), edit)
}

// startSidecarLogging is startSidecar logging to logger.
func startSidecarLogging(t testing.TB, backend string, logger *slog.Logger, edit func(*config.Settings)) *runningSidecar {
	t.Helper()
	r := serveSidecarLogging(t, backend, logger, edit)
	waitServing(t, dial(t, r.addr))
	return r
}

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
	resp, err := httpClient.Get("http://" + r.metricsAddr + "/metrics")
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
