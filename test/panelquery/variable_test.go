package panelquery

import (
	"encoding/json"
	"testing"
)

func TestVariable_QueryText(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"string", `"label_values(up, job)"`, "label_values(up, job)"},
		{"query editor object", `{"qryType":1,"query":"label_values(up, job)","refId":"A"}`, "label_values(up, job)"},
		{"none", ``, ""},
		{"neither", `3`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Variable{Query: json.RawMessage(tt.raw)}).QueryText(); got != tt.want {
				t.Errorf("QueryText() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseLabelValues(t *testing.T) {
	tests := []struct {
		query, selector, label string
		ok                     bool
	}{
		{"label_values(up, job)", "up", "job", true},
		{`label_values({__name__=~"a|b"}, method)`, `{__name__=~"a|b"}`, "method", true},
		{`label_values( x{job="a, b"} , instance )`, `x{job="a, b"}`, "instance", true},
		{"label_values(job)", "", "", false},
		{"query_result(up)", "", "", false},
	}
	for _, tt := range tests {
		selector, label, err := ParseLabelValues(tt.query)
		if (err == nil) != tt.ok || selector != tt.selector || label != tt.label {
			t.Errorf("ParseLabelValues(%q) = %q, %q, %v; want %q, %q, ok %v", tt.query, selector, label, err, tt.selector, tt.label, tt.ok)
		}
	}
}
