package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// enginePanels returns the panels of the Engine row, the collapsing engine's
// state per sidecar: keys in flight, queued backend calls, waiters and the
// result cache.
func enginePanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		graph(12, "In-flight keys", l.at(0, 0, 6, 8), units.Short).
			Description(`Keys with a backend call in flight, per sidecar instance. Not split by method.`).
			Targets(queries(
				series(`sum by (instance) (collapser_inflight_keys)`, "{{instance}}"),
			)),
		graph(25, "Queued backend calls", l.at(6, 0, 6, 8), units.Short).
			Description(`Backend calls waiting for a slot because COLLAPSER_MAX_BACKEND_CALLS calls are running, ` +
				`per sidecar instance. Above 0 the backend is the bottleneck; a queued call fails with ` +
				`RESOURCE_EXHAUSTED when its callers' deadlines or the backend timeout pass.`).
			Targets(queries(
				series(`sum by (instance) (collapser_backend_calls_queued)`, "{{instance}}"),
			)),
		graph(13, "Waiters", l.at(12, 0, 6, 8), units.Short).
			Description(`Callers waiting for an in-flight backend call they joined, per sidecar instance. Not split ` +
				`by method.`).
			Targets(queries(
				series(`sum by (instance) (collapser_waiters)`, "{{instance}}"),
			)),
		graph(14, "Cache entries & bytes", l.at(18, 0, 6, 8), units.Short).
			Description(`Results held in the result cache (left axis) and their size (right axis), per sidecar instance. Not split by method.`).
			// Bytes (query B) on their own axis, on the right.
			OverrideByQuery("B", []dashboard.DynamicConfigValue{
				{Id: "unit", Value: units.BytesIEC},
				{Id: "custom.axisPlacement", Value: common.AxisPlacementRight},
			}).
			Targets(queries(
				series(`sum by (instance) (collapser_cache_entries)`, "entries {{instance}}"),
				series(`sum by (instance) (collapser_cache_bytes)`, "bytes {{instance}}"),
			)),
	}
}
