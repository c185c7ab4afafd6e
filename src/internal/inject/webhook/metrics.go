package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The results an admission is counted under.
const (
	ResultInjected = "injected" // the sidecar was added
	ResultSkipped  = "skipped"  // not opted in, or injected already
	ResultRejected = "rejected" // a bad annotation or a port collision
	ResultError    = "error"    // the request or the namespace could not be read
)

// Metrics are the injector's admission metrics.
type Metrics struct {
	admissions *prometheus.CounterVec
	duration   prometheus.Histogram
}

// NewMetrics registers the admission metrics with reg, each result's
// series at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collapser_injector_admissions_total",
			Help: "Pod admissions the injector answered, by result: injected, skipped (not opted in or injected already), rejected (bad annotation or port collision) or error.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "collapser_injector_admission_duration_seconds",
			Help:    "Time the injector took to answer one pod admission, the namespace lookup included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	for _, r := range []string{ResultInjected, ResultSkipped, ResultRejected, ResultError} {
		m.admissions.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.admissions, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
