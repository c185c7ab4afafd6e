package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkNoBypass runs the demo client in a namespace of its own, as any other
// workload of the cluster would: through the Service it gets the sidecar
// (200 calls, far fewer backend calls), while the backend's gRPC port on the
// pod's own address refuses it (the backend listens on loopback), and the
// Service has no port to the backend at all.
func checkNoBypass(t *testing.T, s settings, kubectl *k8s.KubectlOptions, proxyPod string) {
	svc := k8s.GetService(t, kubectl, release)
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.Port))
	}
	slices.Sort(ports)
	if want := []string{"backend-metrics:2113", "grpc:50052", "metrics:2112"}; !slices.Equal(ports, want) {
		t.Errorf("Service ports %v, want %v: no port may lead to the backend's gRPC port", ports, want)
	}

	other := restrictedNamespace(t, s, "collapser-other-"+strings.ToLower(random.UniqueId()))
	host := release + "." + kubectl.Namespace + ".svc"
	metrics := "--backend-metrics=http://" + host + ":2113/metrics"
	through := runClientPod(t, s, other, "through-sidecar", "--target="+host+":50052", metrics, "--requests=200", "--concurrency=200", "--min-collapse-ratio=0.9")
	if through.exitCode != 0 {
		t.Errorf("200 calls through the sidecar from another namespace failed (exit %d):\n%s", through.exitCode, through.logs)
	} else {
		t.Logf("through the sidecar from another namespace:\n%s", through.logs)
	}

	podIP := k8s.GetPod(t, kubectl, proxyPod).Status.PodIP
	direct := runClientPod(t, s, other, "direct-to-backend", "--target="+podIP+":50051", metrics, "--requests=200")
	if direct.exitCode == 0 || !strings.Contains(direct.logs, "is unreachable") {
		t.Errorf("calls straight to the backend's port %s:50051 were not refused (exit %d):\n%s", podIP, direct.exitCode, direct.logs)
	} else {
		t.Logf("straight to the backend at %s:50051: %s", podIP, strings.TrimSpace(direct.logs))
	}
}

// podResult is how a run-once pod ended.
type podResult struct {
	exitCode int32
	logs     string
	// initLogs are the logs of its init containers, in order.
	initLogs []string
}

// runClientPod runs the demo client with args in a pod of the namespace and
// waits for it to end.
func runClientPod(t *testing.T, s settings, kubectl *k8s.KubectlOptions, name string, args ...string) podResult {
	t.Helper()
	res, err := runClientPodE(t, s, kubectl, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runClientPodE is runClientPod returning its failure instead of failing the
// test, for a run on a goroutine of its own.
func runClientPodE(t *testing.T, s settings, kubectl *k8s.KubectlOptions, name string, args ...string) (podResult, error) {
	return runPodE(t, kubectl, clientPod(s, name, args))
}

// runPodE creates a run-once pod in kubectl's namespace, waits for its
// container to end (or an init container to fail), and returns how it ended
// with the logs of its containers that ran. It reports failures as its
// error, for a run on a goroutine of its own.
func runPodE(t *testing.T, kubectl *k8s.KubectlOptions, pod *corev1.Pod) (podResult, error) {
	return runPodForE(t, kubectl, pod, podBound)
}

// podBound bounds the wait for a run-once pod to end.
const podBound = 3 * time.Minute

// runPodForE is runPodE, waiting up to bound for the pod to end.
func runPodForE(t *testing.T, kubectl *k8s.KubectlOptions, pod *corev1.Pod, bound time.Duration) (podResult, error) {
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		return podResult{}, err
	}
	name := pod.Name
	pods := clientset.CoreV1().Pods(kubectl.Namespace)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return podResult{}, fmt.Errorf("create pod %s: %w", name, err)
	}
	initFailed := false
	code, err := retry.DoWithRetryE(t, "pod "+name+" ends", int(bound/(2*time.Second)), 2*time.Second, func() (string, error) {
		p, err := k8s.GetPodE(t, kubectl, name)
		if err != nil {
			return "", err
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.ExitCode != 0 {
				initFailed = true
				return fmt.Sprint(term.ExitCode), nil
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				return fmt.Sprint(cs.State.Terminated.ExitCode), nil
			}
		}
		return "", fmt.Errorf("pod %s is %s", name, p.Status.Phase)
	})
	if err != nil {
		return podResult{}, err
	}
	exit, err := strconv.ParseInt(code, 10, 32)
	if err != nil {
		return podResult{}, fmt.Errorf("exit code of pod %s: %w", name, err)
	}
	res := podResult{exitCode: int32(exit)}
	logCtx, logCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer logCancel()
	logsOf := func(container string) (string, error) {
		logs, err := pods.GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(logCtx)
		if err != nil {
			return "", fmt.Errorf("logs of pod %s, container %s: %w", name, container, err)
		}
		return string(logs), nil
	}
	for _, c := range pod.Spec.InitContainers {
		logs, err := logsOf(c.Name)
		if err != nil && initFailed {
			break // it never ran: one before it failed
		}
		if err != nil {
			return podResult{}, err
		}
		res.initLogs = append(res.initLogs, logs)
	}
	if initFailed {
		return res, nil
	}
	if res.logs, err = logsOf(pod.Spec.Containers[0].Name); err != nil {
		return podResult{}, err
	}
	return res, nil
}

// clientPod is a run-once demo client pod that meets the restricted Pod
// Security Standard.
func clientPod(s settings, name string, args []string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clientPodSpec(s, args)}
}

// clientPodSpec runs the demo client once with args, restricted.
func clientPodSpec(s settings, args []string) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr(false),
		SecurityContext:              restrictedPodSecurity(),
		Containers: []corev1.Container{{
			Name:            "democlient",
			Image:           imageRepoPrefix + "/democlient:" + s.imageTag,
			ImagePullPolicy: corev1.PullNever,
			Args:            append([]string{"--quiet", "--timeout=30s"}, args...),
			SecurityContext: restrictedSecurity(),
		}},
	}
}

// restrictedPodSecurity is the pod security context the restricted Pod
// Security Standard wants, with the images' non-root user.
func restrictedPodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// restrictedSecurity is the container security context the restricted Pod
// Security Standard wants, and a read-only root file system.
func restrictedSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
