package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRender_LibraryPodsServeTheSidecarsPortsWithItsSettings(t *testing.T) {
	sidecar := render(t, "", "replicaCount=2").deployments[fullname].Spec.Template.Spec
	library := render(t, "ci/library-values.yaml").deployments[fullname].Spec.Template.Spec
	if got, want := containerNames(library), []string{"hello-backend"}; !slices.Equal(got, want) {
		t.Fatalf("containers = %v, want %v: no sidecar", got, want)
	}
	backend := container(t, library, "hello-backend")
	ports := map[string]int32{}
	for _, p := range backend.Ports {
		ports[p.Name] = p.ContainerPort
	}
	// The Services, the NetworkPolicy and Prometheus find a library pod's
	// ports by the sidecar's names.
	if want := map[string]int32{"grpc": 50052, "metrics": 2112, "peer": 50053, "backend-metrics": 2113}; !maps.Equal(ports, want) {
		t.Errorf("ports = %v, want %v", ports, want)
	}
	env := envMap(backend)
	if env["HELLO_COLLAPSE"] != "true" || env["HELLO_LISTEN"] != ":50052" {
		t.Errorf("HELLO_COLLAPSE = %q, HELLO_LISTEN = %q; want true and :50052", env["HELLO_COLLAPSE"], env["HELLO_LISTEN"])
	}
	// One set of values: the library reads the sidecar's very variables.
	want := envMap(container(t, sidecar, "collapser"))
	got := maps.Clone(env)
	maps.DeleteFunc(got, func(k string, _ string) bool { return !strings.HasPrefix(k, "COLLAPSER_") })
	maps.DeleteFunc(want, func(k string, _ string) bool { return !strings.HasPrefix(k, "COLLAPSER_") })
	if !maps.Equal(got, want) {
		t.Errorf("the library's COLLAPSER_* variables differ from the sidecar's:\n got %v\nwant %v", got, want)
	}
	for _, e := range backend.Env {
		if e.Name == "COLLAPSER_MEMORY_LIMIT" && (e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.ContainerName != "hello-backend") {
			t.Errorf("COLLAPSER_MEMORY_LIMIT = %+v, want the hello-backend container's limit", e)
		}
	}
	mounts := func(c corev1.Container) []string {
		var m []string
		for _, v := range c.VolumeMounts {
			m = append(m, v.Name+":"+v.MountPath)
		}
		return m
	}
	if got, want := mounts(backend), mounts(container(t, sidecar, "collapser")); !slices.Equal(got, want) {
		t.Errorf("volume mounts = %v, want the sidecar's %v", got, want)
	}
	// It holds the collapser's caches: the sidecar's resources.
	sidecarLimits := container(t, sidecar, "collapser").Resources.Limits
	if got, want := backend.Resources.Limits.Memory().String(), sidecarLimits.Memory().String(); got != want {
		t.Errorf("memory limit = %s, want the sidecar's %s", got, want)
	}
}

func TestRender_LibraryWithoutTheHelloBackendFails(t *testing.T) {
	_, err := renderChart(loadChart(t), userValues(t, "", "backend.collapse=true", "backend.enabled=false",
		"extraContainers[0].name=mine", "extraContainers[0].image=mine:1"))
	if err == nil || !strings.Contains(err.Error(), "backend.collapse is true but backend.enabled is false") {
		t.Errorf("render = %v, want an error naming backend.collapse and backend.enabled", err)
	}
}

func TestRender_RolloutFollowsStrategyAndMinReadySeconds(t *testing.T) {
	d := render(t, "").deployments[fullname]
	if d.Spec.Strategy.Type != "" || d.Spec.Strategy.RollingUpdate != nil || d.Spec.MinReadySeconds != 0 {
		t.Errorf("default strategy %+v, minReadySeconds %d; want Kubernetes' defaults", d.Spec.Strategy, d.Spec.MinReadySeconds)
	}
	d = render(t, "", "strategy.rollingUpdate.maxSurge=0", "strategy.rollingUpdate.maxUnavailable=2", "minReadySeconds=3600", "progressDeadlineSeconds=7200").deployments[fullname]
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxSurge.String() != "0" || ru.MaxUnavailable.String() != "2" || d.Spec.MinReadySeconds != 3600 ||
		d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != 7200 {
		t.Errorf("strategy %+v, minReadySeconds %d, progressDeadlineSeconds %v; want maxSurge 0, maxUnavailable 2, 3600 and 7200",
			d.Spec.Strategy, d.Spec.MinReadySeconds, d.Spec.ProgressDeadlineSeconds)
	}
	// Kubernetes refuses a Deployment whose minReadySeconds reaches its
	// progress deadline: the chart says so first.
	_, err := renderChart(loadChart(t), userValues(t, "", "minReadySeconds=600"))
	if err == nil || !strings.Contains(err.Error(), "minReadySeconds (600) must be less than progressDeadlineSeconds (600") {
		t.Errorf("render with minReadySeconds=600 = %v, want an error naming progressDeadlineSeconds", err)
	}
}
