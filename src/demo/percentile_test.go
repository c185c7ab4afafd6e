package demo

import (
	"testing"
	"time"
)

func TestPercentile_NearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single", ms(7), 99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of even takes lower", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p90 of 1..100", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is max", ms(hundred...), 100, 100 * time.Millisecond},
		{"tiny p is min", ms(1, 2, 3), 0.001, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}
