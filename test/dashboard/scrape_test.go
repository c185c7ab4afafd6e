package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// family is what a scrape tells about one metric family.
type family struct {
	typ    dto.MetricType
	labels map[string]bool // label names on any of its series
}

// scrape reads the metric families served at http://addr/metrics.
func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("build scrape request: %w", err)
	}
	// No keep-alive: no idle connection outlives the test (goleak).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the metrics of %s: %w", addr, err)
	}
	return families, nil
}

// summarize merges scrapes into the type and label names of each family.
func summarize(scrapes ...map[string]*dto.MetricFamily) map[string]family {
	out := map[string]family{}
	for _, families := range scrapes {
		for name, mf := range families {
			f, ok := out[name]
			if !ok {
				f = family{typ: mf.GetType(), labels: map[string]bool{}}
				out[name] = f
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					f.labels[l.GetName()] = true
				}
			}
		}
	}
	return out
}

// familyOf returns the exported family a selected metric name belongs to:
// the name itself, or for name_bucket, name_sum and name_count the histogram
// or summary family name. It returns "" when none is exported.
func familyOf(name string, exported map[string]family) string {
	if _, ok := exported[name]; ok {
		return name
	}
	suffixes := map[string][]dto.MetricType{
		"_bucket": {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM},
		"_sum":    {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY},
		"_count":  {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY},
	}
	for suffix, types := range suffixes {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := exported[base]; ok && slices.Contains(types, f.typ) {
			return base
		}
	}
	return ""
}

// labelValues returns the values of label on the series of mf.
func labelValues(mf *dto.MetricFamily, label string) map[string]bool {
	values := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				values[l.GetValue()] = true
			}
		}
	}
	return values
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
