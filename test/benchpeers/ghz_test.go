package main

import (
	"slices"
	"testing"
	"time"
)

func TestParseGhzReport_ReadsCountsErrorsAndPercentiles(t *testing.T) {
	// The shape of ghz v0.120.0's -O json, details left out.
	report := `{"count":1000,"total":2000000000,"rps":500.5,
		"latencyDistribution":[{"percentage":10,"latency":1000},{"percentage":50,"latency":2000000},{"percentage":99,"latency":9000000}],
		"statusCodeDistribution":{"OK":997,"Unavailable":3},"details":[{"latency":1}]}`
	got, err := parseGhzReport([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	want := ghzRun{Requests: 1000, Errors: 3, Wall: 2 * time.Second, RPS: 500.5, P50: 2 * time.Millisecond, P99: 9 * time.Millisecond}
	if got != want {
		t.Errorf("parseGhzReport = %+v, want %+v", got, want)
	}
	if _, err := parseGhzReport([]byte(`{"count":0}`)); err == nil {
		t.Error("a report of no calls was accepted")
	}
}

func TestGhzArgs_SteadyRunsWaitForTheirLastCallsAndBurstsCountCalls(t *testing.T) {
	steady := ghzArgs("h.proto", "o.json", "127.0.0.1:1", load{concurrency: 50, connections: 1, duration: 5 * time.Second, distinct: true})
	for _, want := range [][]string{{"--duration", "5s"}, {"--duration-stop", "wait"}, {"--data", distinctData}, {"--connections", "1"}} {
		if i := slices.Index(steady, want[0]); i < 0 || steady[i+1] != want[1] {
			t.Errorf("steady args %q lack %q", steady, want)
		}
	}
	burst := ghzArgs("h.proto", "o.json", "127.0.0.1:1", load{concurrency: 10000, connections: 20, requests: 10000})
	if i := slices.Index(burst, "--total"); i < 0 || burst[i+1] != "10000" || slices.Contains(burst, "--duration") {
		t.Errorf("burst args %q: want --total 10000 and no --duration", burst)
	}
	if burst[len(burst)-1] != "127.0.0.1:1" {
		t.Errorf("burst args %q do not end with the address", burst)
	}
}
