package panelquery

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultScrapeInterval is the scrape interval Grafana assumes for a data
	// source whose settings give none.
	DefaultScrapeInterval = 15 * time.Second
	// safeResolution is the most points Grafana lets a query return: the
	// step is never below range / safeResolution.
	safeResolution = 11000
	day            = 24 * time.Hour
)

// niceSteps are Grafana's round intervals: a computed interval shorter than
// below becomes to (the first that applies).
var niceSteps = []struct{ below, to time.Duration }{
	{10 * time.Millisecond, time.Millisecond},
	{15 * time.Millisecond, 10 * time.Millisecond},
	{35 * time.Millisecond, 20 * time.Millisecond},
	{75 * time.Millisecond, 50 * time.Millisecond},
	{150 * time.Millisecond, 100 * time.Millisecond},
	{350 * time.Millisecond, 200 * time.Millisecond},
	{750 * time.Millisecond, 500 * time.Millisecond},
	{1500 * time.Millisecond, time.Second},
	{3500 * time.Millisecond, 2 * time.Second},
	{7500 * time.Millisecond, 5 * time.Second},
	{12500 * time.Millisecond, 10 * time.Second},
	{17500 * time.Millisecond, 15 * time.Second},
	{25 * time.Second, 20 * time.Second},
	{45 * time.Second, 30 * time.Second},
	{90 * time.Second, time.Minute},
	{210 * time.Second, 2 * time.Minute},
	{450 * time.Second, 5 * time.Minute},
	{750 * time.Second, 10 * time.Minute},
	{1050 * time.Second, 15 * time.Minute},
	{1500 * time.Second, 20 * time.Minute},
	{2700 * time.Second, 30 * time.Minute},
	{5400 * time.Second, time.Hour},
	{9000 * time.Second, 2 * time.Hour},
	{16200 * time.Second, 3 * time.Hour},
	{32400 * time.Second, 6 * time.Hour},
	{day, 12 * time.Hour},
	{7 * day, day},
	{21 * day, 7 * day},
	{42 * day, 30 * day},
}

// roundInterval rounds a computed interval to one of Grafana's steps.
func roundInterval(d time.Duration) time.Duration {
	for _, s := range niceSteps {
		if d < s.below {
			return s.to
		}
	}
	return 365 * day
}

// formatInterval writes d as Grafana writes $__interval: a whole number of
// its largest unit (5s, 1m, 2h, 1d).
func formatInterval(d time.Duration) string {
	units := []struct {
		unit time.Duration
		name string
	}{{365 * day, "y"}, {day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}}
	for _, u := range units {
		if d >= u.unit {
			return fmt.Sprintf("%d%s", d/u.unit, u.name)
		}
	}
	return "1ms"
}

// parseInterval reads a Grafana interval setting: a duration such as 5s or
// 1d, a bare number of seconds, or the legacy ">5s"; "" is 0.
func parseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(strings.TrimPrefix(s, ">"))
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil {
			return time.Duration(days) * day, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("interval %q: %w", s, err)
	}
	return d, nil
}
