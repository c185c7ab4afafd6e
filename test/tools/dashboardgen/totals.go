package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// totalsPanels returns the panels of the Totals over the time range row, exact
// totals over the dashboard's time range: requests, backend calls counted by
// the sidecar and by the backend itself, the backend load saved, p95 latency,
// errors, and the requests joined, served from the cache, served stale and
// passed through.
func totalsPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		countStat(2, "Requests", l.at(0, 0, 4, 4)).
			Description(`Requests the sidecar answered its callers in the time range, every outcome and code: unary ` +
				`and passed-through calls (collapser_requests_total) and calls of replayed streams ` +
				`(collapser_stream_requests_total, broken down in the Streams row). Calls a sidecar served ` +
				`for its peers as their key's owner are not requests of its callers: see Calls served for ` +
				`peers. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_requests_total{method=~"$method"}[$__range] anchored))
  + (sum(increase(collapser_stream_requests_total{method=~"$method"}[$__range] anchored)) or vector(0))`, "requests"),
			)),
		countStat(3, "Backend calls: sidecar", l.at(4, 0, 4, 4)).
			Description(`Calls the sidecar made to the backend in the time range: shared unary calls, background ` +
				`refreshes and passed-through calls. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_backend_calls_total{method=~"$method"}[$__range] anchored))`, "backend calls"),
			)),
		countStat(16, "Backend calls: backend's own count", l.at(8, 0, 4, 4)).
			Description(`Requests the demo hello backend itself counted in the time range (hello_requests_total), ` +
				`the independent check of the sidecar's count; no data with another backend. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(hello_requests_total{method=~"$method"}[$__range] anchored))`, "backend's own count"),
			)),
		countStat(1, "Backend-load reduction", l.at(12, 0, 4, 4)).
			Description(`Share of the requests in the time range the sidecar answered without a backend call of ` +
				`their own: 1 - backend calls / requests (a passed-through request counts as one backend ` +
				`call, a replayed stream's leader and a caller with a stream of its own one backend stream ` +
				`each). Requests are those of the Requests panel without the ones that failed before a path ` +
				`was chosen (outcome=error); empty without requests. Both counts are exact totals over the ` +
				`range, as in the panels beside it (increase(...[$__range] anchored)).`).
			Unit(units.PercentUnit).
			Decimals(2).
			Min(0).
			Max(1).
			Thresholds(thresholds("red", from(0.2, "orange"), from(0.5, "green"))).
			Targets(queries(
				instant(`clamp(
  1 - (sum(increase(collapser_backend_calls_total{method=~"$method"}[$__range] anchored)) or vector(0))
    / ((sum(increase(collapser_requests_total{method=~"$method", outcome!="error"}[$__range] anchored))
        + (sum(increase(collapser_stream_requests_total{method=~"$method", outcome!="error"}[$__range] anchored)) or vector(0))) > 0),
  0, 1
)`, "reduction"),
			)),
		countStat(4, "p95 backend latency", l.at(16, 0, 4, 4)).
			Description(`95th percentile of the sidecar's backend calls of unary methods (streams last as long as ` +
				`the stream: they are not latencies) in the time range, from the duration histogram's ` +
				`buckets counted exactly over the range (increase(...[$__range] anchored)) and interpolated ` +
				`within a bucket as histogram_quantile does: the true value lies in the same bucket. Empty ` +
				`without backend calls.`).
			Unit(units.Seconds).
			Decimals(2).
			Targets(queries(
				instant(`histogram_quantile(0.95, sum by (le) (increase(collapser_backend_call_duration_seconds_bucket{method=~"$method"}[$__range] anchored)))`, "p95"),
			)),
		countStat(17, "Errors", l.at(20, 0, 4, 4)).
			Description(`Requests in the time range whose caller got a gRPC code other than OK ` +
				`(collapser_requests_total and collapser_stream_requests_total, code != OK), 0 when there ` +
				`were none. ` +
				exactTotal).
			Thresholds(thresholds("green", from(1, "red"))).
			Targets(queries(
				instant(`(sum(increase(collapser_requests_total{method=~"$method", code!="OK"}[$__range] anchored)) or vector(0))
  + (sum(increase(collapser_stream_requests_total{method=~"$method", code!="OK"}[$__range] anchored)) or vector(0))`, "errors"),
			)),
		countStat(18, "Joined", l.at(0, 4, 6, 4)).
			Description(`Requests in the time range that joined a backend call already in flight (outcome=joined): ` +
				`the collapsed ones. Unary calls; replayed streams are in the Streams row. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_requests_total{method=~"$method", outcome="joined"}[$__range] anchored))`, "joined"),
			)),
		countStat(19, "Cache hits", l.at(6, 4, 6, 4)).
			Description(`Requests in the time range answered from the result cache within its TTL ` +
				`(outcome=cache_hit). Unary calls; replayed streams are in the Streams row. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_requests_total{method=~"$method", outcome="cache_hit"}[$__range] anchored))`, "cache hits"),
			)),
		countStat(20, "Stale served", l.at(12, 4, 6, 4)).
			Description(`Requests in the time range answered with a result past its TTL: while one background call ` +
				`refreshed it (outcome=stale, staleWhileRevalidate) or because the call failed ` +
				`(outcome=stale_on_error, staleIfError). 0 unless the policy allows stale results. Unary ` +
				`calls; replayed streams are in the Streams row. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_requests_total{method=~"$method", outcome=~"stale|stale_on_error"}[$__range] anchored))`, "stale served"),
			)),
		countStat(21, "Passed through", l.at(18, 4, 6, 4)).
			Description(`Requests in the time range the sidecar forwarded untouched (outcome=passthrough): ` +
				`streaming methods, methods its policy does not collapse and methods of unknown kind; see ` +
				`Method rules. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_requests_total{method=~"$method", outcome="passthrough"}[$__range] anchored))`, "passed through"),
			)),
	}
}
