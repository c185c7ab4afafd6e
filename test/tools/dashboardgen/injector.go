package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// injectorPanels returns the panels of the Injector row, the sidecar
// injector's admission webhook: its replicas scraped, admissions by result
// and how long one takes.
func injectorPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		countStat(51, "Injector replicas up", l.at(0, 0, 4, 8)).
			Description(`Injector pods whose metrics Prometheus scrapes now, ready or not (the number of ` +
				`collapser_injector_admission_duration_seconds series: one per pod). 0 while no injector ` +
				`runs: with failurePolicy Ignore, pods created meanwhile start without the sidecar. The ` +
				`chart runs 2 (injector.replicaCount).`).
			Thresholds(thresholds("red", from(1, "green"))).
			Targets(queries(
				instant(`count(collapser_injector_admission_duration_seconds_count) or vector(0)`, "replicas"),
			)),
		graph(52, "Admissions/s by result", l.at(4, 0, 10, 8), units.RequestsPerSecond).
			Description(`Pod creations the injector answered per second, summed over its replicas, by result: ` +
				`injected (the sidecar added), skipped (not opted in, or injected already), rejected (a bad ` +
				`collapser.io/ annotation or a port collision: the pod was refused with the reason) and ` +
				`error (the request or the pod's namespace could not be read). Every result's series is ` +
				`there at 0 from the start. Pods in kube-system and the injector's own namespace never ` +
				`reach it.`).
			Targets(queries(
				series(`sum by (result) (rate(collapser_injector_admissions_total[$__rate_interval]))`, "{{result}}"),
			)),
		graph(53, "Admission latency", l.at(14, 0, 10, 8), units.Seconds).
			Description(`The 95th percentile of the time the injector took to answer one admission, the ` +
				`namespace lookup included, over its replicas (collapser_injector_admission_duration_seconds). ` +
				`Empty while no pod was admitted in the window. The API server waits at most ` +
				`injector.timeoutSeconds, then applies the failurePolicy.`).
			Targets(queries(
				series(`histogram_quantile(0.95, sum by (le) (rate(collapser_injector_admission_duration_seconds_bucket[$__rate_interval])))`, "p95"),
			)),
	}
}
