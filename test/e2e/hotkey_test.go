package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
	dto "github.com/prometheus/client_model/go"
)

const (
	// keptBurst is a round of distinct SayHello calls through the Service:
	// each pod gets about a third and forwards two thirds of those (the
	// keys the other pods own), above the 50 forwarded calls a pod's
	// decision needs (src/internal/forwarding), none of them shared.
	keptBurst = 600
	// keptRounds bounds the rounds: a pod decides when a call is answered
	// 10 s or more after its window began, and a round lasts a client
	// pod's start and a backend call (3 s).
	keptRounds = 30
	// hotTries bounds the keys tried for a first burst that is not
	// forwarded: one key in 16 is forwarded anyway, a kept method's sample.
	hotTries = 4
)

// checkKeptMethodHotKey makes SayHello kept on every pod (made where its
// calls arrive: distinct keys through the Service, until every pod says
// collapser_peer_forwarding is 0 for it), then sends two bursts of one key
// spread over the pods, one right after the other. The first is made on
// each pod it reaches, up to one backend call per pod; its calls share on
// each pod, which makes the key hot there, and the second burst's calls are
// forwarded to the key's owner: one backend call, by the backends' own
// counts.
func checkKeptMethodHotKey(t *testing.T, kubectl *k8s.KubectlOptions, bursts spreadBurster) {
	round := 0
	retry.DoWithRetry(t, "SayHello kept on every pod", keptRounds, time.Second, func() (string, error) {
		round++
		r, err := bursts.run(t, fmt.Sprint("kept-", round), "--distinct", fmt.Sprint("--requests=", keptBurst), fmt.Sprint("--concurrency=", keptBurst))
		if err != nil {
			return "", retry.FatalError{Underlying: err}
		}
		if r.Errors != 0 {
			return "", retry.FatalError{Underlying: fmt.Errorf("round %d: %d of %d distinct calls failed", round, r.Errors, r.Requests)}
		}
		var forwarded []string
		for pod, families := range podMetrics(t, kubectl, proxyPodSelector, sidecarMetricsPort) {
			if v, ok := forwarding(families["collapser_peer_forwarding"], sayHello); !ok || v != 0 {
				forwarded = append(forwarded, pod)
			}
		}
		if len(forwarded) > 0 {
			slices.Sort(forwarded)
			return "", fmt.Errorf("after %d rounds of %d distinct calls, pods %v still forward SayHello", round, keptBurst, forwarded)
		}
		return "", nil
	})
	t.Logf("SayHello kept on every pod after %d rounds of %d distinct calls", round, keptBurst)

	for try := 1; try <= hotTries; try++ {
		name := fmt.Sprint("hot-", try)
		before := requestsPerPod(podMetrics(t, kubectl, proxyPodSelector, sidecarMetricsPort))
		reports, err := bursts.runTwice(t, name)
		if err != nil {
			t.Fatal(err)
		}
		after := requestsPerPod(podMetrics(t, kubectl, proxyPodSelector, sidecarMetricsPort))
		first, second := reports[0], reports[1]
		t.Logf("key %s: first burst %d requests (%d errors), %d backend calls; second %d requests (%d errors), %d backend calls; per pod: %s",
			name, first.Requests, first.Errors, first.BackendCalls, second.Requests, second.Errors, second.BackendCalls, perPod(before, after))
		if first.Errors != 0 || second.Errors != 0 {
			t.Fatalf("bursts failed: %d and %d errors", first.Errors, second.Errors)
		}
		for pod, n := range after {
			if served := n - before[pod]; served < 2*replicaBurst/4 {
				t.Fatalf("pod %s served %v of the two bursts, want at least a quarter: they did not reach every pod", pod, served)
			}
		}
		if first.BackendCalls < 1 || first.BackendCalls > replicas {
			t.Errorf("first burst: %d backend calls, want 1 to %d (at most one per pod)", first.BackendCalls, replicas)
		}
		if first.BackendCalls == 1 && try < hotTries {
			t.Logf("key %s was forwarded in its first burst: one of the sample of a kept method's keys; another key", name)
			continue
		}
		if second.BackendCalls != 1 {
			t.Errorf("second burst of the hot key %s: %d backend calls, want 1: its calls shared on each pod in the first burst, so each pod forwards them to the owner", name, second.BackendCalls)
		}
		return
	}
}

// forwarding returns the value of mf's sample for method, and whether it
// has one.
func forwarding(mf *dto.MetricFamily, method string) (float64, bool) {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && l.GetValue() == method {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}
