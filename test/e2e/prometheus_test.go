package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
)

// sayHello is the unary method the demo calls and the sidecar collapses.
const sayHello = hellov1.Greeter_SayHello_FullMethodName

// prometheusAPI forwards a local port to the release's Prometheus and
// returns the URL of its HTTP API.
func prometheusAPI(t *testing.T, kubectl *k8s.KubectlOptions) string {
	t.Helper()
	tunnel := k8s.NewTunnel(kubectl, k8s.ResourceTypeService, release+"-prometheus", 0, 9090)
	tunnel.ForwardPort(t)
	t.Cleanup(tunnel.Close)
	return "http://" + tunnel.Endpoint()
}

// waitForFirstScrape waits until Prometheus holds the series the burst will
// raise, at 0: the sidecar's joined requests of SayHello and the backend's
// own count. The rate panels then see the burst as a rise from a sample
// before it, as after make deploy a while before make demo.
func waitForFirstScrape(t *testing.T, api string) {
	t.Helper()
	queries := []string{
		fmt.Sprintf(`collapser_requests_total{method=%q, outcome="joined", code="OK"} == 0`, sayHello),
		fmt.Sprintf(`hello_requests_total{method=%q} == 0`, sayHello),
	}
	retry.DoWithRetry(t, "Prometheus scraped the sidecar's and the backend's series at 0", 24, 5*time.Second, func() (string, error) {
		for _, q := range queries {
			if _, err := queryScalar(api, q); err != nil {
				return "", err
			}
		}
		return "scraped", nil
	})
}

// checkPrometheus asks the in-cluster Prometheus whether it scrapes the
// sidecar and the backend, and waits until its count of the sidecar's
// backend calls equals the backend's own count, read from its metrics.
func checkPrometheus(t *testing.T, kubectl *k8s.KubectlOptions, api string) {
	_, backend := openTunnels(t, kubectl)
	truth := backendCount(t, backend)

	queries := map[string]string{
		"targets up":                  `count(up{job=~"collapser|hello-backend"} == 1)`,
		"sidecar's backend calls":     fmt.Sprintf(`sum(collapser_backend_calls_total{method=%q})`, sayHello),
		"backend's own request count": fmt.Sprintf(`sum(hello_requests_total{method=%q})`, sayHello),
		// The Go runtime as the chart's defaults set it up: collapser.gogc
		// and 90% of collapser.resources.limits.memory (256Mi), which only
		// the downward API tells the sidecar.
		"sidecar's GOGC":            `go_gc_gogc_percent{job="collapser"}`,
		"sidecar's Go memory limit": `go_gc_gomemlimit_bytes{job="collapser"}`,
	}
	want := map[string]float64{
		"targets up": 2, "sidecar's backend calls": float64(truth), "backend's own request count": float64(truth),
		"sidecar's GOGC": 200, "sidecar's Go memory limit": (256 << 20) / 100 * 90,
	}
	// A few 5s scrapes, and Prometheus starting.
	agreed := retry.DoWithRetry(t, "Prometheus agrees with the backend", 24, 5*time.Second, func() (string, error) {
		got := map[string]float64{}
		for name, q := range queries {
			v, err := queryScalar(api, q)
			if err != nil {
				t.Logf("%s: %v", name, err)
				continue
			}
			got[name] = v
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return "", fmt.Errorf("Prometheus says %v, want %v (the backend's own count is %d)", got, want, truth)
		}
		return fmt.Sprint(got), nil
	})
	t.Logf("Prometheus agrees with the backend: %s", agreed)
}

// queryScalar runs an instant query whose result is one sample.
func queryScalar(api, query string) (float64, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(api + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", query, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("query %s: decode: %w", query, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", query, body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, fmt.Errorf("query %s: %d samples, want 1", query, len(body.Data.Result))
	}
	s, ok := body.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("query %s: value %v is not a string", query, body.Data.Result[0].Value[1])
	}
	return strconv.ParseFloat(s, 64)
}

// backendCount reads how many SayHello calls the hello backend received,
// from its metrics.
func backendCount(t *testing.T, metricsURL string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := demo.BackendMetricsCount(ctx, metricsURL)
	if err != nil {
		t.Fatalf("read the backend's count: %v", err)
	}
	return n
}
