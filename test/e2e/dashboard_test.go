package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

const (
	// errorBurst calls fail with a deadline shorter than the backend's
	// latency: their series (code DeadlineExceeded) are born between two
	// scrapes, the case created timestamps are ingested for.
	errorBurst   = 100
	errorTimeout = time.Second
	// scrapeMargin is how long after a run a scrape must start for its
	// samples to hold every count of the run.
	scrapeMargin = time.Second
)

// checkDashboard opens the chart's dashboard as Grafana would, evaluating
// every panel's queries through the cluster's Prometheus, right after the
// burst: its totals must equal the demo's report and the backend's own
// count, and its rate panels must have seen the burst. Then a burst of
// failing calls, whose series are born between two scrapes, must be
// counted from 0 as well. Last, identical StreamHellos calls share one
// backend stream and later ones replay it: the Streams row and the totals
// must show them.
func checkDashboard(t *testing.T, s settings, prom panelquery.Client, target, backendMetrics string, burst *demo.Report, burstEnd time.Time) {
	d, err := panelquery.Load(filepath.Join(s.chartDir, "dashboards", "collapser.json"))
	if err != nil {
		t.Fatal(err)
	}
	scrape := scrapeInterval(t, prom)
	truth := backendCount(t, backendMetrics)

	t.Logf("the demo's report: %d requests, %d errors, %d backend calls, collapse ratio %v; the backend's own count: %d",
		burst.Requests, burst.Errors, burst.BackendCalls, burst.CollapseRatio, truth)
	v := openDashboard(t, prom, d, scrape, burstEnd, proxyJobs)
	bucket := latencyBucket(t, prom, v.at)
	checkPanels(t, d, v, burstExpectations(burst, truth, bucket), true)

	failing := runDemo(t, demo.Config{Target: target, BackendMetrics: backendMetrics, Requests: errorBurst, Concurrency: errorBurst, Name: "errors", Timeout: errorTimeout})
	failingEnd := time.Now()
	if failing.Errors != errorBurst {
		t.Fatalf("%d of %d calls with a %v deadline failed (%v), want all: the backend answers after %v", failing.Errors, errorBurst, errorTimeout, failing.ErrorsByCode, backendLatency)
	}
	truth = backendCount(t, backendMetrics)
	t.Logf("then %d calls with a %v deadline: %d errors %v, %d backend calls; the backend's own count: %d",
		failing.Requests, errorTimeout, failing.Errors, failing.ErrorsByCode, failing.BackendCalls, truth)
	v = openDashboard(t, prom, d, scrape, failingEnd, proxyJobs)
	checkPanels(t, d, v, errorExpectations(burst, failing, truth), false)
	checkCreatedTimestampZeros(t, prom, v)

	streams := runStreams(t, target, backendMetrics)
	streamsEnd := time.Now()
	v = openDashboard(t, prom, d, scrape, streamsEnd, proxyJobs)
	checkPanels(t, d, v, streamExpectations(burst, failing, streams, truth), false)
	checkMethodVariable(t, prom, d, v.at, sayHello, streamHellos)
}

// checkMethodVariable lists the values of the dashboard's method variable
// through Prometheus, over the time range of the dashboard opened at at, as
// Grafana fills its picker, and fails unless each method in want is there to
// be picked alone.
func checkMethodVariable(t *testing.T, prom panelquery.Client, d *panelquery.Dashboard, at time.Time, want ...string) {
	t.Helper()
	i := slices.IndexFunc(d.Templating.List, func(v panelquery.Variable) bool { return v.Name == "method" })
	if i < 0 {
		t.Fatal("the dashboard has no method variable")
	}
	selector, label, err := panelquery.ParseLabelValues(d.Templating.List[i].QueryText())
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := d.TimeRange(at)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	values, err := prom.LabelValues(ctx, label, selector, from, to)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range want {
		if !slices.Contains(values, method) {
			t.Errorf("the method variable lists %q, not %s", values, method)
		}
	}
}

// checkCreatedTimestampZeros proves that Prometheus stored a 0 at the
// created timestamp of each series born with a failure: the sidecar
// exports those series only once they count one, so a 0 first sample can
// only come from created-timestamp ingestion.
func checkCreatedTimestampZeros(t *testing.T, prom panelquery.Client, v view) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rng := v.intervals.Range
	series, err := prom.Instant(ctx, fmt.Sprintf(`collapser_requests_total{code!="OK"}[%ds]`, int(rng.Seconds())), v.at)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) == 0 {
		t.Fatal("Prometheus holds no series of failed requests")
	}
	for _, s := range series {
		first := s.Samples[0]
		t.Logf("%v: first sample %v at %s, then %v", s.Labels, first.Value, first.Time.Format("15:04:05.000"), lastValue(s))
		if first.Value != 0 {
			t.Errorf("%v starts at %v: no 0 at its created timestamp, so the dashboard misses its first %v requests", s.Labels, first.Value, first.Value)
		}
	}
}

// latencyBucket returns the bounds of the duration histogram's bucket that
// holds the backend's latency.
func latencyBucket(t *testing.T, prom panelquery.Client, at time.Time) [2]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	series, err := prom.Instant(ctx, `group by (le) (collapser_backend_call_duration_seconds_bucket)`, at)
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, s := range series {
		var le float64
		if _, err := fmt.Sscan(s.Labels["le"], &le); err != nil {
			t.Fatalf("bucket bound %q: %v", s.Labels["le"], err)
		}
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	latency := backendLatency.Seconds()
	i, _ := slices.BinarySearch(bounds, latency)
	if i == 0 || i == len(bounds) {
		t.Fatalf("no bucket bounds around %vs in %v", latency, bounds)
	}
	return [2]float64{bounds[i-1], bounds[i]}
}

// scrapeInterval is the global scrape interval of the cluster's
// Prometheus, which the chart also writes into the Grafana data source it
// provisions (jsonData.timeInterval): the one Grafana computes with.
func scrapeInterval(t *testing.T, prom panelquery.Client) time.Duration {
	t.Helper()
	config, err := prom.Config(t.Context())
	if err != nil {
		t.Fatalf("read the Prometheus config: %v", err)
	}
	var cfg struct {
		Global struct {
			ScrapeInterval string `json:"scrape_interval"`
		} `json:"global"`
	}
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatalf("Prometheus config: %v", err)
	}
	d, err := time.ParseDuration(cfg.Global.ScrapeInterval)
	if err != nil {
		t.Fatalf("Prometheus scrape_interval: %v", err)
	}
	return d
}
