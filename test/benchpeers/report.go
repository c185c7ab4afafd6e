package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// report is everything a benchmark measured, as written to JSON.
type report struct {
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Host      hostInfo         `json:"host"`
	Settings  settings         `json:"settings"`
	Scenarios []scenarioResult `json:"scenarios"`
	// Problems are failed calls and backend counts that cannot be right.
	Problems []string `json:"problems"`
}

// settings are the load settings of the run.
type settings struct {
	Rounds           int     `json:"rounds"`
	DurationSeconds  float64 `json:"duration_seconds"`
	WarmupSeconds    float64 `json:"warmup_seconds"`
	Concurrency      int     `json:"concurrency"`
	Connections      int     `json:"connections"`
	BurstRequests    int     `json:"burst_requests"`
	BurstConnections int     `json:"burst_connections"`
}

// scenarioResult is one scenario's runs and their medians per target.
type scenarioResult struct {
	Scenario   scenario      `json:"scenario"`
	LoadBefore string        `json:"load_average_before"`
	LoadAfter  string        `json:"load_average_after"`
	Runs       []measurement `json:"runs"`
	Medians    []summary     `json:"medians"`
}

// summary holds, in each field of measurement, the median over the rounds of
// one target's runs (counts rounded to whole calls); Errors is their sum.
type summary struct {
	measurement
	Rounds int `json:"rounds"`
}

// newReport starts the report of a benchmark configured by cfg.
func newReport(cfg config, clockTicks int) *report {
	return &report{
		Started: time.Now().UTC(),
		Host:    describeHost(cfg, clockTicks),
		Settings: settings{
			Rounds:           cfg.rounds,
			DurationSeconds:  cfg.duration.Seconds(),
			WarmupSeconds:    cfg.warmup.Seconds(),
			Concurrency:      cfg.concurrency,
			Connections:      1,
			BurstRequests:    cfg.burst.requests,
			BurstConnections: cfg.burst.connections,
		},
		Problems: []string{},
	}
}

// add records a scenario's runs, their medians and their problems.
func (r *report) add(res scenarioResult) {
	for _, name := range targetNames {
		var runs []measurement
		for _, m := range res.Runs {
			if m.Target == name {
				runs = append(runs, m)
			}
		}
		if len(runs) > 0 {
			res.Medians = append(res.Medians, summarize(name, runs))
		}
	}
	r.Problems = append(r.Problems, problems(res.Scenario, res.Runs)...)
	r.Scenarios = append(r.Scenarios, res)
}

// finish stamps the end of the benchmark.
func (r *report) finish() {
	r.Finished = time.Now().UTC()
}

// summarize returns the medians of runs, all of one target.
func summarize(name string, runs []measurement) summary {
	field := func(f func(measurement) float64) float64 {
		v := make([]float64, len(runs))
		for i, m := range runs {
			v[i] = f(m)
		}
		return median(v)
	}
	s := summary{Rounds: len(runs), measurement: measurement{
		Target:        name,
		Requests:      int64(math.Round(field(func(m measurement) float64 { return float64(m.Requests) }))),
		RPS:           field(func(m measurement) float64 { return m.RPS }),
		RatioToDirect: field(func(m measurement) float64 { return m.RatioToDirect }),
		P50Ms:         field(func(m measurement) float64 { return m.P50Ms }),
		P99Ms:         field(func(m measurement) float64 { return m.P99Ms }),
		WallMs:        field(func(m measurement) float64 { return m.WallMs }),
		BackendCPUUs:  field(func(m measurement) float64 { return m.BackendCPUUs }),
		ClientCPUUs:   field(func(m measurement) float64 { return m.ClientCPUUs }),
		BackendCalls:  int64(math.Round(field(func(m measurement) float64 { return float64(m.BackendCalls) }))),
	}}
	for _, m := range runs {
		s.Errors += m.Errors
	}
	if runs[0].ProxyCPUUs != nil {
		us := field(func(m measurement) float64 { return *m.ProxyCPUUs })
		s.ProxyCPUUs = &us
	}
	return s
}

// median returns the middle value of v, the mean of the two middle ones for
// an even count; v is not modified.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// problems returns what in sc's runs makes the numbers suspect: failed
// calls; a target not expected to collapse (not collapser, or payloads that
// never repeat) whose backend count differs from the calls made (then the
// count is not measuring what it should); a collapser that was meant to
// collapse and did not.
func problems(sc scenario, runs []measurement) []string {
	var out []string
	for _, m := range runs {
		where := fmt.Sprintf("%s, %s, round %d", sc.ID, m.Target, m.Round)
		isCollapser := m.Target == targetCollapser || m.Target == targetPeers
		collapses := isCollapser && sc.expectsCollapse()
		switch {
		case m.Errors > 0:
			out = append(out, fmt.Sprintf("%s: %d of %d calls failed", where, m.Errors, m.Requests))
		case !collapses && m.BackendCalls != m.Requests:
			out = append(out, fmt.Sprintf("%s: the backend counted %d calls for %d calls made, without collapsing", where, m.BackendCalls, m.Requests))
		case collapses && m.BackendCalls >= m.Requests:
			out = append(out, fmt.Sprintf("%s: the backend counted %d calls for %d identical calls: nothing was collapsed", where, m.BackendCalls, m.Requests))
		}
	}
	return out
}

// writeJSON writes r to path, creating its directory.
func writeJSON(path string, r *report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
