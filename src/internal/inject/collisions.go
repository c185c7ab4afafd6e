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

// volumeAnnotations names the annotation that adds each sidecar volume.
var volumeAnnotations = map[string]string{
	policyVolume:     AnnotationPolicy,
	peerTokenVolume:  AnnotationPeerTokenSecret,
	peerTLSVolume:    AnnotationPeerTLSSecret,
	tlsVolume:        AnnotationTLSSecret,
	backendTLSVolume: AnnotationBackendTLSCASecret,
	adminVolume:      adminSocketSetting,
}

// adminPortName names the admin service's port in messages, and
// adminSetting is the chart value that moves it: no annotation does, it is
// the same in every injected pod.
const (
	adminPortName = "admin"
	adminSetting  = "collapser.config.adminListen of the injector's chart"
)

// sidecarPort is a port the sidecar listens on, with what a message says
// of it and the setting that moves it.
type sidecarPort struct {
	name     string
	number   int32
	about    string // in a message's parentheses: its annotation, or what it is
	setting  string // the annotation or chart value that moves it
	declared bool   // a containerPort of the sidecar, whose name is its own
}

// sidecarPorts returns the ports sidecar c listens on: its declared ports,
// and its admin service's, which it binds on loopback without declaring it
// (only the pod's own containers reach it), so that an app container on
// that port collides in the pod's shared network namespace all the same.
func sidecarPorts(c corev1.Container) []sidecarPort {
	var ports []sidecarPort
	for _, p := range c.Ports {
		annotation := portAnnotations[p.Name]
		ports = append(ports, sidecarPort{name: p.Name, number: p.ContainerPort, about: annotation, setting: annotation, declared: true})
	}
	if addr, port := envAddress(c, envAdminListen); port != 0 {
		ports = append(ports, sidecarPort{
			name:    adminPortName,
			number:  port,
			about:   "admin service at " + addr,
			setting: adminSetting,
		})
	}
	return ports
}

// collisions returns why sidecar c cannot join pod: a port number or name
// the pod's containers use already, a port the sidecar would use twice or
// also forward to (backendPort), a volume name taken.
func collisions(pod *corev1.Pod, c corev1.Container, backendPort int32) []string {
	var reasons []string
	ports := sidecarPorts(c)
	for i, p := range ports {
		for _, q := range ports[:i] {
			if q.number == p.number {
				reasons = append(reasons, fmt.Sprintf("port %d would be the collapser sidecar's %s (%s) and its %s (%s); set one of them to another port", p.number, p.name, p.about, q.name, q.about))
			}
		}
		if p.number == backendPort {
			reasons = append(reasons, fmt.Sprintf("port %d would be the collapser sidecar's %s (%s) and its backend (%s); set %s to another port", backendPort, p.name, p.about, AnnotationBackendPort, p.setting))
		}
		for _, other := range allContainers(pod) {
			for _, q := range other.Ports {
				switch {
				case q.ContainerPort == p.number:
					reasons = append(reasons, fmt.Sprintf("port %d of the collapser sidecar (%s) is already used by container %q; set %s to a free port", q.ContainerPort, p.about, other.Name, p.setting))
				case p.declared && q.Name == p.name:
					reasons = append(reasons, fmt.Sprintf("container %q has a port named %q, the name of the collapser sidecar's port; rename it", other.Name, p.name))
				}
			}
		}
	}
	for _, m := range c.VolumeMounts {
		annotation, ok := volumeAnnotations[m.Name]
		for _, v := range pod.Spec.Volumes {
			if ok && v.Name == m.Name {
				reasons = append(reasons, fmt.Sprintf("the pod has a volume named %q, the name of the collapser sidecar's volume of %s; rename it", v.Name, annotation))
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
