package panelquery

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// labelValuesQuery matches a Prometheus query variable label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)$`)

// QueryText returns the variable's query, written either as a string or as
// the object Grafana's Prometheus query editor saves ({"query": …}); "" when
// it has none.
func (v Variable) QueryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var editor struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &editor) == nil {
		return editor.Query
	}
	return ""
}

// ParseLabelValues splits a label_values(selector, label) variable query
// into its series selector and label.
func ParseLabelValues(query string) (selector, label string, err error) {
	m := labelValuesQuery.FindStringSubmatch(query)
	if m == nil {
		return "", "", fmt.Errorf("variable query %q is not label_values(selector, label)", query)
	}
	return m[1], m[2], nil
}
