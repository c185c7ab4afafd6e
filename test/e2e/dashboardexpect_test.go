package e2e

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

// expectation checks what some panels show.
type expectation struct {
	panels []string
	check  func(v view) error
}

// checkPanels runs the expectations and logs what each panel showed. With
// every, a panel that no expectation names fails.
func checkPanels(t *testing.T, d *panelquery.Dashboard, v view, expectations []expectation, every bool) {
	t.Helper()
	covered := map[string]bool{}
	for _, e := range expectations {
		for _, p := range e.panels {
			covered[p] = true
		}
		if err := e.check(v); err != nil {
			t.Errorf("%s: %v", strings.Join(e.panels, ", "), err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the dashboard at %s (range %v, step %v, $__rate_interval %v):\n", v.at.Format(time.TimeOnly),
		v.intervals.Range, v.intervals.Step, v.intervals.RateInterval)
	for _, p := range d.QueryPanels() {
		if every && !covered[p.Title] {
			t.Errorf("panel %q: no expectation checks it", p.Title)
		}
		for _, target := range p.Targets {
			fmt.Fprintf(&b, "  %-50s %s %s\n", p.Title, target.RefID, v.describe(p.Title, target.RefID))
		}
	}
	t.Log(b.String())
}

// burstExpectations are what the dashboard must show after the demo's
// burst, the first calls the sidecar served: every panel.
func burstExpectations(burst *demo.Report, truth int64, bucket [2]float64) []expectation {
	requests, backend := float64(burst.Requests), float64(burst.BackendCalls)
	own := source{"the backend's own count", float64(truth)}
	rows := append(onePodExpectations(burst, truth), idleStreamExpectations()...)
	return append(rows, []expectation{
		expect("Requests", total(source{"the demo sent", requests})),
		expect("Errors", total(source{"the demo's errors", float64(burst.Errors)})),
		expect("Backend calls: sidecar", total(source{"the demo's report", backend}, own)),
		expect("Backend calls: backend's own count", total(source{"the demo's report", backend}, own)),
		expect("Backend-load reduction", func(v view, panel string) error {
			got, err := v.total(panel)
			if err == nil && math.Abs(got-burst.CollapseRatio) > 1e-9 {
				err = fmt.Errorf("shows %v, the demo's collapse ratio is %v", got, burst.CollapseRatio)
			}
			return err
		}),
		expect("p95 backend latency", func(v view, panel string) error {
			got, err := v.total(panel)
			if err == nil && !(got > bucket[0] && got <= bucket[1]) {
				err = fmt.Errorf("shows %vs, outside the histogram bucket (%v, %v] of the backend's %v latency", got, bucket[0], bucket[1], backendLatency)
			}
			return err
		}),
		// One backend call per leader: every other request joined it or
		// hit the cache; nothing was stale or passed through.
		{[]string{"Joined", "Cache hits"}, func(v view) error {
			joined, err1 := v.total("Joined")
			hits, err2 := v.total("Cache hits")
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			if joined+hits != requests-backend {
				return fmt.Errorf("%v joined + %v cache hits, want %v requests - %v backend calls", joined, hits, requests, backend)
			}
			return nil
		}},
		expect("Stale served", total(source{"the chart's default rule (no stale results)", 0})),
		expect("Passed through", total(source{"the demo's calls of a collapsed method", 0})),
		expect("Requests/s by outcome", sawRate("A", requests)),
		expect("Backend calls/s: sidecar vs. backend's own count", sawRate("A", requests), sawRate("B", backend), sawRate("C", backend)),
		expect("Collapsed (joined) requests/s", func(v view, panel string) error {
			joined, err := v.total("Joined")
			if err != nil {
				return err
			}
			return sawRate("A", joined)(v, panel)
		}),
		expect("Cache hits and stale serves/s", hasSeries("A")),
		expect("Backend-load reduction %", func(v view, panel string) error {
			peak, err := v.peak(panel, "A")
			if err == nil && peak < burst.CollapseRatio-1e-9 {
				err = fmt.Errorf("peaks at %v, below the demo's collapse ratio %v", peak, burst.CollapseRatio)
			}
			return err
		}),
		expect("Backend call latency", func(v view, panel string) error {
			var errs []error
			for _, ref := range []string{"A", "B", "C"} {
				peak, err := v.peak(panel, ref)
				if err == nil && !(peak > bucket[0] && peak <= bucket[1]) {
					err = fmt.Errorf("%s peaks at %vs, outside the bucket (%v, %v] of the backend's %v latency", ref, peak, bucket[0], bucket[1], backendLatency)
				}
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}),
		expect("Errors/s (code != OK)", noSeries("A", "B", "C")),
		expect("In-flight keys", hasSeries("A")),
		expect("Waiters", hasSeries("A")),
		expect("Cache entries & bytes", hasSeries("A", "B")),
		expect("Queued backend calls", func(v view, panel string) error {
			peak, err := v.peak(panel, "A")
			if err == nil && peak != 0 {
				err = fmt.Errorf("peaks at %v, want 0: one backend call never waits for a slot", peak)
			}
			return err
		}),
		expect("Method rules", func(v view, panel string) error {
			want := map[string]string{sayHello: "collapse", streamHellos: "replay"}
			for _, s := range v.results[viewKey(panel, "A")] {
				if action, ok := want[s.Labels["method"]]; ok {
					if s.Labels["action"] != action || lastValue(s) != 1 {
						return fmt.Errorf("%s: %v on %v sidecars, want %s on 1", s.Labels["method"], s.Labels, lastValue(s), action)
					}
					delete(want, s.Labels["method"])
				}
			}
			if len(want) != 0 {
				return fmt.Errorf("no row for %v in %v", want, v.results[viewKey(panel, "A")])
			}
			return nil
		}),
		// Every backend answer of the burst was served for the policy's
		// windows: the hello backend declares no cache-control.
		expect("Answers/s by freshness source", sawRate("A", backend), labelValues("A", "source", "backend", "backend_capped", "policy")),
		// Nobody purged: the series are there, at 0.
		expect("Purges/s and answers purged/s", hasSeries("A", "B"), peakIs("A", 0), peakIs("B", 0)),
		// Every call of the burst joined its one backend call: no answer
		// was read past its early refresh. The series are there, at 0.
		expect("Background refreshes/s by reason", labelValues("A", "reason", "early", "purge", "stale"), peakIs("A", 0)),
		expect("Policy file", total(source{"a sidecar that started on its policy file", 1})),
		// The release has no injector: the injector is a release of its own,
		// installed with the README's command (deployInjector), whose own
		// Prometheus shows these panels (injectorDashboard).
		expect("Injector replicas up", total(source{"the release's injector replicas: none", 0})),
		expect("Admissions/s by result", noSeries("A")),
		expect("Admission latency", noSeries("A")),
		expect("Policy reloads", func(v view, panel string) error {
			series := v.results[viewKey(panel, "A")]
			var results []string
			for _, s := range series {
				results = append(results, s.Labels["result"])
				if lastValue(s) != 0 {
					return fmt.Errorf("%v reloads %s, want 0: the policy file never changed", lastValue(s), s.Labels["result"])
				}
			}
			slices.Sort(results)
			if !slices.Equal(results, []string{"failure", "success"}) {
				return fmt.Errorf("results %v, want failure and success", results)
			}
			return nil
		}),
	}...)
}

// errorExpectations are what the dashboard must show after the burst and
// then the failing calls.
func errorExpectations(burst, failing *demo.Report, truth int64) []expectation {
	reports := source{"the demo's reports", float64(burst.BackendCalls + failing.BackendCalls)}
	own := source{"the backend's own count", float64(truth)}
	return []expectation{
		expect("Requests", total(source{"the demo sent", float64(burst.Requests + failing.Requests)})),
		expect("Errors", total(source{"the demo's errors", float64(failing.Errors)})),
		expect("Backend calls: sidecar", total(reports, own)),
		expect("Backend calls: backend's own count", total(reports, own)),
		expect("Errors/s (code != OK)", sawRate("A", float64(failing.Errors))),
	}
}
