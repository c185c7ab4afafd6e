package demo

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is an in-process hello server on 127.0.0.1:0 that also records the
// most requests it ever had in flight.
type backend struct {
	addr        string
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
}

// metricsBackend serves a hello backend on loopback and its metrics, and
// returns its address and its metrics' URL (http://host:port/metrics).
func metricsBackend(t *testing.T) (addr, metricsURL string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	addr = hellotest.Serve(t, hello.Options{Registerer: reg})
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metrics.Close)
	return addr, metrics.URL + "/metrics"
}

func startBackend(t *testing.T, latency time.Duration) *backend {
	t.Helper()
	b := &backend{}
	b.addr = hellotest.Serve(t, hello.Options{Latency: latency}, grpc.UnaryInterceptor(b.track))
	return b
}

func (b *backend) track(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.maxInFlight.Load()
		if n <= m || b.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	return handler(ctx, req)
}
