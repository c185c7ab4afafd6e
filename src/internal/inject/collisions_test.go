package inject

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestInject_PortCollisions(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		appPort     corev1.ContainerPort
		want        string
	}{
		{"app uses the gRPC port", optIn, corev1.ContainerPort{Name: "grpc", ContainerPort: 50052},
			`port 50052 of the collapser sidecar (collapser.io/port) is already used by container "app"; set collapser.io/port to a free port`},
		{"app uses the metrics port", optIn, corev1.ContainerPort{Name: "metrics", ContainerPort: 2112},
			`port 2112 of the collapser sidecar (collapser.io/metrics-port) is already used by container "app"; set collapser.io/metrics-port to a free port`},
		{"app uses the peer port", with(AnnotationPeers, "app-pods", AnnotationPeerTokenSecret, "app-peer-token"), corev1.ContainerPort{Name: "gossip", ContainerPort: 50053},
			`port 50053 of the collapser sidecar (collapser.io/peer-port) is already used by container "app"; set collapser.io/peer-port to a free port`},
		{"moved onto the app's port", with(AnnotationPort, "50051"), corev1.ContainerPort{Name: "grpc", ContainerPort: 50051},
			`port 50051 of the collapser sidecar (collapser.io/port) is already used by container "app"`},
		{"port is the backend", with(AnnotationBackendPort, "50052"), corev1.ContainerPort{Name: "grpc", ContainerPort: 50052},
			`port 50052 would be the collapser sidecar's collapser (collapser.io/port) and its backend (collapser.io/backend-port); set collapser.io/port to another port`},
		{"sidecar ports clash", with(AnnotationMetricsPort, "50052"), corev1.ContainerPort{Name: "grpc", ContainerPort: 50051},
			`port 50052 would be the collapser sidecar's collapser-prom (collapser.io/metrics-port) and its collapser (collapser.io/port); set one of them to another port`},
		{"app has a port named like the sidecar's", optIn, corev1.ContainerPort{Name: "collapser", ContainerPort: 50051},
			`container "app" has a port named "collapser", the name of the collapser sidecar's port; rename it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := appPod(tt.annotations)
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{tt.appPort}
			assertRejected(t, pod, tt.want)
		})
	}
	t.Run("init container's port", func(t *testing.T) {
		pod := appPod(optIn)
		pod.Spec.InitContainers = []corev1.Container{{Name: "mesh", Ports: []corev1.ContainerPort{{ContainerPort: 2112}}}}
		assertRejected(t, pod, `port 2112 of the collapser sidecar (collapser.io/metrics-port) is already used by container "mesh"`)
	})
	t.Run("policy volume name taken", func(t *testing.T) {
		pod := appPod(with(AnnotationPolicy, "rules"))
		pod.Spec.Volumes = []corev1.Volume{{Name: policyVolume}}
		assertRejected(t, pod, `the pod has a volume named "collapser-policy", the name of the collapser sidecar's volume of collapser.io/policy-configmap; rename it`)
	})
	t.Run("TLS volume name taken", func(t *testing.T) {
		pod := appPod(with(AnnotationTLSSecret, "app-tls"))
		pod.Spec.Volumes = []corev1.Volume{{Name: tlsVolume}}
		assertRejected(t, pod, `the pod has a volume named "collapser-tls", the name of the collapser sidecar's volume of collapser.io/tls-secret; rename it`)
	})
}

// TestInject_AdminPortCollisions checks that the admin service's port,
// which the sidecar binds on loopback without declaring it, collides with
// a pod's ports all the same (the pod's containers share one network
// namespace), wherever the template's COLLAPSER_ADMIN_LISTEN puts it, and
// not at all when it is empty.
func TestInject_AdminPortCollisions(t *testing.T) {
	const keep = "<the template's>"
	tests := []struct {
		name        string
		adminListen string // the template's COLLAPSER_ADMIN_LISTEN
		annotations map[string]string
		appPort     corev1.ContainerPort
		want        string // "" when the pod is injected
	}{
		{"app uses the admin port", keep, optIn, corev1.ContainerPort{Name: "grpc", ContainerPort: 50054},
			`port 50054 of the collapser sidecar (admin service at 127.0.0.1:50054) is already used by container "app"; set collapser.config.adminListen of the injector's chart to a free port`},
		{"admin service moved onto the app's port", "0.0.0.0:9000", optIn, corev1.ContainerPort{Name: "http", ContainerPort: 9000},
			`port 9000 of the collapser sidecar (admin service at 0.0.0.0:9000) is already used by container "app"; set collapser.config.adminListen of the injector's chart to a free port`},
		{"gRPC port moved onto the admin port", keep, with(AnnotationPort, "50054"), corev1.ContainerPort{Name: "grpc", ContainerPort: 50051},
			`port 50054 would be the collapser sidecar's admin (admin service at 127.0.0.1:50054) and its collapser (collapser.io/port); set one of them to another port`},
		{"backend on the admin port", keep, with(AnnotationBackendPort, "50054"), corev1.ContainerPort{Name: "http", ContainerPort: 8080},
			`port 50054 would be the collapser sidecar's admin (admin service at 127.0.0.1:50054) and its backend (collapser.io/backend-port); set collapser.config.adminListen of the injector's chart to another port`},
		{"app port named admin", keep, optIn, corev1.ContainerPort{Name: "admin", ContainerPort: 8080}, ""},
		{"admin service off", "", optIn, corev1.ContainerPort{Name: "grpc", ContainerPort: 50054}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := testTemplate(t)
			if tt.adminListen != keep {
				setEnv(&tmpl.Container, envAdminListen, tt.adminListen)
			}
			pod := appPod(tt.annotations)
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{tt.appPort}
			res, err := Injector{Template: tmpl, PeerCertificates: true}.Inject(pod, "team", nil)
			switch {
			case tt.want == "" && (err != nil || len(res.Patch) == 0):
				t.Errorf("Inject = %+v, %v; want the sidecar injected", res, err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("Inject = %+v, %v; want the rejection %q", res, err, tt.want)
			}
		})
	}
}

// TestInject_AdminSocketIsSharedWithTheAppContainersOnly: a template that
// serves the admin service on a Unix socket (the chart's
// injector.adminSocket) gets the socket's directory as an emptyDir that
// the sidecar mounts and every app container mounts read-only; the admin
// port then collides with nothing, and a pod that already uses the volume
// name or the directory is refused.
func TestInject_AdminSocketIsSharedWithTheAppContainersOnly(t *testing.T) {
	const socket = "unix:/var/run/collapser/admin.sock"
	tmpl := testTemplate(t)
	setEnv(&tmpl.Container, envAdminListen, socket)
	in := Injector{Template: tmpl, PeerCertificates: true}

	pod := appPod(optIn)
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 50054}} // the loopback admin port's
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "worker", Image: "example/worker:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	res, err := in.Inject(pod, "team", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := apply(t, pod, res.Patch)
	c, _ := sidecar(t, got)
	if env(c, envAdminListen) != socket {
		t.Errorf("%s = %q, want %q", envAdminListen, env(c, envAdminListen), socket)
	}
	if want := []corev1.VolumeMount{{Name: adminVolume, MountPath: "/var/run/collapser"}}; !reflect.DeepEqual(c.VolumeMounts, want) {
		t.Errorf("the sidecar mounts %+v, want %+v: it makes the socket", c.VolumeMounts, want)
	}
	for _, app := range got.Spec.Containers {
		if app.Name == "collapser" {
			continue
		}
		want := corev1.VolumeMount{Name: adminVolume, MountPath: "/var/run/collapser", ReadOnly: true}
		if n := len(app.VolumeMounts); n == 0 || !reflect.DeepEqual(app.VolumeMounts[n-1], want) {
			t.Errorf("container %s mounts %+v, want %+v last", app.Name, app.VolumeMounts, want)
		}
	}
	if got.Spec.Containers[1].VolumeMounts[0].Name != "data" {
		t.Errorf("the worker's own mount was replaced: %+v", got.Spec.Containers[1].VolumeMounts)
	}
	found := false
	for _, v := range got.Spec.Volumes {
		found = found || v.Name == adminVolume && v.EmptyDir != nil
	}
	if !found {
		t.Errorf("volumes %+v, want the emptyDir %s", got.Spec.Volumes, adminVolume)
	}

	for _, tt := range []struct {
		name string
		edit func(*corev1.Pod)
		want string
	}{
		{"volume name taken", func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: adminVolume}} },
			`the pod has a volume named "collapser-admin", the name of the collapser sidecar's volume of injector.adminSocket of the injector's chart; rename it`},
		{"directory mounted", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "run"}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "run", MountPath: "/var/run/collapser/"}}
		}, `container "app" mounts /var/run/collapser, where the collapser sidecar shares its admin socket; mount it elsewhere, or set injector.adminSocket of the injector's chart to false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := appPod(optIn)
			tt.edit(pod)
			if _, err := in.Inject(pod, "team", nil); err == nil || err.Error() != tt.want {
				t.Errorf("Inject = %v, want the rejection %q", err, tt.want)
			}
		})
	}
}
