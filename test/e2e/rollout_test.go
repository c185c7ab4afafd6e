package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	corev1 "k8s.io/api/core/v1"
)

// The rollout load (issue 29): three replicas with peers, a steady load
// spread over many keys, and the backends' own counts, tallied over every
// pod that served (the demo client's --rate). Its numbers are in
// test/README.md.
const (
	rolloutKeys    = 500
	rolloutRate    = 1000 // calls per second over the keys: each key 2 per second
	rolloutTTL     = 5 * time.Second
	rolloutLatency = 20 * time.Millisecond
	// rolloutWarmUp loads every key; rolloutLoad is each measured load,
	// long enough for a rolling restart of three pods on kind.
	rolloutWarmUp = 20 * time.Second
	rolloutLoad   = 90 * time.Second
	// rolloutBound bounds the wait for the client pod: its three loads and
	// its start, several times over.
	rolloutBound = 10 * time.Minute
)

// TestRolloutLoadOnKind measures what a rolling restart of three replicas
// costs their backends: one client pod sends the same steady load three
// times in a row (one container after another, no gap), a warm-up, a quiet
// load, and a load during which the Deployment is restarted (kubectl
// rollout restart, the chart's strategy: one pod more, none less), and
// reports each load's backend calls, from the hello backends' own counts of
// every pod that served it (the pods the restart replaced too). It is a
// load program, not part of make e2e: it reports its numbers and fails only
// when a load could not run (make rollout-load).
func TestRolloutLoadOnKind(t *testing.T) {
	s := loadSettings(t)
	ensureCluster(t, s)
	loadImages(t, s)
	kubectl := restrictedNamespace(t, s, "collapser-rollout-"+strings.ToLower(random.UniqueId()))
	opts := helmOptions(s, kubectl, rolloutTTL)
	opts.SetValues["replicaCount"] = fmt.Sprint(replicas)
	opts.SetValues["backend.latency"] = rolloutLatency.String()
	opts.SetValues["tests.enabled"] = "false"
	delete(opts.SetValues, "collapser.config.earlyRefresh") // the chart's default: the load measures it
	helm.Install(t, opts, s.chartDir, release)
	waitForProxyPods(t, kubectl, replicas)
	waitForEndpoints(t, kubectl, release, replicas)
	waitForMembers(t, kubectl, replicas)

	ns := kubectl.Namespace
	args := func(d time.Duration) []string {
		return []string{"--json",
			"--target=" + fmt.Sprintf("%s.%s.svc:50052", release, ns),
			// Every pod, ready or not, terminating too, until it is gone.
			"--backend-metrics=" + fmt.Sprintf("http://%s-replicas.%s.svc:2113/metrics", release, ns),
			"--name=key", fmt.Sprint("--keys=", rolloutKeys), fmt.Sprint("--rate=", rolloutRate),
			fmt.Sprint("--duration=", d), "--concurrency=1000", "--connections=30"}
	}
	pod := clientPod(s, "rollout-load", args(rolloutLoad))
	for i, d := range []time.Duration{rolloutWarmUp, rolloutLoad} {
		c := *pod.Spec.Containers[0].DeepCopy()
		c.Name, c.Args = fmt.Sprint("load-", i), append([]string{"--quiet", "--timeout=30s"}, args(d)...)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	done := make(chan burstResult, 1)
	var res podResult
	go func() {
		var err error
		res, err = runPodForE(t, kubectl, pod, rolloutBound)
		done <- burstResult{err: err}
	}()

	// The restart starts once the last load runs.
	retry.DoWithRetry(t, "the measured load under the restart starts", int(rolloutBound/time.Second), time.Second, func() (string, error) {
		p, err := k8s.GetPodE(t, kubectl, pod.Name)
		if err != nil || podStarted(p) {
			return "", err
		}
		return "", fmt.Errorf("pod %s: %s", pod.Name, p.Status.Phase)
	})
	restarted := time.Now()
	k8s.RunKubectl(t, kubectl, "rollout", "restart", "deployment", release)
	k8s.RunKubectl(t, kubectl, "rollout", "status", "deployment", release, "--timeout=5m")
	rolled := time.Since(restarted)
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	if len(res.initLogs) != 2 {
		t.Fatalf("the client pod ran %d of its first two loads:\n%s", len(res.initLogs), strings.Join(res.initLogs, ""))
	}
	var loads [3]demoReport
	for i, logs := range append(res.initLogs, res.logs) {
		r, err := reportOf(logs)
		if err != nil {
			t.Fatal(err)
		}
		loads[i] = r
	}
	quiet, restart := loads[1], loads[2]
	t.Logf("%d keys, %d calls/s, TTL %s, backend %s, loads of %s; the restart took %s",
		rolloutKeys, rolloutRate, rolloutTTL, rolloutLatency, rolloutLoad, rolled.Round(time.Second))
	for i, name := range []string{"warm-up", "quiet", "restart"} {
		r := loads[i]
		t.Logf("%-8s %6d calls (%d failed): %5d backend calls, %.3f per key per TTL",
			name, r.Requests, r.Errors, r.BackendCalls, perKeyPerTTL(r, i))
	}
	t.Logf("the restart made %+.1f%% backend calls (%d against %d)",
		100*(float64(restart.BackendCalls)/float64(quiet.BackendCalls)-1), restart.BackendCalls, quiet.BackendCalls)
	logPodCounters(t, kubectl, "a pod the restart started")
}

// logPodCounters logs, per pod of the release (title says which they
// are), what it counted: the keys it took over from another replica, by
// result; its background refreshes, by reason; its leaders' calls, by who
// answered; the calls that fell back to its own backend because no owner
// answered; its lease lapses (each took everything back); its backend
// calls.
func logPodCounters(t *testing.T, kubectl *k8s.KubectlOptions, title string) {
	for pod, families := range podMetrics(t, kubectl, proxyPodSelector, sidecarMetricsPort) {
		sum := func(name string, match map[string]string) float64 { return sampleSum(families[name], match) }
		var parts []string
		for _, result := range []string{"taken", "none", "failed"} {
			parts = append(parts, fmt.Sprintf("handoffs %s %v", result, sum("collapser_handoffs_total", map[string]string{"result": result})))
		}
		for _, reason := range []string{"early", "stale", "purge"} {
			parts = append(parts, fmt.Sprintf("refreshes %s %v", reason, sum("collapser_refreshes_total", map[string]string{"reason": reason})))
		}
		for _, owner := range []string{"self", "peer", "none", "kept"} {
			parts = append(parts, fmt.Sprintf("leaders' calls owner=%s %v", owner, sum("collapser_peer_calls_total", map[string]string{"owner": owner})))
		}
		parts = append(parts, fmt.Sprintf("fallbacks %v", sum("collapser_peer_fallbacks_total", nil)),
			fmt.Sprintf("lease lapses %v", sum("collapser_peer_lease_lapses_total", nil)),
			fmt.Sprintf("backend calls %v", sum("collapser_backend_calls_total", nil)))
		t.Logf("%s: %s counted %s", title, pod, strings.Join(parts, ", "))
	}
}

// perKeyPerTTL is a load's backend calls per key per TTL; load i is the
// warm-up when 0.
func perKeyPerTTL(r demoReport, i int) float64 {
	d := rolloutLoad
	if i == 0 {
		d = rolloutWarmUp
	}
	return float64(r.BackendCalls) / rolloutKeys / (float64(d) / float64(rolloutTTL))
}

// podStarted reports whether a container of p other than its init
// containers has started.
func podStarted(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}
