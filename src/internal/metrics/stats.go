package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/collapser/collapser/src/internal/collapse"
)

// statsCollector exports the engine's Stats as gauges, reading them once per
// scrape so the four values come from one consistent snapshot.
type statsCollector struct {
	stats    func() collapse.Stats
	inFlight *prometheus.Desc
	waiters  *prometheus.Desc
	entries  *prometheus.Desc
	bytes    *prometheus.Desc
}

func newStatsCollector(stats func() collapse.Stats) *statsCollector {
	return &statsCollector{
		stats:    stats,
		inFlight: prometheus.NewDesc("collapser_inflight_keys", "Keys with a backend call in flight.", nil, nil),
		waiters:  prometheus.NewDesc("collapser_waiters", "Callers waiting for an in-flight backend call they joined.", nil, nil),
		entries:  prometheus.NewDesc("collapser_cache_entries", "Results held in the result cache.", nil, nil),
		bytes:    prometheus.NewDesc("collapser_cache_bytes", "Bytes of results held in the result cache.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inFlight
	ch <- c.waiters
	ch <- c.entries
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(s.Waiters))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
}
