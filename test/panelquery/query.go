package panelquery

import (
	"fmt"
	"strconv"
	"time"
)

// DefaultColumnWidth is the width in pixels of one of the 24 grid columns
// of a dashboard on a 1920-pixel-wide screen: a panel's max data points
// when it sets none (Grafana takes the panel's width).
const DefaultColumnWidth = 80

// Settings are what Grafana takes from outside the dashboard.
type Settings struct {
	// Now is when the dashboard is opened: "now" in its time range.
	Now time.Time
	// ScrapeInterval is the data source's scrape interval setting
	// (jsonData.timeInterval); 0 = none (Grafana then assumes
	// DefaultScrapeInterval for $__rate_interval).
	ScrapeInterval time.Duration
	// ColumnWidth is the width in pixels of a grid column; 0 =
	// DefaultColumnWidth.
	ColumnWidth int
}

// Intervals are what Grafana derives for one query.
type Intervals struct {
	// Range is the length of the dashboard's time range ($__range).
	Range time.Duration
	// MaxDataPoints is the resolution the interval is computed for.
	MaxDataPoints int64
	// Interval is the interval the browser asks for (the request's
	// intervalMs), the base of $__rate_interval.
	Interval time.Duration
	// Step is the query's step, also $__interval.
	Step time.Duration
	// RateInterval is $__rate_interval.
	RateInterval time.Duration
}

// Query is one query Grafana sends for a panel.
type Query struct {
	PanelID    int
	PanelTitle string
	PanelType  string
	RefID      string
	Legend     string
	// Format is the target's format: time_series (""), table or heatmap.
	Format string
	// Expr is the target's expression with macros and variables substituted.
	Expr string
	// Instant queries run at End; range queries from Start to End every Step.
	Instant    bool
	Start, End time.Time
	Intervals
}

// Queries returns the queries Grafana sends for every panel of the
// dashboard opened with s, in panel and target order; hidden targets are
// left out.
func (d *Dashboard) Queries(s Settings) ([]Query, error) {
	from, to, err := d.TimeRange(s.Now)
	if err != nil {
		return nil, err
	}
	variables, err := d.VariableValues()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, p := range d.QueryPanels() {
		for _, t := range p.Targets {
			if t.Hide {
				continue
			}
			q, err := query(p, t, from, to, variables, s)
			if err != nil {
				return nil, fmt.Errorf("panel %d %q %s: %w", p.ID, p.Title, t.RefID, err)
			}
			out = append(out, q)
		}
	}
	return out, nil
}

func query(p Panel, t Target, from, to time.Time, variables map[string]string, s Settings) (Query, error) {
	if t.Instant && t.Range {
		return Query{}, fmt.Errorf("both instant and range: not supported")
	}
	iv, err := intervals(to.Sub(from), p, t, s)
	if err != nil {
		return Query{}, err
	}
	values := iv.macros()
	for name, v := range variables {
		values[name] = v
	}
	expr, err := Interpolate(t.Expr, values)
	if err != nil {
		return Query{}, err
	}
	return Query{
		PanelID: p.ID, PanelTitle: p.Title, PanelType: p.Type,
		RefID: t.RefID, Legend: t.LegendFormat, Format: t.Format,
		Expr:      expr,
		Instant:   t.Instant,
		Start:     alignDown(from, iv.Step),
		End:       alignDown(to, iv.Step),
		Intervals: iv,
	}, nil
}

// intervals applies Grafana's rules (see the package documentation).
func intervals(rng time.Duration, p Panel, t Target, s Settings) (Intervals, error) {
	iv := Intervals{Range: rng, MaxDataPoints: int64(p.MaxDataPoints)}
	if iv.MaxDataPoints <= 0 {
		width := s.ColumnWidth
		if width <= 0 {
			width = DefaultColumnWidth
		}
		iv.MaxDataPoints = int64(p.GridPos.W * width)
	}
	if iv.MaxDataPoints <= 0 {
		return Intervals{}, fmt.Errorf("no max data points: the panel has no width")
	}
	panelMin, err := parseInterval(p.Interval)
	if err != nil {
		return Intervals{}, fmt.Errorf("panel min interval: %w", err)
	}
	minStep, err := parseInterval(t.Interval)
	if err != nil {
		return Intervals{}, fmt.Errorf("min step: %w", err)
	}
	perPoint := rng / time.Duration(iv.MaxDataPoints)

	// The browser: range / max data points, rounded, at least the panel's
	// min interval or else the data source's scrape interval.
	lowLimit := panelMin
	if lowLimit == 0 {
		lowLimit = s.ScrapeInterval
	}
	iv.Interval = max(roundInterval(perPoint), lowLimit)

	// The data source: the step, at least the min step (or the browser's
	// interval) and range / safeResolution.
	least := iv.Interval
	if minStep > 0 {
		least = minStep
	}
	step := least
	if perPoint >= least {
		step = roundInterval(perPoint)
	}
	step = max(step, roundInterval(rng/safeResolution))
	if t.IntervalFactor > 1 {
		step *= time.Duration(t.IntervalFactor)
	}
	iv.Step = step

	scrape := minStep
	if scrape == 0 {
		scrape = s.ScrapeInterval
	}
	if scrape == 0 {
		scrape = DefaultScrapeInterval
	}
	iv.RateInterval = max(iv.Interval+scrape, 4*scrape)
	return iv, nil
}

// macros are Grafana's built-in variables for these intervals.
func (iv Intervals) macros() map[string]string {
	rangeS := iv.Range.Round(time.Second) / time.Second
	return map[string]string{
		"__interval":         formatInterval(iv.Step),
		"__interval_ms":      strconv.FormatInt(iv.Step.Milliseconds(), 10),
		"__range":            strconv.FormatInt(int64(rangeS), 10) + "s",
		"__range_s":          strconv.FormatInt(int64(rangeS), 10),
		"__range_ms":         strconv.FormatInt(iv.Range.Milliseconds(), 10),
		"__rate_interval":    iv.RateInterval.String(),
		"__rate_interval_ms": strconv.FormatInt(iv.RateInterval.Milliseconds(), 10),
	}
}

// alignDown rounds t down to a multiple of step since the Unix epoch.
func alignDown(t time.Time, step time.Duration) time.Time {
	return time.Unix(0, t.UnixNano()-t.UnixNano()%int64(step)).UTC()
}
