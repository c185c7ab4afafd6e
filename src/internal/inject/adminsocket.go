package inject

import (
	"fmt"
	"path"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// adminVolume is the emptyDir that holds the sidecar's admin socket when
// the template serves the admin service on one (COLLAPSER_ADMIN_LISTEN
// unix:<path>, the chart's injector.adminSocket): the sidecar mounts the
// socket's directory, and every app container mounts it read-only (a
// socket takes connections on a read-only mount), so that the pod's own
// containers reach the admin service and nothing that reaches the pod's
// loopback does (a mesh forwards inbound calls from 127.0.0.6).
const adminVolume = "collapser-admin"

// adminSocketSetting is the chart value that puts the admin service on a
// socket, in messages.
const adminSocketSetting = "injector.adminSocket of the injector's chart"

// adminSocketDir is the directory of sidecar c's admin socket, "" when its
// admin service is not on a socket.
func adminSocketDir(c corev1.Container) string {
	i := envIndex(c.Env, envAdminListen)
	if i < 0 {
		return ""
	}
	socket, ok := strings.CutPrefix(c.Env[i].Value, "unix:")
	if !ok || socket == "" {
		return ""
	}
	return path.Dir(socket)
}

// shareAdminSocket mounts dir, the admin socket's directory, into sidecar
// c, and returns the patch that mounts it read-only into each of pod's app
// containers, or why it cannot: an app container that mounts something
// there already.
func shareAdminSocket(c *corev1.Container, pod *corev1.Pod, dir string) ([]jsonpatch.Operation, []string) {
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: adminVolume, MountPath: dir})
	var ops []jsonpatch.Operation
	var reasons []string
	for i, app := range pod.Spec.Containers {
		for _, m := range app.VolumeMounts {
			if path.Clean(m.MountPath) == dir {
				reasons = append(reasons, fmt.Sprintf("container %q mounts %s, where the collapser sidecar shares its admin socket; mount it elsewhere, or set %s to false", app.Name, dir, adminSocketSetting))
			}
		}
		mount := corev1.VolumeMount{Name: adminVolume, MountPath: dir, ReadOnly: true}
		ops = append(ops, appendOp(fmt.Sprintf("/spec/containers/%d/volumeMounts", i), len(app.VolumeMounts), mount))
	}
	return ops, reasons
}

// adminSocketVolume is the emptyDir of the admin socket.
func adminSocketVolume() corev1.Volume {
	return corev1.Volume{Name: adminVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}
