package main

import (
	"strings"
	"testing"
)

func TestThousands_SeparatesGroupsOfThreeDigits(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestWriteTable_OneRowPerTargetAndTheComparison(t *testing.T) {
	cpu := 12.5
	r := &report{Settings: settings{Rounds: 1, BurstRequests: 10000, Concurrency: 50}}
	r.add(scenarioResult{Scenario: allScenarios[0], Runs: []measurement{
		{Target: targetDirect, Round: 1, RPS: 1000, RatioToDirect: 1, Requests: 10, BackendCalls: 10},
		{Target: targetCollapser, Round: 1, RPS: 800, RatioToDirect: 0.8, Requests: 10, BackendCalls: 10, ProxyCPUUs: &cpu},
	}})
	var b strings.Builder
	if err := writeTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| pass-through | direct    | 1,000 |     1.00 |",
		"| pass-through | collapser |   800 |     0.80 |",
		"| pass-through, distinct payloads: RPS vs direct | 0.80×",
		"| proxy CPU per pass-through call                | 12.5 µs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
