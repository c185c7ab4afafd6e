package chart

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// injectorOnly is the platform team's values file: the injector alone.
const injectorOnly = "ci/injector-only-values.yaml"

// TestRender_InjectorOnlyRendersNothingOfTheChartsOwnPod: with proxy.enabled
// false the release is the injector's resources and nothing else, whatever
// the values of the chart's own pod ask for.
func TestRender_InjectorOnlyRendersNothingOfTheChartsOwnPod(t *testing.T) {
	want := []string{
		"ClusterRole/" + injectorName,
		"ClusterRoleBinding/" + injectorName,
		"ConfigMap/" + injectorName,
		"Deployment/" + injectorName,
		"MutatingWebhookConfiguration/" + injectorName,
		"PodDisruptionBudget/" + injectorName,
		"Role/" + injectorName,
		"RoleBinding/" + injectorName,
		"Secret/" + injectorName + "-peer-ca",
		"Secret/" + injectorName + "-tls",
		"Service/" + injectorName,
		"ServiceAccount/" + injectorName,
	}
	if got := render(t, injectorOnly).kinds(); !slices.Equal(got, want) {
		t.Errorf("rendered\n  %v\nwant\n  %v", got, want)
	}

	// Every feature of the chart's own pod asked for (autoscaling, PDB,
	// NetworkPolicy, policy, ServiceMonitor, metrics Service), with the pod off.
	r := render(t, allFeatures, "proxy.enabled=false")
	for _, kind := range r.kinds() {
		name := kind[strings.Index(kind, "/")+1:]
		if !strings.HasPrefix(name, injectorName) && !strings.HasPrefix(name, fullname+"-prometheus") && name != fullname+"-dashboards" {
			t.Errorf("%s rendered with proxy.enabled=false: not the injector's, Prometheus' or the dashboard's", kind)
		}
	}
	if len(r.pods) != 0 || len(r.serviceMonitors) != 0 || len(r.hpas) != 0 || len(r.networkPolicies) != 0 {
		t.Errorf("rendered with proxy.enabled=false: %v", r.kinds())
	}
}

// TestRender_InjectorOnlySidecarIsMadeFromTheCollapserValues: without the
// chart's own pod, collapser.* still make the injected sidecar: the
// template is the one the chart renders for the same values with its pod.
func TestRender_InjectorOnlySidecarIsMadeFromTheCollapserValues(t *testing.T) {
	set := []string{"collapser.config.cacheTTL=2s", "collapser.gogc=300", "collapser.resources.limits.memory=512Mi"}
	alone := render(t, injectorOnly, set...).configMaps[injectorName].Data["sidecar.yaml"]
	withPod := render(t, "", append([]string{"injector.enabled=true"}, set...)...).configMaps[injectorName].Data["sidecar.yaml"]
	var a, b sidecarTemplate
	if err := yaml.UnmarshalStrict([]byte(alone), &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(withPod), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the injector's template without the chart's pod:\n%s\nwith it:\n%s", alone, withPod)
	}
	if env := envMap(a.Container); env["COLLAPSER_CACHE_TTL"] != "2s" || env["GOGC"] != "300" {
		t.Errorf("the template's sidecar env %v, want the values' cacheTTL 2s and GOGC 300", env)
	}
}

// TestRender_NothingToDeployFailsClearly: the chart's pod and the injector
// both off, and no dashboard asked for, is a mistake, not an empty release.
func TestRender_NothingToDeployFailsClearly(t *testing.T) {
	_, err := renderChart(loadChart(t), userValues(t, "", "proxy.enabled=false"))
	if err == nil {
		t.Fatal("rendered a release with neither the chart's pod nor the injector")
	}
	for _, want := range []string{"proxy.enabled and injector.enabled are both false", "would deploy nothing", "Set proxy.enabled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The dashboard alone, for an existing Grafana, is something.
	if r := render(t, "", "proxy.enabled=false", "dashboards.enabled=true"); !slices.Equal(r.kinds(), []string{"ConfigMap/" + fullname + "-dashboards"}) {
		t.Errorf("the dashboard alone rendered %v", r.kinds())
	}
}

func TestRender_InjectorOnlyNotesSayWhatIsThere(t *testing.T) {
	notes := render(t, injectorOnly).notes
	for _, want := range []string{"proxy.enabled=false", "rollout status deployment/" + injectorName} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES do not say %q:\n%s", want, notes)
		}
	}
	for _, absent := range []string{"port-forward service/" + fullname + " ", "helm test demo", "democlient"} {
		if strings.Contains(notes, absent) {
			t.Errorf("NOTES say %q without the chart's pod:\n%s", absent, notes)
		}
	}
}
