package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/retry"

	"github.com/collapser/collapser/test/panelquery"
)

// view is what the dashboard shows when opened at one moment.
type view struct {
	at time.Time // the instant queries' evaluation time
	// intervals are the range queries' ($__range, step, $__rate_interval).
	intervals panelquery.Intervals
	queries   map[string]panelquery.Query
	results   map[string][]panelquery.Series // by panel title and refId
}

func viewKey(panel, refID string) string { return panel + " " + refID }

// The Prometheus jobs a dashboard view waits for: the demo release's
// sidecars and backends, or the injector release's injectors.
var (
	proxyJobs    = []string{"collapser", "hello-backend"}
	injectorJobs = []string{"collapser-injector"}
)

// openDashboard waits until Prometheus has scraped every job of jobs after
// the given moment, then evaluates every query of the
// dashboard opened now, as Grafana computes them (package panelquery). A
// query Prometheus rejects fails the test at once.
func openDashboard(t *testing.T, prom panelquery.Client, d *panelquery.Dashboard, scrape time.Duration, after time.Time, jobs []string) view {
	t.Helper()
	// The last scrape of each job before the queries' time.
	freshness := fmt.Sprintf(`min by (job) (timestamp(up{job=~%q}))`, strings.Join(jobs, "|"))
	// The next scrape of each, within a dozen scrape intervals.
	got := retry.DoWithRetryInterface(t, "Prometheus scraped after "+after.Format(time.TimeOnly), 12, scrape, func() (any, error) {
		queries, err := d.Queries(panelquery.Settings{Now: time.Now(), ScrapeInterval: scrape})
		if err != nil {
			return nil, retry.FatalError{Underlying: err}
		}
		at := queries[0].End
		for _, q := range queries {
			at = minTime(at, q.End)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		last, err := prom.Instant(ctx, freshness, at)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, s := range last {
			if lastValue(s) >= float64(after.Add(scrapeMargin).UnixMilli())/1000 {
				fresh++
			}
		}
		if fresh != len(jobs) {
			return nil, fmt.Errorf("by %v, not every job of %v was scraped %v after %v: last scrapes %v", at.Format(time.TimeOnly), jobs, scrapeMargin, after.Format(time.TimeOnly), last)
		}
		v := view{at: at, queries: map[string]panelquery.Query{}, results: map[string][]panelquery.Series{}}
		for _, q := range queries {
			if !q.Instant {
				v.intervals = q.Intervals
			}
			series, err := prom.Run(ctx, q)
			if err != nil {
				return nil, retry.FatalError{Underlying: fmt.Errorf("panel %q %s: %w", q.PanelTitle, q.RefID, err)}
			}
			v.queries[viewKey(q.PanelTitle, q.RefID)] = q
			v.results[viewKey(q.PanelTitle, q.RefID)] = series
		}
		return v, nil
	})
	return got.(view)
}

// total is the value a stat panel shows: its query A's one sample.
func (v view) total(panel string) (float64, error) {
	series := v.results[viewKey(panel, "A")]
	if len(series) != 1 || len(series[0].Samples) != 1 {
		return 0, fmt.Errorf("no single value: %v", series)
	}
	return series[0].Samples[0].Value, nil
}

// peak is the highest value of a query's series summed at each step.
func (v view) peak(panel, refID string) (float64, error) {
	series, ok := v.results[viewKey(panel, refID)]
	if !ok || len(series) == 0 {
		return 0, fmt.Errorf("%s: no data", refID)
	}
	sums := map[time.Time]float64{}
	for _, s := range series {
		for _, sample := range s.Samples {
			if !math.IsNaN(sample.Value) {
				sums[sample.Time] += sample.Value
			}
		}
	}
	peak := math.Inf(-1)
	for _, sum := range sums {
		peak = max(peak, sum)
	}
	return peak, nil
}

// describe sums up a query's result for the log: a stat's value, a time
// series' peak, a table's rows.
func (v view) describe(panel, refID string) string {
	series := v.results[viewKey(panel, refID)]
	q := v.queries[viewKey(panel, refID)]
	switch {
	case len(series) == 0:
		return "no data"
	case q.Instant && q.Format == "table":
		return fmt.Sprintf("%d rows", len(series))
	case q.Instant:
		var values []string
		for _, s := range series {
			values = append(values, fmt.Sprintf("%v", lastValue(s)))
		}
		return strings.Join(values, ", ")
	}
	peak, _ := v.peak(panel, refID)
	return fmt.Sprintf("%d series, peak %.4g", len(series), peak)
}

func lastValue(s panelquery.Series) float64 {
	if len(s.Samples) == 0 {
		return math.NaN()
	}
	return s.Samples[len(s.Samples)-1].Value
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
