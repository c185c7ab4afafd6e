package panelquery

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// relativeTime matches Grafana's relative times without rounding: now,
// now-15m, now+1h.
var relativeTime = regexp.MustCompile(`^now(?:([+-])(\d+)([smhdwMy]))?$`)

// TimeRange returns the dashboard's time range when it is opened at now.
func (d *Dashboard) TimeRange(now time.Time) (from, to time.Time, err error) {
	if from, err = relativeTo(d.Time.From, now); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("time.from: %w", err)
	}
	if to, err = relativeTo(d.Time.To, now); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("time.to: %w", err)
	}
	if !from.Before(to) {
		return time.Time{}, time.Time{}, fmt.Errorf("time range %s to %s is empty", d.Time.From, d.Time.To)
	}
	return from, to, nil
}

// relativeTo resolves a Grafana relative time such as now-15m at now.
// Rounding (now/d) and absolute times are not supported.
func relativeTo(s string, now time.Time) (time.Time, error) {
	m := relativeTime.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.Time{}, fmt.Errorf("%q is not a relative time such as now-15m", s)
	}
	if m[1] == "" {
		return now, nil
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %w", s, err)
	}
	if m[1] == "-" {
		n = -n
	}
	switch m[3] {
	case "M":
		return now.AddDate(0, n, 0), nil
	case "y":
		return now.AddDate(n, 0, 0), nil
	}
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[3]]
	return now.Add(time.Duration(n) * unit), nil
}
