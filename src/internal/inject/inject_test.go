package inject

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/inject/certs"
	sidecarpkg "github.com/collapser/collapser/src/internal/sidecar"
)

func TestInject_OptIn(t *testing.T) {
	enabled := map[string]string{NamespaceLabel: NamespaceEnabled}
	tests := []struct {
		name        string
		annotations map[string]string
		nsLabels    map[string]string
		want        bool
	}{
		{"no annotation, namespace not labelled", nil, nil, false},
		{"annotation true", optIn, nil, true},
		{"annotation false", map[string]string{AnnotationInject: "false"}, nil, false},
		{"namespace enabled", nil, enabled, true},
		{"namespace enabled, pod opts out", map[string]string{AnnotationInject: "false"}, enabled, false},
		{"namespace label other than enabled", nil, map[string]string{NamespaceLabel: "disabled"}, false},
	}
	in := Injector{Template: testTemplate(t), PeerCertificates: true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := in.Inject(appPod(tt.annotations), "team", tt.nsLabels)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Patch) > 0; got != tt.want {
				t.Errorf("injected = %v, want %v (patch %v)", got, tt.want, res.Patch)
			}
		})
	}
}

// TestInject_Native checks the default: the sidecar is the template's
// container, as the last init container that always restarts, with a
// startup probe made from its liveness probe.
func TestInject_Native(t *testing.T) {
	tmpl := testTemplate(t)
	pod := appPod(optIn)
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "example/migrate:1"}}
	res, err := Injector{Template: tmpl, PeerCertificates: true}.Inject(pod, "team", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings %q, want none", res.Warnings)
	}
	got := apply(t, pod, res.Patch)
	c, init := sidecar(t, got)
	if !init || got.Spec.InitContainers[len(got.Spec.InitContainers)-1].Name != "collapser" || len(got.Spec.Containers) != 1 {
		t.Fatalf("sidecar is not the last init container: init %v, containers %v", got.Spec.InitContainers, got.Spec.Containers)
	}
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("restartPolicy = %v, want Always", c.RestartPolicy)
	}
	want := tmpl.Container.LivenessProbe.DeepCopy()
	want.PeriodSeconds, want.FailureThreshold = startupPeriodSeconds, startupFailureThreshold
	if !reflect.DeepEqual(c.StartupProbe, want) {
		t.Errorf("startupProbe = %+v, want the liveness probe's check %+v", c.StartupProbe, want)
	}
	// But for the startup probe, restart policy and port names, it is the template's container.
	c.StartupProbe, c.RestartPolicy = nil, nil
	c.Ports[0].Name, c.Ports[1].Name = templateGRPCPort, templateMetricsPort
	if !equality.Semantic.DeepEqual(c, tmpl.Container) {
		t.Errorf("injected container differs from the template:\n got %+v\nwant %+v", c, tmpl.Container)
	}
}

func TestInject_Ordinary(t *testing.T) {
	tmpl := testTemplate(t)
	pod := appPod(optIn)
	res, err := Injector{Template: tmpl, Mode: Ordinary}.Inject(pod, "team", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "ordinary container") {
		t.Errorf("warnings = %q, want one about the ordinary container", res.Warnings)
	}
	got := apply(t, pod, res.Patch)
	c, init := sidecar(t, got)
	if init || len(got.Spec.InitContainers) != 0 || got.Spec.Containers[0].Name != "app" {
		t.Fatalf("sidecar is not the last container: init %v, containers %v", got.Spec.InitContainers, got.Spec.Containers)
	}
	if c.RestartPolicy != nil || c.StartupProbe != nil {
		t.Errorf("ordinary sidecar has restartPolicy %v, startupProbe %v; want neither", c.RestartPolicy, c.StartupProbe)
	}
}

// TestInject_AlreadyInjected runs the webhook again on its own output
// (reinvocationPolicy IfNeeded): the pod is left as it is.
func TestInject_AlreadyInjected(t *testing.T) {
	for _, mode := range []Mode{Native, Ordinary} {
		in := Injector{Template: testTemplate(t), Mode: mode, PeerCertificates: true}
		pod := appPod(with(AnnotationPolicy, "rules", AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token"))
		res, err := in.Inject(pod, "team", nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := in.Inject(apply(t, pod, res.Patch), "team", nil)
		if err != nil || len(again.Patch) != 0 || len(again.Warnings) != 0 {
			t.Errorf("mode %v: second injection = %+v, %v; want nothing", mode, again, err)
		}
	}
}

func TestInject_Annotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		check       func(t *testing.T, pod *corev1.Pod, c corev1.Container)
	}{
		{"backend-port", with(AnnotationBackendPort, "8080"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if got := env(c, envBackend); got != "127.0.0.1:8080" {
				t.Errorf("%s = %q, want 127.0.0.1:8080", envBackend, got)
			}
		}},
		{"port", with(AnnotationPort, "7000"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if port(c, PortName) != 7000 || env(c, envListen) != ":7000" {
				t.Errorf("port %d, %s %q; want 7000", port(c, PortName), envListen, env(c, envListen))
			}
			for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p.GRPC.Port != 7000 {
					t.Errorf("%s probe checks port %d, want 7000", name, p.GRPC.Port)
				}
			}
		}},
		{"metrics-port", with(AnnotationMetricsPort, "9100"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if port(c, MetricsPortName) != 9100 || env(c, envMetricsListen) != ":9100" {
				t.Errorf("metrics port %d, %s %q; want 9100", port(c, MetricsPortName), envMetricsListen, env(c, envMetricsListen))
			}
		}},
		{"cache-ttl", with(AnnotationCacheTTL, "1500ms"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if got := env(c, envCacheTTL); got != "1.5s" {
				t.Errorf("%s = %q, want 1.5s", envCacheTTL, got)
			}
		}},
		{"peers", with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if got := env(c, envPeers); got != "dns:///app-pods.team.svc.cluster.local:50053" {
				t.Errorf("%s = %q", envPeers, got)
			}
			if port(c, PeerPortName) != 50053 || env(c, envPeerListen) != ":50053" {
				t.Errorf("peer port %d, %s %q; want the template's 50053", port(c, PeerPortName), envPeerListen, env(c, envPeerListen))
			}
			// Purges go to the peers Service's pods, the sidecar's default.
			if got := env(c, envReplicas); got != "<unset>" {
				t.Errorf("%s = %q, want it unset without %s", envReplicas, got, AnnotationReplicas)
			}
		}},
		{"peers and replicas", with(AnnotationPeers, "app-pods", AnnotationReplicas, "app-replicas", AnnotationPeerPort, "6000", AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if got := env(c, envReplicas); got != "dns:///app-replicas.team.svc.cluster.local:6000" {
				t.Errorf("%s = %q, want the replicas Service's peer port", envReplicas, got)
			}
			if got := env(c, envPeers); got != "dns:///app-pods.team.svc.cluster.local:6000" {
				t.Errorf("%s = %q: the owners stay the peers Service's pods", envPeers, got)
			}
		}},
		{"peers and peer-port", with(AnnotationPeers, "app-pods", AnnotationPeerPort, "6000", AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			if env(c, envPeers) != "dns:///app-pods.team.svc.cluster.local:6000" || port(c, PeerPortName) != 6000 || env(c, envPeerListen) != ":6000" {
				t.Errorf("peers %q, peer port %d, listen %q; want 6000", env(c, envPeers), port(c, PeerPortName), env(c, envPeerListen))
			}
		}},
		{"peers and peer-token-secret", with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if got := env(c, envPeerTokenFile); got != "/etc/collapser/peer-token/token" {
				t.Errorf("%s = %q", envPeerTokenFile, got)
			}
			assertMount(t, c, peerTokenVolume, "/etc/collapser/peer-token")
			assertSecretVolume(t, pod, peerTokenVolume, "app-peer-token", "token")
		}},
		{"peers, their certificate issued", with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			// The certificate the injector issues for the workload.
			assertEnv(t, c, map[string]string{envPeerTLSCert: "/etc/collapser/peer-tls/tls.crt", envPeerTLSKey: "/etc/collapser/peer-tls/tls.key", envPeerTLSCA: "/etc/collapser/peer-tls/ca.crt"})
			assertMount(t, c, peerTLSVolume, "/etc/collapser/peer-tls")
			assertSecretVolume(t, pod, peerTLSVolume, "collapser-peer-tls-app-pods", "tls.crt", "tls.key", "ca.crt")
		}},
		{"peers and peer-tls-secret", with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token", AnnotationPeerTLSSecret, "app-peer-tls"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			assertEnv(t, c, map[string]string{envPeerTLSCert: "/etc/collapser/peer-tls/tls.crt", envPeerTLSKey: "/etc/collapser/peer-tls/tls.key", envPeerTLSCA: "/etc/collapser/peer-tls/ca.crt"})
			wantMount := corev1.VolumeMount{Name: peerTLSVolume, MountPath: "/etc/collapser/peer-tls", ReadOnly: true}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return reflect.DeepEqual(m, wantMount) }) {
				t.Errorf("volumeMounts = %+v, want %+v among them", c.VolumeMounts, wantMount)
			}
			wantItems := []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}, {Key: "ca.crt", Path: "ca.crt"}}
			found := false
			for _, v := range pod.Spec.Volumes {
				found = found || v.Name == peerTLSVolume && v.Secret != nil && v.Secret.SecretName == "app-peer-tls" && reflect.DeepEqual(v.Secret.Items, wantItems)
			}
			if !found {
				t.Errorf("volumes = %+v, want the Secret app-peer-tls's tls.crt, tls.key and ca.crt", pod.Spec.Volumes)
			}
		}},
		{"tls-secret", with(AnnotationTLSSecret, "app-tls"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			assertEnv(t, c, map[string]string{envTLSCert: "/etc/collapser/tls/tls.crt", envTLSKey: "/etc/collapser/tls/tls.key", envTLSClientCA: "<unset>"})
			assertMount(t, c, tlsVolume, "/etc/collapser/tls")
			// No ca.crt asked: a Secret without one mounts.
			assertSecretVolume(t, pod, tlsVolume, "app-tls", "tls.crt", "tls.key")
			assertHTTPProbes(t, c, 2112)
		}},
		{"tls-secret and tls-client-ca", with(AnnotationTLSSecret, "app-tls", AnnotationTLSClientCA, "true"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if got := env(c, envTLSClientCA); got != "/etc/collapser/tls/ca.crt" {
				t.Errorf("%s = %q, want the Secret's ca.crt", envTLSClientCA, got)
			}
			assertSecretVolume(t, pod, tlsVolume, "app-tls", "tls.crt", "tls.key", "ca.crt")
		}},
		{"tls-secret, tls-client-ca false", with(AnnotationTLSSecret, "app-tls", AnnotationTLSClientCA, "false"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if got := env(c, envTLSClientCA); got != "<unset>" {
				t.Errorf("%s = %q, want it unset", envTLSClientCA, got)
			}
			assertSecretVolume(t, pod, tlsVolume, "app-tls", "tls.crt", "tls.key")
		}},
		{"tls-secret, port and metrics-port", with(AnnotationTLSSecret, "app-tls", AnnotationPort, "7000", AnnotationMetricsPort, "9100"), func(t *testing.T, _ *corev1.Pod, c corev1.Container) {
			assertHTTPProbes(t, c, 9100)
		}},
		{"tls-client-ca without tls-secret", with(AnnotationTLSClientCA, "true"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if env(c, envTLSClientCA) != "<unset>" || len(c.VolumeMounts) != 0 || len(pod.Spec.Volumes) != 0 || c.LivenessProbe.GRPC == nil {
				t.Errorf("a client CA without a TLS Secret set %s %q, mounted %+v, volumes %+v", envTLSClientCA, env(c, envTLSClientCA), c.VolumeMounts, pod.Spec.Volumes)
			}
		}},
		{"backend-tls", with(AnnotationBackendTLS, "true"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			assertEnv(t, c, map[string]string{envBackendTLS: "true", envBackendTLSServerName: "<unset>", envBackendTLSCA: "<unset>"})
			if len(c.VolumeMounts) != 0 || len(pod.Spec.Volumes) != 0 {
				t.Errorf("backend TLS with the system's roots mounted %+v, volumes %+v", c.VolumeMounts, pod.Spec.Volumes)
			}
			// The callers' leg stays plain text, probed over gRPC.
			if env(c, envTLSCert) != "<unset>" || c.LivenessProbe.GRPC == nil || c.ReadinessProbe.GRPC == nil {
				t.Errorf("backend TLS changed the callers' leg: %s %q, probes %+v, %+v", envTLSCert, env(c, envTLSCert), c.LivenessProbe, c.ReadinessProbe)
			}
		}},
		{"backend-tls, server name and CA", with(AnnotationBackendTLS, "true", AnnotationBackendTLSServerName, "app.team.svc", AnnotationBackendTLSCASecret, "app-ca"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			assertEnv(t, c, map[string]string{envBackendTLS: "true", envBackendTLSServerName: "app.team.svc", envBackendTLSCA: "/etc/collapser/backend-tls/ca.crt"})
			assertMount(t, c, backendTLSVolume, "/etc/collapser/backend-tls")
			assertSecretVolume(t, pod, backendTLSVolume, "app-ca", "ca.crt")
		}},
		{"backend-tls-ca-secret without backend-tls", with(AnnotationBackendTLS, "false", AnnotationBackendTLSCASecret, "app-ca"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if env(c, envBackendTLS) != "<unset>" || env(c, envBackendTLSCA) != "<unset>" || len(c.VolumeMounts) != 0 || len(pod.Spec.Volumes) != 0 {
				t.Errorf("a backend CA without backend TLS set %s %q, mounted %+v, volumes %+v", envBackendTLSCA, env(c, envBackendTLSCA), c.VolumeMounts, pod.Spec.Volumes)
			}
		}},
		{"peer-token-secret without peers", with(AnnotationPeerTokenSecret, "app-peer-token"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if env(c, envPeerTokenFile) != "<unset>" || len(c.VolumeMounts) != 0 || len(pod.Spec.Volumes) != 0 {
				t.Errorf("a token without peers mounted %+v, volumes %+v", c.VolumeMounts, pod.Spec.Volumes)
			}
		}},
		{"policy-configmap", with(AnnotationPolicy, "app-policy"), func(t *testing.T, pod *corev1.Pod, c corev1.Container) {
			if got := env(c, envPolicyFile); got != "/etc/collapser/policy/policy.yaml" {
				t.Errorf("%s = %q", envPolicyFile, got)
			}
			wantMount := corev1.VolumeMount{Name: policyVolume, MountPath: "/etc/collapser/policy", ReadOnly: true}
			if !reflect.DeepEqual(c.VolumeMounts, []corev1.VolumeMount{wantMount}) {
				t.Errorf("volumeMounts = %+v, want %+v", c.VolumeMounts, wantMount)
			}
			if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].ConfigMap == nil || pod.Spec.Volumes[0].ConfigMap.Name != "app-policy" {
				t.Errorf("volumes = %+v, want the ConfigMap app-policy", pod.Spec.Volumes)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := appPod(tt.annotations)
			pod.Spec.Containers[0].Ports[0].ContainerPort = 8080 // declared: no warning
			res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(pod, "team", nil)
			if err != nil {
				t.Fatal(err)
			}
			// The undeclared backend port's, unless declared; the ignored
			// annotation's in a case "... without ...".
			want := 1
			if tt.name == "backend-port" {
				want = 0
			}
			if strings.Contains(tt.name, " without ") {
				want++ // the ignored annotation's
			}
			if len(res.Warnings) != want {
				t.Errorf("warnings = %q, want %d", res.Warnings, want)
			}
			got := apply(t, pod, res.Patch)
			c, _ := sidecar(t, got)
			tt.check(t, got, c)
		})
	}
}

// assertEnv checks c's variables: each name's value, or "<unset>".
func assertEnv(t *testing.T, c corev1.Container, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := env(c, name); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
}

// assertMount checks that c mounts only the volume name, read-only, at dir.
func assertMount(t *testing.T, c corev1.Container, name, dir string) {
	t.Helper()
	want := corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return reflect.DeepEqual(m, want) }) {
		t.Errorf("volumeMounts = %+v, want %+v among them", c.VolumeMounts, want)
	}
}

// assertSecretVolume checks that pod has the volume name of the Secret
// secret's keys, each mounted as a file of its own name, and no other key.
func assertSecretVolume(t *testing.T, pod *corev1.Pod, name, secret string, keys ...string) {
	t.Helper()
	var want []corev1.KeyToPath
	for _, k := range keys {
		want = append(want, corev1.KeyToPath{Key: k, Path: k})
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.Secret != nil && v.Secret.SecretName == secret && reflect.DeepEqual(v.Secret.Items, want) {
			return
		}
	}
	t.Errorf("volumes = %+v, want %s of the Secret %s's %v", pod.Spec.Volumes, name, secret, keys)
}

// assertHTTPProbes checks that c, serving callers TLS, is probed by GETs on
// metricsPort: /livez for liveness and startup, /readyz for readiness,
// each probe otherwise the template's.
func assertHTTPProbes(t *testing.T, c corev1.Container, metricsPort int) {
	t.Helper()
	tmpl := testTemplate(t).Container
	startup := tmpl.LivenessProbe.DeepCopy()
	startup.PeriodSeconds, startup.FailureThreshold = startupPeriodSeconds, startupFailureThreshold
	for _, p := range []struct {
		name      string
		got, want *corev1.Probe
		path      string
	}{
		{"liveness", c.LivenessProbe, tmpl.LivenessProbe.DeepCopy(), "/livez"},
		{"readiness", c.ReadinessProbe, tmpl.ReadinessProbe.DeepCopy(), "/readyz"},
		{"startup", c.StartupProbe, startup, "/livez"},
	} {
		p.want.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: p.path, Port: intstr.FromInt(metricsPort)}}
		if !equality.Semantic.DeepEqual(p.got, p.want) {
			t.Errorf("%s probe = %+v, want %+v: GET %s on the metrics port %d", p.name, p.got, p.want, p.path, metricsPort)
		}
	}
}

// TestInject_PolicyVolumeAppended adds to a pod's volumes, not in their place.
func TestInject_PolicyVolumeAppended(t *testing.T) {
	pod := appPod(with(AnnotationPolicy, "app-policy"))
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(pod, "team", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := apply(t, pod, res.Patch)
	if len(got.Spec.Volumes) != 2 || got.Spec.Volumes[0].Name != "data" || got.Spec.Volumes[1].Name != policyVolume {
		t.Errorf("volumes = %+v, want data then %s", got.Spec.Volumes, policyVolume)
	}
}

func TestInject_Rejections(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"inject", map[string]string{AnnotationInject: "yes"}, `annotation collapser.io/inject: "yes" is not valid; want "true" or "false"`},
		{"backend-port", with(AnnotationBackendPort, "http"), `annotation collapser.io/backend-port: "http" is not valid; want a port number from 1 to 65535`},
		{"port", with(AnnotationPort, "0"), `annotation collapser.io/port: "0" is not valid; want a port number from 1 to 65535`},
		{"metrics-port", with(AnnotationMetricsPort, "65536"), `annotation collapser.io/metrics-port: "65536" is not valid; want a port number from 1 to 65535`},
		{"peer-port", with(AnnotationPeers, "p", AnnotationPeerPort, "-1"), `annotation collapser.io/peer-port: "-1" is not valid; want a port number from 1 to 65535`},
		{"peers without a peer token", with(AnnotationPeers, "app-pods"), `annotation collapser.io/peers needs collapser.io/peer-token-secret`},
		{"peers", with(AnnotationPeers, "App_Pods"), `annotation collapser.io/peers: "App_Pods" is not valid; want the name of a headless Service in the pod's namespace (a DNS-1035 label)`},
		{"replicas", with(AnnotationPeers, "p", AnnotationPeerTokenSecret, "t", AnnotationReplicas, "app.replicas"), `annotation collapser.io/replicas: "app.replicas" is not valid; want the name of a headless Service in the pod's namespace that publishes not-ready addresses (a DNS-1035 label)`},
		{"policy-configmap", with(AnnotationPolicy, "Policy!"), `annotation collapser.io/policy-configmap: "Policy!" is not valid; want the name of a ConfigMap in the pod's namespace (a DNS-1123 subdomain)`},
		{"cache-ttl", with(AnnotationCacheTTL, "5"), `annotation collapser.io/cache-ttl: "5" is not valid; want a Go duration of 0 or more, such as "100ms", "2s" or "0s" (collapse in flight only)`},
		{"negative cache-ttl", with(AnnotationCacheTTL, "-1s"), `annotation collapser.io/cache-ttl: "-1s" is not valid; want a Go duration`},
		{"tls-secret", with(AnnotationTLSSecret, "App_TLS"), `annotation collapser.io/tls-secret: "App_TLS" is not valid; want the name of a Secret in the pod's namespace (a DNS-1123 subdomain) with tls.crt and tls.key`},
		{"tls-client-ca", with(AnnotationTLSSecret, "app-tls", AnnotationTLSClientCA, "yes"), `annotation collapser.io/tls-client-ca: "yes" is not valid; want "true" or "false"`},
		{"backend-tls", with(AnnotationBackendTLS, "1"), `annotation collapser.io/backend-tls: "1" is not valid; want "true" or "false"`},
		{"backend-tls-server-name", with(AnnotationBackendTLS, "true", AnnotationBackendTLSServerName, "app_backend:443"), `annotation collapser.io/backend-tls-server-name: "app_backend:443" is not valid; want the DNS name the backend's certificate is issued for (a DNS-1123 subdomain)`},
		{"backend-tls-ca-secret", with(AnnotationBackendTLS, "true", AnnotationBackendTLSCASecret, "CA!"), `annotation collapser.io/backend-tls-ca-secret: "CA!" is not valid; want the name of a Secret in the pod's namespace (a DNS-1123 subdomain) with ca.crt`},
		{"two at once", with(AnnotationPort, "x", AnnotationCacheTTL, "y"), `annotation collapser.io/cache-ttl: "y" is not valid; want a Go duration of 0 or more, such as "100ms", "2s" or "0s" (collapse in flight only); annotation collapser.io/port: "x" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertRejected(t, appPod(tt.annotations), tt.want)
		})
	}
}

func assertRejected(t *testing.T, pod *corev1.Pod, want string) {
	t.Helper()
	res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(pod, "team", nil)
	var rejection *Rejection
	if !errors.As(err, &rejection) || !strings.Contains(err.Error(), want) {
		t.Errorf("Inject = %+v, %v; want a rejection containing %q", res, err, want)
	}
	if len(res.Patch) != 0 {
		t.Errorf("a rejected pod got a patch: %v", res.Patch)
	}
}

func TestInject_Warnings(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"unknown annotation", with("collapser.io/cache-tll", "1s"),
			"annotation collapser.io/cache-tll is not a collapser setting and is ignored; the settings are collapser.io/backend-port, collapser.io/backend-tls, collapser.io/backend-tls-ca-secret, collapser.io/backend-tls-server-name, collapser.io/cache-ttl, collapser.io/metrics-port, collapser.io/peer-port, collapser.io/peer-tls-secret, collapser.io/peer-token-secret, collapser.io/peers, collapser.io/policy-configmap, collapser.io/port, collapser.io/replicas, collapser.io/tls-client-ca, collapser.io/tls-secret"},
		{"peer-port without peers", with(AnnotationPeerPort, "6000"), "annotation collapser.io/peer-port is ignored without collapser.io/peers"},
		{"replicas without peers", with(AnnotationReplicas, "app-replicas"), "annotation collapser.io/replicas is ignored without collapser.io/peers"},
		{"tls-client-ca without tls-secret", with(AnnotationTLSClientCA, "true"), "annotation collapser.io/tls-client-ca is ignored without collapser.io/tls-secret"},
		{"backend-tls-server-name without backend-tls", with(AnnotationBackendTLSServerName, "app.team.svc"), `annotation collapser.io/backend-tls-server-name is ignored without collapser.io/backend-tls: "true"`},
		{"backend-tls-ca-secret with backend-tls false", with(AnnotationBackendTLS, "false", AnnotationBackendTLSCASecret, "app-ca"), `annotation collapser.io/backend-tls-ca-secret is ignored without collapser.io/backend-tls: "true"`},
		{"backend port not declared", with(AnnotationBackendPort, "9000"),
			"no container declares port 9000, where the collapser sidecar forwards calls on 127.0.0.1; if the app serves gRPC on another port, set collapser.io/backend-port to it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(appPod(tt.annotations), "team", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Patch) == 0 || !reflect.DeepEqual(res.Warnings, []string{tt.want}) {
				t.Errorf("warnings = %q (patch %d ops), want [%q] and a patch", res.Warnings, len(res.Patch), tt.want)
			}
		})
	}
}

// TestInject_PodSecurityRestricted: a pod that passes Pod Security
// "restricted" passes it with the sidecar, in both modes and with every
// setting that adds a port, variable or volume.
func TestInject_PodSecurityRestricted(t *testing.T) {
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	check := func(t *testing.T, pod *corev1.Pod) {
		t.Helper()
		result := psapolicy.AggregateCheckResults(evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec))
		if !result.Allowed {
			t.Errorf("pod is not restricted: %s: %s", result.ForbiddenReason(), result.ForbiddenDetail())
		}
	}
	pod := appPod(with(AnnotationPeers, "app-pods", AnnotationReplicas, "app-replicas", AnnotationPeerTokenSecret, "app-peer-token", AnnotationPeerTLSSecret, "app-peer-tls", AnnotationPolicy, "rules",
		AnnotationTLSSecret, "app-tls", AnnotationTLSClientCA, "true", AnnotationBackendTLS, "true", AnnotationBackendTLSServerName, "app.team.svc", AnnotationBackendTLSCASecret, "app-ca"))
	check(t, pod)
	for _, mode := range []Mode{Native, Ordinary} {
		res, err := Injector{Template: testTemplate(t), Mode: mode, PeerCertificates: true}.Inject(pod, "team", nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, apply(t, pod, res.Patch))
	}
}

func TestParseTemplate(t *testing.T) {
	good := `clusterDomain: cluster.local
peerPort: 50053
policyDir: /etc/collapser/policy
peerTokenDir: /etc/collapser/peer-token
peerTlsDir: /etc/collapser/peer-tls
container:
  name: collapser
  image: collapser/collapser:0.1.0
  ports: [{name: grpc, containerPort: 50052}, {name: metrics, containerPort: 2112}]
  livenessProbe: {grpc: {port: 50052, service: liveness}}
  env: [{name: COLLAPSER_ADMIN_LISTEN, value: "127.0.0.1:50054"}]
`
	if _, err := ParseTemplate([]byte(good)); err != nil {
		t.Fatalf("good template: %v", err)
	}
	tests := []struct{ name, edit, want string }{
		{"unknown field", "extra: 1\n", `unknown field "extra"`},
		{"no image", "container: {name: collapser, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}}\n", "needs a name and an image"},
		{"no gRPC port", "container: {name: c, image: i, ports: [{name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}}\n", `no port named "grpc"`},
		{"no liveness probe", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}]}\n", "no gRPC liveness probe"},
		{"peers rendered", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}, env: [{name: COLLAPSER_PEERS, value: x}]}\n", "sets COLLAPSER_PEERS"},
		{"replicas rendered", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}, env: [{name: COLLAPSER_REPLICAS, value: x}]}\n", "sets COLLAPSER_REPLICAS"},
		{"TLS rendered", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}, env: [{name: COLLAPSER_TLS_CERT_FILE, value: \"\"}]}\n", "sets COLLAPSER_TLS_CERT_FILE"},
		{"backend TLS rendered", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}, env: [{name: COLLAPSER_BACKEND_TLS, value: \"false\"}]}\n", "sets COLLAPSER_BACKEND_TLS"},
		{"no peer port", "peerPort: 0\n", "peerPort (0) must be set"},
		{"no admin address", "container: {name: c, image: i, ports: [{name: grpc, containerPort: 1}, {name: metrics, containerPort: 2}], livenessProbe: {grpc: {port: 1}}}\n", "does not set COLLAPSER_ADMIN_LISTEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTemplate([]byte(replaceKey(good, tt.edit)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseTemplate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// replaceKey returns doc with the top-level key of edit replaced by edit, or edit appended.
func replaceKey(doc, edit string) string {
	key := edit[:strings.Index(edit, ":")+1]
	var out []string
	skipping := false
	for _, line := range strings.SplitAfter(doc, "\n") {
		if strings.HasPrefix(line, key) {
			skipping = true
			continue
		}
		if skipping && strings.HasPrefix(line, " ") {
			continue
		}
		skipping = false
		out = append(out, line)
	}
	return strings.Join(out, "") + edit
}

// TestEnvNames_AreTheSidecarsVariables holds the variables injection sets
// to the sidecar's own flags.
func TestEnvNames_AreTheSidecarsVariables(t *testing.T) {
	for flag, name := range map[string]string{
		"listen": envListen, "metrics-listen": envMetricsListen, "backend": envBackend, "cache-ttl": envCacheTTL,
		"peers": envPeers, "replicas": envReplicas, "peer-listen": envPeerListen, "policy-file": envPolicyFile, "admin-listen": envAdminListen,
		"peer-token-file": envPeerTokenFile, "peer-tls-cert-file": envPeerTLSCert, "peer-tls-key-file": envPeerTLSKey, "peer-tls-ca-file": envPeerTLSCA,
		"tls-cert-file": envTLSCert, "tls-key-file": envTLSKey, "tls-client-ca-file": envTLSClientCA,
		"backend-tls": envBackendTLS, "backend-tls-ca-file": envBackendTLSCA, "backend-tls-server-name": envBackendTLSServerName,
		"backend-tls-cert-file": envBackendTLSCert, "backend-tls-key-file": envBackendTLSKey,
	} {
		if want := config.EnvName(flag); name != want {
			t.Errorf("--%s is read from %s, injection sets %s", flag, want, name)
		}
	}
}

// TestProbePaths_AreTheSidecars holds the probes of a sidecar serving TLS
// to the paths and health service its metrics port answers.
func TestProbePaths_AreTheSidecars(t *testing.T) {
	if livezPath != sidecarpkg.LivezPath || readyzPath != sidecarpkg.ReadyzPath || livenessService != sidecarpkg.LivenessService {
		t.Errorf("injection probes %s (service %q) and %s; the sidecar answers %s (service %q) and %s",
			livezPath, livenessService, readyzPath, sidecarpkg.LivezPath, sidecarpkg.LivenessService, sidecarpkg.ReadyzPath)
	}
}

func TestInject_SkipsAPodOnTheNodesNetwork(t *testing.T) {
	pod := appPod(optIn)
	pod.Spec.HostNetwork = true
	res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(pod, "team", nil)
	if err != nil || len(res.Patch) != 0 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "hostNetwork") {
		t.Errorf("Inject of a hostNetwork pod = %+v, %v; want no patch and a warning naming hostNetwork", res, err)
	}
}

func TestInject_PeersWithoutACertificateOfTheirOwnGetOneIssued(t *testing.T) {
	peers := with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token")
	res, err := Injector{Template: testTemplate(t), PeerCertificates: true}.Inject(appPod(peers), "team", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := certs.PeerRequest{Namespace: "team", Service: "app-pods", Secret: PeerSecretName("app-pods")}
	if res.PeerCertificate == nil || *res.PeerCertificate != want {
		t.Errorf("PeerCertificate = %+v, want %+v", res.PeerCertificate, want)
	}

	own := with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token", AnnotationPeerTLSSecret, "app-peer-tls")
	if res, err := (Injector{Template: testTemplate(t), PeerCertificates: true}).Inject(appPod(own), "team", nil); err != nil || res.PeerCertificate != nil {
		t.Errorf("a pod that names its peer certificate: PeerCertificate %+v, err %v; want none issued", res.PeerCertificate, err)
	}

	_, err = Injector{Template: testTemplate(t)}.Inject(appPod(peers), "team", nil)
	var rejection *Rejection
	if !errors.As(err, &rejection) || !strings.Contains(err.Error(), AnnotationPeerTLSSecret) {
		t.Errorf("peers without a certificate where the injector issues none: err %v, want a rejection naming %s", err, AnnotationPeerTLSSecret)
	}
}
