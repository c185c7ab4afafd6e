package main

import (
	"slices"
	"strings"
	"testing"
)

func TestWriteComparison_RatiosOfMissToPassThroughAndOfPeersToOneSidecar(t *testing.T) {
	full := benchReport(map[string]map[string]float64{
		"passthrough": {targetCollapser: 20, targetNginx: 30, targetPlain: 25},
		"miss":        {targetCollapser: 22, targetNginx: 33, targetPlain: 25},
		"miss-peers":  {targetCollapser: 24, targetPeers: 60},
	})
	missOnly := benchReport(map[string]map[string]float64{
		"miss": {targetCollapser: 22, targetNginx: 33, targetPlain: 25},
	})
	tests := []struct {
		name  string
		r     *report
		label string
		want  []string // nil: no such row
	}{
		{"pass-through CPU", full, "proxy CPU per pass-through call", []string{"20.0 µs", "30.0 µs", "25.0 µs"}},
		{"miss CPU", full, "proxy CPU per miss", []string{"22.0 µs", "33.0 µs", "25.0 µs"}},
		{"miss over pass-through", full, "miss CPU / pass-through CPU, per call", []string{"1.10×", "1.10×", "1.00×"}},
		{"peers CPU", full, "proxy CPU per miss, 3 peers (summed)", []string{"60.0 µs", "—", "—"}},
		{"one sidecar CPU", full, "proxy CPU per miss without peers, same run", []string{"24.0 µs", "—", "—"}},
		{"peers over one sidecar", full, "3 peers CPU / one sidecar alone CPU, per call", []string{"2.50×", "—", "—"}},
		{"peers RPS", full, "miss with 3 peers: RPS vs direct", []string{"0.50×", "—", "—"}},
		{"a scenario that did not run", full, "hit path, 0 ms backend, c=50: RPS vs direct", nil},
		{"a ratio without its pass-through", missOnly, "miss CPU / pass-through CPU, per call", nil},
		{"the miss without its pass-through", missOnly, "proxy CPU per miss", []string{"22.0 µs", "33.0 µs", "25.0 µs"}},
		{"peers without their scenario", missOnly, "3 peers CPU / one sidecar alone CPU, per call", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeComparison(&b, tt.r)
			got, ok := comparisonCells(b.String(), tt.label)
			if tt.want == nil {
				if ok {
					t.Errorf("row %q = %q, want none:\n%s", tt.label, got, b.String())
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("row %q = %q, want %q:\n%s", tt.label, got, tt.want, b.String())
			}
		})
	}
}

// benchReport returns a report of one round per scenario, with direct and
// the targets given, each with its proxy CPU per call and an RPS half of
// direct's.
func benchReport(cpu map[string]map[string]float64) *report {
	r := &report{Settings: settings{Rounds: 1, BurstRequests: 10000, Concurrency: 50}}
	for _, sc := range allScenarios {
		targets, ok := cpu[sc.ID]
		if !ok {
			continue
		}
		runs := []measurement{{Target: targetDirect, Round: 1, RPS: 1000, RatioToDirect: 1, Requests: 10, BackendCalls: 10}}
		for _, name := range targetNames {
			if us, ok := targets[name]; ok {
				runs = append(runs, measurement{Target: name, Round: 1, RPS: 500, RatioToDirect: 0.5, Requests: 10, BackendCalls: 10, ProxyCPUUs: &us})
			}
		}
		r.add(scenarioResult{Scenario: sc, Runs: runs})
	}
	return r
}

// comparisonCells returns the cells of the row labelled label in a
// Markdown table, the label left out.
func comparisonCells(table, label string) ([]string, bool) {
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) > 1 && cells[0] == label {
			return cells[1:], true
		}
	}
	return nil, false
}
