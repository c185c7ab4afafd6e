package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun_ServesMetricsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen=127.0.0.1:0", "--backend=127.0.0.1:1"},
			testkit.Env(map[string]string{"COLLAPSER_METRICS_LISTEN": "127.0.0.1:0"}), pw)
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
	if err := testkit.Recv(t, "run to return after cancel", done); err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRun_BadConfigurationIsAnError(t *testing.T) {
	err := run(context.Background(), nil, testkit.Env(map[string]string{"COLLAPSER_CACHE_TTL": "forever"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "COLLAPSER_CACHE_TTL") {
		t.Errorf("run() = %v, want an error naming COLLAPSER_CACHE_TTL", err)
	}
	if err := run(context.Background(), []string{"-h"}, testkit.Env(nil), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run(-h) = %v, want flag.ErrHelp", err)
	}
}

func TestSetGoMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	const unlimited = math.MaxInt64 // the runtime's default
	tests := []struct {
		name string
		env  map[string]string
		want int64
	}{
		{"no limit known", nil, unlimited},
		{"the container's limit", map[string]string{"COLLAPSER_MEMORY_LIMIT": "268435456"}, 241591860},
		{"GOMEMLIMIT wins", map[string]string{"COLLAPSER_MEMORY_LIMIT": "268435456", "GOMEMLIMIT": "100MiB"}, unlimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(unlimited)
			cfg, err := config.Parse(nil, testkit.Env(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			setGoMemoryLimit(cfg, testkit.Env(tt.env), slog.New(slog.DiscardHandler))
			if got := debug.SetMemoryLimit(-1); got != tt.want {
				t.Errorf("Go memory limit = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestListen_ASocketTakesConnectionsFromEveryUserOfItsDirectory: the
// admin socket is made 0666, so that an app container of another user
// that mounts its directory can purge; a socket left by an earlier run is
// replaced.
func TestListen_ASocketTakesConnectionsFromEveryUserOfItsDirectory(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "admin.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil { // an earlier run's
		t.Fatal(err)
	}
	lis, err := listen(config.Settings{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AdminListen: "unix:" + socket})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, l := range []net.Listener{lis.GRPC, lis.Metrics, lis.Admin} {
			l.Close()
		}
	}()
	info, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&os.ModeSocket == 0 || info.Mode().Perm() != 0o666 {
		t.Errorf("admin socket %s has mode %v, want a socket with 0666", socket, info.Mode())
	}
}
