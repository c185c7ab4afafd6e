package panelquery

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// allValue is the current value of a variable set to All.
const allValue = "$__all"

// reference matches Grafana's variable syntaxes: $name, ${name},
// ${name:format} and [[name]].
var reference = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)(?::(\w+))?\]\]`)

// regexSpecial matches the characters Grafana's Prometheus data source
// escapes in the values of multi-value and All variables.
var regexSpecial = regexp.MustCompile(`[\\^$.|?*+()\[\]{}]`)

// Interpolate replaces every variable reference in expr by its value. A
// name without a value, or a format other than regex or raw, is an error:
// Grafana would send it to Prometheus as written.
func Interpolate(expr string, values map[string]string) (string, error) {
	var problems []string
	out := reference.ReplaceAllStringFunc(expr, func(ref string) string {
		m := reference.FindStringSubmatch(ref)
		name, format := m[1]+m[2]+m[4], m[3]+m[5]
		v, ok := values[name]
		switch {
		case !ok:
			problems = append(problems, "unknown variable "+ref)
			return ref
		case format != "" && format != "regex" && format != "raw":
			problems = append(problems, "unsupported format "+ref)
			return ref
		}
		return v
	})
	if len(problems) > 0 {
		return "", fmt.Errorf("%s in %q", strings.Join(problems, ", "), expr)
	}
	return out, nil
}

// VariableValues returns each template variable's current value as the
// Prometheus data source puts it into a query: All is the variable's
// allValue; one value of a multi-value or All variable is regex-escaped;
// several are (a|b), each escaped.
func (d *Dashboard) VariableValues() (map[string]string, error) {
	values := map[string]string{}
	for _, v := range d.Templating.List {
		if len(v.Current.Value) == 0 {
			continue // no current value: a reference to it is an error
		}
		current, err := currentValues(v)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		switch {
		case len(current) == 1 && current[0] == allValue:
			if v.AllValue == "" {
				return nil, fmt.Errorf("variable %s: All without an allValue (the list of every value) is not supported", v.Name)
			}
			values[v.Name] = v.AllValue
		case len(current) == 1 && !v.Multi && !v.IncludeAll:
			values[v.Name] = current[0]
		default:
			escaped := make([]string, len(current))
			for i, c := range current {
				escaped[i] = regexSpecial.ReplaceAllString(c, `\$0`)
			}
			values[v.Name] = escaped[0]
			if len(escaped) > 1 {
				values[v.Name] = "(" + strings.Join(escaped, "|") + ")"
			}
		}
	}
	return values, nil
}

// currentValues decodes a variable's current value: a string or a list.
func currentValues(v Variable) ([]string, error) {
	var one string
	if err := json.Unmarshal(v.Current.Value, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(v.Current.Value, &many); err != nil || len(many) == 0 {
		return nil, fmt.Errorf("current value %s is neither a string nor a list of strings", v.Current.Value)
	}
	return many, nil
}
