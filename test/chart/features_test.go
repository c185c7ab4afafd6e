package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// proxyLabels are the selector labels of the release's collapser pods.
var proxyLabels = map[string]string{
	"app.kubernetes.io/name":      "collapser",
	"app.kubernetes.io/instance":  releaseName,
	"app.kubernetes.io/component": "proxy",
}

func TestRender_NetworkPolicyOpensOnlyTheSidecarAndMetricsPorts(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		set         []string
		grpcPeers   int // 0: every peer (no from)
		metricPorts []string
		peerRule    bool // replicas: the peer port, from the release's own pods
	}{
		{"defaults: every peer", "", []string{"networkPolicy.enabled=true"}, 0, []string{"metrics", "backend-metrics"}, false},
		{"configured peers and the release's own pods", allFeatures, nil, 2, []string{"metrics", "backend-metrics"}, true},
		{"own backend container", "ci/backend-off-values.yaml", []string{"networkPolicy.enabled=true"}, 0, []string{"metrics"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.file, tt.set...)
			np := r.networkPolicies[fullname]
			if np == nil {
				t.Fatalf("no NetworkPolicy; rendered %v", r.kinds())
			}
			if !maps.Equal(np.Spec.PodSelector.MatchLabels, proxyLabels) {
				t.Errorf("podSelector = %v, want %v", np.Spec.PodSelector.MatchLabels, proxyLabels)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
				t.Errorf("policyTypes = %v, want [Ingress]", np.Spec.PolicyTypes)
			}
			rules := 2
			if tt.peerRule {
				rules = 3
			}
			if len(np.Spec.Ingress) != rules {
				t.Fatalf("%d ingress rules, want %d (gRPC, metrics, peers with replicas)", len(np.Spec.Ingress), rules)
			}
			if tt.peerRule {
				peer := np.Spec.Ingress[2]
				if got := portNames(peer.Ports); !slices.Equal(got, []string{"peer"}) {
					t.Errorf("third rule ports = %v, want [peer]", got)
				}
				if len(peer.From) != 1 || peer.From[0].PodSelector == nil || !maps.Equal(peer.From[0].PodSelector.MatchLabels, proxyLabels) {
					t.Errorf("peer port from %+v, want only this release's collapser pods", peer.From)
				}
			}
			grpc, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
			if got := portNames(grpc.Ports); !slices.Equal(got, []string{"grpc"}) {
				t.Errorf("first rule ports = %v, want [grpc]: the backend's port must stay closed", got)
			}
			if got := portNames(metrics.Ports); !slices.Equal(got, tt.metricPorts) {
				t.Errorf("second rule ports = %v, want %v", got, tt.metricPorts)
			}
			if len(grpc.From) != tt.grpcPeers {
				t.Errorf("gRPC from %d peers, want %d: %+v", len(grpc.From), tt.grpcPeers, grpc.From)
			}
			// Every named port is a port of a container of the pod.
			declared := containerPortNames(r.deployments[fullname].Spec.Template.Spec)
			for _, rule := range np.Spec.Ingress {
				for _, name := range portNames(rule.Ports) {
					if !declared[name] {
						t.Errorf("rule opens port %s, which no container declares", name)
					}
				}
			}
			if tt.grpcPeers == 0 {
				return
			}
			// With peers configured, the release's test pod (gRPC) and Prometheus and
			// test pod (metrics) are let in too.
			own := grpc.From[len(grpc.From)-1].PodSelector
			if own == nil || own.MatchLabels["app.kubernetes.io/component"] != "test" || own.MatchLabels["app.kubernetes.io/instance"] != releaseName {
				t.Errorf("last gRPC peer = %+v, want this release's test pod", grpc.From[len(grpc.From)-1])
			}
			ownMetrics := metrics.From[len(metrics.From)-1].PodSelector
			if ownMetrics == nil || len(ownMetrics.MatchExpressions) != 1 || !slices.Equal(ownMetrics.MatchExpressions[0].Values, []string{"prometheus", "test"}) {
				t.Errorf("last metrics peer = %+v, want this release's Prometheus and test pod", metrics.From[len(metrics.From)-1])
			}
			prometheusLabels := r.deployments[fullname+"-prometheus"].Spec.Template.Labels
			for k, v := range ownMetrics.MatchLabels {
				if prometheusLabels[k] != v {
					t.Errorf("metrics peer selects %s=%s, the Prometheus pod has %q", k, v, prometheusLabels[k])
				}
			}
		})
	}
}

func portNames(ports []networkingv1.NetworkPolicyPort) []string {
	var names []string
	for _, p := range ports {
		names = append(names, p.Port.String())
	}
	return names
}

func TestRender_PodDisruptionBudgetTakesOneOfItsBounds(t *testing.T) {
	tests := []struct {
		set     []string
		min     *intstr.IntOrString
		max     *intstr.IntOrString
		wantErr string
	}{
		{[]string{"podDisruptionBudget.enabled=true"}, nil, ptr(intstr.FromInt32(1)), ""},
		{[]string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=50%", "podDisruptionBudget.maxUnavailable="}, ptr(intstr.FromString("50%")), nil, ""},
		{[]string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=1"}, nil, nil, "not both"},
		{[]string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.maxUnavailable="}, nil, nil, "set minAvailable or maxUnavailable"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.set, ","), func(t *testing.T) {
			if tt.wantErr != "" {
				_, err := renderChart(loadChart(t), userValues(t, "", tt.set...))
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			pdb := render(t, "", tt.set...).pdbs[fullname]
			if pdb == nil {
				t.Fatal("no PodDisruptionBudget")
			}
			if !equalIntOrString(pdb.Spec.MinAvailable, tt.min) || !equalIntOrString(pdb.Spec.MaxUnavailable, tt.max) {
				t.Errorf("minAvailable %v maxUnavailable %v, want %v %v", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable, tt.min, tt.max)
			}
			if !maps.Equal(pdb.Spec.Selector.MatchLabels, proxyLabels) {
				t.Errorf("selector = %v, want %v", pdb.Spec.Selector.MatchLabels, proxyLabels)
			}
		})
	}
}

func equalIntOrString(a, b *intstr.IntOrString) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func TestRender_PolicyIsAMountedConfigMapThatDoesNotRestartThePod(t *testing.T) {
	r := render(t, allFeatures)
	cm := r.configMaps[fullname+"-policy"]
	if cm == nil {
		t.Fatalf("no policy ConfigMap; rendered %v", r.kinds())
	}
	var policy struct {
		Default map[string]any   `json:"default"`
		Methods []map[string]any `json:"methods"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["policy.yaml"]), &policy); err != nil {
		t.Fatalf("policy.yaml: %v\n%s", err, cm.Data["policy.yaml"])
	}
	if policy.Default["collapse"] != "auto" || len(policy.Methods) != 2 || policy.Methods[0]["name"] != "/hello.v1.Greeter/SayHello" || policy.Methods[0]["cacheTTL"] != "250ms" {
		t.Errorf("policy = %+v, want the values' policy", policy)
	}
	d := r.deployments[fullname]
	spec := d.Spec.Template.Spec
	c := container(t, spec, "collapser")
	if got := envMap(c)["COLLAPSER_POLICY_FILE"]; got != "/etc/collapser/policy/policy.yaml" {
		t.Errorf("COLLAPSER_POLICY_FILE = %q", got)
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == "/etc/collapser/policy" {
			mount = &c.VolumeMounts[i]
		}
	}
	// A subPath mount never sees ConfigMap updates; the directory mount does.
	if mount == nil || !mount.ReadOnly || mount.SubPath != "" {
		t.Fatalf("policy mount = %+v in %v, want a read-only directory mount at /etc/collapser/policy", mount, c.VolumeMounts)
	}
	for _, v := range spec.Volumes {
		if v.Name == mount.Name && (v.ConfigMap == nil || v.ConfigMap.Name != cm.Name) {
			t.Errorf("volume %s = %+v, want ConfigMap %s", v.Name, v.VolumeSource, cm.Name)
		}
	}
	// No pod annotation changes with the policy, so a policy change rolls nothing.
	other := render(t, allFeatures, "collapser.policy.default.cacheTTL=5s")
	if other.configMaps[fullname+"-policy"].Data["policy.yaml"] == cm.Data["policy.yaml"] {
		t.Fatal("the policy change did not reach the ConfigMap")
	}
	if a, b := d.Spec.Template.Annotations, other.deployments[fullname].Spec.Template.Annotations; !maps.Equal(a, b) {
		t.Errorf("pod annotations change with the policy (%v -> %v): the pod would restart", a, b)
	}

	// Without a policy: no ConfigMap, no variable, no mount.
	plain := render(t, "")
	if _, ok := plain.configMaps[fullname+"-policy"]; ok {
		t.Error("policy ConfigMap rendered for an empty policy")
	}
	pc := container(t, plain.deployments[fullname].Spec.Template.Spec, "collapser")
	if _, ok := envMap(pc)["COLLAPSER_POLICY_FILE"]; ok || len(pc.VolumeMounts) != 0 {
		t.Errorf("empty policy: env %v, mounts %v; want neither", envMap(pc), pc.VolumeMounts)
	}
}

func TestRender_ImagesTakeRegistryAndDigest(t *testing.T) {
	r := render(t, allFeatures, "prometheus.image.registry=mirror.example", "tests.image.tag=1.2.3")
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		spec      corev1.PodSpec
		container string
		want      string
	}{
		{r.deployments[fullname].Spec.Template.Spec, "collapser", "registry.example:5000/collapser/collapser:" + appVersion(t) + "@" + digest},
		{r.deployments[fullname].Spec.Template.Spec, "hello-backend", "collapser/hello-backend:" + appVersion(t)},
		{r.deployments[fullname+"-prometheus"].Spec.Template.Spec, "prometheus", "mirror.example/prom/prometheus:v3.16.0"},
		{r.pods[fullname+"-test-collapse"].Spec, "democlient", "collapser/democlient:1.2.3"},
	}
	for _, tt := range tests {
		if got := container(t, tt.spec, tt.container).Image; got != tt.want {
			t.Errorf("%s image = %q, want %q", tt.container, got, tt.want)
		}
	}
}

func TestRender_SchedulingOptionsReachThePod(t *testing.T) {
	spec := render(t, allFeatures).deployments[fullname].Spec.Template.Spec
	if spec.PriorityClassName != "high" {
		t.Errorf("priorityClassName = %q, want high", spec.PriorityClassName)
	}
	if len(spec.TopologySpreadConstraints) != 1 {
		t.Fatalf("topologySpreadConstraints = %+v, want 1", spec.TopologySpreadConstraints)
	}
	tsc := spec.TopologySpreadConstraints[0]
	if tsc.TopologyKey != "topology.kubernetes.io/zone" || tsc.MaxSkew != 1 || tsc.WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("constraint = %+v", tsc)
	}
	// A constraint without a labelSelector gets this release's collapser pods.
	if tsc.LabelSelector == nil || !maps.Equal(tsc.LabelSelector.MatchLabels, proxyLabels) {
		t.Errorf("labelSelector = %+v, want %v", tsc.LabelSelector, proxyLabels)
	}
	own := render(t, allFeatures, "topologySpreadConstraints[0].labelSelector.matchLabels.app=mine",
		"topologySpreadConstraints[0].maxSkew=2", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
		"topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")
	if got := own.deployments[fullname].Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels; !maps.Equal(got, map[string]string{"app": "mine"}) {
		t.Errorf("a constraint's own labelSelector was replaced: %v", got)
	}
	if want := []corev1.PodReadinessGate{{ConditionType: "example.io/target-ready"}}; !slices.Equal(spec.ReadinessGates, want) {
		t.Errorf("readinessGates = %+v, want %+v", spec.ReadinessGates, want)
	}
	plain := render(t, "").deployments[fullname].Spec.Template.Spec
	if plain.PriorityClassName != "" || len(plain.TopologySpreadConstraints) != 0 || len(plain.ReadinessGates) != 0 {
		t.Errorf("defaults set priorityClassName %q, constraints %v, readiness gates %v", plain.PriorityClassName, plain.TopologySpreadConstraints, plain.ReadinessGates)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRender_NetworkPolicyRendersByDefaultWherePeersAre(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  []string
		want bool
	}{
		{"one pod, no peers", nil, false},
		{"three pods, peers", []string{"replicaCount=3"}, true},
		{"three pods, turned off", []string{"replicaCount=3", "networkPolicy.enabled=false"}, false},
		{"three pods, peers off", []string{"replicaCount=3", "peers.enabled=false"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, "", tt.set...).networkPolicies[fullname] != nil; got != tt.want {
				t.Errorf("NetworkPolicy rendered %v, want %v", got, tt.want)
			}
		})
	}
}
