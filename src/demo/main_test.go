package demo

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
