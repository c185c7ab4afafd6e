package main

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// defaultTestTimeout bounds every wait of a test.
const defaultTestTimeout = 10 * time.Second

func TestProcessStop_EndsTheWholeGroup(t *testing.T) {
	// The shell leaves behind a child that ignores SIGTERM, as nginx's
	// master may leave workers.
	p, err := startProcess(t.TempDir(), "sh", "", nil, "sh", "-c", `(trap "" TERM; sleep 60) & wait`)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the child has started", func() bool { return groupSize(t, p.pid()) == 2 })
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the group is gone", func() bool {
		return errors.Is(syscall.Kill(-p.pid(), 0), syscall.ESRCH) || groupSize(t, p.pid()) == 0
	})
}

func TestProcessStop_ReportsAProcessThatExitedByItself(t *testing.T) {
	p, err := startProcess(t.TempDir(), "false", "", nil, "false")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(defaultTestTimeout):
		t.Fatalf("timed out after %v waiting for the process to exit", defaultTestTimeout)
	}
	if err := p.stop(); err == nil {
		t.Error("stop of a process that had failed reported no error")
	}
}

// groupSize returns how many live (not zombie) processes are in group pgid.
func groupSize(t *testing.T, pgid int) int {
	t.Helper()
	stats, err := groupStats(pgid)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range stats {
		if st.state != 'Z' {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 10 ms for up to defaultTestTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(defaultTestTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
