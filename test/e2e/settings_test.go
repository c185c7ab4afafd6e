package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// settings are the e2e run's knobs, read from the environment.
type settings struct {
	cluster         string
	nodeImage       string
	kindConfig      string
	reuseCluster    bool
	imageTag        string
	prometheus      bool
	prometheusImage string // repository:tag
	kind            string
	repoRoot        string
	chartDir        string
	kubeconfigPath  string
}

// imageRepoPrefix prefixes the project's image names, as scripts/images.sh does.
const imageRepoPrefix = "collapser"

// projectImages are the images scripts/images.sh builds.
func (s settings) projectImages() []string {
	var images []string
	for _, name := range []string{"collapser", "hello-backend", "democlient", "collapser-injector"} {
		images = append(images, imageRepoPrefix+"/"+name+":"+s.imageTag)
	}
	return images
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// loadSettings skips the test unless COLLAPSER_E2E=1.
func loadSettings(t *testing.T) settings {
	t.Helper()
	if os.Getenv("COLLAPSER_E2E") != "1" {
		t.Skip("end-to-end test: set COLLAPSER_E2E=1 (make e2e)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	s := settings{
		cluster:         envOr("KIND_CLUSTER", "collapser-e2e"),
		nodeImage:       os.Getenv("KIND_NODE_IMAGE"),
		kindConfig:      os.Getenv("KIND_CONFIG"),
		reuseCluster:    os.Getenv("E2E_REUSE_CLUSTER") == "1",
		imageTag:        envOr("E2E_IMAGE_TAG", "e2e"),
		prometheus:      os.Getenv("E2E_PROMETHEUS") == "1",
		prometheusImage: envOr("E2E_PROMETHEUS_IMAGE", "prom/prometheus:v3.16.0"),
		kind:            envOr("KIND", "kind"),
		repoRoot:        root,
		chartDir:        filepath.Join(root, "charts", "collapser"),
	}
	s.kubeconfigPath = filepath.Join(os.TempDir(), "kind-"+s.cluster+".kubeconfig")
	return s
}
