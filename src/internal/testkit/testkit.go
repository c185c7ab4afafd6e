// Package testkit holds the scaffolding the tests of every package share:
// one bound for every wait, a context that ends with it, a polling wait (and
// one for a load, which bounds its stalls rather than its whole), a bounded
// receive, a listener and an address nobody listens on, a TCP relay a test
// cuts (Relay), an environment lookup over a map, and Greeter, a hello
// backend whose methods a test writes. Beside the standard library it imports only grpc and the hello
// API, none of which imports collapser's packages, so any package's tests
// may use it. Only tests import it.
package testkit

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// DefaultTimeout bounds every wait in the tests: a test that reaches it has
// failed, so it is generous enough for a loaded machine running -race.
const DefaultTimeout = 30 * time.Second

// pollInterval is how often WaitFor checks its condition.
const pollInterval = time.Millisecond

// Context returns a context that ends after DefaultTimeout or when the test
// ends, whichever is first.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultTimeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds, and fails the test naming what it waited
// for if it does not hold within DefaultTimeout. Use it only for state that
// has no event to wait on (a counter, a gauge, a goroutine count).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", DefaultTimeout, what)
		}
		<-tick.C
	}
}

// WaitForCount polls count until it reaches want, and fails the test naming
// what it waited for if count stays the same for DefaultTimeout. It is
// WaitFor for a large load, whose whole takes as long as the machine is
// slow: what it bounds is a stall, not the total.
func WaitForCount(t testing.TB, what string, want int, count func() int) {
	t.Helper()
	n := count()
	moved := time.Now()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for n < want {
		<-tick.C
		if now := count(); now != n {
			n, moved = now, time.Now()
		} else if time.Since(moved) > DefaultTimeout {
			t.Fatalf("timed out waiting for %s: %d of %d, no change for %v", what, n, want, DefaultTimeout)
		}
	}
}

// Recv returns the next value from c, or its zero value at once if c is
// closed, and fails the test naming what it waited for if nothing arrives
// within DefaultTimeout. Like t.Fatal, call it from the test's goroutine.
func Recv[T any](t testing.TB, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(DefaultTimeout):
		t.Fatalf("timed out after %v waiting for %s", DefaultTimeout, what)
		var zero T
		return zero // not reached: Fatalf ends the goroutine
	}
}

// Listen listens on addr ("127.0.0.1:0" for a free loopback port) and fails
// the test if it cannot.
func Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return lis
}

// ClosedAddr returns a loopback address nobody listens on: one the system
// has just handed out to a listener that is closed again.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	lis := Listen(t, "127.0.0.1:0")
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return addr
}

// Env returns a lookup of vars shaped like os.LookupEnv, for code that
// reads its environment through one: a name vars lacks is unset, one it
// holds with "" is set but empty.
func Env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// LiveHeap returns the bytes of live heap objects after two full
// collections (the second frees what the first left to finalizers): what
// the memory tests compare with what a bound counts.
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// SecretFile writes content and a newline, as a Secret's key often ends,
// into a file of the test's own, and returns its path.
func SecretFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
