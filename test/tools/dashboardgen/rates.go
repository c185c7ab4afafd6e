package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// ratesPanels returns the panels of the Rates row: how requests are served per
// second, backend calls against the backend's own count, and the backend load
// saved.
func ratesPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		graph(5, "Requests/s by outcome", l.at(0, 0, 12, 8), units.RequestsPerSecond).
			Description(`How unary and passed-through requests were served: leader (started the one backend call), ` +
				`joined (waited for a call in flight), cache_hit (served from the short result cache), ` +
				`stale and stale_on_error, private (made its own call: the one it joined answered privately), own (made ` +
				`its own call rather than wait: maxWaiters, waitTimeout), passthrough (streaming or unknown ` +
				`methods) and error (failed before a path was chosen). Replayed streams: Stream requests/s ` +
				`by outcome.`).
			Targets(queries(
				series(`sum by (outcome) (rate(collapser_requests_total{method=~"$method"}[$__rate_interval]))`, "{{outcome}}"),
			)),
		graph(6, "Backend calls/s: sidecar vs. backend's own count", l.at(12, 0, 12, 8), units.RequestsPerSecond).
			Description(`Requests arriving at the sidecar (replayed streams included), the calls the sidecar made ` +
				`to the backend, and the hello backend's own request counter (hello_requests_total) as an ` +
				`independent check. The gap between the first line and the others is the collapsing.`).
			Targets(queries(
				series(`sum(rate(collapser_requests_total{method=~"$method"}[$__rate_interval]))
  + (sum(rate(collapser_stream_requests_total{method=~"$method"}[$__rate_interval])) or vector(0))`, "requests to the sidecar"),
				series(`sum(rate(collapser_backend_calls_total{method=~"$method"}[$__rate_interval]))`, "sidecar calls to the backend"),
				series(`sum(rate(hello_requests_total{method=~"$method"}[$__rate_interval]))`, "hello backend: requests counted"),
			)),
		graph(7, "Collapsed (joined) requests/s", l.at(0, 8, 8, 8), units.RequestsPerSecond).
			Description(`Requests that joined a backend call already in flight for the same key, by method.`).
			Targets(queries(
				series(`sum by (method) (rate(collapser_requests_total{method=~"$method", outcome="joined"}[$__rate_interval]))`, "{{method}}"),
			)),
		graph(8, "Cache hits and stale serves/s", l.at(8, 8, 8, 8), units.RequestsPerSecond).
			Description(`Requests answered from the result cache: fresh (cache_hit), past the TTL while a refresh ` +
				`runs (stale) and past the TTL because the call failed (stale_on_error), per second.`).
			Targets(queries(
				series(`sum by (outcome) (rate(collapser_requests_total{method=~"$method", outcome=~"cache_hit|stale|stale_on_error"}[$__rate_interval]))`, "{{outcome}}"),
			)),
		graph(9, "Backend-load reduction %", l.at(16, 8, 8, 8), units.PercentUnit).
			Description(`1 - backend calls / requests, clamped to [0, 1]; requests as in Requests (replayed streams ` +
				`included), those with outcome=error left out.`).
			Max(1).
			Targets(queries(
				series(`clamp(
  1 - (sum(rate(collapser_backend_calls_total{method=~"$method"}[$__rate_interval])) or vector(0))
    / ((sum(rate(collapser_requests_total{method=~"$method", outcome!="error"}[$__rate_interval]))
        + (sum(rate(collapser_stream_requests_total{method=~"$method", outcome!="error"}[$__rate_interval])) or vector(0))) > 0),
  0, 1
)`, "backend-load reduction"),
			)),
	}
}
