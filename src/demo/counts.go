package demo

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// requestsMetric is the hello backend's counter of the requests it received,
// labelled by full method name; it counts exactly what Stats.GetCounts reports.
const requestsMetric = "hello_requests_total"

// counter reads the backend's own SayHello count.
type counter interface {
	sayHelloCount(ctx context.Context) (int64, error)
}

// statsCounter reads the count from the hello backend's Stats service.
type statsCounter struct {
	client hellov1.StatsClient
	addr   string
}

func (c statsCounter) sayHelloCount(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	reply, err := c.client.GetCounts(ctx, &hellov1.GetCountsRequest{})
	if err != nil {
		return 0, fmt.Errorf("read SayHello count from backend %s: %w", c.addr, err)
	}
	return reply.GetByMethod()[hellov1.Greeter_SayHello_FullMethodName], nil
}

// metricsCounter reads the count from the hello backend's Prometheus
// metrics: a read-only HTTP port, for a backend whose gRPC listener only the
// sidecar in its pod can reach.
type metricsCounter struct {
	url    string
	client *http.Client
}

func newMetricsCounter(url string) metricsCounter {
	return metricsCounter{url: url, client: &http.Client{Timeout: DefaultConnectTimeout}}
}

func (c metricsCounter) sayHelloCount(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return 0, fmt.Errorf("read SayHello count from backend metrics %s: %w", c.url, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read SayHello count from backend metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read SayHello count from backend metrics %s: %s", c.url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read SayHello count from backend metrics %s: %w", c.url, err)
	}
	if family, ok := families[requestsMetric]; ok {
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == hellov1.Greeter_SayHello_FullMethodName {
					return int64(m.GetCounter().GetValue()), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("read SayHello count from backend metrics %s: no %s{method=%q}", c.url, requestsMetric, hellov1.Greeter_SayHello_FullMethodName)
}

// BackendMetricsCount reads the hello backend's own SayHello count from its
// Prometheus metrics at url (http://host:2113/metrics), as a run with
// Config.BackendMetrics does before and after its bursts.
func BackendMetricsCount(ctx context.Context, url string) (int64, error) {
	return newMetricsCounter(url).sayHelloCount(ctx)
}
