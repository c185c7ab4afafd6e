package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/gruntwork-io/terratest/modules/shell"
)

// command runs a program, failing the test with its output if it fails.
func command(t *testing.T, dir string, env map[string]string, name string, args ...string) string {
	t.Helper()
	return shell.RunCommandAndGetOutput(t, shell.Command{Command: name, Args: args, WorkingDir: dir, Env: env})
}

// ensureCluster creates the kind cluster and deletes it when the test ends,
// or, with E2E_REUSE_CLUSTER=1, uses the cluster if it exists and keeps it.
// Either way it writes the cluster's kubeconfig to s.kubeconfigPath.
func ensureCluster(t *testing.T, s settings) {
	t.Helper()
	clusters := strings.Fields(command(t, "", nil, s.kind, "get", "clusters"))
	exists := slices.Contains(clusters, s.cluster)
	switch {
	case exists && s.reuseCluster:
		command(t, "", nil, s.kind, "export", "kubeconfig", "--name", s.cluster, "--kubeconfig", s.kubeconfigPath)
		return
	case exists:
		t.Fatalf("kind cluster %q exists: delete it (kind delete cluster --name %s) or set E2E_REUSE_CLUSTER=1", s.cluster, s.cluster)
	}
	args := []string{"create", "cluster", "--name", s.cluster, "--kubeconfig", s.kubeconfigPath, "--wait", "5m"}
	if s.nodeImage != "" {
		args = append(args, "--image", s.nodeImage)
	}
	if s.kindConfig != "" {
		args = append(args, "--config", s.kindConfig)
	}
	command(t, "", nil, s.kind, args...)
	if !s.reuseCluster {
		t.Cleanup(func() {
			command(t, "", nil, s.kind, "delete", "cluster", "--name", s.cluster, "--kubeconfig", s.kubeconfigPath)
		})
	}
}

// loadImages builds the project's images and loads them, and Prometheus's
// when it is used, into the cluster's nodes: no registry is involved.
func loadImages(t *testing.T, s settings) {
	t.Helper()
	command(t, s.repoRoot, map[string]string{"IMAGE_TAG": s.imageTag}, "./scripts/images.sh")
	images := s.projectImages()
	if s.prometheus {
		images = append(images, s.prometheusImage)
	}
	command(t, "", nil, s.kind, append([]string{"load", "docker-image", "--name", s.cluster}, images...)...)
}
