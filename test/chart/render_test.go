package chart

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../../charts/collapser"
	releaseName = "demo"
	namespace   = "lab"
	// fullname is the resource name prefix for releaseName ("demo-collapser").
	fullname = releaseName + "-collapser"
	// serviceMonitorAPI is what the ServiceMonitor template requires of the cluster.
	serviceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
	// certManagerAPI is what the injector's Certificate requires of the cluster.
	certManagerAPI = "cert-manager.io/v1/Certificate"
	// allFeatures turns on every optional part of the chart (see the file).
	allFeatures = "../../test/chart/testdata/all-features-values.yaml"
)

// capabilities are those of a Kubernetes v1.34 cluster (the chart's kubeVersion
// needs at least 1.27; Helm's SDK default is older) with the Prometheus Operator.
func capabilities(apis ...string) *chartutil.Capabilities {
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apis...)
	return &caps
}

// rendered is one chart rendering: every manifest decoded into its API type.
type rendered struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	serviceAccounts map[string]*corev1.ServiceAccount
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	pods            map[string]*corev1.Pod // helm test hooks
	networkPolicies map[string]*networkingv1.NetworkPolicy
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors map[string]map[string]any
	// The injector's RBAC and webhook configuration.
	roles               map[string]*rbacv1.Role
	roleBindings        map[string]*rbacv1.RoleBinding
	clusterRoles        map[string]*rbacv1.ClusterRole
	clusterRoleBindings map[string]*rbacv1.ClusterRoleBinding
	mutatingWebhooks    map[string]*admissionregistrationv1.MutatingWebhookConfiguration
	// cert-manager's, for the injector's certificate.
	certificates map[string]*certificate
	issuers      map[string]*issuer
	notes        string
}

// kinds lists "Kind/name" of every rendered object, sorted.
func (r *rendered) kinds() []string {
	var out []string
	add := func(kind string, names []string) {
		for _, n := range names {
			out = append(out, kind+"/"+n)
		}
	}
	add("Deployment", slices.Collect(maps.Keys(r.deployments)))
	add("Service", slices.Collect(maps.Keys(r.services)))
	add("HorizontalPodAutoscaler", slices.Collect(maps.Keys(r.hpas)))
	add("ServiceAccount", slices.Collect(maps.Keys(r.serviceAccounts)))
	add("ConfigMap", slices.Collect(maps.Keys(r.configMaps)))
	add("Secret", slices.Collect(maps.Keys(r.secrets)))
	add("Pod", slices.Collect(maps.Keys(r.pods)))
	add("NetworkPolicy", slices.Collect(maps.Keys(r.networkPolicies)))
	add("PodDisruptionBudget", slices.Collect(maps.Keys(r.pdbs)))
	add("Role", slices.Collect(maps.Keys(r.roles)))
	add("RoleBinding", slices.Collect(maps.Keys(r.roleBindings)))
	add("ClusterRole", slices.Collect(maps.Keys(r.clusterRoles)))
	add("ClusterRoleBinding", slices.Collect(maps.Keys(r.clusterRoleBindings)))
	add("MutatingWebhookConfiguration", slices.Collect(maps.Keys(r.mutatingWebhooks)))
	add("ServiceMonitor", slices.Collect(maps.Keys(r.serviceMonitors)))
	add("Certificate", slices.Collect(maps.Keys(r.certificates)))
	add("Issuer", slices.Collect(maps.Keys(r.issuers)))
	sort.Strings(out)
	return out
}

// loadChart loads the chart from its directory, as `helm template` does.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	return chrt
}

// appVersion returns the chart's appVersion: the tag of its own images unless
// values name another.
func appVersion(t *testing.T) string {
	t.Helper()
	return loadChart(t).Metadata.AppVersion
}

// userValues reads a values file (relative to the chart; "" for none) and applies
// --set style overrides on top.
func userValues(t *testing.T, valuesFile string, set ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, valuesFile))
		if err != nil {
			t.Fatalf("read %s: %v", valuesFile, err)
		}
		vals = v.AsMap()
	}
	for _, s := range set {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("parse --set %q: %v", s, err)
		}
	}
	return vals
}

// renderChart renders the chart like `helm template demo charts/collapser -n lab
// --api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions
// cert-manager.io/v1/Certificate` (values validated against
// values.schema.json) and returns the files by name.
func renderChart(chrt *chart.Chart, vals map[string]any) (map[string]string, error) {
	return renderWith(chrt, vals, capabilities(serviceMonitorAPI, certManagerAPI))
}

// renderWith renders the chart for a cluster with the given capabilities.
func renderWith(chrt *chart.Chart, vals map[string]any, caps *chartutil.Capabilities) (map[string]string, error) {
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	if !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart needs Kubernetes %s, not %s", chrt.Metadata.KubeVersion, caps.KubeVersion)
	}
	top, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return files, nil
}

// render renders the chart with the given values and decodes every manifest into its
// Kubernetes type, failing the test on any unknown field, duplicate name or unexpected kind.
func render(t *testing.T, valuesFile string, set ...string) *rendered {
	t.Helper()
	files, err := renderChart(loadChart(t), userValues(t, valuesFile, set...))
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		configMaps:      map[string]*corev1.ConfigMap{},
		secrets:         map[string]*corev1.Secret{},
		pods:            map[string]*corev1.Pod{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		hpas:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		serviceMonitors: map[string]map[string]any{},

		roles:               map[string]*rbacv1.Role{},
		roleBindings:        map[string]*rbacv1.RoleBinding{},
		clusterRoles:        map[string]*rbacv1.ClusterRole{},
		clusterRoleBindings: map[string]*rbacv1.ClusterRoleBinding{},
		mutatingWebhooks:    map[string]*admissionregistrationv1.MutatingWebhookConfiguration{},
		certificates:        map[string]*certificate{},
		issuers:             map[string]*issuer{},
	}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = content
			continue
		}
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := r.add(doc); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	return r
}

// add decodes one manifest strictly into the API type of its kind.
func (r *rendered) add(doc string) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		return fmt.Errorf("read kind: %w", err)
	}
	if want := namespaceOf(head.Kind); head.Metadata.Namespace != want {
		return fmt.Errorf("%s %s: namespace %q, want %q", head.Kind, head.Metadata.Name, head.Metadata.Namespace, want)
	}
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		return decodeInto(doc, head.Metadata.Name, r.deployments)
	case "v1 Service":
		return decodeInto(doc, head.Metadata.Name, r.services)
	case "v1 ServiceAccount":
		return decodeInto(doc, head.Metadata.Name, r.serviceAccounts)
	case "v1 ConfigMap":
		return decodeInto(doc, head.Metadata.Name, r.configMaps)
	case "v1 Secret":
		return decodeInto(doc, head.Metadata.Name, r.secrets)
	case "v1 Pod":
		return decodeInto(doc, head.Metadata.Name, r.pods)
	case "networking.k8s.io/v1 NetworkPolicy":
		return decodeInto(doc, head.Metadata.Name, r.networkPolicies)
	case "policy/v1 PodDisruptionBudget":
		return decodeInto(doc, head.Metadata.Name, r.pdbs)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return decodeInto(doc, head.Metadata.Name, r.hpas)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return decodeInto(doc, head.Metadata.Name, r.serviceMonitors)
	case "rbac.authorization.k8s.io/v1 Role":
		return decodeInto(doc, head.Metadata.Name, r.roles)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return decodeInto(doc, head.Metadata.Name, r.roleBindings)
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return decodeInto(doc, head.Metadata.Name, r.clusterRoles)
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return decodeInto(doc, head.Metadata.Name, r.clusterRoleBindings)
	case "admissionregistration.k8s.io/v1 MutatingWebhookConfiguration":
		return decodeInto(doc, head.Metadata.Name, r.mutatingWebhooks)
	case "cert-manager.io/v1 Certificate":
		return decodeInto(doc, head.Metadata.Name, r.certificates)
	case "cert-manager.io/v1 Issuer":
		return decodeInto(doc, head.Metadata.Name, r.issuers)
	default:
		return fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
}

// namespaceOf is the namespace an object of kind is rendered in: none for the
// cluster-scoped kinds, the release's for the others.
func namespaceOf(kind string) string {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration":
		return ""
	}
	return namespace
}

// decodeInto decodes doc with strict field checking (unknown or duplicate fields are
// errors) and stores it under name.
func decodeInto[T any](doc, name string, into map[string]T) error {
	var obj T
	if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
		return fmt.Errorf("strict decode: %w", err)
	}
	if _, dup := into[name]; dup {
		return fmt.Errorf("two objects of one kind named %q", name)
	}
	into[name] = obj
	return nil
}

// ciValuesFiles lists the chart's ci/*-values.yaml files (chart-testing's install set).
func ciValuesFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) == 0 {
		t.Fatal("no ci/*-values.yaml files")
	}
	var out []string
	for _, m := range matches {
		rel, err := filepath.Rel(chartDir, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

// readChartFile returns a file of the chart directory.
func readChartFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// container returns the named container of a pod spec.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, containerNames(spec))
	return corev1.Container{}
}

// containerNames lists a pod spec's container names in order.
func containerNames(spec corev1.PodSpec) []string {
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// containerPortNames returns the set of the names of a pod spec's container
// ports.
func containerPortNames(spec corev1.PodSpec) map[string]bool {
	names := map[string]bool{}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			names[p.Name] = true
		}
	}
	return names
}

// envMap returns a container's literal environment variables.
func envMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			m[e.Name] = e.Value
		}
	}
	return m
}

// servicePorts returns a Service's ports by name.
func servicePorts(s *corev1.Service) map[string]corev1.ServicePort {
	m := map[string]corev1.ServicePort{}
	for _, p := range s.Spec.Ports {
		m[p.Name] = p
	}
	return m
}
