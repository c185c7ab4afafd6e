package demo

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestRun_CountsFromBackendMetricsEqualTheRequestsThatReachedIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	addr := hellotest.Serve(t, hello.Options{Registerer: reg})
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metrics.Close)

	const n = 25
	for run := range 2 { // the second run counts only its own calls
		r, err := Run(testkit.Context(t), Config{Target: addr, BackendMetrics: metrics.URL + "/metrics", Requests: n})
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if r.Errors != 0 || r.BackendCalls != n {
			t.Errorf("run %d: errors=%d backend_calls=%d, want 0, %d", run+1, r.Errors, r.BackendCalls, n)
		}
	}
	if got, err := BackendMetricsCount(testkit.Context(t), metrics.URL+"/metrics"); err != nil || got != 2*n {
		t.Errorf("BackendMetricsCount = %d, %v; want %d", got, err, 2*n)
	}
}

func TestMetricsCounter_FailsClearlyWithoutTheCounter(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"not found", http.StatusNotFound, "", "404 Not Found"},
		{"no counter", http.StatusOK, "go_goroutines 7\n", `no hello_requests_total{method="/hello.v1.Greeter/SayHello"}`},
		{"other method only", http.StatusOK, `hello_requests_total{method="/hello.v1.Greeter/Chat"} 3` + "\n", "no hello_requests_total"},
		{"not the text format", http.StatusOK, "{}\n", "backend metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			_, err := newMetricsCounter(srv.URL).sayHelloCount(testkit.Context(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
