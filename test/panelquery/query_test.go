package panelquery

import (
	"testing"
	"time"
)

// testDashboard has a row, an instant stat, a range time series and a
// hidden target.
const testDashboard = `{
  "time": {"from": "now-15m", "to": "now"},
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "current": {"text": "Prometheus", "value": "prometheus"}},
    {"name": "method", "type": "query", "multi": true, "includeAll": true, "allValue": ".*", "current": {"value": ["$__all"]}}
  ]},
  "panels": [
    {"id": 1, "type": "row", "title": "Totals", "gridPos": {"w": 24}, "panels": []},
    {"id": 2, "type": "stat", "title": "Requests", "gridPos": {"w": 4},
     "targets": [{"refId": "A", "expr": "sum(increase(x{method=~\"$method\"}[$__range] anchored))", "instant": true}]},
    {"id": 3, "type": "timeseries", "title": "Requests/s", "gridPos": {"w": 12},
     "targets": [
       {"refId": "A", "expr": "sum(rate(x{method=~\"$method\"}[$__rate_interval]))", "range": true, "legendFormat": "requests/s"},
       {"refId": "B", "expr": "up", "hide": true}
     ]},
    {"id": 4, "type": "row", "title": "Collapsed", "collapsed": true, "gridPos": {"w": 24}, "panels": [
      {"id": 5, "type": "timeseries", "title": "Inside", "gridPos": {"w": 24}, "targets": [{"refId": "A", "expr": "y[$__interval]"}]}
    ]}
  ]
}`

func TestQueries_AsGrafanaSendsThem(t *testing.T) {
	d, err := Parse([]byte(testDashboard))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 31, 12, 0, 7, 300e6, time.UTC) // 12:00:07.3
	queries, err := d.Queries(Settings{Now: now, ScrapeInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	aligned := time.Date(2026, 3, 31, 12, 0, 5, 0, time.UTC) // rounded down to the 5s step
	want := []Query{
		{PanelID: 2, PanelTitle: "Requests", PanelType: "stat", RefID: "A",
			Expr: `sum(increase(x{method=~".*"}[900s] anchored))`, Instant: true},
		{PanelID: 3, PanelTitle: "Requests/s", PanelType: "timeseries", RefID: "A", Legend: "requests/s",
			Expr: `sum(rate(x{method=~".*"}[20s]))`},
		{PanelID: 5, PanelTitle: "Inside", PanelType: "timeseries", RefID: "A", Expr: `y[5s]`},
	}
	if len(queries) != len(want) {
		t.Fatalf("%d queries, want %d: %+v", len(queries), len(want), queries)
	}
	for i, q := range queries {
		w := want[i]
		if q.PanelID != w.PanelID || q.PanelTitle != w.PanelTitle || q.PanelType != w.PanelType || q.RefID != w.RefID ||
			q.Legend != w.Legend || q.Expr != w.Expr || q.Instant != w.Instant {
			t.Errorf("query %d = %+v, want %+v", i, q, w)
		}
		if !q.End.Equal(aligned) || !q.Start.Equal(aligned.Add(-15*time.Minute)) || q.Step != 5*time.Second {
			t.Errorf("query %d runs %v to %v every %v, want %v to %v every 5s", i, q.Start, q.End, q.Step, aligned.Add(-15*time.Minute), aligned)
		}
	}
}

func TestQueries_RejectUnknownVariables(t *testing.T) {
	d, err := Parse([]byte(`{"time": {"from": "now-15m", "to": "now"},
	  "panels": [{"id": 1, "type": "stat", "gridPos": {"w": 4}, "targets": [{"refId": "A", "expr": "x{m=\"$nope\"}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Queries(Settings{Now: time.Now()}); err == nil {
		t.Error("Queries accepted a query with an unknown variable")
	}
}
