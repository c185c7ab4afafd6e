package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// portAnnotations names the annotation that moves each sidecar port.
var portAnnotations = map[string]string{
	PortName:        AnnotationPort,
	MetricsPortName: AnnotationMetricsPort,
	PeerPortName:    AnnotationPeerPort,
}

// collisions returns why sidecar c cannot join pod: a port number or name
// the pod's containers use already, a port the sidecar would use twice or
// also forward to (backendPort), a volume name taken.
func collisions(pod *corev1.Pod, c corev1.Container, backendPort int32) []string {
	var reasons []string
	for i, p := range c.Ports {
		annotation := portAnnotations[p.Name]
		for _, q := range c.Ports[:i] {
			if q.ContainerPort == p.ContainerPort {
				reasons = append(reasons, fmt.Sprintf("port %d would be the collapser sidecar's %s (%s) and its %s (%s); set one of them to another port", p.ContainerPort, p.Name, annotation, q.Name, portAnnotations[q.Name]))
			}
		}
		if p.ContainerPort == backendPort {
			reasons = append(reasons, fmt.Sprintf("port %d would be the collapser sidecar's %s (%s) and its backend (%s); set %s to another port", p.ContainerPort, p.Name, annotation, AnnotationBackendPort, annotation))
		}
		for _, other := range allContainers(pod) {
			for _, q := range other.Ports {
				switch {
				case q.ContainerPort == p.ContainerPort:
					reasons = append(reasons, fmt.Sprintf("port %d of the collapser sidecar (%s) is already used by container %q; set %s to a free port", p.ContainerPort, annotation, other.Name, annotation))
				case q.Name == p.Name:
					reasons = append(reasons, fmt.Sprintf("container %q has a port named %q, the name of the collapser sidecar's port; rename it", other.Name, p.Name))
				}
			}
		}
	}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if m.Name == policyVolume && v.Name == policyVolume {
				reasons = append(reasons, fmt.Sprintf("the pod has a volume named %q, the name of the collapser sidecar's policy volume (%s); rename it", v.Name, AnnotationPolicy))
			}
		}
	}
	return reasons
}

// declares reports whether a container of pod declares port.
func declares(pod *corev1.Pod, port int32) bool {
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				return true
			}
		}
	}
	return false
}
