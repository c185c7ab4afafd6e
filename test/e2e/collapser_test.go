package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

const (
	release = "collapser" // the chart then names its resources "collapser"
	// backendLatency is long enough for a burst of 10,000 calls through a
	// port-forward to reach the sidecar while the first backend call runs.
	backendLatency = 3 * time.Second
	cacheTTL       = 100 * time.Millisecond
	burst          = 10_000
)

// proxyPodSelector lists the release's proxy pods (backend + sidecar).
var proxyPodSelector = metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=proxy"}

// TestCollapserOnKind installs the chart into a kind cluster and checks,
// from the hello backend's own counter, that the sidecar collapses bursts,
// that the dashboard, evaluated through Prometheus as Grafana would, shows
// the burst exactly, that replies are never shared across credentials, that
// the sidecar is the only way to the backend from another namespace, is
// scraped by Prometheus, passes helm test (whose pod is then deleted), that
// the sidecar injector, installed alone with the README's command for kind
// (make deploy-injector), puts the sidecar in front of workloads of their
// own (checkInjector), that the release takes a new TTL on upgrade, and
// that the injector still admits pods after an upgrade with that command.
//
// The subtests share one release on purpose: an install with Prometheus
// takes about a minute on kind, and every subtest counts only what its own
// load did (the backend's count before and after it, through the demo
// client), so one that fails leaves the next one's measure intact. Three
// depend on an earlier one and say so when it did not run: the dashboard
// check reads the burst's report, the upgrade replaces the installed pod,
// and the injector's upgrade needs its install. The replicas test installs
// a release of its own; the injector (whose webhook configuration is
// cluster-wide) is a release of its own, and its workloads get a namespace
// of their own.
func TestCollapserOnKind(t *testing.T) {
	s := loadSettings(t)
	ensureCluster(t, s)
	loadImages(t, s)

	namespace := "collapser-e2e-" + strings.ToLower(random.UniqueId())
	kubectl := restrictedNamespace(t, s, namespace)
	injector := injectorRelease(t, s)

	opts := helmOptions(s, kubectl, cacheTTL)
	helm.Install(t, opts, s.chartDir, release)
	podName := waitForProxyPod(t, kubectl, "")
	var prom panelquery.Client
	if s.prometheus {
		prom = prometheusClient(t, kubectl)
	}

	var burstReport *demo.Report
	var burstEnd time.Time
	t.Run("burst of identical calls makes one backend call", func(t *testing.T) {
		target, backend := openTunnels(t, kubectl)
		if s.prometheus {
			waitForFirstScrape(t, prom)
		}
		report := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: burst, Concurrency: burst, Name: "burst", Timeout: time.Minute})
		burstReport, burstEnd = report, time.Now()
		checkBurstCollapsed(t, report)
	})

	if s.prometheus {
		t.Run("the dashboard shows the burst exactly, through the cluster's Prometheus", func(t *testing.T) {
			if burstReport == nil {
				t.Fatal("the burst did not run")
			}
			target, backend := openTunnels(t, kubectl)
			checkDashboard(t, s, prom, target, backend, burstReport, burstEnd)
		})
	}

	t.Run("callers with different credentials never share a reply", func(t *testing.T) {
		target, backend := openTunnels(t, kubectl)
		report := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: 1000, Concurrency: 1000, Name: "creds",
			Authorization: "Bearer alice", SecondAuthorization: "Bearer bob", Timeout: time.Minute})
		seen := map[string]bool{}
		for _, b := range report.Bursts {
			if b.Mismatched != 0 {
				t.Errorf("caller %q got %d replies computed for another caller", b.Caller, b.Mismatched)
			}
			for caller := range b.Replies {
				seen[caller] = true
			}
		}
		if !seen["alice"] || !seen["bob"] || report.BackendCalls < 2 {
			t.Errorf("backend served callers %v in %d calls; want both alice and bob, at least 2 calls", seen, report.BackendCalls)
		}
	})

	t.Run("from another namespace the backend is reached only through the sidecar", func(t *testing.T) {
		checkNoBypass(t, s, kubectl, podName)
	})

	if s.prometheus {
		t.Run("prometheus scrapes the sidecar and agrees with the backend", func(t *testing.T) {
			checkPrometheus(t, kubectl, prom)
		})
	}

	t.Run("helm test passes, prints its report and deletes its pod", func(t *testing.T) {
		out, err := helm.RunHelmCommandAndGetOutputE(t, opts, "test", release, "--timeout", "5m")
		if err != nil {
			t.Fatalf("helm test: %v\n%s", err, out)
		}
		for _, want := range []string{"Phase:          Succeeded", `"backend_calls"`, `"collapse_ratio"`} {
			if !strings.Contains(out, want) {
				t.Errorf("helm test output lacks %s:\n%s", want, out)
			}
		}
		if _, err := k8s.GetPodE(t, kubectl, release+"-test-collapse"); err == nil {
			t.Errorf("test pod %s-test-collapse still exists after it succeeded", release)
		}
	})

	t.Run("three replicas collapse as one", func(t *testing.T) {
		checkReplicas(t, s)
	})

	injectorInstalled := false
	t.Run("the injector, installed with the README's command, puts the sidecar in front of workloads the chart did not render", func(t *testing.T) {
		deployInjector(t, s, s.imageTag)
		injectorInstalled = true
		checkInjector(t, s, injector)
	})

	t.Run("upgrade with a new TTL rolls the pod and the TTL takes effect", func(t *testing.T) {
		const newTTL = 30 * time.Second
		opts := helmOptions(s, kubectl, newTTL)
		helm.Upgrade(t, opts, s.chartDir, release)
		newPod := waitForProxyPod(t, kubectl, podName)
		t.Logf("pod %s replaced by %s", podName, newPod)

		target, backend := openTunnels(t, kubectl)
		// Two calls a second apart: with the old 100ms TTL the second would
		// reach the backend again; with 30s it is a cache hit.
		first := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: 1, Concurrency: 1, Name: "ttl", Timeout: time.Minute})
		time.Sleep(time.Second) // the gap the TTL must cover, not synchronisation
		second := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: 1, Concurrency: 1, Name: "ttl", Timeout: time.Minute})
		if first.BackendCalls != 1 || second.BackendCalls != 0 {
			t.Errorf("backend calls: %d then %d, want 1 then 0 (served from the 30s cache)", first.BackendCalls, second.BackendCalls)
		}
	})

	t.Run("after an upgrade with the README's command the injector still admits pods with the sidecar", func(t *testing.T) {
		if !injectorInstalled {
			t.Fatal("the injector was not installed")
		}
		// Images of another tag change the sidecar template, so the
		// upgrade replaces the injector's pods; the chart leaves the
		// webhook's caBundle to the injector, which the upgrade must
		// keep. A namespace of its own: the webhook skips the release's.
		deployInjector(t, s, s.imageTag+"-upgraded")
		probe := restrictedNamespace(t, s, "collapser-upgraded-"+strings.ToLower(random.UniqueId()))
		// The new pods are ready a moment before the API server reaches them
		// through the Service, and meanwhile failurePolicy Ignore admits pods
		// without the sidecar (CI saw it once): wait as after the install. A
		// lost caBundle never injects, and fails the wait.
		waitUntilInjecting(t, s, probe)
		checkAdmitted(t, s, probe, "after-upgrade")
	})
}

// helmOptions installs the project's images (never pulled), a slow backend,
// the given TTL, a policy that replays StreamHellos and keeps its ended
// streams for streamHeld, no injector (deployInjector installs it), and, when enabled,
// Prometheus; Grafana stays off (no image here; its manifests are covered
// by the render tests).
func helmOptions(s settings, kubectl *k8s.KubectlOptions, ttl time.Duration) *helm.Options {
	promRepo, promTag, _ := strings.Cut(s.prometheusImage, ":")
	values := map[string]string{
		"collapser.image.repository": imageRepoPrefix + "/collapser",
		"collapser.image.tag":        s.imageTag,
		"collapser.image.pullPolicy": "Never",
		"backend.image.repository":   imageRepoPrefix + "/hello-backend",
		"backend.image.tag":          s.imageTag,
		"backend.image.pullPolicy":   "Never",
		"tests.image.repository":     imageRepoPrefix + "/democlient",
		"tests.image.tag":            s.imageTag,
		"tests.image.pullPolicy":     "Never",
		// The injector is a release of its own (deployInjector).
		"injector.enabled":          "false",
		"backend.latency":           backendLatency.String(),
		"collapser.config.cacheTTL": ttl.String(),
		// The tests count the backend's calls per burst. With early refresh
		// on, a burst's last reads would also start its key's refresh
		// whenever the key's refresh point, drawn over its TTL, fell within
		// the burst: a count that would hang on the clock. Early refresh is
		// tested on three sidecars on a fake clock, and measured on kind by
		// TestRolloutLoadOnKind.
		"collapser.config.earlyRefresh": "false",
		"grafana.enabled":               "false",
		"prometheus.enabled":            "false",

		// The policy file's one rule; every other method keeps the flags' rule.
		"collapser.policy.methods[0].name":     streamHellos,
		"collapser.policy.methods[0].stream":   "replay",
		"collapser.policy.methods[0].cacheTTL": streamHeld.String(),
		// GetGreeting's NOT_FOUND is kept an hour on every replica, for the
		// purge to take back.
		"collapser.policy.methods[1].name":          getGreeting,
		"collapser.policy.methods[1].cacheCodes[0]": "NOT_FOUND",
		"collapser.policy.methods[1].cacheCodesTTL": purgedTTL.String(),
	}
	if s.prometheus {
		values["prometheus.enabled"] = "true"
		values["prometheus.image.repository"] = promRepo
		values["prometheus.image.tag"] = promTag
		values["prometheus.image.pullPolicy"] = "Never"
	}
	return &helm.Options{
		KubectlOptions: kubectl,
		SetValues:      values,
		ExtraArgs: map[string][]string{
			"install": {"--wait", "--timeout", "5m"},
			"upgrade": {"--wait", "--timeout", "5m"},
		},
	}
}

// restrictedNamespace creates a namespace enforcing the "restricted" Pod
// Security Standard, deleted when the test ends (after its diagnostics are
// dumped on failure), and returns options for it.
func restrictedNamespace(t *testing.T, s settings, name string) *k8s.KubectlOptions {
	t.Helper()
	kubectl := k8s.NewKubectlOptions("", s.kubeconfigPath, name)
	k8s.CreateNamespaceWithMetadata(t, kubectl, metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	})
	t.Cleanup(func() { k8s.DeleteNamespace(t, kubectl, name) })
	dumpOnFailure(t, kubectl)
	return kubectl
}

// waitForProxyPod waits until the release's proxy pod (backend + sidecar) is
// the only one and available with every container ready, and returns its
// name. A pod named replaced must be gone.
func waitForProxyPod(t *testing.T, kubectl *k8s.KubectlOptions, replaced string) string {
	t.Helper()
	return retry.DoWithRetry(t, "proxy pod available (replacing "+replaced+")", 150, 2*time.Second, func() (string, error) {
		pods := k8s.ListPods(t, kubectl, proxyPodSelector)
		if len(pods) == 1 && pods[0].Name != replaced && pods[0].DeletionTimestamp == nil && k8s.IsPodAvailable(&pods[0]) {
			return pods[0].Name, nil
		}
		return "", fmt.Errorf("%d proxy pods, none available and new", len(pods))
	})
}

// openTunnels forwards local ports to the release's Service: its gRPC port
// (the sidecar) and backend-metrics port; it returns the sidecar's address
// and the URL of the hello backend's metrics, where its own count is read.
func openTunnels(t *testing.T, kubectl *k8s.KubectlOptions) (target, backendMetrics string) {
	t.Helper()
	return openTunnelsTo(t, kubectl, k8s.ResourceTypeService, release)
}

// openTunnelsTo is openTunnels to a Service or a pod of the namespace whose
// ports 50052 and 2113 are the sidecar's and the hello backend's metrics.
func openTunnelsTo(t *testing.T, kubectl *k8s.KubectlOptions, kind k8s.KubeResourceType, name string) (target, backendMetrics string) {
	t.Helper()
	sidecar := k8s.NewTunnel(kubectl, kind, name, 0, 50052)
	sidecar.ForwardPort(t)
	t.Cleanup(sidecar.Close)
	metrics := k8s.NewTunnel(kubectl, kind, name, 0, 2113)
	metrics.ForwardPort(t)
	t.Cleanup(metrics.Close)
	return sidecar.Endpoint(), "http://" + metrics.Endpoint() + "/metrics"
}

// checkBurstCollapsed checks, from the backend's own count, that a burst
// of identical calls through one sidecar collapsed: every call that
// arrives while one backend call runs joins it, and the cache covers
// cacheTTL after, so a burst shorter than a backend latency makes one
// call, and a longer one at most one per latency+TTL.
func checkBurstCollapsed(t *testing.T, report *demo.Report) {
	t.Helper()
	most := 1 + int64(report.Duration/(backendLatency+cacheTTL))
	t.Logf("%d requests in %v: %d backend calls (at most %d explained), collapse ratio %.5f",
		report.Requests, report.Duration, report.BackendCalls, most, report.CollapseRatio)
	if report.Errors != 0 {
		t.Errorf("%d requests failed: %v", report.Errors, report.ErrorsByCode)
	}
	if report.BackendCalls < 1 || report.BackendCalls > most {
		t.Errorf("backend saw %d calls, want 1 to %d", report.BackendCalls, most)
	}
	if report.Duration < backendLatency && report.BackendCalls != 1 {
		t.Errorf("burst took %v, less than a backend latency, yet the backend saw %d calls", report.Duration, report.BackendCalls)
	}
	if report.CollapseRatio < 0.999 {
		t.Errorf("collapse ratio %.5f, want at least 0.999", report.CollapseRatio)
	}
}

// runDemo sends the demo client's burst and returns its report.
func runDemo(t *testing.T, cfg demo.Config) *demo.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report, err := demo.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	return report
}
