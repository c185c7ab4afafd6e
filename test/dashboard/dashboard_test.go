package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"go.uber.org/goleak"
)

const (
	// sourcePath is the one source of the dashboard, relative to the repository root.
	sourcePath = "dashboards/collapser.json"
	// chartCopyPath is the Helm chart's copy, written by scripts/dashboards.sh update.
	chartCopyPath = "charts/collapser/dashboards/collapser.json"

	datasourceVariable = "datasource"
	methodVariable     = "method"
	// methodQuery is the query filling the method variable: every method the
	// sidecar answered, the calls of replayed streams as well as the rest.
	methodQuery = `label_values({__name__=~"collapser_requests_total|collapser_stream_requests_total"}, method)`
	// gridColumns is the width of Grafana's dashboard grid.
	gridColumns = 24
	// minSchemaVersion is the oldest dashboard schema we write (Grafana 10.4+).
	minSchemaVersion = 39
)

func TestMain(m *testing.M) {
	// Teach the SDK's decoder the panel and query types (stat, timeseries,
	// prometheus …) so options and targets decode into typed values.
	plugins.RegisterDefaultPlugins()
	goleak.VerifyTestMain(m)
}

// repoRoot is the repository root; this package sits in test/dashboard.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("resolve repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

// readRepoFile returns the content of a file given relative to the repository root.
func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// loadDashboard decodes the source with the SDK's normal decoder. Its strict
// decoder (UnmarshalJSONStrict) is not used: in v0.0.22 it reports an empty,
// non-nil error on success and drops panels.
//
//lint:ignore SA1019 the file is a classic (schemaVersion 39) dashboard, the model Grafana provisions from files; dashboardv2 is another format
func loadDashboard(t testing.TB) grafana.Dashboard {
	t.Helper()
	//lint:ignore SA1019 as above
	var d grafana.Dashboard
	if err := json.Unmarshal(readRepoFile(t, sourcePath), &d); err != nil {
		t.Fatalf("decode %s as a Grafana dashboard: %v", sourcePath, err)
	}
	return d
}

// loadPanels returns the dashboard's panels, rows left out. Every row must
// be expanded (its panels follow it at the top level): an entry that decoded
// as neither a panel nor a row (no "type") fails.
func loadPanels(t testing.TB) []*grafana.Panel {
	t.Helper()
	panels, _ := loadLayout(t)
	return panels
}

// loadLayout returns the dashboard's panels and rows, each in file order.
func loadLayout(t testing.TB) ([]*grafana.Panel, []*grafana.RowPanel) {
	t.Helper()
	d := loadDashboard(t)
	var panels []*grafana.Panel
	var rows []*grafana.RowPanel
	for i, p := range d.Panels {
		switch {
		case p.Panel != nil:
			panels = append(panels, p.Panel)
		case p.RowPanel != nil:
			rows = append(rows, p.RowPanel)
		default:
			t.Fatalf("panels[%d] is neither a panel nor a row (no type)", i)
		}
	}
	return panels, rows
}

// panelName names a panel in failure messages.
func panelName(p *grafana.Panel) string {
	title := "<untitled>"
	if p.Title != nil {
		title = *p.Title
	}
	id := "<no id>"
	if p.Id != nil {
		id = fmt.Sprint(*p.Id)
	}
	return fmt.Sprintf("panel %s %q", id, title)
}

// prometheusTargets returns the panel's targets as Prometheus queries.
func prometheusTargets(t testing.TB, p *grafana.Panel) []*prometheus.Dataquery {
	t.Helper()
	queries := make([]*prometheus.Dataquery, 0, len(p.Targets))
	for i, target := range p.Targets {
		q, ok := target.(*prometheus.Dataquery)
		if !ok {
			t.Fatalf("%s: targets[%d] decoded as %T, want a Prometheus query", panelName(p), i, target)
		}
		queries = append(queries, q)
	}
	return queries
}

func TestDashboard_DecodesAndPassesGrafanaValidation(t *testing.T) {
	raw := readRepoFile(t, sourcePath)
	var shape struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Fatalf("decode %s: %v", sourcePath, err)
	}
	d := loadDashboard(t)
	if err := d.Validate(); err != nil {
		t.Fatalf("Grafana dashboard validation: %v", err)
	}
	if len(d.Panels) != len(shape.Panels) {
		t.Fatalf("decoded %d panels, the JSON has %d", len(d.Panels), len(shape.Panels))
	}
	panels := loadPanels(t)
	if len(panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	for _, p := range panels {
		queries := prometheusTargets(t, p)
		if len(queries) == 0 {
			t.Errorf("%s has no queries", panelName(p))
		}
		refIDs := map[string]bool{}
		for i, q := range queries {
			if q.Expr == "" {
				t.Errorf("%s: targets[%d] has an empty expr", panelName(p), i)
			}
			if refIDs[deref(q.RefId)] {
				t.Errorf("%s: refId %q used twice", panelName(p), deref(q.RefId))
			}
			refIDs[deref(q.RefId)] = true
		}
	}
}

func TestDashboard_SettingsMatchTheBrief(t *testing.T) {
	d := loadDashboard(t)
	tests := []struct {
		name, got, want string
	}{
		{"uid", deref(d.Uid), "collapser"},
		{"title", deref(d.Title), "Collapser"},
		{"refresh", deref(d.Refresh), "5s"},
		{"time.from", timeFrom(d.Time), "now-15m"},
		{"time.to", timeTo(d.Time), "now"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if d.SchemaVersion < minSchemaVersion {
		t.Errorf("schemaVersion = %d, want >= %d", d.SchemaVersion, minSchemaVersion)
	}
}

func TestDashboard_TemplateVariablesSelectDatasourceAndMethods(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]grafana.VariableModel{}
	for _, v := range d.Templating.List {
		if _, dup := vars[v.Name]; dup {
			t.Errorf("variable %q defined twice", v.Name)
		}
		vars[v.Name] = v
	}

	ds, ok := vars[datasourceVariable]
	if !ok {
		t.Fatalf("no %q variable", datasourceVariable)
	}
	if ds.Type != grafana.VariableTypeDatasource || variableQuery(ds) != "prometheus" {
		t.Errorf("variable %q: type %q query %q, want a datasource variable of type prometheus", ds.Name, ds.Type, variableQuery(ds))
	}

	m, ok := vars[methodVariable]
	if !ok {
		t.Fatalf("no %q variable", methodVariable)
	}
	if m.Type != grafana.VariableTypeQuery {
		t.Errorf("variable %q: type %q, want query", m.Name, m.Type)
	}
	if got := variableQuery(m); got != methodQuery {
		t.Errorf("variable %q: query %q, want %q", m.Name, got, methodQuery)
	}
	if !usesDatasourceVariable(m.Datasource) {
		t.Errorf("variable %q: datasource %s, want the prometheus ${%s} variable", m.Name, describeRef(m.Datasource), datasourceVariable)
	}
	if !derefBool(m.IncludeAll) || !derefBool(m.Multi) {
		t.Errorf("variable %q: includeAll=%v multi=%v, want both true", m.Name, derefBool(m.IncludeAll), derefBool(m.Multi))
	}
}

func TestDashboard_PanelIDsAreUnique(t *testing.T) {
	panels, rows := loadLayout(t)
	seen := map[uint32]string{}
	for _, r := range rows {
		if other, dup := seen[r.Id]; dup {
			t.Errorf("%s reuses the id of %s", rowName(r), other)
		}
		seen[r.Id] = rowName(r)
	}
	for _, p := range panels {
		if p.Id == nil {
			t.Errorf("%s has no id", panelName(p))
			continue
		}
		if other, dup := seen[*p.Id]; dup {
			t.Errorf("%s reuses the id of %s", panelName(p), other)
		}
		seen[*p.Id] = panelName(p)
	}
}

func TestDashboard_RowsAreExpandedFullWidthHeadings(t *testing.T) {
	panels, rows := loadLayout(t)
	if len(rows) == 0 {
		t.Fatal("the dashboard has no rows")
	}
	top := rows[0].GridPos
	for _, r := range rows {
		g := r.GridPos
		switch {
		case r.Title == nil || *r.Title == "":
			t.Errorf("%s has no title", rowName(r))
		case r.Collapsed || len(r.Panels) > 0:
			t.Errorf("%s is collapsed or holds panels: keep rows expanded, their panels at the top level", rowName(r))
		case g == nil || g.H != 1 || g.W != gridColumns || g.X != 0:
			t.Errorf("%s: gridPos %+v, want a full-width heading (h=1, w=%d, x=0)", rowName(r), g, gridColumns)
		}
	}
	for _, p := range panels {
		if top != nil && p.GridPos != nil && p.GridPos.Y < top.Y {
			t.Errorf("%s is above the first row: every panel belongs to a row", panelName(p))
		}
	}
}

func rowName(r *grafana.RowPanel) string {
	return fmt.Sprintf("row %d %q", r.Id, deref(r.Title))
}

func TestDashboard_PanelsQueryThroughTheDatasourceVariable(t *testing.T) {
	for _, p := range loadPanels(t) {
		if !usesDatasourceVariable(p.Datasource) {
			t.Errorf("%s: datasource %s, want the prometheus ${%s} variable", panelName(p), describeRef(p.Datasource), datasourceVariable)
		}
		for _, q := range prometheusTargets(t, p) {
			if q.Datasource != nil && !usesDatasourceVariable(q.Datasource) {
				t.Errorf("%s: query %s: datasource %s, want the prometheus ${%s} variable", panelName(p), deref(q.RefId), describeRef(q.Datasource), datasourceVariable)
			}
		}
	}
}

func TestDashboard_PanelsFitTheGridWithoutOverlapping(t *testing.T) {
	panels, rows := loadLayout(t)
	for _, r := range rows {
		if r.GridPos != nil {
			panels = append(panels, &grafana.Panel{Id: &r.Id, Title: r.Title, GridPos: r.GridPos})
		}
	}
	for _, p := range panels {
		g := p.GridPos
		switch {
		case g == nil:
			t.Errorf("%s has no gridPos", panelName(p))
		case g.W == 0 || g.H == 0:
			t.Errorf("%s: gridPos %+v has no area", panelName(p), *g)
		case g.X+g.W > gridColumns:
			t.Errorf("%s: gridPos x=%d w=%d ends past column %d", panelName(p), g.X, g.W, gridColumns)
		}
	}
	for i, a := range panels {
		for _, b := range panels[i+1:] {
			if a.GridPos != nil && b.GridPos != nil && overlap(*a.GridPos, *b.GridPos) {
				t.Errorf("%s %+v overlaps %s %+v", panelName(a), *a.GridPos, panelName(b), *b.GridPos)
			}
		}
	}
}

// overlap reports whether two grid rectangles share any cell.
func overlap(a, b grafana.GridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// usesDatasourceVariable reports whether ref is the prometheus datasource
// chosen by the datasource variable.
func usesDatasourceVariable(ref *common.DataSourceRef) bool {
	if ref == nil || deref(ref.Type) != "prometheus" {
		return false
	}
	uid := deref(ref.Uid)
	return uid == "$"+datasourceVariable || uid == "${"+datasourceVariable+"}"
}

func describeRef(ref *common.DataSourceRef) string {
	if ref == nil {
		return "<none>"
	}
	return fmt.Sprintf("{type %q uid %q}", deref(ref.Type), deref(ref.Uid))
}

// variableQuery returns a variable's query, written either as a string or as
// the object Grafana's Prometheus query editor saves ({"query": …}).
func variableQuery(v grafana.VariableModel) string {
	switch {
	case v.Query == nil:
		return ""
	case v.Query.String != nil:
		return *v.Query.String
	default:
		s, _ := v.Query.Map["query"].(string)
		return s
	}
}

func timeFrom(t *grafana.DashboardDashboardTime) string {
	if t == nil {
		return ""
	}
	return t.From
}

func timeTo(t *grafana.DashboardDashboardTime) string {
	if t == nil {
		return ""
	}
	return t.To
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefBool(b *bool) bool {
	return b != nil && *b
}
