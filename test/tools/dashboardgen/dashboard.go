//lint:file-ignore SA1019 a classic (schemaVersion 39) dashboard, the model Grafana provisions from files; dashboardv2 is another format

package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Settings of the dashboard as a whole.
const (
	dashboardUID   = "collapser"
	dashboardTitle = "Collapser"
	// schemaVersion is Grafana 10.4's dashboard schema, the oldest we write
	// (later Grafanas migrate it as they load it); the SDK's builder writes 42.
	schemaVersion        = 39
	dashboardDescription = "Request collapsing by the collapser gRPC sidecar: exact totals over the time range, " +
		"how requests are served per second, the backend load it saves, backend latency, the engine's state, " +
		"the policy's decision per method, collapsing across replicas, replayed streams and the sidecar injector's admissions."
)

// rows are the dashboard's rows, top to bottom: a full-width heading each,
// then the panels its panels function places below it.
var rows = []struct {
	id     uint32
	title  string
	panels func(*layout) []cog.Builder[dashboard.Panel]
}{
	{15, "Totals over the time range", totalsPanels},
	{22, "Rates", ratesPanels},
	{23, "Backend", backendPanels},
	{24, "Engine", enginePanels},
	{26, "Policy", policyPanels},
	{30, "Replicas", replicasPanels},
	{40, "Streams", streamsPanels},
	{50, "Injector", injectorPanels},
}

// collapserDashboard builds the dashboard and checks it with the SDK's validation.
func collapserDashboard() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder(dashboardTitle).
		Uid(dashboardUID).
		Description(dashboardDescription).
		Tags([]string{"collapser", "grpc"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-15m", "now").
		Timezone("browser").
		Timepicker(dashboard.NewTimePickerBuilder().RefreshIntervals([]string{"5s", "10s", "30s", "1m", "5m"})).
		Refresh("5s").
		FiscalYearStartMonth(0).
		WeekStart("").
		Version(1).
		Annotation(builtInAnnotations()).
		WithVariable(datasourceVariable()).
		WithVariable(methodVariable())
	l := &layout{}
	for _, r := range rows {
		b.WithRow(l.row(r.id, r.title))
		for _, p := range r.panels(l) {
			b.WithPanel(p)
		}
	}
	d, err := b.Build()
	if err != nil {
		return d, err
	}
	d.SchemaVersion = schemaVersion
	omitDefaults(&d)
	return d, d.Validate()
}

// builtInAnnotations is the annotation every Grafana dashboard has: the
// dashboard's own annotations and alerts, its toggle hidden.
func builtInAnnotations() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name("Annotations & Alerts").
		Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
		Enable(true).
		Hide(true).
		IconColor("rgba(0, 211, 255, 1)").
		Type("dashboard").
		BuiltIn(1)
}
