package inject

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Template is what the chart renders once for the injector: the sidecar
// container of the chart's own pod (the named template
// collapser.sidecarContainer, rendered without peers and without a policy)
// and the chart values that per-pod settings are made from.
type Template struct {
	// Container is the sidecar container, injected as it is but for the
	// per-pod settings.
	Container corev1.Container `json:"container"`
	// ClusterDomain ends the peers' DNS name (the chart's clusterDomain).
	ClusterDomain string `json:"clusterDomain"`
	// PeerPort is the port peers forward calls to unless collapser.io/peer-port
	// says otherwise (the chart's peers.port).
	PeerPort int32 `json:"peerPort"`
	// PolicyDir is where the policy ConfigMap is mounted (the chart's
	// collapser.policyDir); the sidecar reads policy.yaml in it.
	PolicyDir string `json:"policyDir"`
	// PeerTokenDir is where the peer token Secret is mounted (the chart's
	// collapser.peerTokenDir); the sidecar reads the file token in it.
	PeerTokenDir string `json:"peerTokenDir"`
	// PeerTLSDir is where the peer TLS Secret is mounted (the chart's
	// collapser.peerTLSDir); the sidecar reads tls.crt, tls.key and ca.crt.
	PeerTLSDir string `json:"peerTlsDir"`
}

// ParseTemplate reads a Template from YAML or JSON and checks that it has
// what injection fills in or checks: the gRPC and metrics ports, a
// liveness probe to start from, the admin service's address (its port is
// checked against the pod's), and no peers, policy or TLS (to callers or
// to the backend) of the chart's own pod.
func ParseTemplate(data []byte) (Template, error) {
	var t Template
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return Template{}, fmt.Errorf("read sidecar template: %w", err)
	}
	if err := t.validate(); err != nil {
		return Template{}, fmt.Errorf("sidecar template: %w", err)
	}
	return t, nil
}

func (t Template) validate() error {
	c := t.Container
	var errs []error
	if c.Name == "" || c.Image == "" {
		errs = append(errs, errors.New("container needs a name and an image"))
	}
	for _, name := range []string{templateGRPCPort, templateMetricsPort} {
		if portIndex(c.Ports, name) < 0 {
			errs = append(errs, fmt.Errorf("container has no port named %q", name))
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.GRPC == nil {
		errs = append(errs, errors.New("container has no gRPC liveness probe (a native sidecar's startup probe is made from it)"))
	}
	// The sidecar listens on the admin service's port unless the variable
	// is empty, and on its own default when it is unset: the template says
	// which, so that its port is checked against the pod's.
	if envIndex(c.Env, envAdminListen) < 0 {
		errs = append(errs, fmt.Errorf("container does not set %s: render it from the chart's collapser.config, so that the admin service's port is known", envAdminListen))
	}
	for _, name := range []string{envPeers, envReplicas, envPeerListen, envPeerTokenFile, envPeerTLSCert, envPeerTLSKey, envPeerTLSCA, envPolicyFile} {
		if envIndex(c.Env, name) >= 0 {
			errs = append(errs, fmt.Errorf("container sets %s: render it without peers and policy, which are per-pod settings", name))
		}
	}
	for _, name := range []string{envTLSCert, envTLSKey, envTLSClientCA, envBackendTLS, envBackendTLSCA, envBackendTLSServerName, envBackendTLSCert, envBackendTLSKey} {
		if envIndex(c.Env, name) >= 0 {
			errs = append(errs, fmt.Errorf("container sets %s: render it without TLS to callers or to the backend, which are per-pod settings", name))
		}
	}
	if t.ClusterDomain == "" || t.PolicyDir == "" || t.PeerTokenDir == "" || t.PeerTLSDir == "" || !validPort(t.PeerPort) {
		errs = append(errs, fmt.Errorf("clusterDomain (%q), policyDir (%q), peerTokenDir (%q), peerTlsDir (%q) and peerPort (%d) must be set",
			t.ClusterDomain, t.PolicyDir, t.PeerTokenDir, t.PeerTLSDir, t.PeerPort))
	}
	return errors.Join(errs...)
}

// portIndex returns the index of the port named name, or -1.
func portIndex(ports []corev1.ContainerPort, name string) int {
	for i, p := range ports {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// envIndex returns the index of the variable named name, or -1.
func envIndex(env []corev1.EnvVar, name string) int {
	for i, e := range env {
		if e.Name == name {
			return i
		}
	}
	return -1
}

func validPort(p int32) bool { return p > 0 && p <= 65535 }
