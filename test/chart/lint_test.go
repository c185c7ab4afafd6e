package chart

import (
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

func TestLint_ChartIsCleanWithEveryCIValuesFile(t *testing.T) {
	files := append([]string{""}, ciValuesFiles(t)...)
	for _, file := range files {
		t.Run("values="+file, func(t *testing.T) {
			linter := lint.All(chartDir, userValues(t, file), namespace, false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestChart_ArtifactHubImagesFollowTheAppVersion keeps the one annotation that
// cannot be templated true: each image it lists is the chart's own, tagged
// with the appVersion the chart deploys by default.
func TestChart_ArtifactHubImagesFollowTheAppVersion(t *testing.T) {
	var images []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(loadChart(t).Metadata.Annotations["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("artifacthub.io/images: %v", err)
	}
	var names []string
	for _, im := range images {
		names = append(names, im.Name)
		if want := "collapser/" + im.Name + ":" + appVersion(t); im.Image != want {
			t.Errorf("artifacthub.io/images: %s is %q, want %q", im.Name, im.Image, want)
		}
	}
	if want := []string{"collapser", "hello-backend", "democlient", "collapser-injector"}; !slices.Equal(names, want) {
		t.Errorf("artifacthub.io/images lists %v, want %v", names, want)
	}
}
