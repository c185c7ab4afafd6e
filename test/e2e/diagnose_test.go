package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dumpOnFailure registers a cleanup that, if the test failed, writes the
// namespace's pods (described), events and container logs to the test log.
// Register it after the namespace's own cleanup so it runs first.
func dumpOnFailure(t *testing.T, kubectl *k8s.KubectlOptions) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		describePods(t, kubectl, metav1.ListOptions{}, &b)
		listEvents(t, kubectl, &b)
		t.Logf("diagnostics of namespace %s:\n%s", kubectl.Namespace, b.String())
	})
}

// describePods writes the states and the logs of every container of the
// pods of selector, init containers (native sidecars) included.
func describePods(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions, b *strings.Builder) {
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		fmt.Fprintf(b, "no client: %v\n", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := clientset.CoreV1().Pods(kubectl.Namespace).List(ctx, selector)
	if err != nil {
		fmt.Fprintf(b, "list pods: %v\n", err)
		return
	}
	for _, pod := range pods.Items {
		fmt.Fprintf(b, "=== pod %s: phase %s, node %s\n", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		for _, c := range pod.Status.Conditions {
			fmt.Fprintf(b, "  condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		statuses := append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			fmt.Fprintf(b, "  container %s: ready=%v restarts=%d image=%s state=%s\n", cs.Name, cs.Ready, cs.RestartCount, cs.Image, containerState(cs.State))
			if cs.LastTerminationState.Terminated != nil {
				fmt.Fprintf(b, "    last termination: %s\n", containerState(cs.LastTerminationState))
			}
		}
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			logs, err := clientset.CoreV1().Pods(kubectl.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr(int64(200))}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(b, "  --- logs of %s: %v\n", c.Name, err)
				continue
			}
			fmt.Fprintf(b, "  --- logs of %s (last 200 lines):\n%s\n", c.Name, logs)
		}
	}
}

// containerState says in a few words what state s is.
func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.String()
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit %d: %s)", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
	}
	return "unknown"
}

// listEvents writes the namespace's events, oldest first.
func listEvents(t *testing.T, kubectl *k8s.KubectlOptions, b *strings.Builder) {
	events, err := k8s.ListEventsE(t, kubectl, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "list events: %v\n", err)
		return
	}
	sort.Slice(events, func(i, j int) bool { return events[i].LastTimestamp.Before(&events[j].LastTimestamp) })
	fmt.Fprintln(b, "=== events")
	for _, e := range events {
		fmt.Fprintf(b, "  %s %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
