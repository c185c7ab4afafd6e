package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/collapser/collapser/src/demo"
)

// injectorChecks holds what the injector's subtests share: a namespace of
// their own, where the workloads the chart did not render run, the
// release's namespace, where the injector runs, and what they saw.
type injectorChecks struct {
	s        settings
	kubectl  *k8s.KubectlOptions // the workloads' namespace
	release  *k8s.KubectlOptions // the release's namespace: the injector's
	client   kubernetes.Interface
	injected int // pods the subtests saw admitted with the sidecar
	refused  int // pods the subtests saw refused
}

// checkInjector checks the release's sidecar injector on workloads of a
// namespace of its own, enforcing the restricted Pod Security Standard: a
// plain Deployment gets the native sidecar and collapses a burst, a Job
// completes, three replicas with the peers annotation and no certificate of
// their own get one the injector issues, collapse as one and take the
// injector's renewal of their certificate in place without a failed call, a
// pod using the sidecar's ports is refused with the message, admission
// works after a forced certificate renewal, the injector counted it all,
// and with no injector a pod starts without the sidecar, visibly. It first
// waits until the injector just installed admits pods. The
// Deployments are created at once, so that their pods start together; each
// subtest waits for its own. The injector's metrics are read before the
// outage, whose scaling to 0 ends its pods and their counts.
func checkInjector(t *testing.T, s settings, release *k8s.KubectlOptions) {
	kubectl := restrictedNamespace(t, s, "collapser-injected-"+strings.ToLower(random.UniqueId()))
	dumpInjectorOnFailure(t, release)
	client, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	c := &injectorChecks{s: s, kubectl: kubectl, release: release, client: client}
	waitUntilInjecting(t, s, kubectl)
	c.create(t, helloDeployment(s, helloApp, 1, nil), helloService(helloApp), peerTokenSecret(peersToken),
		helloDeployment(s, peersApp, replicas, map[string]string{annotationPeers: peersService, annotationPeerTokenSecret: peersToken}),
		helloService(peersApp), headlessPeersService(peersService, peersApp))

	t.Run("a plain Deployment gets the native sidecar and a burst through its Service makes one backend call", c.deploymentBurst)
	t.Run("an annotated Job completes", c.jobCompletes)
	t.Run("three replicas with the peers annotation collapse as one", c.peersCollapse)
	t.Run("renewing the peers' certificate during bursts fails no call", c.peerRenewal)
	t.Run("a pod using the sidecar's ports is refused with the message", c.collisionsRefused)
	t.Run("after a forced certificate renewal admission still works", c.renewalKeepsAdmitting)
	t.Run("the injector counted every admission", c.admissionsCounted)
	if s.prometheus {
		t.Run("the dashboard shows the injector's admissions, through its release's Prometheus", c.injectorDashboard)
	}
	t.Run("with no injector a pod starts without the sidecar, visibly", c.outageVisible)
}

// deploymentBurst checks the plain Deployment's pod: it has the native
// sidecar, its Service's gRPC port reaches the sidecar's port, and a burst
// through it makes one backend call by the backend's own count.
func (c *injectorChecks) deploymentBurst(t *testing.T) {
	pod := waitForPods(t, c.kubectl, appSelector(helloApp), 1)[0]
	c.checkInjected(t, &pod)
	grpcPort := waitForEndpointPorts(t, c.kubectl, helloApp, pod.Name)["grpc"]
	if grpcPort != 50052 {
		t.Fatalf("service %s's grpc port reaches port %d of pod %s, want the sidecar's 50052", helloApp, grpcPort, pod.Name)
	}
	checkCollapsing(t, c.kubectl, appSelector(helloApp))
	// To the pod the Service's EndpointSlice names, at the port it names:
	// Terratest's tunnel to a Service resolves a named targetPort only
	// among a pod's containers, not its init containers (native sidecars).
	target, backend := openTunnelsTo(t, c.kubectl, k8s.ResourceTypePod, pod.Name)
	report := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: burst, Concurrency: burst, Name: "injected-burst", Timeout: time.Minute})
	checkBurstCollapsed(t, report)
}

// jobCompletes runs the demo client as an annotated Job against the plain
// Deployment's Service: the Job succeeds while its pod has the native
// sidecar, which ends when the client exits.
func (c *injectorChecks) jobCompletes(t *testing.T) {
	ns := c.kubectl.Namespace
	job := clientJob(c.s, "hello-job", fmt.Sprintf("--target=%s.%s.svc:50052", helloApp, ns),
		fmt.Sprintf("--backend-metrics=http://%s.%s.svc:2113/metrics", helloApp, ns), "--requests=100", "--concurrency=100")
	c.create(t, job)
	retry.DoWithRetry(t, "job "+job.Name+" succeeds", 90, 2*time.Second, func() (string, error) {
		got, err := c.client.BatchV1().Jobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			return "", err
		case got.Status.Failed > 0:
			return "", retry.FatalError{Underlying: fmt.Errorf("job %s failed: %+v", job.Name, got.Status.Conditions)}
		case got.Status.Succeeded != 1:
			return "", fmt.Errorf("job %s: %d active, %d succeeded", job.Name, got.Status.Active, got.Status.Succeeded)
		}
		return "", nil
	})
	pods := k8s.ListPods(t, c.kubectl, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if len(pods) != 1 {
		t.Fatalf("job %s has %d pods, want 1", job.Name, len(pods))
	}
	c.checkInjected(t, &pods[0])
	for _, cs := range pods[0].Status.InitContainerStatuses {
		if cs.Name == sidecarName {
			t.Logf("job %s succeeded; pod %s is %s, its sidecar %s", job.Name, pods[0].Name, pods[0].Status.Phase, containerState(cs.State))
		}
	}
}

// peersCollapse checks that the three replicas with the peers annotation
// have the peer port and the certificate the injector issued them, and
// that a burst spread over them through their Service makes one backend
// call in total, by the backends' own counts.
func (c *injectorChecks) peersCollapse(t *testing.T) {
	pods := waitForPods(t, c.kubectl, appSelector(peersApp), replicas)
	for _, pod := range pods {
		sidecar := c.checkInjected(t, &pod)
		if !hasPort(sidecar, sidecarPeerPort) {
			t.Errorf("the sidecar of pod %s has no port named %s: %+v", pod.Name, sidecarPeerPort, sidecar.Ports)
		}
		// The replicas call each other over mutual TLS: the one backend
		// call of the spread burst below is made over it.
		tlsFiles := 0
		for _, e := range sidecar.Env {
			if strings.HasPrefix(e.Name, "COLLAPSER_PEER_TLS_") && strings.HasPrefix(e.Value, "/") {
				tlsFiles++
			}
		}
		if tlsFiles != 3 {
			t.Errorf("the sidecar of pod %s reads %d peer TLS files, want 3 (certificate, key, CA): %+v", pod.Name, tlsFiles, sidecar.Env)
		}
	}
	c.checkIssuedPeerCertificate(t)
	waitForEndpoints(t, c.kubectl, peersService, replicas)
	waitForEndpoints(t, c.kubectl, peersApp, replicas)
	checkCollapsing(t, c.kubectl, appSelector(peersApp))
	checkSpreadBurst(t, newSpreadBurster(c.s, c.kubectl, peersApp, peersService), appSelector(peersApp), "injected-peers")
}

// collisionsRefused creates annotated pods whose app container declares a
// port of the sidecar's, or mounts the directory where the sidecar shares
// its admin socket: each is refused with the injector's message, which
// names the port or directory and the setting that moves it.
func (c *injectorChecks) collisionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want string
	}{
		{"port-50052", func(p *corev1.Pod) { addPort(p, corev1.ContainerPort{Name: "grpc", ContainerPort: 50052}) },
			`port 50052 of the collapser sidecar (collapser.io/port) is already used by container "hello"; set collapser.io/port to a free port`},
		{"port-2112", func(p *corev1.Pod) { addPort(p, corev1.ContainerPort{Name: "prom", ContainerPort: 2112}) },
			`port 2112 of the collapser sidecar (collapser.io/metrics-port) is already used by container "hello"; set collapser.io/metrics-port to a free port`},
		{"admin-dir", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "run", MountPath: adminSocketDir})
		}, `container "hello" mounts /var/run/collapser, where the collapser sidecar shares its admin socket; mount it elsewhere, or set injector.adminSocket of the injector's chart to false`},
	} {
		pod := injectedHelloPod(c.s, "collides-"+tc.name, probeApp)
		tc.edit(pod)
		_, err := c.client.CoreV1().Pods(c.kubectl.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `admission webhook "pod.inject.collapser.io" denied the request`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pod %s: %v; want it refused by the injector with %q", pod.Name, err, tc.want)
			continue
		}
		c.refused++
		t.Logf("pod %s refused: %v", pod.Name, err)
	}
}

// addPort declares port on pod's app container.
func addPort(pod *corev1.Pod, port corev1.ContainerPort) {
	pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, port)
}

// renewalKeepsAdmitting forces a renewal of the injector's certificate by
// removing it from the Secret (its CAs stay), waits until an injector
// renewed it (a new serving certificate, and two CAs in the caBundle of
// every webhook of its configuration: the new one and the one before,
// still trusted),
// and checks that a pod is still admitted with the sidecar.
func (c *injectorChecks) renewalKeepsAdmitting(t *testing.T) {
	secrets := c.client.CoreV1().Secrets(c.release.Namespace)
	before, err := secrets.Get(t.Context(), injectorSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldCAs := parseCerts(t, before.Data["ca.crt"])
	k8s.RunKubectl(t, c.release, "patch", "secret", injectorSecret, "--type=json", `--patch=[{"op":"remove","path":"/data/tls.crt"}]`)
	removed := time.Now()
	// The injectors look at the Secret every certificate check interval.
	retry.DoWithRetry(t, "the injector renews its certificate", int(3*certCheckInterval/(2*time.Second)), 2*time.Second, func() (string, error) {
		secret, err := secrets.Get(t.Context(), injectorSecret, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if len(secret.Data["tls.crt"]) == 0 {
			return "", errors.New("no serving certificate yet")
		}
		newCA := parseCerts(t, secret.Data["ca.crt"])[0]
		for i, bundle := range c.caBundles(t) {
			cas := parseCerts(t, bundle)
			if len(cas) != 2 || !cas[0].Equal(newCA) || !cas[1].Equal(oldCAs[0]) {
				return "", fmt.Errorf("webhook %d's caBundle holds %d CAs, want the new one and the one before", i, len(cas))
			}
		}
		return "", nil
	})
	t.Logf("certificate renewed %v after it was removed; every webhook's caBundle holds the new CA and the one before", time.Since(removed).Round(time.Second))
	checkAdmitted(t, c.s, c.kubectl, "after-renewal")
	c.injected++
}

// checkCollapsing checks that the sidecar of every pod of selector, ready,
// collapses SayHello, by its collapser_method_rule_info. A sidecar learns
// its backend's methods from the backend's reflection, and until then would
// pass calls through, as it would a write; a native sidecar starts before
// its app, so its first attempts fail: the sidecar is not ready until it
// has learned them, so a ready pod collapses from its first call.
func checkCollapsing(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions) {
	t.Helper()
	rule := map[string]string{"method": sayHello, "action": "collapse"}
	for pod, families := range podMetrics(t, kubectl, selector, sidecarMetricsPort) {
		if sampleSum(families["collapser_method_rule_info"], rule) != 1 {
			t.Errorf("the sidecar of ready pod %s does not collapse %s", pod, sayHello)
		}
	}
}

// checkAdmitted creates an annotated pod named name in kubectl's
// namespace, checks that admission gave it the native sidecar, and deletes
// it.
func checkAdmitted(t *testing.T, s settings, kubectl *k8s.KubectlOptions, name string) {
	t.Helper()
	client, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods(kubectl.Namespace)
	created, err := pods.Create(t.Context(), injectedHelloPod(s, name, probeApp), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	if _, err := nativeSidecar(created); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete pod %s: %v", name, err)
	}
}

// waitUntilInjecting waits until a pod created in kubectl's namespace gets
// the sidecar, asking with server-side dry runs (the webhook's sideEffects
// allow them; nothing is created). An injector just installed is ready a
// moment before the API server reaches it through its Service (kube-proxy
// programs the new endpoints), and meanwhile failurePolicy Ignore admits
// pods without the sidecar, as the chart's NOTES say.
func waitUntilInjecting(t *testing.T, s settings, kubectl *k8s.KubectlOptions) {
	t.Helper()
	client, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods(kubectl.Namespace)
	retry.DoWithRetry(t, "the injector admits pods", 30, 2*time.Second, func() (string, error) {
		got, err := pods.Create(t.Context(), injectedHelloPod(s, "dry-run-probe", probeApp), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return "", err
		}
		_, err = nativeSidecar(got)
		return "", err
	})
}

// checkInjected checks that pod has the native sidecar: an init container
// named like the chart's sidecar that always restarts, with a startup
// probe. It counts the pod as injected and returns the sidecar.
func (c *injectorChecks) checkInjected(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	sidecar, err := nativeSidecar(pod)
	if err != nil {
		t.Fatal(err)
	}
	c.injected++
	checkAdminSocketShared(t, pod, sidecar)
	return sidecar
}

// adminSocketDir is where the injected sidecar serves its admin service on
// a socket (the chart's injector.adminSocket), shared with the app.
const adminSocketDir = "/var/run/collapser"

// checkAdminSocketShared checks that the sidecar serves its admin service
// on a socket in adminSocketDir, and that every app container of pod
// mounts that directory read-only to reach it.
func checkAdminSocketShared(t *testing.T, pod *corev1.Pod, sidecar corev1.Container) {
	t.Helper()
	for _, e := range sidecar.Env {
		if e.Name == "COLLAPSER_ADMIN_LISTEN" && e.Value != "unix:"+adminSocketDir+"/admin.sock" {
			t.Errorf("the sidecar of pod %s serves its admin service on %q, want the socket in %s", pod.Name, e.Value, adminSocketDir)
		}
	}
	for _, app := range pod.Spec.Containers {
		if !slices.ContainsFunc(app.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == adminSocketDir && m.ReadOnly }) {
			t.Errorf("container %s of pod %s does not mount %s read-only: %+v", app.Name, pod.Name, adminSocketDir, app.VolumeMounts)
		}
	}
}

// nativeSidecar returns pod's native sidecar, or why it has none.
func nativeSidecar(pod *corev1.Pod) (corev1.Container, error) {
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name != sidecarName {
			continue
		}
		if ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways || ic.StartupProbe == nil {
			return ic, fmt.Errorf("pod %s's init container %s is not a native sidecar (restartPolicy %v, startup probe %v)", pod.Name, ic.Name, ic.RestartPolicy, ic.StartupProbe)
		}
		return ic, nil
	}
	return corev1.Container{}, fmt.Errorf("pod %s has no init container %s: not injected (init containers %v)", pod.Name, sidecarName, containerNames(pod.Spec.InitContainers))
}

// create creates objs, Deployments, Jobs and Services, in the injector
// checks' namespace, failing the test if one cannot be.
func (c *injectorChecks) create(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns := c.kubectl.Namespace
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *appsv1.Deployment:
			_, err = c.client.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			_, err = c.client.BatchV1().Jobs(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = c.client.CoreV1().Services(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = c.client.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = errors.New("not a kind the injector checks create")
		}
		if err != nil {
			t.Fatalf("create %T in namespace %s: %v", obj, ns, err)
		}
	}
}

// hasPort reports whether c declares a port named name.
func hasPort(c corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// containerNames lists the names of cs.
func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}
