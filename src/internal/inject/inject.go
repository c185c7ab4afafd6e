// Package inject decides whether a pod gets the collapser sidecar and
// builds the JSON patch that adds it. It knows nothing of the sidecar
// itself: the container comes from a Template the chart renders (the very
// container of the chart's own pod), and injection only fills in each pod's
// settings from its annotations (ports, backend, peers and replicas, peer
// token and TLS, TLS to callers and to the backend, policy, cache TTL). A
// pod with peers must name the Secret of its peer token
// (AnnotationPeerTokenSecret): every call between replicas carries it, so a
// pod that names peers without it is refused. Its replicas call each other
// over mutual TLS: with the certificate of AnnotationPeerTLSSecret, or else
// with one the injector issues for the workload (Result.PeerCertificate,
// in the Secret PeerSecretName names); a pod that names neither when the
// injector issues none is refused.
//
// Nothing is intercepted: callers reach the sidecar through the workload's
// Service, whose targetPort names PortName. The app's probes are not
// rewritten and no capability is added, so a pod that passes Pod Security
// "restricted" passes it injected too. Only the sidecar's own probes change
// with AnnotationTLSSecret: its gRPC liveness and readiness probes (and the
// startup probe made from the liveness one) become HTTP GETs of /livez and
// /readyz on its metrics port, since the kubelet's gRPC probe speaks plain
// text only. A pod on the node's network (hostNetwork) is not injected,
// with a warning: the sidecar's ports and its admin service would be the
// node's.
//
// The patch only adds (the sidecar, and the volumes it mounts: the policy
// ConfigMap's, the Secrets of the peer token, of the peer TLS, of the
// callers' TLS and of the backend's CA; and, when the template serves the
// admin service on a Unix socket, the socket's emptyDir, which every app
// container mounts read-only to reach it): it never rewrites the pod from a
// decoded copy, so fields this package's API version does not know
// survive. A pod that already has the sidecar is left as it is, so the
// webhook can be invoked again (reinvocationPolicy IfNeeded).
package inject

import (
	"cmp"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/collapser/collapser/src/internal/inject/certs"
)

// The names of the injected sidecar's ports: unique in the pod, so that a
// Service's targetPort names one port (the template's are named
// templateGRPCPort and templateMetricsPort, which an app may use too).
const (
	PortName        = "collapser"
	MetricsPortName = "collapser-prom"
	PeerPortName    = "collapser-peer"

	templateGRPCPort    = "grpc"
	templateMetricsPort = "metrics"
)

// policyVolume is the name of the volume of the policy ConfigMap, and
// policyFile the file in it that the sidecar reads.
const (
	policyVolume = "collapser-policy"
	policyFile   = "policy.yaml"
)

// peerTokenVolume is the name of the volume of the peer token Secret, and
// peerTokenKey the key, and file, the sidecar reads.
const (
	peerTokenVolume = "collapser-peer-token"
	peerTokenKey    = "token"
)

// peerTLSVolume is the name of the volume of the peer TLS Secret, whose
// keys, and files, are those of a kubernetes.io/tls Secret with its CA.
const peerTLSVolume = "collapser-peer-tls"

// A native sidecar's startup probe: the liveness probe's check (the sidecar
// serves, whatever its backend's state: the app starts only after it),
// tried every second for up to startupFailureThreshold seconds.
const (
	startupPeriodSeconds    = 1
	startupFailureThreshold = 30
)

// Mode says how the sidecar is added to a pod.
type Mode int

const (
	// Native adds the sidecar as the last init container, with
	// restartPolicy Always and a startup probe (Kubernetes 1.29+): the app
	// containers start once it serves, and a Job completes when its own
	// containers exit.
	Native Mode = iota
	// Ordinary adds the sidecar as the last container, for API servers
	// without native sidecars.
	Ordinary
)

// Injector injects Template's sidecar in Mode.
type Injector struct {
	Template Template
	Mode     Mode
	// PeerCertificates says that the injector issues the peer certificate
	// of a workload whose pods name peers and no AnnotationPeerTLSSecret.
	PeerCertificates bool
}

// Result is what injection does to one pod.
type Result struct {
	// Patch is the JSON patch (RFC 6902) that adds the sidecar; empty when
	// the pod is left as it is.
	Patch []jsonpatch.Operation
	// Warnings are notes for whoever creates the pod.
	Warnings []string
	// PeerCertificate, when set, is the peer certificate the patch mounts
	// and the injector must issue before the pod is admitted.
	PeerCertificate *certs.PeerRequest
}

// PeerSecretName is the name of the Secret, in the workload's namespace,
// of the peer certificate the injector issues for the replicas whose peers
// Service is peers.
func PeerSecretName(peers string) string { return "collapser-peer-tls-" + peers }

// Rejection is why a pod must not be created as it is: each reason names
// the annotation to change and the values it accepts.
type Rejection struct {
	Reasons []string
}

func (r *Rejection) Error() string { return strings.Join(r.Reasons, "; ") }

// Inject returns the patch that adds the sidecar to pod, created in
// namespace whose labels are namespaceLabels, or a *Rejection. A pod that
// did not opt in, or already has the sidecar, gets an empty Result.
func (in Injector) Inject(pod *corev1.Pod, namespace string, namespaceLabels map[string]string) (Result, error) {
	wanted, err := wantsSidecar(pod.Annotations, namespaceLabels)
	if err != nil || !wanted || in.injected(pod) {
		return Result{}, err
	}
	if pod.Spec.HostNetwork {
		// The sidecar's ports would be the node's, and its admin service
		// on the node's loopback; Istio and Linkerd skip such pods too.
		return Result{Warnings: []string{"the pod uses the node's network (hostNetwork): the collapser sidecar is not injected, since its ports and its admin service would be the node's"}}, nil
	}
	s, rejections, warnings := parseSettings(pod.Annotations)
	var issue *certs.PeerRequest
	if s.peers != "" && s.peerTLS == "" {
		if !in.PeerCertificates {
			rejections = append(rejections, fmt.Sprintf("annotation %s needs %s: replicas call each other over mutual TLS, and this injector issues no peer certificates", AnnotationPeers, AnnotationPeerTLSSecret))
		}
		s.peerTLS = PeerSecretName(s.peers)
		issue = &certs.PeerRequest{Namespace: namespace, Service: s.peers, Secret: s.peerTLS}
	}
	if len(rejections) > 0 {
		return Result{}, &Rejection{Reasons: rejections}
	}
	c, backendPort := in.container(s, namespace)
	var shareAdmin []jsonpatch.Operation
	adminDir := adminSocketDir(c)
	if adminDir != "" {
		shareAdmin, rejections = shareAdminSocket(&c, pod, adminDir)
	}
	if rejections := append(rejections, collisions(pod, c, backendPort)...); len(rejections) > 0 {
		return Result{}, &Rejection{Reasons: rejections}
	}
	if backendPort != 0 && !declares(pod, backendPort) {
		warnings = append(warnings, fmt.Sprintf("no container declares port %d, where the collapser sidecar forwards calls on 127.0.0.1; if the app serves gRPC on another port, set %s to it", backendPort, AnnotationBackendPort))
	}
	var patch []jsonpatch.Operation
	if in.Mode == Native {
		patch = append(patch, appendOp("/spec/initContainers", len(pod.Spec.InitContainers), c))
	} else {
		patch = append(patch, appendOp("/spec/containers", len(pod.Spec.Containers), c))
		warnings = append(warnings, "the collapser sidecar is an ordinary container (no native sidecars here): the app may start before it serves, and a Job's pod does not complete while it runs")
	}
	patch = append(patch, shareAdmin...)
	var volumes []corev1.Volume
	if adminDir != "" {
		volumes = append(volumes, adminSocketVolume())
	}
	if s.policy != "" {
		volumes = append(volumes, corev1.Volume{Name: policyVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.policy},
		}}})
	}
	if s.peers != "" && s.peerToken != "" {
		volumes = append(volumes, secretVolume(peerTokenVolume, s.peerToken, peerTokenKey))
	}
	if s.peers != "" && s.peerTLS != "" {
		volumes = append(volumes, secretVolume(peerTLSVolume, s.peerTLS, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, corev1.ServiceAccountRootCAKey))
	}
	volumes = append(volumes, tlsVolumes(s)...)
	for i, v := range volumes {
		patch = append(patch, appendOp("/spec/volumes", len(pod.Spec.Volumes)+i, v))
	}
	return Result{Patch: patch, Warnings: warnings, PeerCertificate: issue}, nil
}

// secretVolume is the volume name of the Secret secret's keys, each a file
// of its own name.
func secretVolume(name, secret string, keys ...string) corev1.Volume {
	items := make([]corev1.KeyToPath, 0, len(keys))
	for _, key := range keys {
		items = append(items, corev1.KeyToPath{Key: key, Path: key})
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items}}}
}

// wantsSidecar reads the opt-in: the pod's annotation, else its namespace's label.
func wantsSidecar(annotations, namespaceLabels map[string]string) (bool, error) {
	v, ok := annotations[AnnotationInject]
	switch {
	case !ok:
		return namespaceLabels[NamespaceLabel] == NamespaceEnabled, nil
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	}
	return false, &Rejection{Reasons: []string{fmt.Sprintf("annotation %s: %q is not valid; want \"true\" or \"false\"", AnnotationInject, v)}}
}

// injected reports whether pod already has a container named like the sidecar.
func (in Injector) injected(pod *corev1.Pod) bool {
	for _, c := range allContainers(pod) {
		if c.Name == in.Template.Container.Name {
			return true
		}
	}
	return false
}

// container returns the sidecar for settings s in namespace, and the port
// it forwards to on loopback (0 if the template's backend is not host:port).
func (in Injector) container(s settings, namespace string) (corev1.Container, int32) {
	t := in.Template
	c := *t.Container.DeepCopy()
	grpcPort := c.Ports[portIndex(c.Ports, templateGRPCPort)].ContainerPort
	metricsPort := c.Ports[portIndex(c.Ports, templateMetricsPort)].ContainerPort
	port := cmp.Or(s.port, grpcPort)
	setPort(&c, templateGRPCPort, PortName, port, envListen)
	metricsPort = cmp.Or(s.metricsPort, metricsPort)
	setPort(&c, templateMetricsPort, MetricsPortName, metricsPort, envMetricsListen)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.GRPC != nil && p.GRPC.Port == grpcPort {
			p.GRPC.Port = port
		}
	}
	if s.backendPort != 0 {
		setEnv(&c, envBackend, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s.backendPort))))
	}
	if s.cacheTTL != "" {
		setEnv(&c, envCacheTTL, s.cacheTTL)
	}
	if s.peers != "" {
		peerPort := cmp.Or(s.peerPort, t.PeerPort)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: PeerPortName, ContainerPort: peerPort, Protocol: corev1.ProtocolTCP})
		setEnv(&c, envPeers, peerTarget(s.peers, namespace, t.ClusterDomain, peerPort))
		if s.replicas != "" {
			setEnv(&c, envReplicas, peerTarget(s.replicas, namespace, t.ClusterDomain, peerPort))
		}
		setEnv(&c, envPeerListen, fmt.Sprintf(":%d", peerPort))
		if s.peerToken != "" {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: peerTokenVolume, MountPath: t.PeerTokenDir, ReadOnly: true})
			setEnv(&c, envPeerTokenFile, path.Join(t.PeerTokenDir, peerTokenKey))
		}
		if s.peerTLS != "" {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: peerTLSVolume, MountPath: t.PeerTLSDir, ReadOnly: true})
			setEnv(&c, envPeerTLSCert, path.Join(t.PeerTLSDir, corev1.TLSCertKey))
			setEnv(&c, envPeerTLSKey, path.Join(t.PeerTLSDir, corev1.TLSPrivateKeyKey))
			setEnv(&c, envPeerTLSCA, path.Join(t.PeerTLSDir, corev1.ServiceAccountRootCAKey))
		}
	}
	setTLS(&c, s, metricsPort)
	if s.policy != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: policyVolume, MountPath: t.PolicyDir, ReadOnly: true})
		setEnv(&c, envPolicyFile, path.Join(t.PolicyDir, policyFile))
	}
	if in.Mode == Native {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
		c.StartupProbe = c.LivenessProbe.DeepCopy()
		c.StartupProbe.PeriodSeconds = startupPeriodSeconds
		c.StartupProbe.FailureThreshold = startupFailureThreshold
	}
	return c, backendPortOf(c)
}

// peerTarget is the gRPC target of the peer port of the headless Service
// service in namespace: grpc-go's dns resolver resolves it to the pods the
// Service lists.
func peerTarget(service, namespace, clusterDomain string, port int32) string {
	return fmt.Sprintf("dns:///%s.%s.svc.%s:%d", service, namespace, clusterDomain, port)
}

// setPort renames the template's port from to name, sets its number and
// the variable that tells the sidecar where to listen.
func setPort(c *corev1.Container, from, name string, port int32, env string) {
	p := &c.Ports[portIndex(c.Ports, from)]
	p.Name, p.ContainerPort = name, port
	setEnv(c, env, fmt.Sprintf(":%d", port))
}

// setEnv sets the variable name to value, in its place if c has it.
func setEnv(c *corev1.Container, name, value string) {
	if i := envIndex(c.Env, name); i >= 0 {
		c.Env[i] = corev1.EnvVar{Name: name, Value: value}
		return
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// backendPortOf returns the port c forwards calls to, 0 if its backend is
// not host:port.
func backendPortOf(c corev1.Container) int32 {
	_, port := envAddress(c, envBackend)
	return port
}

// envAddress returns the host:port in c's variable name and its port, or
// a port of 0 when the variable is unset, empty or not host:port.
func envAddress(c corev1.Container, name string) (string, int32) {
	i := envIndex(c.Env, name)
	if i < 0 {
		return "", 0
	}
	addr := c.Env[i].Value
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil || !validPort(int32(p)) {
		return addr, 0
	}
	return addr, int32(p)
}

// appendOp adds v at the end of the list at path, which holds n items.
func appendOp(path string, n int, v any) jsonpatch.Operation {
	if n == 0 {
		return jsonpatch.Operation{Operation: "add", Path: path, Value: []any{v}}
	}
	return jsonpatch.Operation{Operation: "add", Path: path + "/-", Value: v}
}

func allContainers(pod *corev1.Pod) []corev1.Container {
	return append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
}
