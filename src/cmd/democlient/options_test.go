package main

import (
	"io"
	"testing"
	"time"
)

func TestParseOptions_BackendMetricsReplacesTheStatsAddress(t *testing.T) {
	tests := []struct {
		args               []string
		backend, byMetrics string
	}{
		{nil, "localhost:50051", ""},
		{[]string{"--backend", "b:1"}, "b:1", ""},
		{[]string{"--backend-metrics", "http://m:2113/metrics"}, "", "http://m:2113/metrics"},
	}
	for _, tt := range tests {
		o, err := parseOptions(tt.args, io.Discard, io.Discard)
		if err != nil || o.demo.Backend != tt.backend || o.demo.BackendMetrics != tt.byMetrics {
			t.Errorf("parseOptions(%q) = backend %q, metrics %q, %v; want %q, %q", tt.args, o.demo.Backend, o.demo.BackendMetrics, err, tt.backend, tt.byMetrics)
		}
	}
}

func TestParseOptions_RateMakesASteadyLoadOverKeys(t *testing.T) {
	o, err := parseOptions([]string{"--rate", "500", "--duration", "2m", "--keys", "400"}, io.Discard, io.Discard)
	if err != nil || o.demo.Rate != 500 || o.demo.Duration != 2*time.Minute || o.demo.Keys != 400 {
		t.Errorf("parseOptions = rate %d, duration %s, keys %d, %v; want 500, 2m, 400", o.demo.Rate, o.demo.Duration, o.demo.Keys, err)
	}
}
