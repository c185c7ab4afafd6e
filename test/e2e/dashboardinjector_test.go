package e2e

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/collapser/collapser/test/panelquery"
)

// injectorDashboard opens the dashboard through the injector release's own
// Prometheus (make deploy-injector PROMETHEUS=true), after the admissions
// of the subtests before it, and checks the injector's panels: both
// replicas up, a series for every result, admissions injected and rejected
// and none failed, and a latency quantile only where admissions were
// counted.
func (c *injectorChecks) injectorDashboard(t *testing.T) {
	d, err := panelquery.Load(filepath.Join(c.s.chartDir, "dashboards", "collapser.json"))
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheusClient(t, c.release)
	v := openDashboard(t, prom, d, scrapeInterval(t, prom), time.Now(), injectorJobs)
	checkPanels(t, d, v, []expectation{
		expect("Injector replicas up", total(source{"the injector's replicas (injector.replicaCount)", injectorReplicas})),
		expect("Admissions/s by result", labelValues("A", "result", "error", "injected", "rejected", "skipped"),
			seriesPeaks("A", "result", map[string]float64{"error": 0}), rose("A", "result", "injected", "rejected")),
		expect("Admission latency", quantileOnlyWhereCounted("A", "Admissions/s by result", "A")),
	}, false)
}

// rose expects the series of a time series query whose label has each of
// values to rise above 0 at some step.
func rose(refID, label string, values ...string) panelCheck {
	return func(v view, panel string) error {
		peaks := map[string]float64{}
		for _, s := range v.results[viewKey(panel, refID)] {
			for _, sample := range s.Samples {
				if !math.IsNaN(sample.Value) {
					peaks[s.Labels[label]] = max(peaks[s.Labels[label]], sample.Value)
				}
			}
		}
		var errs []error
		for _, value := range values {
			if peaks[value] <= 0 {
				errs = append(errs, fmt.Errorf("%s: %s=%s never rose above 0", refID, label, value))
			}
		}
		return errors.Join(errs...)
	}
}
