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
// flight: none fails, and a burst over the three library pods makes one
// backend call.
func checkRollingSwitch(t *testing.T, kubectl *k8s.KubectlOptions, opts *helm.Options, bursts spreadBurster) {
	// From three sidecar pods (an earlier check added a fourth).
	k8s.RunKubectl(t, kubectl, "scale", "deployment", release, fmt.Sprint("--replicas=", replicas))
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
	pods := waitForProxyPods(t, kubectl, replicas)
	if sidecars, libraries := kinds(pods); sidecars != 1 || libraries != 2 {
		t.Fatalf("the held rollout runs %d sidecar pods and %d library pods, want 1 and 2", sidecars, libraries)
	}
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
		if sidecars, libraries := kinds(waitForProxyPods(t, kubectl, replicas)); sidecars != 0 || libraries != replicas {
			t.Fatalf("after the rollout: %d sidecar pods and %d library pods, want 0 and %d", sidecars, libraries, replicas)
		}
	})

	t.Run("a burst over three library pods makes one backend call", func(t *testing.T) {
		waitForEndpoints(t, kubectl, release, replicas)
		waitForMembers(t, kubectl, replicas)
		checkSpreadBurst(t, bursts, proxyPodSelector, "library")
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
