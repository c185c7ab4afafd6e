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
	ids := func(ss []scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	got, err := selectScenarios("burst, passthrough", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"passthrough", "burst"}; !slices.Equal(ids(got), want) {
		t.Errorf("selected %q, want %q", ids(got), want)
	}
	all, _ := selectScenarios("", true)
	unpinnedOff, _ := selectScenarios("", false)
	if len(all) != len(allScenarios) || slices.Contains(ids(unpinnedOff), "passthrough-unpinned") {
		t.Errorf("default selection: pinned %q, not pinned %q", ids(all), ids(unpinnedOff))
	}
	if _, err := selectScenarios("passthrough,nope", true); err == nil {
		t.Error("an unknown scenario id was accepted")
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
