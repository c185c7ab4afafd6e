package inject

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// tlsVolume is the name of the volume of the callers' TLS Secret
// (AnnotationTLSSecret), mounted at tlsDir: tls.crt, tls.key and, when
// callers must present certificates, ca.crt.
const (
	tlsVolume = "collapser-tls"
	tlsDir    = "/etc/collapser/tls"
)

// backendTLSVolume is the name of the volume of the backend's CA Secret
// (AnnotationBackendTLSCASecret), mounted at backendTLSDir: its ca.crt.
const (
	backendTLSVolume = "collapser-backend-tls"
	backendTLSDir    = "/etc/collapser/backend-tls"
)

// The paths the sidecar's metrics port answers a probe on (package
// sidecar, LivezPath and ReadyzPath): livezPath for the gRPC health
// service livenessService, readyzPath for the sidecar's status.
const (
	livezPath       = "/livez"
	readyzPath      = "/readyz"
	livenessService = "liveness"
)

// setTLS sets TLS on c's legs from s: the callers' (its mount, its files and
// probes that ask metricsPort over HTTP) and the backend's.
func setTLS(c *corev1.Container, s settings, metricsPort int32) {
	if s.tls != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tlsVolume, MountPath: tlsDir, ReadOnly: true})
		setEnv(c, envTLSCert, path.Join(tlsDir, corev1.TLSCertKey))
		setEnv(c, envTLSKey, path.Join(tlsDir, corev1.TLSPrivateKeyKey))
		if s.tlsClientCA {
			setEnv(c, envTLSClientCA, path.Join(tlsDir, corev1.ServiceAccountRootCAKey))
		}
		// The kubelet's gRPC probe speaks plain text only: the metrics
		// port answers for the same health service (as the chart's
		// collapser.grpcProbe does for its own pod).
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p == nil || p.GRPC == nil {
				continue
			}
			get := &corev1.HTTPGetAction{Path: readyzPath, Port: intstr.FromInt32(metricsPort)}
			if p.GRPC.Service != nil && *p.GRPC.Service == livenessService {
				get.Path = livezPath
			}
			p.ProbeHandler = corev1.ProbeHandler{HTTPGet: get}
		}
	}
	if s.backendTLS {
		setEnv(c, envBackendTLS, "true")
		if s.backendTLSServerName != "" {
			setEnv(c, envBackendTLSServerName, s.backendTLSServerName)
		}
		if s.backendTLSCA != "" {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: backendTLSVolume, MountPath: backendTLSDir, ReadOnly: true})
			setEnv(c, envBackendTLSCA, path.Join(backendTLSDir, corev1.ServiceAccountRootCAKey))
		}
	}
}

// tlsVolumes returns the volumes of the Secrets setTLS mounts, each with
// the keys the sidecar reads only, so that a Secret without ca.crt mounts
// when no CA is asked of it.
func tlsVolumes(s settings) []corev1.Volume {
	var volumes []corev1.Volume
	if s.tls != "" {
		keys := []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}
		if s.tlsClientCA {
			keys = append(keys, corev1.ServiceAccountRootCAKey)
		}
		volumes = append(volumes, secretVolume(tlsVolume, s.tls, keys...))
	}
	if s.backendTLS && s.backendTLSCA != "" {
		volumes = append(volumes, secretVolume(backendTLSVolume, s.backendTLSCA, corev1.ServiceAccountRootCAKey))
	}
	return volumes
}
