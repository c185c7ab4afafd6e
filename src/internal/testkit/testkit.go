// Package testkit holds the scaffolding the tests of every package share:
// one bound for every wait, a context that ends with it, and a polling wait.
// It imports only the standard library, so any package's tests may use it.
package testkit

import (
	"context"
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
