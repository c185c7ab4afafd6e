package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/collapse"
)

func newBenchSidecar(b *testing.B) *Sidecar {
	b.Helper()
	s, err := NewSidecar(prometheus.NewRegistry(), Sources{Stats: func() collapse.Stats { return collapse.Stats{} }, Streams: noStreams})
	if err != nil {
		b.Fatalf("NewSidecar: %v", err)
	}
	return s
}

// BenchmarkObserveRequest measures the hot path: a method already admitted,
// a label combination already created.
func BenchmarkObserveRequest(b *testing.B) {
	s := newBenchSidecar(b)
	s.ObserveRequest("/hello.v1.Greeter/SayHello", "joined", codes.OK)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.ObserveRequest("/hello.v1.Greeter/SayHello", "joined", codes.OK)
		}
	})
}

// BenchmarkObserveBackendCall measures the backend call path (counter and
// histogram) for an admitted method.
func BenchmarkObserveBackendCall(b *testing.B) {
	s := newBenchSidecar(b)
	s.ObserveBackendCall("/hello.v1.Greeter/SayHello", codes.OK, 0)
	b.ReportAllocs()
	for b.Loop() {
		s.ObserveBackendCall("/hello.v1.Greeter/SayHello", codes.OK, 0)
	}
}
