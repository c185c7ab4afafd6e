package dashboard

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/collapser/collapser/test/panelquery"
)

// builtinMacros are Grafana's global variables with a representative value
// of the right kind (durations, numbers) to stand in for them when parsing.
var builtinMacros = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "15m",
	"__interval_ms":   "15000",
	"__range_ms":      "900000",
	"__range_s":       "900",
}

// variableValue is what dashboard variable name expands to: a label value
// naming the variable, so a check can tell which matchers use it.
func variableValue(name string) string {
	return "var_" + name
}

// expandMacros replaces Grafana's built-in macros and the dashboard variables
// in expr so that it can be parsed as PromQL. Any other $name is an error: it
// would reach Prometheus unexpanded.
func expandMacros(expr string, variables map[string]bool) (string, error) {
	values := maps.Clone(builtinMacros)
	for name := range variables {
		values[name] = variableValue(name)
	}
	return panelquery.Interpolate(expr, values)
}

// query is one PromQL expression of the dashboard and where it is.
type query struct {
	where string // "panel 3 \"Requests/s\" A"
	expr  string // as written, macros not expanded
}

// dashboardQueries returns every panel query of the dashboard.
func dashboardQueries(t testing.TB) []query {
	t.Helper()
	var queries []query
	for _, p := range loadPanels(t) {
		for _, q := range prometheusTargets(t, p) {
			queries = append(queries, query{where: panelName(p) + " " + deref(q.RefId), expr: q.Expr})
		}
	}
	return queries
}

// dashboardVariables returns the names of the dashboard's template variables.
func dashboardVariables(t testing.TB) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, v := range loadDashboard(t).Templating.List {
		names[v.Name] = true
	}
	return names
}

// parseQuery expands the macros of q and parses it as PromQL.
func parseQuery(q query, variables map[string]bool) (parser.Expr, error) {
	expanded, err := expandMacros(q.expr, variables)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q.where, err)
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(expanded)
	if err != nil {
		return nil, fmt.Errorf("%s: parse %q: %w", q.where, expanded, err)
	}
	return expr, nil
}

// nodes returns the nodes of type T in expr, in order: its series
// selectors (*parser.VectorSelector) or function calls (*parser.Call).
func nodes[T parser.Node](expr parser.Expr) []T {
	var out []T
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if v, ok := n.(T); ok {
			out = append(out, v)
		}
		return nil
	})
	return out
}

// selectorMetric is the metric name a selector asks for ("" if none).
func selectorMetric(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// metricSelector is one selector of the dashboard with the query it is in.
type metricSelector struct {
	where    string
	metric   string
	matchers []*labels.Matcher // without the metric name
}

// dashboardSelectors parses every dashboard query and returns its selectors,
// plus the metric the method variable's label_values query reads.
func dashboardSelectors(t testing.TB) []metricSelector {
	t.Helper()
	variables := dashboardVariables(t)
	var selectors []metricSelector
	for _, q := range dashboardQueries(t) {
		expr, err := parseQuery(q, variables)
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range nodes[*parser.VectorSelector](expr) {
			s := metricSelector{where: q.where, metric: selectorMetric(vs)}
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					s.matchers = append(s.matchers, m)
				}
			}
			selectors = append(selectors, s)
		}
	}
	source := methodVariableSource(t)
	for _, metric := range source.metrics(t) {
		selectors = append(selectors, metricSelector{
			where:    "variable " + methodVariable,
			metric:   metric,
			matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, source.label, ".+")},
		})
	}
	return selectors
}

// variableSource is what a label_values variable query reads: the values of
// label on the series matchers select.
type variableSource struct {
	matchers []*labels.Matcher
	label    string
}

// methodVariableSource parses the method variable's label_values query.
func methodVariableSource(t testing.TB) variableSource {
	t.Helper()
	for _, v := range loadDashboard(t).Templating.List {
		if v.Name != methodVariable {
			continue
		}
		selector, label, err := panelquery.ParseLabelValues(variableQuery(v))
		if err != nil {
			t.Fatalf("variable %q: %v", v.Name, err)
		}
		matchers, err := parser.NewParser(parser.Options{}).ParseMetricSelector(selector)
		if err != nil {
			t.Fatalf("variable %q: selector %q: %v", v.Name, selector, err)
		}
		return variableSource{matchers: matchers, label: label}
	}
	t.Fatalf("no %q variable", methodVariable)
	return variableSource{}
}

// metrics returns the metric names the source's selector names: its
// __name__ matcher's value, or the alternatives of its regular expression.
func (s variableSource) metrics(t testing.TB) []string {
	t.Helper()
	for _, m := range s.matchers {
		if m.Name != model.MetricNameLabel {
			continue
		}
		switch {
		case m.Type == labels.MatchEqual:
			return []string{m.Value}
		case m.Type == labels.MatchRegexp && len(m.SetMatches()) > 0:
			return m.SetMatches()
		}
		t.Fatalf("variable %q: metric matcher %s names no metrics one by one", methodVariable, m)
	}
	t.Fatalf("variable %q: the selector names no metric", methodVariable)
	return nil
}

// values returns the values of the source's label on the series of
// families that its selector matches, as Prometheus would list them.
func (s variableSource) values(families map[string]*dto.MetricFamily) map[string]bool {
	values := map[string]bool{}
	for name, mf := range families {
		for _, series := range mf.GetMetric() {
			set := map[string]string{model.MetricNameLabel: name}
			for _, l := range series.GetLabel() {
				set[l.GetName()] = l.GetValue()
			}
			if v := set[s.label]; v != "" && matchesAll(s.matchers, set) {
				values[v] = true
			}
		}
	}
	return values
}

// matchesAll reports whether the label set satisfies every matcher.
func matchesAll(matchers []*labels.Matcher, set map[string]string) bool {
	for _, m := range matchers {
		if !m.Matches(set[m.Name]) {
			return false
		}
	}
	return true
}

// usedMetrics returns the sorted, distinct metric names the dashboard selects.
func usedMetrics(selectors []metricSelector) []string {
	set := map[string]bool{}
	for _, s := range selectors {
		set[s.metric] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func TestExpandMacros_StandsInForMacrosAndMarksVariables(t *testing.T) {
	variables := map[string]bool{"method": true}
	in := `rate(x{method=~"${method:regex}"}[$__rate_interval])`
	if got, err := expandMacros(in, variables); err != nil || got != `rate(x{method=~"var_method"}[1m])` {
		t.Errorf("expandMacros(%q) = %q, %v; want the marker and a representative interval", in, got, err)
	}
	if got, err := expandMacros(`x{method=~"$mehtod"}`, variables); err == nil {
		t.Errorf("expandMacros accepted an unknown variable: %q", got)
	}
}

func TestDashboard_EveryQueryParsesAsPromQL(t *testing.T) {
	variables := dashboardVariables(t)
	for _, q := range dashboardQueries(t) {
		expr, err := parseQuery(q, variables)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, vs := range nodes[*parser.VectorSelector](expr) {
			if selectorMetric(vs) == "" {
				t.Errorf("%s: selector %s names no metric", q.where, vs)
			}
		}
		if !strings.Contains(q.expr, "rate(") {
			continue
		}
		if !strings.Contains(q.expr, "$__rate_interval") {
			t.Errorf("%s: rate() without $__rate_interval: %q", q.where, q.expr)
		}
	}
}

func TestDashboard_ShowsEveryMetricOfTheContract(t *testing.T) {
	// The metrics the contract names for dashboards: the sidecar's own, the
	// injector's admissions and the hello backend's request counter, the
	// independent check.
	contract := []string{
		"collapser_requests_total",
		"collapser_backend_calls_total",
		"collapser_backend_call_duration_seconds_bucket",
		"collapser_inflight_keys",
		"collapser_waiters",
		"collapser_cache_entries",
		"collapser_cache_bytes",
		"collapser_backend_calls_queued",
		"collapser_method_rule_info",
		"collapser_policy_reloads_total",
		"collapser_policy_last_reload_successful",
		"collapser_peer_calls_total",
		"collapser_peer_fallbacks_total",
		"collapser_peer_requests_total",
		"collapser_stream_requests_total",
		"collapser_streams_live",
		"collapser_streams_held",
		"collapser_stream_readers",
		"collapser_stream_recorded_bytes",
		"collapser_injector_admissions_total",
		"collapser_injector_admission_duration_seconds_bucket",
		"hello_requests_total",
	}
	used := usedMetrics(dashboardSelectors(t))
	for _, name := range contract {
		if !slices.Contains(used, name) {
			t.Errorf("no query reads %s (used: %v)", name, used)
		}
	}
}
