package demo

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestRun_CountsFromBackendMetricsEqualTheRequestsThatReachedIt(t *testing.T) {
	addr, metricsURL := metricsBackend(t)

	const n = 25
	for run := range 2 { // the second run counts only its own calls
		r, err := Run(testkit.Context(t), Config{Target: addr, BackendMetrics: metricsURL, Requests: n})
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if r.Errors != 0 || r.BackendCalls != n {
			t.Errorf("run %d: errors=%d backend_calls=%d, want 0, %d", run+1, r.Errors, r.BackendCalls, n)
		}
	}
	if got, err := BackendMetricsCount(testkit.Context(t), metricsURL); err != nil || got != 2*n {
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
			_, err := BackendMetricsCount(testkit.Context(t), srv.URL)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBackendMetricsCount_SumsEveryAddressOfTheHost(t *testing.T) {
	// Two backends on one port of two loopback addresses, as two pods
	// behind a headless Service: 127.0.0.1 and 127.0.0.2.
	var port string
	for i, n := range []int{3, 4} {
		addr := "127.0.0." + fmt.Sprint(i+1) + ":" + port
		if port == "" {
			addr = "127.0.0.1:0"
		}
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("no second loopback address here: %v", err)
		}
		_, port, _ = net.SplitHostPort(lis.Addr().String())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hello_requests_total{method=%q} %d\n", "/hello.v1.Greeter/SayHello", n)
		}), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	for _, tt := range []struct {
		host string
		want int64
	}{{"127.0.0.1", 3}, {"127.0.0.2", 4}} {
		got, err := BackendMetricsCount(testkit.Context(t), "http://"+net.JoinHostPort(tt.host, port)+"/metrics")
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.host, got, err, tt.want)
		}
	}
	addrs, err := backendAddresses(testkit.Context(t), "localhost")
	if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.1" {
		t.Errorf("localhost resolves to %v, %v; want only 127.0.0.1", addrs, err)
	}
}
