package main

import (
	"io"
	"testing"
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
