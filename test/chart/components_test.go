package chart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRender_TogglesAddAndRemoveComponents(t *testing.T) {
	base := []string{
		"Deployment/" + fullname,
		"Pod/" + fullname + "-test-collapse",
		"Service/" + fullname,
		"Service/" + fullname + "-pods",
		"ServiceAccount/" + fullname,
	}
	prometheus := []string{
		"ConfigMap/" + fullname + "-prometheus",
		"Deployment/" + fullname + "-prometheus",
		"Service/" + fullname + "-metrics",
		"Service/" + fullname + "-prometheus",
	}
	grafana := []string{
		"ConfigMap/" + fullname + "-dashboards",
		"ConfigMap/" + fullname + "-grafana",
		"Deployment/" + fullname + "-grafana",
		"Secret/" + fullname + "-grafana",
		"Service/" + fullname + "-grafana",
	}
	tests := []struct {
		name string
		set  []string
		want [][]string
	}{
		{"defaults", nil, [][]string{base}},
		{"prometheus", []string{"prometheus.enabled=true"}, [][]string{base, prometheus}},
		{"prometheus and grafana", []string{"prometheus.enabled=true", "grafana.enabled=true"}, [][]string{base, prometheus, grafana}},
		{"grafana with an external Prometheus", []string{"grafana.enabled=true", "grafana.datasourceUrl=http://prometheus.monitoring:9090"}, [][]string{base, grafana}},
		{"service monitor", []string{"serviceMonitor.enabled=true"}, [][]string{base, {"Service/" + fullname + "-metrics", "ServiceMonitor/" + fullname}}},
		{"dashboard for an existing Grafana", []string{"dashboards.enabled=true"}, [][]string{base, {"ConfigMap/" + fullname + "-dashboards"}}},
		{"no service account", []string{"serviceAccount.create=false"}, [][]string{{"Deployment/" + fullname, "Pod/" + fullname + "-test-collapse", "Service/" + fullname, "Service/" + fullname + "-pods"}}},
		{"no test pod", []string{"tests.enabled=false"}, [][]string{{"Deployment/" + fullname, "Service/" + fullname, "Service/" + fullname + "-pods", "ServiceAccount/" + fullname}}},
		{"network policy", []string{"networkPolicy.enabled=true"}, [][]string{base, {"NetworkPolicy/" + fullname}}},
		{"disruption budget", []string{"podDisruptionBudget.enabled=true"}, [][]string{base, {"PodDisruptionBudget/" + fullname}}},
		{"policy", []string{"collapser.policy.default.collapse=auto"}, [][]string{base, {"ConfigMap/" + fullname + "-policy"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, w := range tt.want {
				want = append(want, w...)
			}
			slices.Sort(want)
			if got := render(t, "", tt.set...).kinds(); !slices.Equal(got, want) {
				t.Errorf("rendered\n  %v\nwant\n  %v", got, want)
			}
		})
	}
}

func TestRender_ServiceExposesGRPCAndMetricsButNoBackendPort(t *testing.T) {
	r := render(t, "")
	svc := r.services[fullname]
	ports := servicePorts(svc)
	want := map[string]struct {
		port   int32
		target string
	}{
		"grpc":            {50052, "grpc"},
		"metrics":         {2112, "metrics"},
		"backend-metrics": {2113, "backend-metrics"},
	}
	if len(ports) != len(want) {
		t.Errorf("ports %v, want %v", ports, want)
	}
	podPorts := containerPortNames(r.deployments[fullname].Spec.Template.Spec)
	for name, w := range want {
		p, ok := ports[name]
		if !ok {
			t.Errorf("no port %s", name)
			continue
		}
		if p.Port != w.port || p.TargetPort != intstr.FromString(w.target) {
			t.Errorf("port %s = %d -> %s, want %d -> %s", name, p.Port, p.TargetPort.String(), w.port, w.target)
		}
		if !podPorts[w.target] {
			t.Errorf("port %s targets %s, which no container declares", name, w.target)
		}
	}
	selects(t, svc, r.deployments[fullname].Spec.Template.Labels)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("type = %s, want ClusterIP", svc.Spec.Type)
	}
}

// selects fails unless the Service's selector matches the pod labels.
func selects(t *testing.T, svc *corev1.Service, podLabels map[string]string) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s has no selector", svc.Name)
	}
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("Service %s selects %s=%s, pod has %q", svc.Name, k, v, podLabels[k])
		}
	}
}

func TestRender_TestPodRunsDemoClientAgainstTheService(t *testing.T) {
	r := render(t, "")
	pod := r.pods[fullname+"-test-collapse"]
	if pod.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("annotations %v, want helm.sh/hook: test", pod.Annotations)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %s, want Never", pod.Spec.RestartPolicy)
	}
	// Deleted when it passes (it used to outlive the release), kept when it fails;
	// helm prints its logs before deleting it.
	if got, want := pod.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded"; got != want {
		t.Errorf("hook-delete-policy = %q, want %q", got, want)
	}
	if got, want := pod.Annotations["helm.sh/hook-output-log-policy"], "hook-succeeded,hook-failed"; got != want {
		t.Errorf("hook-output-log-policy = %q, want %q", got, want)
	}
	c := container(t, pod.Spec, "democlient")
	if c.Image != "collapser/democlient:"+appVersion(t) {
		t.Errorf("image = %q", c.Image)
	}
	want := []string{
		"--target=" + fullname + ":50052",
		"--backend-metrics=http://" + fullname + "-pods:2113/metrics",
		"--requests=10000",
		"--concurrency=10000",
		"--timeout=10s",
		"--connect-timeout=30s",
		"--min-collapse-ratio=0.9",
		"--json",
	}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args = %v, want %v", c.Args, want)
	}
	// Both addresses are ports of the Service.
	ports := servicePorts(r.services[fullname])
	if ports["grpc"].Port != 50052 || ports["backend-metrics"].Port != 2113 {
		t.Errorf("Service ports %v do not match the test's addresses", ports)
	}
	if c.Resources.Requests.Cpu().String() != "50m" || c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("resources = %+v, want tests.resources (50m CPU, 256Mi limit)", c.Resources)
	}
	custom := render(t, "", "tests.resources.limits.memory=1Gi").pods[fullname+"-test-collapse"]
	if limits := container(t, custom.Spec, "democlient").Resources.Limits; limits.Memory().String() != "1Gi" {
		got := limits.Memory().String()
		t.Errorf("tests.resources.limits.memory=1Gi gave limit %s", got)
	}
}

func TestRender_NotesPrintTheCommandsToReachEverything(t *testing.T) {
	tests := []struct {
		file string
		set  []string
		want []string
	}{
		{"ci/default-values.yaml", nil, []string{
			"kubectl --namespace lab port-forward service/" + fullname + " 50052:50052 2112:2112 2113:2113",
			"go run ./src/cmd/democlient --target localhost:50052 --backend-metrics http://localhost:2113/metrics",
			"helm test demo --namespace lab\n",
		}},
		{"ci/default-values.yaml", []string{"replicaCount=3"}, []string{
			"the sidecars\nforward each key's call to the pod that owns it",
			"helm test below sums every pod's count",
		}},
		{"ci/library-values.yaml", nil, []string{
			"Forward the collapsing hello backend's gRPC port (localhost:50052)",
			"send a burst to the hello backend,\nwhich collapses in its own process with the collapser library",
			"the backends\nforward each key's call to the pod that owns it",
			"go run ./src/cmd/democlient --target localhost:50052 --backend-metrics http://localhost:2113/metrics",
		}},
		{"ci/backend-off-values.yaml", nil, []string{
			"kubectl --namespace lab port-forward service/" + fullname + " 50052:50052 2112:2112\n",
			"the sidecar forwards to 127.0.0.1:50051 in the pod",
		}},
		{"ci/observability-values.yaml", nil, []string{
			"kubectl --namespace lab port-forward service/" + fullname + "-grafana 3000:3000",
			"http://localhost:3000",
			"kubectl --namespace lab port-forward service/" + fullname + "-prometheus 9090:9090",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file+strings.Join(tt.set, ","), func(t *testing.T) {
			notes := render(t, tt.file, tt.set...).notes + "\n"
			for _, w := range tt.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES.txt lacks %q:\n%s", w, notes)
				}
			}
			// One port-forward to the Service holds every local port it needs: two
			// would both try to bind localhost:50052.
			if n := strings.Count(notes, "port-forward service/"+fullname+" "); n != 1 {
				t.Errorf("%d port-forwards to service/%s, want 1 (each would bind localhost:50052):\n%s", n, fullname, notes)
			}
		})
	}
}
