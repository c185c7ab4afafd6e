package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
)

// checkPurgeReachesUnreadyPod takes one of the release's pods out of the
// Services while it keeps running (its readiness gate False): it leaves
// <release>-pods, whose pods own the keys (every sidecar then lists one
// replica fewer), but stays in <release>-replicas, which lists every pod.
// Every pod keeps a greeting's NOT_FOUND; a purge of GetGreeting through a
// ready pod's admin port reaches the three replicas and misses none; and a
// read through the unready pod then makes a backend call (the backends' own
// counts) instead of serving what the purge took back. The pod is then
// made ready again and is back in the Services.
func checkPurgeReachesUnreadyPod(t *testing.T, kubectl *k8s.KubectlOptions, gate *gateKeeper) {
	pods := proxyPods(t, kubectl)
	unready, through := pods[len(pods)-1], pods[0]
	gate.hold(t, unready.Name)
	t.Cleanup(func() { gate.release(t, unready.Name) }) // for the subtests after a failure
	waitForPodInServices(t, kubectl, unready.Name, false)
	waitForMembers(t, kubectl, replicas-1)
	t.Logf("pod %s is not ready: out of %s and %s-pods, still in %s-replicas", unready.Name, release, release, release)

	clients := greeters(t, kubectl, pods)
	const name = "purge-unready-e2e"
	kept := keepGreeting(t, kubectl, name, clients)
	resp := purgeGreetings(t, kubectl, through.Name)
	if resp.GetReplicas() != replicas || len(resp.GetMissed()) != 0 {
		t.Errorf("the purge reached %d replicas and missed %v, want %d and none: the unready pod %s is a replica too",
			resp.GetReplicas(), resp.GetMissed(), replicas, unready.Name)
	}
	readNotFound(t, name, clients[len(clients)-1])
	if got := greetingCalls(t, kubectl) - kept; got != 1 {
		t.Errorf("a read through the unready pod %s after the purge made %v backend calls, want 1: it may not serve what was purged", unready.Name, got)
	}

	gate.release(t, unready.Name)
	waitForPodInServices(t, kubectl, unready.Name, true)
	waitForEndpoints(t, kubectl, release, replicas)
	waitForMembers(t, kubectl, replicas)
}

// waitForPodInServices waits until pod's readiness is ready, and it is a
// ready endpoint of the release's Service and of <release>-pods exactly
// when it is ready, beside the other pods, all ready; and a ready endpoint
// of <release>-replicas either way (publishNotReadyAddresses).
func waitForPodInServices(t *testing.T, kubectl *k8s.KubectlOptions, pod string, ready bool) {
	t.Helper()
	retry.DoWithRetry(t, fmt.Sprintf("pod %s ready %v in the Services, in %s-replicas either way", pod, ready, release), 90, 2*time.Second, func() (string, error) {
		p, err := k8s.GetPodE(t, kubectl, pod)
		if err != nil {
			return "", err
		}
		if podReady(p) != ready {
			return "", fmt.Errorf("pod %s ready %v", pod, podReady(p))
		}
		want := map[string]int{release: replicas - 1, release + "-pods": replicas - 1, release + "-replicas": replicas}
		if ready {
			want[release], want[release+"-pods"] = replicas, replicas
		}
		for service, n := range want {
			endpoints, err := endpointsOf(t, kubectl, service)
			if err != nil {
				return "", err
			}
			listed := 0
			for _, r := range endpoints {
				if r {
					listed++
				}
			}
			if listed != n || endpoints[pod] != (ready || service == release+"-replicas") {
				return "", fmt.Errorf("service %s: %d ready endpoints, pod %s's ready: %v", service, listed, pod, endpoints[pod])
			}
		}
		return "", nil
	})
}

// waitForMembers waits until every live proxy pod's peer connection lists
// n replicas (collapser_peer_members): each resolves <release>-pods, of
// ready pods, every 2 s.
func waitForMembers(t *testing.T, kubectl *k8s.KubectlOptions, n int) {
	t.Helper()
	retry.DoWithRetry(t, fmt.Sprintf("every pod lists %d replicas", n), int(membershipWait/time.Second), time.Second, func() (string, error) {
		for pod, families := range podMetrics(t, kubectl, proxyPodSelector, sidecarMetricsPort) {
			if m := sampleSum(families["collapser_peer_members"], nil); m != float64(n) {
				return "", fmt.Errorf("pod %s lists %v replicas", pod, m)
			}
		}
		return "", nil
	})
}
