package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/collapser/collapser/src/demo"
)

// spreadBurster sends bursts of identical calls spread over the pods
// behind a Service, from a demo client pod in their namespace: kube-proxy
// picks a pod per connection. It counts the backend calls at every pod:
// the name of a headless Service that selects them resolves to all of them.
type spreadBurster struct {
	s       settings
	kubectl *k8s.KubectlOptions
	target  string // host:port of the Service's gRPC port (the sidecars)
	counts  string // --backend-metrics: every pod's backend, through the headless Service
}

// newSpreadBurster sends bursts to service's port 50052 and counts them at
// port 2113 of the pods headless selects, both in kubectl's namespace.
func newSpreadBurster(s settings, kubectl *k8s.KubectlOptions, service, headless string) spreadBurster {
	ns := kubectl.Namespace
	return spreadBurster{
		s:       s,
		kubectl: kubectl,
		target:  fmt.Sprintf("%s.%s.svc:50052", service, ns),
		counts:  fmt.Sprintf("http://%s.%s.svc:2113/metrics", headless, ns),
	}
}

// run sends replicaBurst calls named name over replicaConnections
// connections, with the demo client's extra flags, and returns its report.
// It may run on a goroutine of its own: it reports failures as its error.
func (b spreadBurster) run(t *testing.T, name string, extra ...string) (demoReport, error) {
	res, err := runPodE(t, b.kubectl, clientPod(b.s, b.podName(name), b.args(name, extra)))
	if err != nil {
		return demoReport{}, err
	}
	if res.exitCode != 0 {
		return demoReport{}, fmt.Errorf("demo client (exit %d):\n%s", res.exitCode, res.logs)
	}
	return reportOf(res.logs)
}

// runTwice sends b's burst named name twice from one pod, the second right
// after the first: the first from an init container, the second from the
// pod's container, which the kubelet starts once the first has ended (no
// pod is scheduled in between). It returns both reports.
func (b spreadBurster) runTwice(t *testing.T, name string, extra ...string) ([2]demoReport, error) {
	pod := clientPod(b.s, b.podName(name), b.args(name, extra))
	first := *pod.Spec.Containers[0].DeepCopy()
	first.Name = "first-burst"
	pod.Spec.InitContainers = []corev1.Container{first}
	var reports [2]demoReport
	res, err := runPodE(t, b.kubectl, pod)
	if err != nil {
		return reports, err
	}
	if res.exitCode != 0 {
		return reports, fmt.Errorf("demo client (exit %d):\n%s%s", res.exitCode, strings.Join(res.initLogs, ""), res.logs)
	}
	for i, logs := range []string{res.initLogs[0], res.logs} {
		if reports[i], err = reportOf(logs); err != nil {
			return reports, err
		}
	}
	return reports, nil
}

// args are the demo client's flags for a burst named name.
func (b spreadBurster) args(name string, extra []string) []string {
	return append([]string{"--target=" + b.target, "--backend-metrics=" + b.counts, "--name=" + name, "--json",
		fmt.Sprint("--requests=", replicaBurst), fmt.Sprint("--concurrency=", replicaBurst),
		fmt.Sprint("--connections=", replicaConnections)}, extra...)
}

// podName is a new name for the client pod of a burst named name.
func (spreadBurster) podName(name string) string {
	return strings.ToLower(name) + "-" + strings.ToLower(random.UniqueId())
}

// reportOf reads the demo client's report from its log.
func reportOf(logs string) (demoReport, error) {
	var r demoReport
	if err := json.Unmarshal([]byte(jsonOf(logs)), &r); err != nil {
		return r, fmt.Errorf("demo client report: %v\n%s", err, logs)
	}
	return r, nil
}

// burstResult is the end of a burst run on a goroutine of its own.
type burstResult struct {
	r   demoReport
	err error
}

// startAtPod runs b's burst named name, with the demo client's extra
// flags, on a goroutine of its own, and returns once its first calls have
// reached pod's backend (its own count rose), with the channel its end
// comes on.
func (b spreadBurster) startAtPod(t *testing.T, pod, name string, extra ...string) <-chan burstResult {
	t.Helper()
	backend := k8s.NewTunnel(b.kubectl, k8s.ResourceTypePod, pod, 0, 2113)
	backend.ForwardPort(t)
	defer backend.Close()
	metricsURL := "http://" + backend.Endpoint() + "/metrics"
	before := backendCount(t, metricsURL)
	done := make(chan burstResult, 1)
	go func() {
		r, err := b.run(t, name, extra...)
		done <- burstResult{r, err}
	}()
	retry.DoWithRetry(t, "the burst's first calls at "+pod, 60, time.Second, func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A failed read is retried like a low count: the tunnel may hiccup.
		n, err := demo.BackendMetricsCount(ctx, metricsURL)
		if err == nil && n <= before {
			err = fmt.Errorf("backend count %d, %d before the burst", n, before)
		}
		return "", err
	})
	return done
}

// must is run, failing the test if the burst fails.
func (b spreadBurster) must(t *testing.T, name string, extra ...string) demoReport {
	t.Helper()
	r, err := b.run(t, name, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkSpreadBurst sends b's burst named name and checks, from the
// backends' own counts summed over the pods, that it made one backend
// call without an error, and, from their sidecars' own counts, that it
// reached every pod of selector (a quarter of it at least each). It
// returns the burst and the sidecars' metrics after it.
func checkSpreadBurst(t *testing.T, b spreadBurster, selector metav1.ListOptions, name string) spreadBurst {
	t.Helper()
	before := requestsPerPod(podMetrics(t, b.kubectl, selector, sidecarMetricsPort))
	r := b.must(t, name)
	end := time.Now()
	metrics := podMetrics(t, b.kubectl, selector, sidecarMetricsPort)
	after := requestsPerPod(metrics)
	t.Logf("%d requests (%d errors) over %d pods: %d backend calls in total; per pod: %s", r.Requests, r.Errors, len(after), r.BackendCalls, perPod(before, after))
	if r.Errors != 0 || r.BackendCalls != 1 {
		t.Errorf("errors %d, backend calls %d; want 0 and 1", r.Errors, r.BackendCalls)
	}
	for pod, n := range after {
		if served := n - before[pod]; served < replicaBurst/4 {
			t.Errorf("pod %s served %v of the burst, want at least a quarter: the burst did not reach every pod", pod, served)
		}
	}
	return spreadBurst{report: r, end: end, metrics: metrics}
}

// requestsPerPod sums each pod's collapser_requests_total: the requests
// its sidecar answered, every method and outcome.
func requestsPerPod(metrics map[string]map[string]*dto.MetricFamily) map[string]float64 {
	counts := map[string]float64{}
	for pod, families := range metrics {
		counts[pod] = sampleSum(families["collapser_requests_total"], nil)
	}
	return counts
}

// perPod prints what each pod served between two requestsPerPod.
func perPod(before, after map[string]float64) string {
	var parts []string
	for pod, n := range after {
		parts = append(parts, fmt.Sprintf("%s %v", pod, n-before[pod]))
	}
	return strings.Join(parts, ", ")
}

// jsonOf returns the JSON object in a client pod's log.
func jsonOf(logs string) string {
	if i := strings.Index(logs, "{"); i >= 0 {
		return logs[i:]
	}
	return logs
}

// endOf returns what done sends once what, bursts run on a goroutine of
// their own, ended; it fails t when they have not within churnBound.
func endOf[T any](t *testing.T, done <-chan T, what string) T {
	t.Helper()
	var v T
	select {
	case v = <-done:
	case <-time.After(churnBound):
		t.Fatalf("%s did not end within %v", what, churnBound)
	}
	return v
}
