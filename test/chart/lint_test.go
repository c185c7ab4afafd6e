package chart

import (
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
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
