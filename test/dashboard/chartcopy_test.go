package dashboard

import (
	"bytes"
	"testing"
)

// TestChartCopy_EqualsTheSource is the check scripts/dashboards.sh verify
// makes: Helm cannot read outside the chart, so the chart ships a copy that
// must not drift from dashboards/collapser.json.
func TestChartCopy_EqualsTheSource(t *testing.T) {
	source := readRepoFile(t, sourcePath)
	chartCopy := readRepoFile(t, chartCopyPath)
	if !bytes.Equal(source, chartCopy) {
		t.Fatalf("%s differs from %s: run scripts/dashboards.sh update (make dashboards)", chartCopyPath, sourcePath)
	}
}
