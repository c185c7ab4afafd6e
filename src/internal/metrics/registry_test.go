package metrics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/proxy"
)

func TestNewRegistry_HoldsGoAndProcessCollectors(t *testing.T) {
	reg := NewRegistry()
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("GatherAndCount(%s) = %d, %v; want 1", name, n, err)
		}
	}
}

func TestHandler_ServesSidecarAndRuntimeMetricsThatPassLint(t *testing.T) {
	reg := NewRegistry()
	s := NewRecorder(Options{})
	if err := Register(reg, s, Sources{Stats: func() collapse.Stats { return collapse.Stats{Entries: 2} }, Streams: noStreams}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "cache_hit", codes.OK)

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="cache_hit"} 1`,
		"collapser_cache_entries 2",
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestHandler_LogsGatheringErrorsAndStillServes(t *testing.T) {
	var logs bytes.Buffer
	previous := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(previous) })

	partial := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := NewRegistry().Gather()
		return families, errors.Join(err, errors.New("collector exploded"))
	})
	rec := httptest.NewRecorder()
	Handler(partial).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "go_goroutines ") {
		t.Errorf("status = %d, want 200 with the metrics that were gathered (ContinueOnError)", rec.Code)
	}
	if !strings.Contains(logs.String(), "collector exploded") {
		t.Errorf("log = %q, want the gathering error", logs.String())
	}
}
