package chart

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// prometheusConfig is the part of prometheus.yml the chart writes.
type prometheusConfig struct {
	Global struct {
		ScrapeInterval     string `json:"scrape_interval"`
		EvaluationInterval string `json:"evaluation_interval"`
	} `json:"global"`
	ScrapeConfigs []struct {
		JobName      string `json:"job_name"`
		DNSSDConfigs []struct {
			Names           []string `json:"names"`
			RefreshInterval string   `json:"refresh_interval"`
		} `json:"dns_sd_configs"`
	} `json:"scrape_configs"`
}

func TestRender_PrometheusScrapesEveryPodsSidecarAndBackendEvery5s(t *testing.T) {
	r := render(t, "ci/observability-values.yaml")
	cm := r.configMaps[fullname+"-prometheus"]
	cfg := prometheusScrapes(t, r)
	if cfg.Global.ScrapeInterval != "5s" {
		t.Errorf("scrape_interval = %q, want 5s", cfg.Global.ScrapeInterval)
	}
	srv := func(port string) string {
		return "_" + port + "._tcp." + fullname + "-metrics." + namespace + ".svc.cluster.local"
	}
	want := map[string]string{"collapser": srv("metrics"), "hello-backend": srv("backend-metrics")}
	if len(cfg.ScrapeConfigs) != len(want) {
		t.Errorf("%d scrape configs, want %d", len(cfg.ScrapeConfigs), len(want))
	}
	for _, sc := range cfg.ScrapeConfigs {
		if len(sc.DNSSDConfigs) != 1 || !slices.Equal(sc.DNSSDConfigs[0].Names, []string{want[sc.JobName]}) {
			t.Errorf("job %s discovers %+v, want SRV name %q", sc.JobName, sc.DNSSDConfigs, want[sc.JobName])
		}
	}

	// The SRV names exist: the headless Service has those named ports on the pods.
	headless := r.services[fullname+"-metrics"]
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("metrics Service clusterIP = %q, want None (one SRV record per pod)", headless.Spec.ClusterIP)
	}
	ports := servicePorts(headless)
	if ports["metrics"].Port != 2112 || ports["backend-metrics"].Port != 2113 {
		t.Errorf("metrics Service ports = %v, want metrics 2112 and backend-metrics 2113", ports)
	}
	selects(t, headless, r.deployments[fullname].Spec.Template.Labels)

	// The Prometheus pod reads that config and needs no Kubernetes API access.
	d := r.deployments[fullname+"-prometheus"]
	spec := d.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("Prometheus mounts a ServiceAccount token it does not need")
	}
	if got := spec.Volumes[0].ConfigMap; got == nil || got.Name != cm.Name {
		t.Errorf("Prometheus config volume = %+v, want ConfigMap %s", spec.Volumes[0], cm.Name)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("Prometheus pod has no config checksum: config changes would not roll it")
	}
	selects(t, r.services[fullname+"-prometheus"], d.Spec.Template.Labels)
	if len(d.Spec.Template.Labels) == 0 || d.Spec.Template.Labels["app.kubernetes.io/component"] != "prometheus" {
		t.Errorf("Prometheus pod labels %v", d.Spec.Template.Labels)
	}
}

// TestRender_PrometheusScrapesEveryInjectorPod: with the injector, the
// chart's Prometheus finds each injector pod's ops port through a headless
// Service of its own, as it finds the sidecars; without the chart's pod it
// scrapes the injector alone.
func TestRender_PrometheusScrapesEveryInjectorPod(t *testing.T) {
	srv := "_metrics._tcp." + injectorName + "-metrics." + namespace + ".svc.cluster.local"
	tests := []struct {
		name string
		file string
		jobs []string
	}{
		{"beside the chart's pod", "", []string{"collapser", "hello-backend", "collapser-injector"}},
		{"alone", injectorOnly, []string{"collapser-injector"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.file, "injector.enabled=true", "prometheus.enabled=true")
			cfg := prometheusScrapes(t, r)
			var jobs []string
			for _, sc := range cfg.ScrapeConfigs {
				jobs = append(jobs, sc.JobName)
				if sc.JobName == "collapser-injector" && (len(sc.DNSSDConfigs) != 1 || !slices.Equal(sc.DNSSDConfigs[0].Names, []string{srv})) {
					t.Errorf("job %s discovers %+v, want SRV name %q", sc.JobName, sc.DNSSDConfigs, srv)
				}
			}
			if !slices.Equal(jobs, tt.jobs) {
				t.Errorf("scrape jobs %v, want %v", jobs, tt.jobs)
			}
			headless := r.services[injectorName+"-metrics"]
			if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
				t.Fatalf("injector metrics Service %+v, want a headless one listing unready pods too", headless)
			}
			d := r.deployments[injectorName]
			selects(t, headless, d.Spec.Template.Labels)
			port := servicePorts(headless)["metrics"]
			if port.Port != 8080 || port.TargetPort.String() != "ops" || !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "ops" }) {
				t.Errorf("injector metrics Service port %+v, want metrics 8080 to the injector's ops port", port)
			}
		})
	}
	if _, ok := render(t, "", "injector.enabled=true").services[injectorName+"-metrics"]; ok {
		t.Error("the injector's metrics Service is rendered without Prometheus")
	}
}

// prometheusScrapes decodes the chart's prometheus.yml.
func prometheusScrapes(t *testing.T, r *rendered) prometheusConfig {
	t.Helper()
	cm := r.configMaps[fullname+"-prometheus"]
	var cfg prometheusConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data["prometheus.yml"]), &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v\n%s", err, cm.Data["prometheus.yml"])
	}
	return cfg
}

func TestRender_ProxyServiceDoesNotSelectObservabilityPods(t *testing.T) {
	r := render(t, "ci/observability-values.yaml")
	svc := r.services[fullname]
	for _, name := range []string{fullname + "-prometheus", fullname + "-grafana"} {
		labels := r.deployments[name].Spec.Template.Labels
		matches := true
		for k, v := range svc.Spec.Selector {
			matches = matches && labels[k] == v
		}
		if matches {
			t.Errorf("Service %s selects the pods of %s", svc.Name, name)
		}
	}
}

func TestRender_GrafanaProvisionsDatasourceAndDashboard(t *testing.T) {
	r := render(t, "ci/observability-values.yaml")
	cm := r.configMaps[fullname+"-grafana"]

	var ds struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool           `json:"isDefault"`
			Editable                     bool           `json:"editable"`
			JSONData                     map[string]any `json:"jsonData"`
		} `json:"datasources"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["datasources.yaml"]), &ds); err != nil {
		t.Fatalf("datasources.yaml: %v", err)
	}
	if len(ds.Datasources) != 1 {
		t.Fatalf("%d datasources, want 1", len(ds.Datasources))
	}
	if got, want := ds.Datasources[0].URL, "http://"+fullname+"-prometheus:9090"; got != want {
		t.Errorf("datasource URL = %q, want %q", got, want)
	}
	if ds.Datasources[0].UID != "prometheus" || ds.Datasources[0].Type != "prometheus" {
		t.Errorf("datasource = %+v, want uid and type prometheus", ds.Datasources[0])
	}

	var providers struct {
		APIVersion int `json:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type string
			DisableDeletion    bool              `json:"disableDeletion"`
			AllowUIUpdates     bool              `json:"allowUiUpdates"`
			Options            map[string]string `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["dashboards.yaml"]), &providers); err != nil {
		t.Fatalf("dashboards.yaml: %v", err)
	}
	d := r.deployments[fullname+"-grafana"]
	spec := d.Spec.Template.Spec
	g := container(t, spec, "grafana")
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range g.VolumeMounts {
		mounts[m.MountPath] = m
	}
	path := providers.Providers[0].Options["path"]
	m, ok := mounts[path]
	if !ok {
		t.Fatalf("dashboard provider path %s is not mounted; mounts %v", path, mounts)
	}
	dashboards := r.configMaps[fullname+"-dashboards"]
	var vol corev1.Volume
	for _, v := range spec.Volumes {
		if v.Name == m.Name {
			vol = v
		}
	}
	if vol.ConfigMap == nil || vol.ConfigMap.Name != dashboards.Name {
		t.Errorf("volume at %s = %+v, want ConfigMap %s", path, vol, dashboards.Name)
	}
	for _, p := range []string{"/etc/grafana/provisioning/datasources/datasources.yaml", "/etc/grafana/provisioning/dashboards/dashboards.yaml", "/var/lib/grafana", "/tmp"} {
		if _, ok := mounts[p]; !ok {
			t.Errorf("nothing mounted at %s", p)
		}
	}

	// The dashboard is the chart's copy, valid JSON, labelled for Grafana's sidecar.
	if dashboards.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", dashboards.Labels)
	}
	text := dashboards.Data["collapser.json"]
	if !json.Valid([]byte(text)) {
		t.Error("collapser.json in the ConfigMap is not valid JSON")
	}
	if want := string(readChartFile(t, "dashboards/collapser.json")); strings.TrimSpace(text) != want {
		t.Error("dashboard ConfigMap differs from charts/collapser/dashboards/collapser.json")
	}

	env := envMap(g)
	for k, v := range map[string]string{
		"GF_AUTH_ANONYMOUS_ENABLED":                 "true",
		"GF_AUTH_ANONYMOUS_ORG_ROLE":                "Viewer",
		"GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH": path + "/collapser.json",
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	secret := r.secrets[fullname+"-grafana"]
	if len(secret.Data["admin-password"]) < 16 {
		t.Errorf("generated admin password has %d bytes, want at least 16", len(secret.Data["admin-password"]))
	}
	grafanaSvc := r.services[fullname+"-grafana"]
	if p := servicePorts(grafanaSvc)["http"]; p.Port != 3000 {
		t.Errorf("Grafana Service port = %d, want 3000", p.Port)
	}
	selects(t, grafanaSvc, d.Spec.Template.Labels)
}

func TestRender_GrafanaWithoutPrometheusFails(t *testing.T) {
	_, err := renderChart(loadChart(t), userValues(t, "", "grafana.enabled=true"))
	if err == nil {
		t.Fatal("rendered Grafana without a datasource")
	}
	if want := "set prometheus.enabled or grafana.datasourceUrl"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestRender_ServiceMonitorSelectsTheMetricsService(t *testing.T) {
	r := render(t, "", "serviceMonitor.enabled=true", "serviceMonitor.labels.release=kube-prometheus-stack")
	sm := r.serviceMonitors[fullname]
	var spec struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			HonorLabels   bool   `json:"honorLabels"`
		} `json:"endpoints"`
	}
	b, err := json.Marshal(sm["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("ServiceMonitor spec: %v", err)
	}
	metadata := sm["metadata"].(map[string]any)
	if labels := metadata["labels"].(map[string]any); labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v lack the extra release label", labels)
	}
	if !slices.Equal(spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("namespaceSelector = %v, want [%s]", spec.NamespaceSelector.MatchNames, namespace)
	}
	// It selects exactly the headless metrics Service, not the gRPC one.
	for name, svc := range r.services {
		matches := true
		for k, v := range spec.Selector.MatchLabels {
			matches = matches && svc.Labels[k] == v
		}
		if matches != (name == fullname+"-metrics") {
			t.Errorf("selector %v matches Service %s: %v", spec.Selector.MatchLabels, name, matches)
		}
	}
	ports := servicePorts(r.services[fullname+"-metrics"])
	var got []string
	for _, e := range spec.Endpoints {
		got = append(got, e.Port)
		if _, ok := ports[e.Port]; !ok {
			t.Errorf("endpoint port %s is not a port of the metrics Service", e.Port)
		}
		if e.Interval != "5s" || e.Path != "/metrics" || e.HonorLabels {
			t.Errorf("endpoint %+v, want /metrics every 5s, honorLabels false", e)
		}
	}
	if !slices.Equal(got, []string{"metrics", "backend-metrics"}) {
		t.Errorf("endpoints = %v, want [metrics backend-metrics]", got)
	}
}

func TestRender_ServiceMonitorTakesRelabelingsHonorLabelsAndJobLabel(t *testing.T) {
	sm := render(t, allFeatures).serviceMonitors[fullname]
	b, err := json.Marshal(sm["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		JobLabel  string `json:"jobLabel"`
		Endpoints []struct {
			Port              string           `json:"port"`
			HonorLabels       bool             `json:"honorLabels"`
			Relabelings       []map[string]any `json:"relabelings"`
			MetricRelabelings []map[string]any `json:"metricRelabelings"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.JobLabel != "app.kubernetes.io/name" {
		t.Errorf("jobLabel = %q", spec.JobLabel)
	}
	if len(spec.Endpoints) != 2 {
		t.Fatalf("%d endpoints, want 2", len(spec.Endpoints))
	}
	for _, e := range spec.Endpoints {
		if !e.HonorLabels || len(e.Relabelings) != 1 || e.Relabelings[0]["targetLabel"] != "node" ||
			len(e.MetricRelabelings) != 1 || e.MetricRelabelings[0]["action"] != "drop" {
			t.Errorf("endpoint %s = %+v, want honorLabels and the values' relabelings", e.Port, e)
		}
	}
}

func TestRender_ServiceMonitorWithoutItsCRDFailsClearly(t *testing.T) {
	_, err := renderWith(loadChart(t), userValues(t, "", "serviceMonitor.enabled=true"), capabilities())
	if err == nil {
		t.Fatal("rendered a ServiceMonitor for a cluster without its CRD")
	}
	for _, want := range []string{"no monitoring.coreos.com/v1 ServiceMonitor", "install the Prometheus Operator's CRDs", "--api-versions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestRender_PrometheusExtraArgsFollowTheChartsFlags(t *testing.T) {
	d := render(t, allFeatures).deployments[fullname+"-prometheus"]
	args := container(t, d.Spec.Template.Spec, "prometheus").Args
	if len(args) == 0 || args[len(args)-1] != "--web.enable-lifecycle" || !slices.Contains(args, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("args = %v, want the chart's flags then --web.enable-lifecycle", args)
	}
}

func TestRender_PrometheusIngestsCreatedTimestampsUnlessTurnedOff(t *testing.T) {
	const flag = "--enable-feature=created-timestamp-zero-ingestion"
	tests := []struct {
		name string
		set  []string
		want bool
	}{
		{"by default", nil, true},
		{"turned off", []string{"prometheus.createdTimestampZeroIngestion=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := render(t, "ci/observability-values.yaml", tt.set...).deployments[fullname+"-prometheus"]
			args := container(t, d.Spec.Template.Spec, "prometheus").Args
			if slices.Contains(args, flag) != tt.want {
				t.Errorf("args = %v, want %s: %v", args, flag, tt.want)
			}
		})
	}
}
