package chart

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// injectorName is the name of every injector resource for releaseName.
const injectorName = fullname + "-injector"

// sidecarTemplate is the injector's ConfigMap as the injector reads it
// (src/internal/inject.Template).
type sidecarTemplate struct {
	Container     corev1.Container `json:"container"`
	ClusterDomain string           `json:"clusterDomain"`
	PeerPort      int32            `json:"peerPort"`
	PolicyDir     string           `json:"policyDir"`
	PeerTokenDir  string           `json:"peerTokenDir"`
	PeerTLSDir    string           `json:"peerTlsDir"`
}

// perPod are what the injector sets per pod, from annotations, and the chart
// sets in its own pod from peers, collapser.policy and collapser.config's TLS
// keys: the chart's sidecar has them, the injector's template does not.
var perPod = struct{ env, ports, mounts []string }{
	env: []string{"COLLAPSER_PEERS", "COLLAPSER_REPLICAS", "COLLAPSER_PEER_LISTEN", "COLLAPSER_PEER_TOKEN_FILE", "COLLAPSER_POLICY_FILE",
		"COLLAPSER_PEER_TLS_CERT_FILE", "COLLAPSER_PEER_TLS_KEY_FILE", "COLLAPSER_PEER_TLS_CA_FILE", "COLLAPSER_PEER_PLAINTEXT",
		"COLLAPSER_TLS_CERT_FILE", "COLLAPSER_TLS_KEY_FILE", "COLLAPSER_TLS_CLIENT_CA_FILE", "COLLAPSER_BACKEND_TLS",
		"COLLAPSER_BACKEND_TLS_CA_FILE", "COLLAPSER_BACKEND_TLS_SERVER_NAME", "COLLAPSER_BACKEND_TLS_CERT_FILE", "COLLAPSER_BACKEND_TLS_KEY_FILE"},
	ports:  []string{"peer"},
	mounts: []string{"policy", "peer-token", "peer-tls"},
}

// TestRender_InjectorTemplateIsTheChartsSidecar holds the injector's sidecar
// template to the sidecar container of the chart's own pod, field by field,
// for the same values: with peers and a policy in the chart's pod, the
// template is that container without them (per-pod settings of the
// injector), its admin service on the socket injector.adminSocket puts it
// on. src/internal/inject's tests hold the injected container to the
// template.
func TestRender_InjectorTemplateIsTheChartsSidecar(t *testing.T) {
	tests := []struct {
		name, file  string
		set         []string
		adminSocket bool
	}{
		{"defaults", "", []string{"injector.enabled=true"}, true},
		{"every feature, peers and a policy", allFeatures, []string{"injector.enabled=true", "replicaCount=3", "peers.port=6000", "clusterDomain=example.org"}, true},
		{"admin on the chart's address", "", []string{"injector.enabled=true", "injector.adminSocket=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.file, tt.set...)
			cm, ok := r.configMaps[injectorName]
			if !ok {
				t.Fatalf("no ConfigMap %s; rendered %v", injectorName, r.kinds())
			}
			var tmpl sidecarTemplate
			if err := yaml.UnmarshalStrict([]byte(cm.Data["sidecar.yaml"]), &tmpl); err != nil {
				t.Fatalf("sidecar.yaml: %v", err)
			}
			own := sidecarOf(t, r.deployments[fullname].Spec.Template.Spec)
			if tt.file != "" && (len(own.Env) == len(withoutPerPod(own).Env) || len(own.VolumeMounts) == 0) {
				t.Fatal("the chart's own sidecar has no peers or policy: the case tests nothing")
			}
			own = withoutPerPod(own)
			if tt.adminSocket {
				for i, e := range own.Env {
					if e.Name == "COLLAPSER_ADMIN_LISTEN" {
						own.Env[i].Value = "unix:/var/run/collapser/admin.sock"
					}
				}
			}
			got, want := reflect.ValueOf(tmpl.Container), reflect.ValueOf(own)
			for i := range got.NumField() {
				if !equality.Semantic.DeepEqual(got.Field(i).Interface(), want.Field(i).Interface()) {
					g, _ := json.Marshal(got.Field(i).Interface())
					w, _ := json.Marshal(want.Field(i).Interface())
					t.Errorf("%s: template %s, chart's sidecar %s", got.Type().Field(i).Name, g, w)
				}
			}
			values := userValues(t, tt.file, tt.set...)
			wantDomain, wantPort := "cluster.local", int32(50053)
			if tt.file != "" {
				wantDomain, wantPort = values["clusterDomain"].(string), 6000
			}
			if tmpl.ClusterDomain != wantDomain || tmpl.PeerPort != wantPort || tmpl.PolicyDir != "/etc/collapser/policy" || tmpl.PeerTokenDir != "/etc/collapser/peer-token" || tmpl.PeerTLSDir != "/etc/collapser/peer-tls" {
				t.Errorf("clusterDomain %q, peerPort %d, policyDir %q, peerTokenDir %q; want %q, %d and the chart's policy and peer token directories",
					tmpl.ClusterDomain, tmpl.PeerPort, tmpl.PolicyDir, tmpl.PeerTokenDir, wantDomain, wantPort)
			}
		})
	}
}

// TestRender_InjectorTemplateHasNoTLS: TLS to callers and to the backend
// of the chart's own pod stays out of the injector's template, whose
// probes stay gRPC: the injector sets both per pod (collapser.io/tls-secret,
// collapser.io/backend-tls) and refuses a template that sets them.
func TestRender_InjectorTemplateHasNoTLS(t *testing.T) {
	r := render(t, "", "injector.enabled=true", "collapser.config.tlsCertFile=/etc/tls/tls.crt", "collapser.config.tlsKeyFile=/etc/tls/tls.key",
		"collapser.config.backendTls=true", "collapser.config.backendTlsServerName=backend.example")
	var tmpl sidecarTemplate
	if err := yaml.UnmarshalStrict([]byte(r.configMaps[injectorName].Data["sidecar.yaml"]), &tmpl); err != nil {
		t.Fatalf("sidecar.yaml: %v", err)
	}
	own := envMap(sidecarOf(t, r.deployments[fullname].Spec.Template.Spec))
	if own["COLLAPSER_TLS_CERT_FILE"] != "/etc/tls/tls.crt" || own["COLLAPSER_BACKEND_TLS"] != "true" {
		t.Fatalf("the chart's own sidecar has no TLS (%v): the case tests nothing", own)
	}
	for _, e := range tmpl.Container.Env {
		if strings.Contains(e.Name, "_TLS") && !strings.HasPrefix(e.Name, "COLLAPSER_PEER_TLS") {
			t.Errorf("the injector's template sets %s=%q", e.Name, e.Value)
		}
	}
	if p, q := tmpl.Container.LivenessProbe, tmpl.Container.ReadinessProbe; p == nil || p.GRPC == nil || q == nil || q.GRPC == nil {
		t.Errorf("the injector's template probes %+v and %+v, want gRPC: the injector rewrites them per pod", p, q)
	}
}

func sidecarOf(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == "collapser" {
			return c
		}
	}
	t.Fatal("the chart's pod has no collapser container")
	return corev1.Container{}
}

func withoutPerPod(c corev1.Container) corev1.Container {
	c = *c.DeepCopy()
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return slices.Contains(perPod.env, e.Name) })
	c.Ports = slices.DeleteFunc(c.Ports, func(p corev1.ContainerPort) bool { return slices.Contains(perPod.ports, p.Name) })
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return slices.Contains(perPod.mounts, m.Name) })
	if len(c.VolumeMounts) == 0 {
		c.VolumeMounts = nil
	}
	return c
}

func TestRender_InjectorIsOffByDefault(t *testing.T) {
	r := render(t, "")
	if _, ok := r.deployments[injectorName]; ok || len(r.mutatingWebhooks) > 0 || len(r.clusterRoles) > 0 {
		t.Errorf("the injector renders by default: %v", r.kinds())
	}
}

// TestRender_InjectorIsSafeAndMinimal: an outage never blocks pod creation,
// kube-system and the injector's namespace are never injected, two
// replicas with a PDB, and RBAC for its own Secret, its own webhook
// configuration and reading namespaces only.
func TestRender_InjectorIsSafeAndMinimal(t *testing.T) {
	r := render(t, "", "injector.enabled=true")
	cfg, ok := r.mutatingWebhooks[injectorName]
	if !ok || len(cfg.Webhooks) != 2 {
		t.Fatalf("no MutatingWebhookConfiguration %s with two webhooks; rendered %v", injectorName, r.kinds())
	}
	// The API server calls the injector only for pods that may want the
	// sidecar: those of opted-in namespaces, at a path that reads no
	// namespace, and elsewhere those with the annotation.
	want := []struct {
		name, path, operator string
		matchConditions      bool
	}{
		{"namespace.inject.collapser.io", "/inject/namespace", "In", false},
		{"pod.inject.collapser.io", "/inject", "NotIn", true},
	}
	for i, w := range cfg.Webhooks {
		// Issuing a workload's peer certificate writes its Secret, never on a dry run.
		if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun ||
			*w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy || *w.TimeoutSeconds > 10 {
			t.Errorf("%s: failurePolicy %s, sideEffects %s, reinvocationPolicy %s, timeoutSeconds %d; want Ignore, NoneOnDryRun, IfNeeded, at most 10",
				w.Name, *w.FailurePolicy, *w.SideEffects, *w.ReinvocationPolicy, *w.TimeoutSeconds)
		}
		if w.Name != want[i].name {
			t.Errorf("webhook %d is %s, want %s", i, w.Name, want[i].name)
		}
		exprs := w.NamespaceSelector.MatchExpressions
		if len(exprs) != 2 || exprs[0].Key != "kubernetes.io/metadata.name" || exprs[0].Operator != "NotIn" || !slices.Equal(exprs[0].Values, []string{"kube-system", namespace}) {
			t.Errorf("%s: namespaceSelector %+v, want kube-system and %s excluded", w.Name, w.NamespaceSelector, namespace)
		} else if l := exprs[1]; l.Key != "collapser.io/inject" || string(l.Operator) != want[i].operator || !slices.Equal(l.Values, []string{"enabled"}) {
			t.Errorf("%s: namespaceSelector %+v, want collapser.io/inject %s [enabled]", w.Name, l, want[i].operator)
		}
		if svc := w.ClientConfig.Service; svc == nil || svc.Name != injectorName || svc.Namespace != namespace || *svc.Path != want[i].path {
			t.Errorf("%s: clientConfig %+v, want the injector's Service at %s", w.Name, w.ClientConfig, want[i].path)
		}
		if got := len(w.MatchConditions) == 1 && strings.Contains(w.MatchConditions[0].Expression, "'collapser.io/inject' in object.metadata.annotations"); got != want[i].matchConditions {
			t.Errorf("%s: matchConditions %+v, want one on the annotation: %v", w.Name, w.MatchConditions, want[i].matchConditions)
		}
	}
	d := r.deployments[injectorName]
	if d == nil || *d.Spec.Replicas != 2 {
		t.Fatalf("injector Deployment %v, want 2 replicas", d)
	}
	if _, ok := r.pdbs[injectorName]; !ok {
		t.Error("no PodDisruptionBudget for the injector")
	}
	if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want /readyz (serving a valid certificate)", p)
	}
	// Workloads' peer certificates: Secrets created and patched, none read.
	rules := r.clusterRoles[injectorName].Rules
	if len(rules) != 3 || !slices.Equal(rules[0].Resources, []string{"namespaces"}) || !slices.Equal(rules[0].Verbs, []string{"get"}) ||
		!slices.Equal(rules[1].ResourceNames, []string{injectorName}) ||
		!slices.Equal(rules[2].Resources, []string{"secrets"}) || !slices.Equal(rules[2].Verbs, []string{"create", "patch"}) {
		t.Errorf("ClusterRole rules %+v, want get namespaces, its own webhook configuration, and create and patch Secrets", rules)
	}
	role := r.roles[injectorName].Rules
	if len(role) != 1 || !slices.Equal(role[0].ResourceNames, []string{injectorName + "-tls", injectorName + "-peer-ca"}) {
		t.Errorf("Role rules %+v, want its own Secrets only: its certificate's and its peer CA's", role)
	}
	for _, name := range []string{injectorName + "-tls", injectorName + "-peer-ca"} {
		if _, ok := r.secrets[name]; !ok {
			t.Errorf("no Secret %s", name)
		}
	}
	if env := envMap(d.Spec.Template.Spec.Containers[0]); env["COLLAPSER_INJECTOR_PEER_CA_SECRET"] != injectorName+"-peer-ca" {
		t.Errorf("the injector's peer CA Secret is %q, want %s-peer-ca", env["COLLAPSER_INJECTOR_PEER_CA_SECRET"], injectorName)
	}
	for _, want := range []string{`collapser.io/inject: "true"`, "kubectl --namespace lab rollout status deployment/" + injectorName, "targetPort at the port named collapser"} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES do not say %q:\n%s", want, r.notes)
		}
	}
}

// TestRender_InjectorWithoutPeerCertificates: with
// injector.peerCertificates.enabled=false the injector issues none, may
// write no Secret of a workload, and its webhook has no side effects.
func TestRender_InjectorWithoutPeerCertificates(t *testing.T) {
	r := render(t, "", "injector.enabled=true", "injector.peerCertificates.enabled=false")
	for _, w := range r.mutatingWebhooks[injectorName].Webhooks {
		if *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %s, want None", w.Name, *w.SideEffects)
		}
	}
	for _, rule := range r.clusterRoles[injectorName].Rules {
		if slices.Contains(rule.Resources, "secrets") {
			t.Errorf("ClusterRole rule %+v: the injector may write workloads' Secrets", rule)
		}
	}
	if _, ok := r.secrets[injectorName+"-peer-ca"]; ok {
		t.Error("a peer CA Secret is rendered without peer certificates")
	}
	env := envMap(r.deployments[injectorName].Spec.Template.Spec.Containers[0])
	if v, set := env["COLLAPSER_INJECTOR_PEER_CA_SECRET"]; !set || v != "" {
		t.Errorf("COLLAPSER_INJECTOR_PEER_CA_SECRET = %q (set %v), want set and empty: none issued", v, set)
	}
}
