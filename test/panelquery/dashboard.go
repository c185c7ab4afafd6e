package panelquery

import (
	"encoding/json"
	"fmt"
	"os"
)

// Dashboard is the part of a Grafana dashboard's JSON model that decides
// what its panels ask Prometheus.
type Dashboard struct {
	Time struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	// Panels are the top-level entries, rows included.
	Panels []Panel `json:"panels"`
}

// Panel is a panel or a row of a dashboard.
type Panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		W int `json:"w"`
	} `json:"gridPos"`
	// Interval is the panel's min interval (query options); "" = none.
	Interval string `json:"interval"`
	// MaxDataPoints is the panel's max data points; 0 = its width in pixels.
	MaxDataPoints float64  `json:"maxDataPoints"`
	Targets       []Target `json:"targets"`
	// Panels are a collapsed row's panels.
	Panels []Panel `json:"panels"`
}

// Target is one Prometheus query of a panel.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
	// Instant and Range choose the query kind; neither means range.
	Instant bool `json:"instant"`
	Range   bool `json:"range"`
	// Interval is the query's min step; "" = none.
	Interval string `json:"interval"`
	// IntervalFactor multiplies the step (deprecated in Grafana); 0 = 1.
	IntervalFactor int64  `json:"intervalFactor"`
	LegendFormat   string `json:"legendFormat"`
	Format         string `json:"format"`
	Hide           bool   `json:"hide"`
}

// Variable is a template variable.
type Variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	IncludeAll bool   `json:"includeAll"`
	Multi      bool   `json:"multi"`
	AllValue   string `json:"allValue"`
	// Query is a string or the Prometheus query editor's object; see QueryText.
	Query   json.RawMessage `json:"query"`
	Current struct {
		// Value is a string or a list of strings; "$__all" means All.
		Value json.RawMessage `json:"value"`
	} `json:"current"`
}

// Load reads a dashboard JSON file.
func Load(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	return Parse(b)
}

// Parse decodes a dashboard's JSON model.
func Parse(b []byte) (*Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode dashboard: %w", err)
	}
	return &d, nil
}

// QueryPanels returns the panels that query, in order: every panel but the
// rows, those inside collapsed rows included.
func (d *Dashboard) QueryPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(panels []Panel) {
		for _, p := range panels {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}
