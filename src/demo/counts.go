package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// requestsMetric is the hello backend's counter of the requests it received,
// labelled by full method name; it counts exactly what Stats.GetCounts reports.
const requestsMetric = "hello_requests_total"

// counter reads the backend's own count of a method's calls.
type counter interface {
	count(ctx context.Context, method string) (int64, error)
}

// statsCounter reads the count from the hello backend's Stats service.
type statsCounter struct {
	client hellov1.StatsClient
	addr   string
}

func (c statsCounter) count(ctx context.Context, method string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	reply, err := c.client.GetCounts(ctx, &hellov1.GetCountsRequest{})
	if err != nil {
		return 0, fmt.Errorf("read %s count from backend %s: %w", method, c.addr, err)
	}
	return reply.GetByMethod()[method], nil
}

// metricsCounter reads the count from the hello backends' Prometheus
// metrics: a read-only HTTP port, for a backend whose gRPC listener only the
// sidecar in its pod can reach. The URL's host may name several backends (a
// headless Service names every pod): the count is the sum over the
// addresses it resolves to (IPv4 ones, or IPv6 ones when it has none).
type metricsCounter struct {
	url    *url.URL
	raw    string
	client *http.Client
}

func newMetricsCounter(raw string) (metricsCounter, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return metricsCounter{}, fmt.Errorf("backend metrics URL %q is not http://host:port/path", raw)
	}
	return metricsCounter{url: u, raw: raw, client: &http.Client{Timeout: DefaultConnectTimeout}}, nil
}

func (c metricsCounter) count(ctx context.Context, method string) (int64, error) {
	addrs, err := backendAddresses(ctx, c.url.Hostname())
	if err != nil {
		return 0, c.readError(method, err)
	}
	var sum int64
	for _, addr := range addrs {
		n, err := c.countAt(ctx, c.at(addr), method)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// readError is the error of a count of method that found no backend.
func (c metricsCounter) readError(method string, err error) error {
	return fmt.Errorf("read %s count from backend metrics %s: %w", method, c.raw, err)
}

// backendAddresses resolves host to the addresses of its backends.
func backendAddresses(ctx context.Context, host string) ([]string, error) {
	if net.ParseIP(host) != nil {
		return []string{host}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var v4, v6 []string
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			v4 = append(v4, ip.Unmap().String())
		} else {
			v6 = append(v6, ip.String())
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	if len(v4) > 0 {
		return slices.Compact(v4), nil
	}
	return slices.Compact(v6), nil
}

// countAt reads the count of method of the one backend at url.
func (c metricsCounter) countAt(ctx context.Context, url, method string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("read backend metrics %s: %w", url, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read backend metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read backend metrics %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read backend metrics %s: %w", url, err)
	}
	if family, ok := families[requestsMetric]; ok {
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == method {
					return int64(m.GetCounter().GetValue() + m.GetUntyped().GetValue()), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("read %s count from backend metrics %s: no %s{method=%q}", method, url, requestsMetric, method)
}

// BackendMetricsCount reads the hello backends' own SayHello count from
// their Prometheus metrics at url (http://host:2113/metrics; a host that
// resolves to several addresses sums them), as a run with
// Config.BackendMetrics does before and after its bursts.
func BackendMetricsCount(ctx context.Context, url string) (int64, error) {
	c, err := newMetricsCounter(url)
	if err != nil {
		return 0, err
	}
	return c.count(ctx, hellov1.Greeter_SayHello_FullMethodName)
}
