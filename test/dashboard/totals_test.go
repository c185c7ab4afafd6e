package dashboard

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/collapser/collapser/test/panelquery"
)

// chartValuesPath holds the chart's default scrape interval, which is also
// the scrape interval of the Grafana data source the chart provisions.
const chartValuesPath = "charts/collapser/values.yaml"

// TestDashboard_TotalsAreExactOverTheTimeRange keeps the totals exact: a
// stat or table panel asks one instant query, and every increase() counts
// over the whole time range without extrapolation ([$__range] anchored).
// rate() belongs in time series, whose last value after a burst is 0.
func TestDashboard_TotalsAreExactOverTheTimeRange(t *testing.T) {
	wantRange, err := time.ParseDuration(builtinMacros["__range"])
	if err != nil {
		t.Fatal(err)
	}
	variables := dashboardVariables(t)
	for _, p := range loadPanels(t) {
		instantPanel := p.Type == "stat" || p.Type == "table"
		for _, q := range prometheusTargets(t, p) {
			where := panelName(p) + " " + deref(q.RefId)
			if instant := derefBool(q.Instant) && !derefBool(q.Range); instant != instantPanel {
				t.Errorf("%s: instant=%v range=%v; want an instant query in stat and table panels, a range query elsewhere", where, derefBool(q.Instant), derefBool(q.Range))
			}
			expr, err := parseQuery(query{where: where, expr: q.Expr}, variables)
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range nodes[*parser.Call](expr) {
				switch name := call.Func.Name; {
				case name == "increase":
					m, ok := call.Args[0].(*parser.MatrixSelector)
					if !ok || m.Range != wantRange || !m.VectorSelector.(*parser.VectorSelector).Anchored {
						t.Errorf("%s: %s is not increase(...[$__range] anchored): it would extrapolate or miss part of the range", where, call)
					}
				case instantPanel && (name == "rate" || name == "irate"):
					t.Errorf("%s: %s in a %s panel: show a total over the range, rates in time series", where, call, p.Type)
				}
			}
		}
	}
}

// TestDashboard_GrafanaComputesA20sRateIntervalAtTheDefaultRange works out
// $__rate_interval as Grafana does (package panelquery) with the scrape
// interval the chart provisions: 4 scrapes per rate window and one point
// per scrape, on screens 960 to 3,840 pixels wide.
func TestDashboard_GrafanaComputesA20sRateIntervalAtTheDefaultRange(t *testing.T) {
	var values struct {
		Prometheus struct {
			ScrapeInterval string `json:"scrapeInterval"`
		} `json:"prometheus"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, chartValuesPath), &values); err != nil {
		t.Fatalf("%s: %v", chartValuesPath, err)
	}
	scrape, err := time.ParseDuration(values.Prometheus.ScrapeInterval)
	if err != nil {
		t.Fatalf("%s: prometheus.scrapeInterval: %v", chartValuesPath, err)
	}
	d, err := panelquery.Parse(readRepoFile(t, sourcePath))
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{40, panelquery.DefaultColumnWidth, 160} {
		queries, err := d.Queries(panelquery.Settings{Now: time.Now(), ScrapeInterval: scrape, ColumnWidth: width})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range queries {
			if q.Instant {
				continue
			}
			if q.Step != scrape || q.RateInterval != 4*scrape {
				t.Errorf("%d px per column: panel %d %q %s: step %v, $__rate_interval %v; want %v and %v", width, q.PanelID, q.PanelTitle, q.RefID, q.Step, q.RateInterval, scrape, 4*scrape)
			}
		}
	}
}
