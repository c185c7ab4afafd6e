package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// The shapes the panels share. Each panel file starts from one of them and
// changes only what is its own (unit, decimals, thresholds …).

// prometheusSource is the Prometheus data source the datasource variable picks,
// used by every panel and query.
func prometheusSource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + datasourceVariableName + "}")}
}

// exactTotal ends the description of every stat that counts with
// increase(...[$__range] anchored): why its number is exact.
const exactTotal = "Exact over the time range: increase(...[$__range] anchored) is each series' last sample " +
	"in the range minus its last one before it (or its first one in it), counter resets included, " +
	"never extrapolated (plain increase() showed about 12,900 for a burst of 10,000). " +
	"The sidecar exports its series at 0 before their first call, and this chart's Prometheus stores " +
	"a 0 at each counter's created timestamp, so series born between two scrapes (a first error, " +
	"a new pod) count from 0 as well. Needs Prometheus 3.16 or later (anchored)."

// countStat is a stat panel of one number over the dashboard's time range: the
// last value of instant queries, whole numbers with thousands separators, blue.
func countStat(id uint32, title string, pos dashboard.GridPos) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Id(id).
		Title(title).
		Datasource(prometheusSource()).
		GridPos(pos).
		Unit(units.LocaleFormat).
		Decimals(0).
		Thresholds(thresholds("blue")).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeNone).
		JustifyMode(common.BigValueJustifyModeAuto).
		Orientation(common.VizOrientationAuto).
		TextMode(common.BigValueTextModeAuto)
}

// graph is a time series panel of range queries in unit: thin lines over a
// light fill from 0 up, every series in the tooltip, largest first.
func graph(id uint32, title string, pos dashboard.GridPos, unit string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Id(id).
		Title(title).
		Datasource(prometheusSource()).
		GridPos(pos).
		Unit(unit).
		DrawStyle(common.GraphDrawStyleLine).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		Min(0).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// thresholds colours a stat: base below the first step, each step's colour
// from its value up.
func thresholds(base string, steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().
		Mode(dashboard.ThresholdsModeAbsolute).
		Steps(append([]dashboard.Threshold{{Color: base}}, steps...))
}

// from is a threshold step: color from value up.
func from(value float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: &value, Color: color}
}

// instant is a query of a stat or table panel: one value per series, at the
// end of the time range.
func instant(expr, legend string) *prometheus.DataqueryBuilder {
	return query(expr, legend).Instant()
}

// series is a query of a time series panel.
func series(expr, legend string) *prometheus.DataqueryBuilder {
	return query(expr, legend).Range()
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(prometheusSource()).
		EditorMode(prometheus.QueryEditorModeCode).
		Expr(expr).
		LegendFormat(legend)
}

// queries names a panel's queries A, B, C … in order.
func queries(qs ...*prometheus.DataqueryBuilder) []cog.Builder[variants.Dataquery] {
	targets := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		targets[i] = q.RefId(string(rune('A' + i)))
	}
	return targets
}
