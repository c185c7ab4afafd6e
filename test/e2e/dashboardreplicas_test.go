package e2e

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/retry"
	dto "github.com/prometheus/client_model/go"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

// spreadBurst is the replicas test's first burst: the demo client's report,
// when it ended, and every pod's sidecar metrics after it.
type spreadBurst struct {
	report  demoReport
	end     time.Time
	metrics map[string]map[string]*dto.MetricFamily
}

// podTotals are the sidecars' own counts of a spread burst, read from each
// pod's metrics and summed over the pods.
type podTotals struct {
	requests, leaders, forwarded, fallbacks, servedForPeers float64
	// toPeers are the forwarded calls another pod answered.
	toPeers float64
	// led is how many pods had callers that led a shared call; ledElsewhere
	// how many of them made no backend call (not the key's owner): each
	// forwarded its leader's call.
	led, ledElsewhere int
}

func (b spreadBurst) totals() podTotals {
	var p podTotals
	for _, families := range b.metrics {
		leaders := sampleSum(families["collapser_requests_total"], map[string]string{"outcome": "leader"})
		if leaders > 0 {
			p.led++
			if sampleSum(families["collapser_backend_calls_total"], nil) == 0 {
				p.ledElsewhere++
			}
		}
		p.leaders += leaders
		p.requests += sampleSum(families["collapser_requests_total"], nil)
		p.forwarded += sampleSum(families["collapser_peer_calls_total"], nil)
		p.toPeers += sampleSum(families["collapser_peer_calls_total"], map[string]string{"owner": "peer"})
		p.fallbacks += sampleSum(families["collapser_peer_fallbacks_total"], nil)
		p.servedForPeers += sampleSum(families["collapser_peer_requests_total"], nil)
	}
	return p
}

// checkReplicasDashboard opens the dashboard after the spread burst, as in
// checkDashboard, and checks the totals and the Replicas row against the
// demo's report (the backends' own counts summed over the pods) and the
// pods' own metrics.
func checkReplicasDashboard(t *testing.T, s settings, prom panelquery.Client, b spreadBurst) {
	d, err := panelquery.Load(filepath.Join(s.chartDir, "dashboards", "collapser.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := b.totals()
	t.Logf("the pods' own counts: %v requests, %v leaders in %d pods (%d of them not the owner), %v forwarded (%v answered by another pod), %v fallbacks, %v served for peers",
		p.requests, p.leaders, p.led, p.ledElsewhere, p.forwarded, p.toPeers, p.fallbacks, p.servedForPeers)
	v := openDashboard(t, prom, d, scrapeInterval(t, prom), b.end, proxyJobs)
	checkPanels(t, d, v, spreadExpectations(b.report, p), false)
}

// spreadExpectations are what the dashboard shows after the spread burst:
// one backend call in one pod, and one forwarded call per pod whose callers
// led, each served by the owner.
func spreadExpectations(r demoReport, p podTotals) []expectation {
	requests, backend := float64(r.Requests), float64(r.BackendCalls)
	report := source{"the demo's report (the backends' own counts)", backend}
	forwarded := source{"the pods' own forwarded calls", p.forwarded}
	return []expectation{
		expect("Requests", total(source{"the demo sent", requests}, source{"the pods' own counts", p.requests})),
		expect("Backend calls: sidecar", total(report)),
		expect("Backend calls: backend's own count", total(report)),
		expect("Backend-load reduction", func(v view, panel string) error {
			got, err := v.total(panel)
			if want := 1 - backend/requests; err == nil && math.Abs(got-want) > 1e-9 {
				err = fmt.Errorf("shows %v, want 1 - %v / %v = %v", got, backend, requests, want)
			}
			return err
		}),
		expect("Backend calls per pod", perPodCalls(replicas, report, report)),
		expect("Backend calls/s per pod", sawRate("A", backend), sawRate("B", backend)),
		// Every leader's call is counted once, by where it went. Each pod
		// but the owner led once and forwarded its call; the owner may
		// lead twice, sharing one backend call: once over its own peer
		// port, before its connection to itself is up, and once here; or
		// not at all, its callers joining a call forwarded to it first.
		expect("Forwarded calls", total(forwarded, source{"the pods' own leaders", p.leaders})),
		expect("Forwarded share (other pods)", total(source{"the pods' own calls answered by another pod / leaders", p.toPeers / p.leaders},
			source{"one leader in each pod but the owner / leaders", float64(p.ledElsewhere) / p.leaders})),
		expect("Fallbacks to the local backend", total(source{"every owner reachable", 0}, source{"the pods' own fallbacks", p.fallbacks})),
		// The owner's own leader is served without a hop once its ring's
		// connection to itself is up, over its peer port before.
		expect("Calls served for peers", total(source{"the pods' own counts", p.servedForPeers})),
		expect("Forwarded and peer-served calls/s", sawRate("A", p.forwarded), labelValues("A", "owner", "kept", "peer", "self"),
			peakIs("B", 0), sawRate("C", p.servedForPeers)),
		expect("Replicas each pod lists", everySeriesPeaksAt("A", replicas), seriesCount("A", replicas)),
		// One burst of one key: nothing shows that a method's calls do not
		// share, and every pod forwards every collapsed method.
		expect("Forwarded methods", everySeriesPeaksAt("A", replicas)),
		// Every pod holds a lease from each other one, and none ran out.
		expect("Leases each pod holds", everySeriesPeaksAt("A", replicas-1), seriesCount("A", replicas),
			everySeriesPeaksAt("B", replicas)),
		expect("Lease lapses", total(source{"the pods reach each other", 0})),
	}
}

// onePodExpectations are what the Replicas row shows in a release of one
// pod without peers, after the demo's burst: that pod's backend calls,
// nothing forwarded.
func onePodExpectations(burst *demo.Report, truth int64) []expectation {
	backend := float64(burst.BackendCalls)
	none := source{"one pod, no peers", 0}
	return []expectation{
		expect("Backend calls per pod", perPodCalls(1, source{"the demo's report", backend}, source{"the backend's own count", float64(truth)})),
		expect("Backend calls/s per pod", sawRate("A", backend), sawRate("B", backend)),
		expect("Forwarded calls", total(none)),
		expect("Forwarded share (other pods)", total(none)),
		expect("Fallbacks to the local backend", total(none)),
		expect("Calls served for peers", total(none)),
		expect("Forwarded and peer-served calls/s", noSeries("A", "B", "C")),
		expect("Replicas each pod lists", noSeries("A")),
		expect("Forwarded methods", noSeries("A")),
		expect("Leases each pod holds", noSeries("A", "B")),
		expect("Lease lapses", total(none)),
		expect("Keys taken over/s by result", noSeries("A")),
	}
}

// perPodCalls expects Backend calls per pod to show pods pods, each with the
// same count from its sidecar (A) and its hello backend (B), and these sums.
func perPodCalls(pods int, sidecar, backend source) panelCheck {
	return func(v view, panel string) error {
		a, errA := byPod(v.results[viewKey(panel, "A")])
		b, errB := byPod(v.results[viewKey(panel, "B")])
		if err := errors.Join(errA, errB); err != nil {
			return err
		}
		if len(a) != pods || len(b) != pods {
			return fmt.Errorf("sidecars %v, backends %v: want %d pods each", a, b, pods)
		}
		var sumA, sumB float64
		for pod, n := range a {
			if m, ok := b[pod]; !ok || m != n {
				return fmt.Errorf("pod %s: its sidecar shows %v, its backend %v (sidecars %v, backends %v)", pod, n, m, a, b)
			}
			sumA, sumB = sumA+n, sumB+b[pod]
		}
		if sumA != sidecar.value || sumB != backend.value {
			return fmt.Errorf("sidecars %v in all, backends %v; %s %v, %s %v", sumA, sumB, sidecar.name, sidecar.value, backend.name, backend.value)
		}
		return nil
	}
}

// byPod maps a per-instance result to its pods: the host of the instance
// (the chart's Prometheus names a pod's sidecar and backend by one host
// and their two ports).
func byPod(series []panelquery.Series) (map[string]float64, error) {
	out := map[string]float64{}
	for _, s := range series {
		host, _, err := net.SplitHostPort(s.Labels["instance"])
		if err != nil {
			return nil, fmt.Errorf("instance %q: %v", s.Labels["instance"], err)
		}
		out[host] += lastValue(s)
	}
	return out, nil
}

// waitForPodScrapes waits until Prometheus has scraped every pod's sidecar
// and backend, and holds each sidecar's joined SayHello series at 0: a
// burst then rises from a sample before it in every pod.
func waitForPodScrapes(t *testing.T, prom panelquery.Client, pods int) {
	t.Helper()
	queries := []string{
		`count(up{job="collapser"} == 1)`,
		`count(up{job="hello-backend"} == 1)`,
		fmt.Sprintf(`count(collapser_requests_total{method=%q, outcome="joined", code="OK"} == 0)`, sayHello),
	}
	retry.DoWithRetry(t, fmt.Sprintf("Prometheus scraped %d pods", pods), 24, 5*time.Second, func() (string, error) {
		for _, q := range queries {
			n, err := queryScalar(t.Context(), prom, q)
			if err != nil {
				return "", err
			}
			if n != float64(pods) {
				return "", fmt.Errorf("%s = %v, want %d", q, n, pods)
			}
		}
		return "scraped", nil
	})
}

// seriesCount expects a panel's query to have n series.
func seriesCount(refID string, n int) panelCheck {
	return func(v view, panel string) error {
		if got := len(v.results[viewKey(panel, refID)]); got != n {
			return fmt.Errorf("%s has %d series, want %d", refID, got, n)
		}
		return nil
	}
}

// everySeriesPeaksAt expects each series of a panel's query to peak at want.
func everySeriesPeaksAt(refID string, want float64) panelCheck {
	return func(v view, panel string) error {
		series := v.results[viewKey(panel, refID)]
		if len(series) == 0 {
			return fmt.Errorf("%s: no data", refID)
		}
		var errs []error
		for _, s := range series {
			peak := math.Inf(-1)
			for _, sample := range s.Samples {
				if !math.IsNaN(sample.Value) {
					peak = max(peak, sample.Value)
				}
			}
			if peak != want {
				errs = append(errs, fmt.Errorf("%s: series %v peaks at %v, want %v", refID, s.Labels, peak, want))
			}
		}
		return errors.Join(errs...)
	}
}
