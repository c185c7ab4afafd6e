package panelquery

import (
	"encoding/json"
	"testing"
)

func TestInterpolate(t *testing.T) {
	values := map[string]string{"method": ".*", "__range": "900s", "__rate_interval": "20s", "__rate_interval_ms": "20000"}
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "dollar", in: `x{method=~"$method"}[$__range]`, want: `x{method=~".*"}[900s]`},
		{name: "braces and format", in: `x{method=~"${method:regex}"}[${__rate_interval}]`, want: `x{method=~".*"}[20s]`},
		{name: "longest name", in: `$__rate_interval_ms / $__rate_interval`, want: `20000 / 20s`},
		{name: "brackets", in: `x{method=~"[[method]]"}`, want: `x{method=~".*"}`},
		{name: "unknown variable", in: `x{method=~"$mehtod"}`, wantErr: true},
		{name: "unknown macro", in: `rate(x[$__rate_intervall])`, wantErr: true},
		{name: "unsupported format", in: `x{method=~"${method:csv}"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Interpolate(tt.in, values)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Interpolate(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestVariableValues(t *testing.T) {
	tests := []struct {
		name     string
		variable Variable
		want     string
		wantErr  bool
	}{
		{name: "All is the allValue", variable: variable(`["$__all"]`, true, true, ".*"), want: ".*"},
		{name: "All as a string", variable: variable(`"$__all"`, false, true, ".+"), want: ".+"},
		{name: "one value of a multi-value variable is escaped", variable: variable(`["/a.B/C"]`, true, true, ""), want: `/a\.B/C`},
		{name: "several values", variable: variable(`["/a.B/C","/a.B/D"]`, true, false, ""), want: `(/a\.B/C|/a\.B/D)`},
		{name: "a plain variable is not escaped", variable: variable(`"prometheus.x"`, false, false, ""), want: "prometheus.x"},
		{name: "All without allValue", variable: variable(`["$__all"]`, true, true, ""), wantErr: true},
		{name: "not a string", variable: variable(`{"a":1}`, false, false, ""), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Dashboard{}
			d.Templating.List = []Variable{tt.variable}
			got, err := d.VariableValues()
			if (err != nil) != tt.wantErr {
				t.Fatalf("VariableValues() error = %v, want error %v", err, tt.wantErr)
			}
			if got["v"] != tt.want {
				t.Errorf("value = %q, want %q", got["v"], tt.want)
			}
		})
	}
}

func variable(current string, multi, includeAll bool, all string) Variable {
	v := Variable{Name: "v", Multi: multi, IncludeAll: includeAll, AllValue: all}
	v.Current.Value = json.RawMessage(current)
	return v
}
