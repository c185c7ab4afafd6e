package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// streamsPanels returns the panels of the Streams row, replayed server streams:
// requests by outcome, the backend streams they opened against the backend's
// own count, and the streams, readers and bytes held.
func streamsPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		countStat(41, "Stream requests by outcome", l.at(0, 0, 12, 4)).
			Description(`Calls of server-streaming methods whose rule replays them (stream: replay), by how they ` +
				`were served: leader (opened the one backend stream), joined (read a live stream from its ` +
				`first message), replayed (read a kept, ended stream: no backend stream), own (the stream ` +
				`outgrew its record's bounds or answered privately: a backend stream of its own) and error ` +
				`(failed before a path was chosen). ` +
				exactTotal).
			TextMode(common.BigValueTextModeValueAndName).
			Targets(queries(
				instant(`sum by (outcome) (increase(collapser_stream_requests_total{method=~"$method"}[$__range] anchored))`, "{{outcome}}"),
			)),
		countStat(42, "Backend streams: sidecar", l.at(12, 0, 6, 4)).
			Description(`Backend streams the replayed calls opened in the time range: one per leader and one per ` +
				`caller with a stream of its own (collapser_stream_requests_total, outcome leader or own). ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_stream_requests_total{method=~"$method", outcome=~"leader|own"}[$__range] anchored))`, "backend streams"),
			)),
		countStat(43, "Backend streams: backend's own count", l.at(18, 0, 6, 4)).
			Description(`Calls the demo hello backend itself counted in the time range (hello_requests_total) of ` +
				`the methods the sidecars' rules replay now (collapser_method_rule_info{action="replay"}): ` +
				`the independent check of Backend streams; no data with another backend. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(
  increase(hello_requests_total{method=~"$method"}[$__range] anchored)
    and on (method) group by (method) (collapser_method_rule_info{method=~"$method", action="replay"})
)`, "backend's own count"),
			)),
		graph(44, "Stream requests/s by outcome", l.at(0, 4, 6, 8), units.RequestsPerSecond).
			Description(`Calls of replayed streams per second, by outcome (leader, joined, replayed, own, error), ` +
				`when each ended.`).
			Targets(queries(
				series(`sum by (outcome) (rate(collapser_stream_requests_total{method=~"$method"}[$__rate_interval]))`, "{{outcome}}"),
			)),
		graph(45, "Live and held streams", l.at(6, 4, 6, 8), units.Short).
			Description(`Replayed streams reading their backend stream now (live), and ended ones kept for their ` +
				`rule's TTL to be replayed whole (held), per sidecar instance. Not split by method.`).
			Targets(queries(
				series(`sum by (instance) (collapser_streams_live)`, "live {{instance}}"),
				series(`sum by (instance) (collapser_streams_held)`, "held {{instance}}"),
			)),
		graph(46, "Stream readers", l.at(12, 4, 6, 8), units.Short).
			Description(`Callers reading a live replayed stream now, leaders included, per sidecar instance. Not ` +
				`split by method.`).
			Targets(queries(
				series(`sum by (instance) (collapser_stream_readers)`, "{{instance}}"),
			)),
		graph(47, "Recorded stream bytes", l.at(18, 4, 6, 8), units.BytesIEC).
			Description(`Bytes the records of replayed streams hold as allocated (kept records whole, live records' ` +
				`messages), per sidecar instance; bounded per stream by COLLAPSER_STREAM_MAX_BYTES and for ` +
				`the kept ones by COLLAPSER_STREAM_MAX_HELD_BYTES.`).
			Targets(queries(
				series(`sum by (instance) (collapser_stream_recorded_bytes)`, "{{instance}}"),
			)),
	}
}
