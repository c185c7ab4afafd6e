package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// backendPanels returns the panels of the Backend row: the backend calls'
// latency percentiles and the calls that failed.
func backendPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		graph(10, "Backend call latency", l.at(0, 0, 12, 8), units.Seconds).
			Description(`Quantiles of the sidecar's backend call duration, from the ` +
				`collapser_backend_call_duration_seconds histogram: calls of unary methods (and of methods ` +
				`of unknown kind); streams are counted, not timed. With tracing on, the points on the p95 ` +
				`line are exemplars: a sampled backend call's duration and its trace (trace_id), the ` +
				`leader's trace, in which every caller it answered has a link to it.`).
			Targets(queries(
				series(`histogram_quantile(0.5, sum by (le) (rate(collapser_backend_call_duration_seconds_bucket{method=~"$method"}[$__rate_interval])))`, "p50"),
				series(`histogram_quantile(0.95, sum by (le) (rate(collapser_backend_call_duration_seconds_bucket{method=~"$method"}[$__rate_interval])))`, "p95").
					Exemplar(true),
				series(`histogram_quantile(0.99, sum by (le) (rate(collapser_backend_call_duration_seconds_bucket{method=~"$method"}[$__rate_interval])))`, "p99"),
			)),
		graph(11, "Errors/s (code != OK)", l.at(12, 0, 12, 8), units.RequestsPerSecond).
			Description(`Requests answered with a gRPC code other than OK (unary and passed-through calls, and ` +
				`calls of replayed streams), and backend calls that ended with one, by method and code.`).
			Targets(queries(
				series(`sum by (method, code) (rate(collapser_requests_total{method=~"$method", code!="OK"}[$__rate_interval]))`, "to callers: {{method}} {{code}}"),
				series(`sum by (method, code) (rate(collapser_backend_calls_total{method=~"$method", code!="OK"}[$__rate_interval]))`, "from backend: {{method}} {{code}}"),
				series(`sum by (method, code) (rate(collapser_stream_requests_total{method=~"$method", code!="OK"}[$__rate_interval]))`, "to stream callers: {{method}} {{code}}"),
			)),
	}
}
