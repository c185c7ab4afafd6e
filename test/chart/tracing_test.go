package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// otelVars returns the OTEL_* variables of the chart's own sidecar.
func otelVars(c corev1.Container) map[string]string {
	env := envMap(c)
	maps.DeleteFunc(env, func(name, _ string) bool { return !strings.HasPrefix(name, "OTEL_") })
	return env
}

func TestRender_TracingPassesTheOTELVariablesOnlyWithAnEndpoint(t *testing.T) {
	if vars := otelVars(sidecarOf(t, render(t, "").deployments[fullname].Spec.Template.Spec)); len(vars) != 0 {
		t.Errorf("by default the sidecar has %v, want no OTEL_* variable: tracing off", vars)
	}
	sidecar := sidecarOf(t, render(t, allFeatures).deployments[fullname].Spec.Template.Spec)
	want := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4317",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.25",
		"OTEL_SERVICE_NAME":           "checkout-collapser",
		"OTEL_BSP_MAX_QUEUE_SIZE":     "4096",
		"OTEL_RESOURCE_ATTRIBUTES":    "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),deployment.environment.name=prod",
	}
	if got := otelVars(sidecar); !maps.Equal(got, want) {
		t.Errorf("OTEL_* variables %v, want %v", got, want)
	}
	// The kubelet expands $(POD_NAME) from the pod's metadata, through a
	// variable defined before the one that names it.
	at := func(name, field string) int {
		return slices.IndexFunc(sidecar.Env, func(e corev1.EnvVar) bool {
			return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field
		})
	}
	attrs := slices.IndexFunc(sidecar.Env, func(e corev1.EnvVar) bool { return e.Name == "OTEL_RESOURCE_ATTRIBUTES" })
	if name, ns := at("POD_NAME", "metadata.name"), at("POD_NAMESPACE", "metadata.namespace"); name < 0 || ns < 0 || name > attrs || ns > attrs {
		t.Errorf("POD_NAME at %d and POD_NAMESPACE at %d, want both from the pod's metadata before OTEL_RESOURCE_ATTRIBUTES at %d", name, ns, attrs)
	}
}

func TestRender_PrometheusKeepsExemplarsUnlessTurnedOff(t *testing.T) {
	const flag = "--enable-feature=exemplar-storage"
	for set, want := range map[string]bool{"": true, "prometheus.exemplarStorage=false": false} {
		d := render(t, "ci/observability-values.yaml", nonEmpty(set)...).deployments[fullname+"-prometheus"]
		if args := container(t, d.Spec.Template.Spec, "prometheus").Args; slices.Contains(args, flag) != want {
			t.Errorf("set %q: args %v, want %s: %v", set, args, flag, want)
		}
	}
}

func TestRender_GrafanaLinksExemplarsToATraceViewerWhenGiven(t *testing.T) {
	const url = "http://jaeger.observability:16686/trace/${__value.raw}"
	for set, want := range map[string]bool{"": false, "grafana.exemplarTraceUrl=" + url: true} {
		ds := render(t, "ci/observability-values.yaml", nonEmpty(set)...).configMaps[fullname+"-grafana"].Data["datasources.yaml"]
		if got := strings.Contains(ds, "exemplarTraceIdDestinations") && strings.Contains(ds, url) && strings.Contains(ds, "name: trace_id"); got != want {
			t.Errorf("set %q: datasource links exemplars %v, want %v:\n%s", set, got, want, ds)
		}
	}
}

// nonEmpty returns set as the one --set of a render, or none when it is "".
func nonEmpty(set string) []string {
	if set == "" {
		return nil
	}
	return []string{set}
}
