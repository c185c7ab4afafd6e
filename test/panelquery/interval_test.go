package panelquery

import (
	"testing"
	"time"
)

func TestRoundInterval(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{5 * time.Millisecond, time.Millisecond},
		{749 * time.Millisecond, 500 * time.Millisecond},
		{750 * time.Millisecond, time.Second}, // 15m over 1200 points
		{4 * time.Second, 5 * time.Second},
		{86400 * time.Millisecond, time.Minute},       // 24h over 1000 points
		{604800 * time.Millisecond, 10 * time.Minute}, // 7d over 1000 points
		{100 * day, 365 * day},
	}
	for _, tt := range tests {
		if got := roundInterval(tt.in); got != tt.want {
			t.Errorf("roundInterval(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestFormatInterval(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{5 * time.Second, "5s"},
		{90 * time.Second, "1m"},
		{1500 * time.Millisecond, "1s"},
		{2 * day, "2d"},
		{500 * time.Microsecond, "1ms"},
	}
	for _, tt := range tests {
		if got := formatInterval(tt.in); got != tt.want {
			t.Errorf("formatInterval(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "5s", want: 5 * time.Second},
		{in: "15", want: 15 * time.Second},
		{in: ">10s", want: 10 * time.Second},
		{in: "1d", want: day},
		{in: "soon", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseInterval(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseInterval(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestIntervals_FollowGrafanasRules(t *testing.T) {
	const s5 = 5 * time.Second
	tests := []struct {
		name              string
		rng               time.Duration
		panel             Panel
		target            Target
		scrape            time.Duration
		interval, step    time.Duration
		rate              time.Duration
		wantMaxDataPoints int64
	}{
		{name: "15m on a half-width panel, 5s scrape: the scrape interval is the floor",
			rng: 15 * time.Minute, panel: panelOfWidth(12), scrape: s5,
			interval: s5, step: s5, rate: 20 * time.Second, wantMaxDataPoints: 960},
		{name: "no scrape interval in the data source: 15s assumed for the rate interval",
			rng: 15 * time.Minute, panel: panelOfWidth(12),
			interval: time.Second, step: time.Second, rate: time.Minute, wantMaxDataPoints: 960},
		{name: "24h over 1000 points",
			rng: 24 * time.Hour, panel: Panel{MaxDataPoints: 1000}, scrape: 15 * time.Second,
			interval: time.Minute, step: time.Minute, rate: 75 * time.Second, wantMaxDataPoints: 1000},
		{name: "7d over 1000 points",
			rng: 7 * day, panel: Panel{MaxDataPoints: 1000}, scrape: s5,
			interval: 10 * time.Minute, step: 10 * time.Minute, rate: 10*time.Minute + s5, wantMaxDataPoints: 1000},
		{name: "the panel's min interval wins over the scrape interval",
			rng: 15 * time.Minute, panel: Panel{Interval: "30s", MaxDataPoints: 960}, scrape: s5,
			interval: 30 * time.Second, step: 30 * time.Second, rate: 35 * time.Second, wantMaxDataPoints: 960},
		{name: "the target's min step sets the step and stands for the scrape interval",
			rng: 15 * time.Minute, panel: panelOfWidth(12), target: Target{Interval: "1m"}, scrape: s5,
			interval: s5, step: time.Minute, rate: 4 * time.Minute, wantMaxDataPoints: 960},
		{name: "interval factor",
			rng: 15 * time.Minute, panel: panelOfWidth(12), target: Target{IntervalFactor: 2}, scrape: s5,
			interval: s5, step: 10 * time.Second, rate: 20 * time.Second, wantMaxDataPoints: 960},
		{name: "never more than 11,000 points",
			rng: 30 * day, panel: Panel{MaxDataPoints: 100000}, scrape: s5,
			interval: 30 * time.Second, step: 5 * time.Minute, rate: 35 * time.Second, wantMaxDataPoints: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := intervals(tt.rng, tt.panel, tt.target, Settings{ScrapeInterval: tt.scrape})
			if err != nil {
				t.Fatal(err)
			}
			want := Intervals{Range: tt.rng, MaxDataPoints: tt.wantMaxDataPoints, Interval: tt.interval, Step: tt.step, RateInterval: tt.rate}
			if got != want {
				t.Errorf("intervals = %+v, want %+v", got, want)
			}
		})
	}
}

func TestIntervals_MacrosAreWrittenAsGrafanaWritesThem(t *testing.T) {
	iv := Intervals{Range: 15 * time.Minute, Step: 5 * time.Second, RateInterval: 75 * time.Second}
	want := map[string]string{
		"__interval": "5s", "__interval_ms": "5000",
		"__range": "900s", "__range_s": "900", "__range_ms": "900000",
		"__rate_interval": "1m15s", "__rate_interval_ms": "75000",
	}
	got := iv.macros()
	for name, v := range want {
		if got[name] != v {
			t.Errorf("$%s = %q, want %q", name, got[name], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("macros %v, want exactly %v", got, want)
	}
}

func panelOfWidth(w int) Panel {
	var p Panel
	p.GridPos.W = w
	return p
}
