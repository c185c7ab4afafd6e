package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

const (
	// replicas is the pod count of the replicas test's release.
	replicas = 3
	// replicaBurst is the burst spread over the pods, through the Service,
	// from a pod of the cluster: kube-proxy picks a pod per connection.
	replicaBurst = 3000
	// replicaConnections spreads it: with 300 connections of 10 calls, a
	// pod gets less than a quarter of the burst (75 connections, 100
	// expected) with a chance of about one in a thousand.
	replicaConnections = 300
	// membershipWait is how long the test waits for every pod to see a new
	// one (measured in seconds: each resolves the peers every 2 s) and for
	// it to own keys: a wait for a busy machine, not a bound.
	membershipWait = 2 * time.Minute
	// churnBound bounds the wait for the burst a pod is deleted in: ten
	// waves of 3 s calls, and a client pod's start and end, several times
	// over.
	churnBound = 10 * time.Minute
)

// demoReport is the part of democlient's --json report the test reads.
type demoReport struct {
	Requests     int   `json:"requests"`
	Errors       int   `json:"errors"`
	BackendCalls int64 `json:"backend_calls"`
}

// checkReplicas installs the chart with three pods (peers on, as the chart
// decides for more than one) in a namespace of its own and checks, from the
// hello backends' own counts summed over the pods, that a burst spread over
// every pod makes one backend call, and, with Prometheus, that the
// dashboard's Replicas row shows it; that a purge reaches every pod, one
// that is not ready too; that a burst of identical streams reads one
// backend stream; that once a method is kept (not forwarded), the second
// burst of one of its keys makes one backend call; three backend calls and
// streams with peers off; that deleting a pod during a burst loses no
// caller; that every pod sees a fourth pod, which then owns keys; and that
// a rolling switch to the library keeps one backend call per key
// (checkRollingSwitch).
func checkReplicas(t *testing.T, s settings) {
	kubectl := restrictedNamespace(t, s, "collapser-replicas-"+strings.ToLower(random.UniqueId()))
	// The pods are ready only while the test's gate keeper says so: it
	// takes one out of the Services while it runs.
	gate := startGateKeeper(t, kubectl, proxyPodSelector)
	opts := helmOptions(s, kubectl, cacheTTL)
	opts.SetValues["replicaCount"] = fmt.Sprint(replicas)
	opts.SetValues["podReadinessGates[0]"] = readinessGate
	opts.SetValues["tests.enabled"] = "false"
	// The injector's webhook configuration is cluster-wide: the first
	// release's injector serves the cluster.
	opts.SetValues["injector.enabled"] = "false"
	helm.Install(t, opts, s.chartDir, release)
	waitForProxyPods(t, kubectl, replicas)
	waitForEndpoints(t, kubectl, release, replicas)
	var prom panelquery.Client
	if s.prometheus {
		prom = prometheusClient(t, kubectl)
	}

	bursts := newSpreadBurster(s, kubectl, release, release+"-pods")

	// A stream burst: 20 replies 50 ms apart, so the burst's callers join
	// the stream through their pod's record, or replay a kept record.
	streamBurstArgs := []string{"--stream", "--stream-messages=20", "--stream-interval-ms=50"}

	var peered *spreadBurst
	t.Run("a burst spread over three pods makes one backend call", func(t *testing.T) {
		if s.prometheus {
			waitForPodScrapes(t, prom, replicas)
		}
		b := checkSpreadBurst(t, bursts, proxyPodSelector, "peered")
		peered = &b
	})

	if s.prometheus {
		t.Run("the dashboard's Replicas row shows the burst over three pods", func(t *testing.T) {
			if peered == nil {
				t.Fatal("the burst did not run")
			}
			checkReplicasDashboard(t, s, prom, *peered)
		})
	}

	// After the dashboard's check, which reads the burst's calls alone.
	t.Run("a purge through one pod's admin port takes the answer back on all three", func(t *testing.T) {
		checkPurgeReachesEveryPod(t, kubectl)
	})

	t.Run("a purge while one pod is unready reaches it", func(t *testing.T) {
		checkPurgeReachesUnreadyPod(t, kubectl, gate)
	})

	t.Run("a stream burst spread over three pods reads one backend stream", func(t *testing.T) {
		r := bursts.must(t, "peered-streams", streamBurstArgs...)
		t.Logf("%d StreamHellos calls (%d errors) over %d pods: %d backend streams in total", r.Requests, r.Errors, replicas, r.BackendCalls)
		if r.Errors != 0 || r.BackendCalls != 1 {
			t.Errorf("errors %d, backend streams %d; want 0 and 1", r.Errors, r.BackendCalls)
		}
	})

	// After the bursts that need SayHello forwarded; the upgrade after it
	// replaces the pods, which start with every method forwarded.
	t.Run("a burst of a kept method's hot key makes one backend call", func(t *testing.T) {
		checkKeptMethodHotKey(t, kubectl, bursts)
	})

	t.Run("without peers the same burst makes one backend call per pod", func(t *testing.T) {
		off := *opts
		off.SetValues = maps.Clone(opts.SetValues)
		off.SetValues["peers.enabled"] = "false"
		helm.Upgrade(t, &off, s.chartDir, release)
		waitForProxyPods(t, kubectl, replicas)
		waitForEndpoints(t, kubectl, release, replicas)
		r := bursts.must(t, "alone")
		t.Logf("peers off: %d requests over %d pods, %d backend calls", r.Requests, replicas, r.BackendCalls)
		if r.BackendCalls != replicas {
			t.Errorf("backend calls %d, want %d: each pod collapses on its own", r.BackendCalls, replicas)
		}
		r = bursts.must(t, "alone-streams", streamBurstArgs...)
		t.Logf("peers off: %d StreamHellos calls over %d pods, %d backend streams", r.Requests, replicas, r.BackendCalls)
		if r.BackendCalls != replicas {
			t.Errorf("backend streams %d, want %d: each pod replays on its own", r.BackendCalls, replicas)
		}
		helm.Upgrade(t, opts, s.chartDir, release)
		waitForProxyPods(t, kubectl, replicas)
	})

	t.Run("deleting a pod during a burst loses no caller", func(t *testing.T) {
		victim := proxyPods(t, kubectl)[0]
		// Distinct keys, and the backend takes 3 s per call: ten waves of
		// 600 callers run for about 30 s. The pod goes once its backend has
		// calls of the burst in flight, not after a guess at when that is.
		done := bursts.startAtPod(t, victim.Name, "churn", "--requests=6000", "--concurrency=600", "--distinct")
		k8s.RunKubectl(t, kubectl, "delete", "pod", victim.Name, "--wait=false")
		res := endOf(t, done, "the burst")
		if res.err != nil {
			t.Fatal(res.err)
		}
		r := res.r
		t.Logf("pod %s deleted mid-burst: %d requests, %d errors, %d backend calls", victim.Name, r.Requests, r.Errors, r.BackendCalls)
		if r.Errors != 0 {
			t.Errorf("%d of %d callers failed while a pod went away", r.Errors, r.Requests)
		}
		waitForProxyPods(t, kubectl, replicas)
	})

	t.Run("every pod sees a new pod, and it owns keys", func(t *testing.T) {
		old := proxyPods(t, kubectl)
		k8s.RunKubectl(t, kubectl, "scale", "deployment", release, fmt.Sprint("--replicas=", replicas+1))
		pods := waitForProxyPods(t, kubectl, replicas+1)
		var added string
		for _, p := range pods {
			if !slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.Name == p.Name }) {
				added = p.Name
			}
		}
		ready := time.Now()
		// Each sidecar resolves the peers every 2 s (no connection is lost
		// when a pod joins): every pod's ring lists the new one.
		waitForMembers(t, kubectl, replicas+1)
		t.Logf("pod %s ready: every pod listed it %v later", added, time.Since(ready).Round(time.Second))
		sidecar := k8s.NewTunnel(kubectl, k8s.ResourceTypePod, old[0].Name, 0, 50052)
		sidecar.ForwardPort(t)
		defer sidecar.Close()
		metrics := k8s.NewTunnel(kubectl, k8s.ResourceTypePod, added, 0, 2113)
		metrics.ForwardPort(t)
		defer metrics.Close()
		url := "http://" + metrics.Endpoint() + "/metrics"
		round := 0
		retry.DoWithRetry(t, "the new pod owns keys", int(membershipWait/(2*time.Second)), 2*time.Second, func() (string, error) {
			round++
			// Distinct keys through an old pod: a quarter of them are the new
			// pod's (of those the old pod still forwards: all, or a sample
			// once their method's forwarded calls stopped sharing).
			runDemo(t, demo.Config{Target: sidecar.Endpoint(), BackendMetrics: url, Requests: 40, Concurrency: 40,
				Name: fmt.Sprint("owner-", round), Distinct: true, Timeout: time.Minute})
			n, err := demo.BackendMetricsCount(t.Context(), url)
			if err != nil || n == 0 {
				return "", fmt.Errorf("new pod's backend calls %d (%v)", n, err)
			}
			return "", nil
		})
		t.Logf("pod %s ready: it owned keys %v later", added, time.Since(ready).Round(time.Second))
	})

	// Last: it leaves the release's pods running the library.
	t.Run("a rolling switch from the sidecar to the library keeps one backend call per key", func(t *testing.T) {
		checkRollingSwitch(t, kubectl, opts, bursts)
	})
}

// proxyPods returns the release's proxy pods that are not going away.
func proxyPods(t *testing.T, kubectl *k8s.KubectlOptions) []corev1.Pod {
	t.Helper()
	return livePods(t, kubectl, proxyPodSelector)
}

// livePods returns the pods of selector that are not going away.
func livePods(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions) []corev1.Pod {
	t.Helper()
	var live []corev1.Pod
	for _, p := range k8s.ListPods(t, kubectl, selector) {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// waitForProxyPods waits until exactly n proxy pods exist, none going away,
// all available with every container ready, and returns them.
func waitForProxyPods(t *testing.T, kubectl *k8s.KubectlOptions, n int) []corev1.Pod {
	t.Helper()
	return waitForPods(t, kubectl, proxyPodSelector, n)
}

// waitForPods waits until exactly n pods of selector exist, none going
// away, all available with every container ready, and returns them.
func waitForPods(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions, n int) []corev1.Pod {
	t.Helper()
	return waitForPodsThat(t, kubectl, selector, n, func([]corev1.Pod) error { return nil })
}

// waitForPodsThat is waitForPods for pods that, all together, also pass
// check: what a rollout's step is known by when the pods before it are
// as available as the pods after it.
func waitForPodsThat(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions, n int, check func([]corev1.Pod) error) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	retry.DoWithRetry(t, fmt.Sprintf("%d pods %s available", n, selector.LabelSelector), 150, 2*time.Second, func() (string, error) {
		all := k8s.ListPods(t, kubectl, selector)
		pods = pods[:0]
		for _, p := range all {
			if p.DeletionTimestamp == nil && k8s.IsPodAvailable(&p) && podReady(&p) {
				pods = append(pods, p)
			}
		}
		if len(pods) != n || len(all) != n {
			return "", fmt.Errorf("%d pods, %d available, want %d", len(all), len(pods), n)
		}
		return "", check(pods)
	})
	return pods
}

// podReady reports whether the pod's Ready condition is true: unlike
// k8s.IsPodAvailable, which reads the app containers only, it counts a
// native sidecar's readiness (an init container's) too.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubeProxySync is how long kube-proxy may take to program a Service's new
// endpoints after they appear (its default minimum sync period is 1 s).
const kubeProxySync = 3 * time.Second

// waitForEndpoints waits until the Service lists n ready endpoints and
// kube-proxy (and the cluster's DNS, for a headless Service) has had
// kubeProxySync to program them, so that new connections to the Service
// spread over every pod.
func waitForEndpoints(t *testing.T, kubectl *k8s.KubectlOptions, service string, n int) {
	t.Helper()
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	var since time.Time
	retry.DoWithRetry(t, fmt.Sprintf("%d ready endpoints of service %s", n, service), 60, time.Second, func() (string, error) {
		list, err := clientset.DiscoveryV1().EndpointSlices(kubectl.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return "", err
		}
		ready := 0
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		if ready != n {
			since = time.Time{}
			return "", fmt.Errorf("%d ready endpoints, want %d", ready, n)
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < kubeProxySync {
			return "", fmt.Errorf("%d ready endpoints for %v, waiting for kube-proxy", n, time.Since(since).Round(time.Second))
		}
		return "", nil
	})
}

// sidecarMetricsPort is the sidecar's metrics port, the chart's and an
// injected sidecar's by default.
const sidecarMetricsPort = 2112

// podMetrics returns the metrics each pod of selector serves on port, by
// pod name.
func podMetrics(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions, port int) map[string]map[string]*dto.MetricFamily {
	t.Helper()
	metrics := map[string]map[string]*dto.MetricFamily{}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range livePods(t, kubectl, selector) {
		tunnel := k8s.NewTunnel(kubectl, k8s.ResourceTypePod, p.Name, 0, port)
		tunnel.ForwardPort(t)
		resp, err := client.Get("http://" + tunnel.Endpoint() + "/metrics")
		if err != nil {
			tunnel.Close()
			t.Fatalf("metrics of %s: %v", p.Name, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		tunnel.Close()
		if err != nil {
			t.Fatalf("metrics of %s: %v", p.Name, err)
		}
		metrics[p.Name] = families
	}
	return metrics
}

// sampleSum adds up the values of mf's counters or gauges whose labels
// include match.
func sampleSum(mf *dto.MetricFamily, match map[string]string) float64 {
	var sum float64
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for name, value := range match {
			matches = matches && labels[name] == value
		}
		if matches {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
