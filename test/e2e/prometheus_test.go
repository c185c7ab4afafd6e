package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

// sayHello is the unary method the demo calls and the sidecar collapses.
const sayHello = hellov1.Greeter_SayHello_FullMethodName

// prometheusClient forwards a local port to the release's Prometheus and
// returns a client of its HTTP API.
func prometheusClient(t *testing.T, kubectl *k8s.KubectlOptions) panelquery.Client {
	t.Helper()
	tunnel := k8s.NewTunnel(kubectl, k8s.ResourceTypeService, release+"-prometheus", 0, 9090)
	tunnel.ForwardPort(t)
	t.Cleanup(tunnel.Close)
	return panelquery.Client{URL: "http://" + tunnel.Endpoint()}
}

// waitForFirstScrape waits until Prometheus holds the series the burst will
// raise, at 0: the sidecar's joined requests of SayHello and the backend's
// own count. The rate panels then see the burst as a rise from a sample
// before it, as after make deploy a while before make demo.
func waitForFirstScrape(t *testing.T, prom panelquery.Client) {
	t.Helper()
	queries := []string{
		fmt.Sprintf(`collapser_requests_total{method=%q, outcome="joined", code="OK"} == 0`, sayHello),
		fmt.Sprintf(`hello_requests_total{method=%q} == 0`, sayHello),
	}
	retry.DoWithRetry(t, "Prometheus scraped the sidecar's and the backend's series at 0", 24, 5*time.Second, func() (string, error) {
		for _, q := range queries {
			if _, err := queryScalar(t.Context(), prom, q); err != nil {
				return "", err
			}
		}
		return "scraped", nil
	})
}

// checkPrometheus asks the in-cluster Prometheus whether it scrapes the
// sidecar and the backend, and waits until its count of the sidecar's
// backend calls equals the backend's own count, read from its metrics.
func checkPrometheus(t *testing.T, kubectl *k8s.KubectlOptions, prom panelquery.Client) {
	_, backend := openTunnels(t, kubectl)
	truth := backendCount(t, backend)

	queries := map[string]string{
		"targets up":                  `count(up{job=~"collapser|hello-backend"} == 1)`,
		"sidecar's backend calls":     fmt.Sprintf(`sum(collapser_backend_calls_total{method=%q})`, sayHello),
		"backend's own request count": fmt.Sprintf(`sum(hello_requests_total{method=%q})`, sayHello),
		// The Go runtime as the chart's defaults set it up: collapser.gogc
		// and 90% of collapser.resources.limits.memory (512Mi), which only
		// the downward API tells the sidecar.
		"sidecar's GOGC":            `go_gc_gogc_percent{job="collapser"}`,
		"sidecar's Go memory limit": `go_gc_gomemlimit_bytes{job="collapser"}`,
	}
	want := map[string]float64{
		"targets up": 2, "sidecar's backend calls": float64(truth), "backend's own request count": float64(truth),
		"sidecar's GOGC": 200, "sidecar's Go memory limit": (512 << 20) / 100 * 90,
	}
	// A few 5s scrapes, and Prometheus starting.
	agreed := retry.DoWithRetry(t, "Prometheus agrees with the backend", 24, 5*time.Second, func() (string, error) {
		got := map[string]float64{}
		for name, q := range queries {
			v, err := queryScalar(t.Context(), prom, q)
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

// queryScalar runs an instant query, at Prometheus's now, whose result is
// one sample.
func queryScalar(ctx context.Context, prom panelquery.Client, query string) (float64, error) {
	series, err := prom.Instant(ctx, query, time.Time{})
	if err != nil {
		return 0, err
	}
	if len(series) != 1 || len(series[0].Samples) != 1 {
		return 0, fmt.Errorf("query %s: %d series, want 1 of one sample", query, len(series))
	}
	return series[0].Samples[0].Value, nil
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
