package metrics

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/proxy"
)

// BenchmarkObserveRequest measures the hot path: a method already admitted,
// a label combination already created.
func BenchmarkObserveRequest(b *testing.B) {
	s, _ := newTestRecorderWith(b, Sources{})
	s.ObserveRequest(context.Background(), proxy.RouteCaller, "/hello.v1.Greeter/SayHello", "joined", codes.OK)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.ObserveRequest(context.Background(), proxy.RouteCaller, "/hello.v1.Greeter/SayHello", "joined", codes.OK)
		}
	})
}

// BenchmarkObserveBackendCall measures the backend call path (counter and
// histogram) for an admitted method.
func BenchmarkObserveBackendCall(b *testing.B) {
	s, _ := newTestRecorderWith(b, Sources{})
	s.ObserveBackendCall(context.Background(), "/hello.v1.Greeter/SayHello", codes.OK, 0)
	b.ReportAllocs()
	for b.Loop() {
		s.ObserveBackendCall(context.Background(), "/hello.v1.Greeter/SayHello", codes.OK, 0)
	}
}
