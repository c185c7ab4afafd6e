package e2e

import (
	"fmt"
	"maps"
	"testing"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/k8s"
	corev1 "k8s.io/api/core/v1"
)

// checkRollingSwitch switches the replicas release from the sidecar to the
// library (backend.collapse) with a rolling update, in two steps. The
// first step is held (minReadySeconds) with one sidecar pod and two library
// pods of the one Deployment on one ring: a burst spread over them makes one
// backend call. The rollout then goes on while distinct calls are in
// flight: none fails, and a burst over the three library pods, repeated,
// makes one backend call.
func checkRollingSwitch(t *testing.T, kubectl *k8s.KubectlOptions, opts *helm.Options, bursts spreadBurster) {
	// From three fresh sidecar pods: an earlier check added a fourth, and
	// the distinct loads before left SayHello kept (not forwarded) on them
	// (package forwarding), so that a burst's first calls would be made on
	// every pod.
	k8s.RunKubectl(t, kubectl, "scale", "deployment", release, fmt.Sprint("--replicas=", replicas))
	k8s.RunKubectl(t, kubectl, "rollout", "restart", "deployment", release)
	k8s.RunKubectl(t, kubectl, "rollout", "status", "deployment", release, "--timeout=5m")
	waitForProxyPods(t, kubectl, replicas)

	// The first step replaces two of the three pods at once, and holds.
	library := *opts
	library.SetValues = maps.Clone(opts.SetValues)
	library.SetValues["backend.collapse"] = "true"
	library.SetValues["strategy.rollingUpdate.maxSurge"] = "0"
	library.SetValues["strategy.rollingUpdate.maxUnavailable"] = "2"
	library.SetValues["minReadySeconds"] = "3600"
	library.SetValues["progressDeadlineSeconds"] = "7200"
	// helm --wait would wait for the held rollout to end.
	library.ExtraArgs = map[string][]string{"upgrade": {"--timeout", "5m"}}
	helm.Upgrade(t, &library, bursts.s.chartDir, release)
	pods := waitForKinds(t, kubectl, 1, replicas-1)
	waitForEndpoints(t, kubectl, release, replicas)
	waitForMembers(t, kubectl, replicas)
	t.Run("a burst over a sidecar pod and two library pods makes one backend call", func(t *testing.T) {
		checkSpreadBurst(t, bursts, proxyPodSelector, "mixed")
	})

	t.Run("the rollout goes on under load and loses no call", func(t *testing.T) {
		// The rollout goes on once the load's calls are at a library pod's backend.
		watched := pods[0].Name
		for _, p := range pods {
			if !isSidecarPod(p) {
				watched = p.Name
			}
		}
		done := bursts.startAtPod(t, watched, "switch", "--requests=6000", "--concurrency=600", "--distinct")
		library.SetValues["minReadySeconds"] = "0"
		helm.Upgrade(t, &library, bursts.s.chartDir, release)
		res := endOf(t, done, "the load")
		if res.err != nil {
			t.Fatal(res.err)
		}
		t.Logf("rolling switch under load: %d requests, %d errors, %d backend calls", res.r.Requests, res.r.Errors, res.r.BackendCalls)
		if res.r.Errors != 0 {
			t.Errorf("%d of %d calls failed while the release switched from the sidecar to the library", res.r.Errors, res.r.Requests)
		}
		waitForKinds(t, kubectl, 0, replicas)
	})

	// The load's distinct calls left SayHello kept on the library pods, as
	// on sidecar pods: a burst's first calls are made on each pod (at most
	// one per pod), its key is then hot, and its second burst is forwarded
	// to its owner.
	t.Run("a second burst over three library pods makes one backend call", func(t *testing.T) {
		waitForEndpoints(t, kubectl, release, replicas)
		waitForMembers(t, kubectl, replicas)
		reports, err := bursts.runTwice(t, "library")
		if err != nil {
			t.Fatal(err)
		}
		first, second := reports[0], reports[1]
		t.Logf("three library pods: first burst %d requests (%d errors), %d backend calls; second %d requests (%d errors), %d backend calls",
			first.Requests, first.Errors, first.BackendCalls, second.Requests, second.Errors, second.BackendCalls)
		if first.Errors != 0 || second.Errors != 0 {
			t.Fatalf("bursts failed: %d and %d errors", first.Errors, second.Errors)
		}
		if first.BackendCalls < 1 || first.BackendCalls > replicas || second.BackendCalls != 1 {
			t.Errorf("backend calls %d then %d, want 1 to %d (at most one per pod), then 1", first.BackendCalls, second.BackendCalls, replicas)
			logPodCounters(t, kubectl, "a library pod")
		}
	})
}

// waitForKinds waits until the release runs exactly sidecars sidecar pods
// and libraries library pods, all available, and returns them. helm upgrade
// returns once the Deployment is changed, before its controller acts: until
// then the pods before the change are listed, available, and none going
// away (a wait for the count alone once returned them).
func waitForKinds(t *testing.T, kubectl *k8s.KubectlOptions, sidecars, libraries int) []corev1.Pod {
	t.Helper()
	return waitForPodsThat(t, kubectl, proxyPodSelector, sidecars+libraries, func(pods []corev1.Pod) error {
		if s, l := kinds(pods); s != sidecars || l != libraries {
			return fmt.Errorf("%d sidecar pods and %d library pods, want %d and %d", s, l, sidecars, libraries)
		}
		return nil
	})
}

// isSidecarPod reports whether p runs the collapser sidecar (not the
// library in its backend).
func isSidecarPod(p corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "collapser" {
			return true
		}
	}
	return false
}

// kinds counts the sidecar pods and the library pods among pods.
func kinds(pods []corev1.Pod) (sidecars, libraries int) {
	for _, p := range pods {
		if isSidecarPod(p) {
			sidecars++
		} else {
			libraries++
		}
	}
	return sidecars, libraries
}
