package main

import (
	"encoding/json"
	"fmt"
)

// dashboardJSON returns the dashboard as its file holds it: indented by two
// spaces, <, > and & written as themselves (PromQL compares with them), and a
// final newline.
func dashboardJSON() ([]byte, error) {
	d, err := collapserDashboard()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return append(unescapeHTML(b), '\n'), nil
}

// htmlEscapes are encoding/json's escapes of <, > and &. The SDK's MarshalJSON
// methods (panels, rows) call json.Marshal, which always writes them, whatever
// an encoder's SetEscapeHTML says.
var htmlEscapes = map[string]byte{`\u003c`: '<', `\u003e`: '>', `\u0026`: '&'}

// unescapeHTML writes <, > and & back as themselves in JSON text. A backslash
// in JSON always starts an escape, so each escape is read whole: `\\u003e`
// (a backslash, then the text u003e) stays as it is.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if i+6 <= len(b) {
			if c, ok := htmlEscapes[string(b[i:i+6])]; ok {
				out = append(out, c)
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
