// Package metrics holds the collapser sidecar's Prometheus metrics. Every
// metric lives in a Sidecar built from an explicit prometheus.Registerer; the
// global registry is never used.
package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/collapse"
)

const (
	// MaxMethods is how many distinct method label values the Sidecar keeps.
	MaxMethods = 200
	// OtherMethod is the method label value used once MaxMethods is reached.
	OtherMethod = "other"
)

// durationBuckets span the backend call durations worth telling apart, from
// 1ms to 10s (the default backend timeout), in seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Sidecar records the sidecar's request and backend call metrics. It
// implements proxy.Observer. Its methods are safe for concurrent use.
type Sidecar struct {
	methods         *methodLimiter
	requests        *prometheus.CounterVec
	backendCalls    *prometheus.CounterVec
	backendDuration *prometheus.HistogramVec
}

// NewSidecar registers the sidecar's metrics with reg. stats is called once
// per scrape to fill the engine gauges (in-flight keys, waiters, cache entries
// and bytes).
func NewSidecar(reg prometheus.Registerer, stats func() collapse.Stats) (*Sidecar, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	if stats == nil {
		return nil, errors.New("metrics: nil stats func")
	}
	s := &Sidecar{
		methods: newMethodLimiter(MaxMethods),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collapser_requests_total",
			Help: "Requests the sidecar answered, by method, how they were served (outcome) and the gRPC code the caller got.",
		}, []string{"method", "outcome", "code"}),
		backendCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collapser_backend_calls_total",
			Help: "Calls the sidecar made to the backend, shared unary calls and passed-through streams alike, by method and gRPC code.",
		}, []string{"method", "code"}),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collapser_backend_call_duration_seconds",
			Help:    "Duration of the sidecar's calls to the backend, shared unary calls and passed-through streams alike, by method.",
			Buckets: durationBuckets,
		}, []string{"method"}),
	}
	collectors := []prometheus.Collector{s.requests, s.backendCalls, s.backendDuration, newStatsCollector(stats)}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register sidecar metrics: %w", err)
		}
	}
	return s, nil
}

// ObserveRequest counts one request answered with code, served as outcome
// ("leader", "joined", "cache_hit", "passthrough" or "error").
func (s *Sidecar) ObserveRequest(method, outcome string, code codes.Code) {
	s.requests.WithLabelValues(s.methods.label(method), outcome, codeName(code)).Inc()
}

// ObserveBackendCall counts one backend call that ended with code after d.
func (s *Sidecar) ObserveBackendCall(method string, code codes.Code, d time.Duration) {
	m := s.methods.label(method)
	s.backendCalls.WithLabelValues(m, codeName(code)).Inc()
	s.backendDuration.WithLabelValues(m).Observe(d.Seconds())
}

// codeName is the code label value. Codes outside the gRPC set are reported as
// Unknown, which keeps the label bounded and avoids formatting "Code(n)".
func codeName(c codes.Code) string {
	if c > codes.Unauthenticated {
		return codes.Unknown.String()
	}
	return c.String()
}
