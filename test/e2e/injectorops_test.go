package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
	dto "github.com/prometheus/client_model/go"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The release's injector, as the chart names and runs it by default.
const (
	// injectorName names its Deployment, Service and webhook configuration.
	injectorName   = release + "-injector"
	injectorSecret = injectorName + "-tls"
	// injectorOpsPort serves its /metrics (the chart's injector.opsPort).
	injectorOpsPort = 8080
	// certCheckInterval is how often it looks at its certificate
	// (COLLAPSER_INJECTOR_CERT_CHECK_INTERVAL: the chart keeps the default).
	certCheckInterval = time.Minute
	// injectorReplicas is the number of its pods: the chart's default
	// injector.replicaCount.
	injectorReplicas = 2
)

// injectorNamespace is where the README's command for kind installs the
// injector alone (make deploy-injector: scripts/deploy.sh injector), as
// release "collapser".
const injectorNamespace = "collapser-system"

// deployInjector installs, or upgrades, the injector with the README's own
// command for kind, on the test's cluster, its images tagged tag, with a
// Prometheus that scrapes it when the test uses Prometheus.
func deployInjector(t *testing.T, s settings, tag string) {
	t.Helper()
	command(t, s.repoRoot, map[string]string{"IMAGE_TAG": tag, "KUBECONFIG": s.kubeconfigPath, "PROMETHEUS": strconv.FormatBool(s.prometheus)},
		"make", "deploy-injector", "KIND_CLUSTER="+s.cluster)
}

// injectorRelease is the namespace of the injector deployInjector
// installs; the test's end deletes it and the injector's cluster-scoped
// objects.
func injectorRelease(t *testing.T, s settings) *k8s.KubectlOptions {
	t.Helper()
	kubectl := k8s.NewKubectlOptions("", s.kubeconfigPath, injectorNamespace)
	t.Cleanup(func() {
		if err := k8s.RunKubectlE(t, kubectl, "delete", "namespace", injectorNamespace, "--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("delete namespace %s: %v", injectorNamespace, err)
		}
	})
	deleteInjectorClusterObjects(t, kubectl)
	return kubectl
}

// injectorPodSelector lists the release's injector pods.
var injectorPodSelector = metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=injector"}

// admissionsCounted reads both injectors' metrics and logs the admissions
// by result and how long they took (the histogram's mean and the buckets
// that hold half and 99 % of them). Every admission is observed once, and
// the counts cover what the subtests saw injected and refused, without an
// error.
func (c *injectorChecks) admissionsCounted(t *testing.T) {
	metrics := podMetrics(t, c.release, injectorPodSelector, injectorOpsPort)
	results := map[string]float64{}
	var total float64
	for _, result := range []string{"injected", "skipped", "rejected", "error"} {
		for _, families := range metrics {
			results[result] += sampleSum(families["collapser_injector_admissions_total"], map[string]string{"result": result})
		}
		total += results[result]
	}
	var durations []*dto.Histogram
	for _, families := range metrics {
		for _, m := range families["collapser_injector_admission_duration_seconds"].GetMetric() {
			durations = append(durations, m.GetHistogram())
		}
	}
	h := mergeHistograms(durations)
	t.Logf("%v admissions by %d injectors: %v; %d timed, mean %v, half within %v, 99%% within %v",
		total, len(metrics), results, h.count, h.mean(), h.within(0.5), h.within(0.99))
	if float64(h.count) != total {
		t.Errorf("%d admissions timed, %v counted: each is both, once", h.count, total)
	}
	if results["injected"] < float64(c.injected) || results["rejected"] < float64(c.refused) || results["error"] != 0 {
		t.Errorf("counted %v; want at least %d injected and %d rejected (what the subtests saw), no error", results, c.injected, c.refused)
	}
}

// outageVisible scales the injector to 0 and creates an annotated pod
// selected by the plain Deployment's Service: with failurePolicy Ignore it
// is created and starts without the sidecar, and it shows: it has no
// container named like the sidecar, and the Service's EndpointSlices offer
// it on no gRPC port (the EndpointSlice controller puts it in a slice of
// its own, with only the ports it has). The injector is scaled back and
// ready afterwards, also when the test fails.
func (c *injectorChecks) outageVisible(t *testing.T) {
	t.Cleanup(func() { scaleInjector(t, c.release, injectorReplicas) })
	scaleInjector(t, c.release, 0)
	pods := c.client.CoreV1().Pods(c.kubectl.Namespace)
	created, err := pods.Create(t.Context(), injectedHelloPod(c.s, "uninjected", helloApp), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("with no injector, an annotated pod was not created: %v", err)
	}
	names := containerNames(slices.Concat(created.Spec.InitContainers, created.Spec.Containers))
	if slices.Contains(names, sidecarName) {
		t.Fatalf("pod %s has a container %s with no injector running: %v", created.Name, sidecarName, names)
	}
	// The Deployment's injected pod and this one, both ready.
	for _, p := range waitForPods(t, c.kubectl, appSelector(helloApp), 2) {
		_, err := nativeSidecar(&p)
		injected := err == nil
		ports := waitForEndpointPorts(t, c.kubectl, helloApp, p.Name)
		t.Logf("service %s offers pod %s (sidecar %v) on ports %v", helloApp, p.Name, injected, ports)
		if _, grpc := ports["grpc"]; grpc != injected || ports["backend-metrics"] != 2113 {
			t.Errorf("service %s offers pod %s on ports %v; want backend-metrics, and grpc only with the sidecar (%v)", helloApp, p.Name, ports, injected)
		}
	}
	if err := pods.Delete(t.Context(), created.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete pod %s: %v", created.Name, err)
	}
}

// scaleInjector scales the injector to n pods and waits until n run, all
// ready, none going away.
func scaleInjector(t *testing.T, release *k8s.KubectlOptions, n int) {
	t.Helper()
	k8s.RunKubectl(t, release, "scale", "deployment", injectorName, fmt.Sprint("--replicas=", n))
	if n > 0 {
		waitForPods(t, release, injectorPodSelector, n)
		return
	}
	retry.DoWithRetry(t, "no injector pod left", 60, 2*time.Second, func() (string, error) {
		if pods := k8s.ListPods(t, release, injectorPodSelector); len(pods) > 0 {
			return "", fmt.Errorf("%d injector pods left", len(pods))
		}
		return "", nil
	})
}

// waitForEndpointPorts waits until service's EndpointSlices list pod, and
// returns the ports they offer it on: the pod's port numbers by the
// Service's port names, as kube-proxy routes them.
func waitForEndpointPorts(t *testing.T, kubectl *k8s.KubectlOptions, service, pod string) map[string]int32 {
	t.Helper()
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	var ports map[string]int32
	retry.DoWithRetry(t, fmt.Sprintf("service %s lists pod %s", service, pod), 60, time.Second, func() (string, error) {
		list, err := clientset.DiscoveryV1().EndpointSlices(kubectl.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return "", err
		}
		for _, slice := range list.Items {
			if slices.ContainsFunc(slice.Endpoints, func(e discoveryv1.Endpoint) bool { return e.TargetRef != nil && e.TargetRef.Name == pod }) {
				ports = map[string]int32{}
				for _, p := range slice.Ports {
					ports[*p.Name] = *p.Port
				}
				return "", nil
			}
		}
		return "", fmt.Errorf("no EndpointSlice of %d lists pod %s", len(list.Items), pod)
	})
	return ports
}

// caBundles returns the CAs each webhook of the injector's configuration
// trusts.
func (c *injectorChecks) caBundles(t *testing.T) [][]byte {
	t.Helper()
	cfg, err := c.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), injectorName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read webhook configuration %s: %v", injectorName, err)
	}
	var bundles [][]byte
	for _, w := range cfg.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles
}

// parseCerts returns the certificates in PEM data, in order.
func parseCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("parse certificate: %v", err)
		}
		certs = append(certs, cert)
	}
	return certs
}

// dumpInjectorOnFailure registers a cleanup that, if the test failed,
// writes the injector pods' states and logs to the test log: they are gone
// by the time the release's namespace is dumped, if an upgrade replaced them.
func dumpInjectorOnFailure(t *testing.T, release *k8s.KubectlOptions) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		describePods(t, release, injectorPodSelector, &b)
		t.Logf("diagnostics of the injector:\n%s", b.String())
	})
}

// deleteInjectorClusterObjects registers a cleanup that deletes the
// release's cluster-scoped injector objects (its webhook configuration and
// cluster role): deleting the release's namespace leaves them, and the
// next install would find them in its way.
func deleteInjectorClusterObjects(t *testing.T, release *k8s.KubectlOptions) {
	t.Cleanup(func() {
		err := k8s.RunKubectlE(t, release, "delete", "mutatingwebhookconfigurations,clusterroles,clusterrolebindings",
			"--selector="+injectorPodSelector.LabelSelector, "--ignore-not-found")
		if err != nil {
			t.Errorf("delete the injector's cluster-scoped objects: %v", err)
		}
	})
}

// admissionHistogram is the injectors' admission durations, summed.
type admissionHistogram struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64 // cumulative count by upper bound
}

// mergeHistograms sums histograms of the same buckets.
func mergeHistograms(hs []*dto.Histogram) admissionHistogram {
	m := admissionHistogram{buckets: map[float64]uint64{}}
	for _, h := range hs {
		m.count += h.GetSampleCount()
		m.sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			m.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return m
}

// mean is the mean admission duration.
func (h admissionHistogram) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count) * float64(time.Second)).Round(time.Microsecond)
}

// within returns the smallest bucket bound that holds the fraction q of
// the admissions, as text ("+Inf" past the last bucket).
func (h admissionHistogram) within(q float64) string {
	for _, b := range slices.Sorted(maps.Keys(h.buckets)) {
		if float64(h.buckets[b]) >= q*float64(h.count) {
			return time.Duration(b * float64(time.Second)).String()
		}
	}
	return "+Inf"
}
