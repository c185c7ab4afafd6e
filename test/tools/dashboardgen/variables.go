package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

const (
	// datasourceVariableName picks the Prometheus data source; every query uses it.
	datasourceVariableName = "datasource"
	// methodQuery fills the method variable: every method the sidecar
	// answered, the calls of replayed streams as well as the rest.
	methodQuery = `label_values({__name__=~"collapser_requests_total|collapser_stream_requests_total"}, method)`
)

// datasourceVariable chooses among the Prometheus data sources, Grafana's
// default one ("prometheus") first.
func datasourceVariable() cog.Builder[dashboard.VariableModel] {
	return refreshOnLoad{dashboard.NewDatasourceVariableBuilder(datasourceVariableName).
		Label("Data source").
		Type("prometheus").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(false),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("Prometheus")},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr("prometheus")},
		}).
		Hide(dashboard.VariableHideDontHide).
		IncludeAll(false).
		Multi(false).
		Regex("")}
}

// methodVariable selects the methods every panel shows, all of them at first;
// refreshed with the time range, so a method appears once it is called.
func methodVariable() *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder("method").
		Label("Method").
		Datasource(prometheusSource()).
		Definition(methodQuery).
		Query(dashboard.StringOrMap{Map: map[string]any{
			"qryType": 1,
			"query":   methodQuery,
			"refId":   "PrometheusVariableQueryEditor-VariableQuery",
		}}).
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		}).
		Hide(dashboard.VariableHideDontHide).
		IncludeAll(true).
		AllValue(".*").
		Multi(true).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Regex("").
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// refreshOnLoad sets what the datasource variable's builder has no method
// for: its options are read when the dashboard loads, as Grafana saves it.
type refreshOnLoad struct {
	*dashboard.DatasourceVariableBuilder
}

func (b refreshOnLoad) Build() (dashboard.VariableModel, error) {
	v, err := b.DatasourceVariableBuilder.Build()
	v.Refresh = cog.ToPtr(dashboard.VariableRefreshOnDashboardLoad)
	return v, err
}
