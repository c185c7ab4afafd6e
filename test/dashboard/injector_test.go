package dashboard

import (
	"os"
	"path/filepath"
	"testing"
)

// unreachableKubeconfig points the injector at an API server that does not
// answer. It needs none to serve its metrics: with --cert-dir and a fixed
// --sidecar-mode it calls the API server only to read a namespace during
// an admission.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
  - name: none
    cluster:
      server: https://127.0.0.1:1
contexts:
  - name: none
    context: {cluster: none, user: none}
current-context: none
users:
  - name: none
    user: {token: none}
`

// startInjector runs the collapser-injector binary in bin until the test
// ends, with the sidecar template of the chart's defaults and an empty
// certificate directory (its metrics need no certificate), and returns
// the address of its metrics. Every series the dashboard reads is there
// before any admission: the result series at 0, the duration histogram
// empty.
func startInjector(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	metrics := freeAddr(t)
	startProcess(t, filepath.Join(bin, "collapser-injector"),
		"--namespace", "dashboard", "--sidecar-mode", "native",
		"--template", filepath.Join(repoRoot(t), "src", "internal", "inject", "testdata", "template.yaml"),
		"--cert-dir", t.TempDir(), "--listen", freeAddr(t), "--ops-listen", metrics)
	return metrics
}
