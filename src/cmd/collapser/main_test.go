package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestRun_ServesMetricsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen=127.0.0.1:0", "--backend=127.0.0.1:1"},
			env(map[string]string{"COLLAPSER_METRICS_LISTEN": "127.0.0.1:0"}), pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("no startup line")
	}
	// "collapser: serving gRPC on A, metrics on B, backend C"
	line := lines.Text()
	go io.Copy(io.Discard, pr)
	metricsAddr := strings.TrimSuffix(strings.Fields(line)[7], ",")
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s (from %q): %v", metricsAddr, line, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "collapser_inflight_keys") {
		t.Errorf("metrics lack collapser_inflight_keys:\n%s", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(testkit.DefaultTimeout):
		t.Fatal("run did not return after cancel")
	}
}

func TestRun_BadConfigurationIsAnError(t *testing.T) {
	err := run(context.Background(), nil, env(map[string]string{"COLLAPSER_CACHE_TTL": "forever"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "COLLAPSER_CACHE_TTL") {
		t.Errorf("run() = %v, want an error naming COLLAPSER_CACHE_TTL", err)
	}
	if err := run(context.Background(), []string{"-h"}, env(nil), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run(-h) = %v, want flag.ErrHelp", err)
	}
}
