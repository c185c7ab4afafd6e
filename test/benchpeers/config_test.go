package main

import (
	"io"
	"slices"
	"testing"
)

func TestCountCPUs_CountsNumbersAndRanges(t *testing.T) {
	for list, want := range map[string]int{"": 0, "1": 1, "0,2": 2, "2-3": 2, "0,2-4": 4} {
		if got, err := countCPUs(list); err != nil || got != want {
			t.Errorf("countCPUs(%q) = %d, %v; want %d", list, got, err, want)
		}
	}
	for _, bad := range []string{"x", "3-1", "1,", "-1"} {
		if _, err := countCPUs(bad); err == nil {
			t.Errorf("countCPUs(%q): no error", bad)
		}
	}
}

func TestSelectScenarios_KeepsTheRunningOrderAndSkipsUnpinnedTwinsWhenNothingIsPinned(t *testing.T) {
	tests := []struct {
		list   string
		pinned bool
		want   []string
	}{
		{"burst, passthrough", true, []string{"passthrough", "burst"}},
		{"miss-peers,passthrough,miss", true, []string{"passthrough", "miss", "miss-peers"}},
		{"", true, []string{"passthrough", "passthrough-unpinned", "miss", "miss-peers", "miss-peers-mtls", "hit-0ms", "hit-50ms", "burst"}},
		{"", false, []string{"passthrough", "miss", "miss-peers", "miss-peers-mtls", "hit-0ms", "hit-50ms", "burst"}},
		{"passthrough-unpinned", false, []string{"passthrough-unpinned"}},
	}
	for _, tt := range tests {
		got, err := selectScenarios(tt.list, tt.pinned)
		if err != nil {
			t.Errorf("selectScenarios(%q, %v): %v", tt.list, tt.pinned, err)
			continue
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("selectScenarios(%q, %v) = %q, want %q", tt.list, tt.pinned, ids, tt.want)
		}
	}
	if _, err := selectScenarios("passthrough,nope", true); err == nil {
		t.Error("an unknown scenario id was accepted")
	}
}

func TestScenarios_OnlyRepeatedPayloadsThroughACollapsingRuleMustCollapse(t *testing.T) {
	want := map[string]bool{"passthrough": false, "passthrough-unpinned": false, "miss": false, "miss-peers": false, "miss-peers-mtls": false,
		"hit-0ms": true, "hit-50ms": true, "burst": true}
	for _, s := range allScenarios {
		if got, ok := want[s.ID]; !ok || got != s.expectsCollapse() {
			t.Errorf("%s: expectsCollapse() = %v, want %v (known: %v)", s.ID, s.expectsCollapse(), got, ok)
		}
	}
}

func TestParseConfig_RequiresAWorkdir(t *testing.T) {
	if _, err := parseConfig(nil, io.Discard); err == nil {
		t.Error("no --workdir was accepted")
	}
	c, err := parseConfig([]string{"--workdir", "w", "--server-cpus", "1", "--scenarios", "passthrough"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if client, server := c.cpus(c.scenarios[0]); client != "" || server != "1" {
		t.Errorf("cpus = %q, %q; want \"\", \"1\"", client, server)
	}
}
