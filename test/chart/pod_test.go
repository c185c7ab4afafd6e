package chart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// checkRestricted fails unless a pod meets the Pod Security Standard "restricted"
// (plus the chart's own rules: numeric non-root user, read-only root file system).
func checkRestricted(t *testing.T, where string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", where)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile is not RuntimeDefault", where)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: pod uses a host namespace", where)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("%s: volume %s is a hostPath", where, v.Name)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no securityContext", where, c.Name)
			continue
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s/%s: runAsNonRoot is not true", where, c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("%s/%s: runAsUser is 0", where, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation is not false", where, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: readOnlyRootFilesystem is not true", where, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", where, c.Name)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: capabilities are not exactly drop [ALL]", where, c.Name)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s/%s: seccompProfile is not RuntimeDefault", where, c.Name)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				t.Errorf("%s/%s: hostPort %d", where, c.Name, p.HostPort)
			}
		}
	}
}

// allPodSpecs returns every pod spec a rendering holds: Deployments and test pods.
func allPodSpecs(r *rendered) map[string]corev1.PodSpec {
	specs := map[string]corev1.PodSpec{}
	for name, d := range r.deployments {
		specs["Deployment/"+name] = d.Spec.Template.Spec
	}
	for name, p := range r.pods {
		specs["Pod/"+name] = p.Spec
	}
	return specs
}

func TestRender_EveryCIValuesFileRendersRestrictedPods(t *testing.T) {
	for _, file := range ciValuesFiles(t) {
		t.Run(file, func(t *testing.T) {
			r := render(t, file)
			_, proxy := r.deployments[fullname]
			_, injector := r.deployments[injectorName]
			if !proxy && !injector {
				t.Fatalf("neither Deployment %s nor %s; rendered %v", fullname, injectorName, r.kinds())
			}
			for where, spec := range allPodSpecs(r) {
				checkRestricted(t, where, spec)
				for _, c := range spec.Containers {
					if c.ImagePullPolicy == corev1.PullAlways || c.ImagePullPolicy == "" {
						t.Errorf("%s/%s: imagePullPolicy %q (kind-loaded images need IfNotPresent or Never)", where, c.Name, c.ImagePullPolicy)
					}
				}
			}
		})
	}
}

func TestRender_DefaultCIValuesFileIsEmpty(t *testing.T) {
	vals := userValues(t, "ci/default-values.yaml")
	if len(vals) != 0 {
		t.Errorf("ci/default-values.yaml sets %v; it must stay empty (the defaults)", vals)
	}
}

func TestRender_PodRunsSidecarAndLoopbackBackendWithProbesKubeletCanReach(t *testing.T) {
	r := render(t, "")
	d := r.deployments[fullname]
	spec := d.Spec.Template.Spec
	if got, want := containerNames(spec), []string{"collapser", "hello-backend"}; !slices.Equal(got, want) {
		t.Fatalf("containers = %v, want %v", got, want)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks is not false: service links inject COLLAPSER_* look-alike variables")
	}
	if spec.ServiceAccountName != fullname {
		t.Errorf("serviceAccountName = %q, want %q", spec.ServiceAccountName, fullname)
	}
	if _, ok := r.serviceAccounts[fullname]; !ok {
		t.Errorf("no ServiceAccount %s", fullname)
	}

	// The backend's gRPC listener is on loopback, out of kubelet's reach: it is probed
	// over HTTP on its metrics port, which answers with its gRPC health status.
	if got := envMap(container(t, spec, "hello-backend"))["HELLO_LISTEN"]; got != "127.0.0.1:50051" {
		t.Errorf("HELLO_LISTEN = %q, want 127.0.0.1:50051 (loopback: only the sidecar may call the backend)", got)
	}
	if got := envMap(container(t, spec, "collapser"))["COLLAPSER_BACKEND"]; got != "127.0.0.1:50051" {
		t.Errorf("COLLAPSER_BACKEND = %q, want 127.0.0.1:50051", got)
	}
	tests := []struct {
		container string
		image     string
		grpcPort  int32 // 0: probed by GET /healthz on the metrics port
		ports     map[string]int32
	}{
		{"collapser", "collapser/collapser:" + appVersion(t), 50052, map[string]int32{"grpc": 50052, "metrics": 2112}},
		{"hello-backend", "collapser/hello-backend:" + appVersion(t), 0, map[string]int32{"backend-metrics": 2113}},
	}
	for _, tt := range tests {
		t.Run(tt.container, func(t *testing.T) {
			c := container(t, spec, tt.container)
			if c.Image != tt.image {
				t.Errorf("image = %q, want %q (tag = appVersion)", c.Image, tt.image)
			}
			for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if tt.grpcPort == 0 {
					if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" || probe.HTTPGet.Port.String() != "backend-metrics" {
						t.Errorf("%s probe = %+v, want GET /healthz on port backend-metrics", name, probe)
					}
					continue
				}
				if probe == nil || probe.GRPC == nil {
					t.Errorf("%s probe is not a gRPC probe: %+v", name, probe)
					continue
				}
				if probe.GRPC.Port != tt.grpcPort {
					t.Errorf("%s probe port = %d, want %d", name, probe.GRPC.Port, tt.grpcPort)
				}
				if wantLiveness := tt.container == "collapser" && name == "liveness"; (probe.GRPC.Service != nil && *probe.GRPC.Service == "liveness") != wantLiveness {
					t.Errorf("%s probe service = %v, want \"liveness\" only for the sidecar's liveness probe", name, probe.GRPC.Service)
				}
			}
			got := map[string]int32{}
			for _, p := range c.Ports {
				got[p.Name] = p.ContainerPort
			}
			if len(got) != len(tt.ports) {
				t.Errorf("ports = %v, want %v", got, tt.ports)
			}
			for name, port := range tt.ports {
				if got[name] != port {
					t.Errorf("port %s = %d, want %d", name, got[name], port)
				}
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("memory request/limit missing: %+v", c.Resources)
			}
		})
	}
}

func TestRender_SidecarDefaultsMatchTheContract(t *testing.T) {
	env := envMap(container(t, render(t, "").deployments[fullname].Spec.Template.Spec, "collapser"))
	want := map[string]string{
		"COLLAPSER_LISTEN":                          ":50052",
		"COLLAPSER_BACKEND":                         "127.0.0.1:50051",
		"COLLAPSER_METRICS_LISTEN":                  ":2112",
		"COLLAPSER_CACHE_TTL":                       "100ms",
		"COLLAPSER_CACHE_MAX_ENTRIES":               "10000",
		"COLLAPSER_CACHE_MAX_BYTES":                 "67108864",
		"COLLAPSER_CACHE_MAX_ENTRY_BYTES":           "1048576",
		"COLLAPSER_BACKEND_TIMEOUT":                 "10s",
		"COLLAPSER_STREAM_MAX_BYTES":                "4194304",
		"COLLAPSER_STREAM_MAX_MESSAGES":             "10000",
		"COLLAPSER_STREAM_MAX_HELD_BYTES":           "67108864",
		"COLLAPSER_MAX_RECV_MSG_BYTES":              "4194304",
		"COLLAPSER_MAX_SEND_MSG_BYTES":              "4194304",
		"COLLAPSER_MAX_CONCURRENT_STREAMS":          "1000",
		"COLLAPSER_MAX_CONNECTIONS":                 "1000",
		"COLLAPSER_RECEIVE_TIMEOUT":                 "10s",
		"COLLAPSER_MAX_HEADER_BYTES":                "65536",
		"COLLAPSER_MAX_BACKEND_CALLS":               "1000",
		"COLLAPSER_SOFT_PURGE_RATE":                 "100",
		"COLLAPSER_PRIVATE_HEADERS":                 "",
		"COLLAPSER_DEFAULT_COLLAPSE":                "auto",
		"COLLAPSER_STALE_WHILE_REVALIDATE":          "0s",
		"COLLAPSER_STALE_IF_ERROR":                  "0s",
		"COLLAPSER_TTL_JITTER":                      "0.1",
		"COLLAPSER_EARLY_REFRESH":                   "true",
		"COLLAPSER_CACHE_CONTROL":                   "honor",
		"COLLAPSER_ADMIN_LISTEN":                    "127.0.0.1:50054",
		"COLLAPSER_ADMIN_ALLOW_REMOTE":              "false",
		"COLLAPSER_ADMIN_TOKEN_FILE":                "",
		"COLLAPSER_TLS_CERT_FILE":                   "",
		"COLLAPSER_TLS_KEY_FILE":                    "",
		"COLLAPSER_TLS_CLIENT_CA_FILE":              "",
		"COLLAPSER_BACKEND_TLS":                     "false",
		"COLLAPSER_BACKEND_TLS_CA_FILE":             "",
		"COLLAPSER_BACKEND_TLS_SERVER_NAME":         "",
		"COLLAPSER_BACKEND_TLS_CERT_FILE":           "",
		"COLLAPSER_BACKEND_TLS_KEY_FILE":            "",
		"COLLAPSER_TAGS_HEADER":                     "collapser-tags",
		"COLLAPSER_FORWARD_TAGS_HEADER":             "false",
		"COLLAPSER_CACHE_STATUS":                    "true",
		"COLLAPSER_MAX_TTL":                         "5m0s",
		"COLLAPSER_KEY_HEADERS":                     "",
		"COLLAPSER_IGNORE_HEADERS":                  "",
		"COLLAPSER_UNSAFE_SHARE_ACROSS_CREDENTIALS": "false",
		"COLLAPSER_COLLAPSE_METHODS":                "",
		"COLLAPSER_DESCRIPTOR_SET":                  "",
		"COLLAPSER_REFLECTION":                      "true",
		"COLLAPSER_SHUTDOWN_TIMEOUT":                "15s",
		"COLLAPSER_LOG_LEVEL":                       "warn",
		"COLLAPSER_LOG_FORMAT":                      "json",
		"GOGC":                                      "200",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if len(env) != len(want) {
		t.Errorf("sidecar has %d variables, want %d: %v", len(env), len(want), env)
	}
}

// TestRender_SidecarKnowsItsMemoryLimit: the sidecar keeps the Go heap under
// its container's memory limit, which only the downward API can tell it.
func TestRender_SidecarKnowsItsMemoryLimit(t *testing.T) {
	spec := render(t, "").deployments[fullname].Spec.Template.Spec
	var ref *corev1.ResourceFieldSelector
	for _, e := range container(t, spec, "collapser").Env {
		if e.Name == "COLLAPSER_MEMORY_LIMIT" && e.ValueFrom != nil {
			ref = e.ValueFrom.ResourceFieldRef
		}
	}
	if ref == nil || ref.ContainerName != "collapser" || ref.Resource != "limits.memory" || !ref.Divisor.IsZero() {
		t.Errorf("COLLAPSER_MEMORY_LIMIT comes from %+v, want the collapser container's limits.memory in bytes", ref)
	}
	env := envMap(container(t, render(t, "", "collapser.gogc=").deployments[fullname].Spec.Template.Spec, "collapser"))
	if v, ok := env["GOGC"]; ok {
		t.Errorf("collapser.gogc empty: GOGC = %q, want it unset (Go's default)", v)
	}
}

func TestRender_SidecarValuesMapToEnvironment(t *testing.T) {
	r := render(t, "",
		"collapser.config.cacheTTL=0s",
		"collapser.config.cacheMaxBytes=134217728",
		"collapser.config.keyHeaders={authorization,x-tenant}",
		"collapser.config.collapseMethods={/hello.v1.Greeter/SayHello}",
		"collapser.config.unsafeShareAcrossCredentials=true",
		"collapser.config.reflection=false",
		"collapser.config.logLevel=debug",
		"collapser.config.maxConcurrentStreams=50",
		"collapser.config.maxConnections=20",
		"collapser.config.receiveTimeout=2s",
		"collapser.config.maxHeaderBytes=8192",
		"collapser.config.maxBackendCalls=64",
		"collapser.config.privateHeaders={x-session,x-user}",
		"collapser.config.defaultCollapse=all",
		"collapser.config.staleWhileRevalidate=5s",
		"collapser.config.staleIfError=1m",
		"backend.port=6000",
		"replicaCount=3",
		"collapser.image.tag=dev1",
	)
	d := r.deployments[fullname]
	spec := d.Spec.Template.Spec
	env := envMap(container(t, spec, "collapser"))
	want := map[string]string{
		"COLLAPSER_CACHE_TTL":                       "0s",
		"COLLAPSER_CACHE_MAX_BYTES":                 "134217728",
		"COLLAPSER_KEY_HEADERS":                     "authorization,x-tenant",
		"COLLAPSER_COLLAPSE_METHODS":                "/hello.v1.Greeter/SayHello",
		"COLLAPSER_UNSAFE_SHARE_ACROSS_CREDENTIALS": "true",
		"COLLAPSER_REFLECTION":                      "false",
		"COLLAPSER_LOG_LEVEL":                       "debug",
		"COLLAPSER_BACKEND":                         "127.0.0.1:6000",
		"COLLAPSER_MAX_CONCURRENT_STREAMS":          "50",
		"COLLAPSER_MAX_CONNECTIONS":                 "20",
		"COLLAPSER_RECEIVE_TIMEOUT":                 "2s",
		"COLLAPSER_MAX_HEADER_BYTES":                "8192",
		"COLLAPSER_MAX_BACKEND_CALLS":               "64",
		"COLLAPSER_PRIVATE_HEADERS":                 "x-session,x-user",
		"COLLAPSER_DEFAULT_COLLAPSE":                "all",
		"COLLAPSER_STALE_WHILE_REVALIDATE":          "5s",
		"COLLAPSER_STALE_IF_ERROR":                  "1m",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if got := envMap(container(t, spec, "hello-backend"))["HELLO_LISTEN"]; got != "127.0.0.1:6000" {
		t.Errorf("HELLO_LISTEN = %q, want 127.0.0.1:6000", got)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *d.Spec.Replicas)
	}
	if got := container(t, spec, "collapser").Image; got != "collapser/collapser:dev1" {
		t.Errorf("image = %q, want collapser/collapser:dev1", got)
	}
}

func TestRender_BackendOffRunsSidecarBeforeUserContainer(t *testing.T) {
	r := render(t, "ci/backend-off-values.yaml")
	spec := r.deployments[fullname].Spec.Template.Spec
	if got, want := containerNames(spec), []string{"collapser", "my-backend"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	// extraContainers go through tpl: the file's image follows the appVersion.
	if got, want := container(t, spec, "my-backend").Image, "collapser/hello-backend:"+appVersion(t); got != want {
		t.Errorf("my-backend image = %q, want %q", got, want)
	}
	if _, ok := servicePorts(r.services[fullname])["backend-metrics"]; ok {
		t.Error("Service has a backend-metrics port without the hello backend")
	}
	if len(r.pods) != 0 {
		t.Errorf("test pods %v rendered without the hello backend", r.kinds())
	}
	if got := envMap(container(t, spec, "collapser"))["COLLAPSER_BACKEND"]; got != "127.0.0.1:50051" {
		t.Errorf("COLLAPSER_BACKEND = %q, want 127.0.0.1:50051", got)
	}
}

func TestRender_BackendOffWithoutContainerFails(t *testing.T) {
	_, err := renderChart(loadChart(t), userValues(t, "", "backend.enabled=false"))
	if err == nil {
		t.Fatal("rendered a pod with a sidecar and no backend")
	}
	if want := "extraContainers is empty"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}
