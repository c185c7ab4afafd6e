package dashboard

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const (
	// buildTimeout bounds building the binaries (a cold build on a busy
	// 2-core machine takes minutes).
	buildTimeout = 8 * time.Minute
	// stopTimeout is how long a binary gets to exit after SIGINT before it is killed.
	stopTimeout = 10 * time.Second
)

// buildBinaries builds the collapser, hello-backend and collapser-injector
// commands of the root module into a temporary directory and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", dir+string(filepath.Separator),
		"./src/cmd/collapser", "./src/cmd/hello-backend", "./src/cmd/collapser-injector")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the binaries: %v\n%s", err, out)
	}
	return dir
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("release port %s: %v", addr, err)
	}
	return addr
}

// startProcess runs the binary at path until the test ends, then interrupts
// it and waits for it to exit. Its output is logged when the test fails.
func startProcess(t *testing.T, path string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = stopTimeout
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		err := cmd.Wait()
		if t.Failed() {
			t.Logf("%s %v exited (%v), output:\n%s", filepath.Base(path), args, err, out)
		}
	})
}

// syncBuffer collects a process's output; exec copies stdout and stderr on
// their own goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
