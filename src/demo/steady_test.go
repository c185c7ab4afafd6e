package demo

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestRun_SteadyLoadSendsRateTimesDurationAndCountsThemAtTheBackend(t *testing.T) {
	addr, metricsURL := metricsBackend(t)
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"stats", Config{Backend: addr}},
		{"metrics, tallied", Config{BackendMetrics: metricsURL}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Target, cfg.Rate, cfg.Duration, cfg.Keys, cfg.Concurrency = addr, 400, 250*time.Millisecond, 7, 20
			r, err := Run(testkit.Context(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Straight to the backend: every request is a backend call.
			if r.Requests != 100 || r.Errors != 0 || r.BackendCalls != 100 {
				t.Errorf("requests %d, errors %d, backend calls %d; want 100, 0, 100", r.Requests, r.Errors, r.BackendCalls)
			}
		})
	}
}

func TestBurstSpec_NameOfEachRequest(t *testing.T) {
	for _, tt := range []struct {
		spec burstSpec
		i    int
		want string
	}{
		{burstSpec{name: "k"}, 5, "k"},
		{burstSpec{name: "k", distinct: true}, 5, "k-5"},
		{burstSpec{name: "k", keys: 3}, 5, "k-2"},
		{burstSpec{name: "k", keys: 3}, 3, "k-0"},
	} {
		if got := tt.spec.nameOf(tt.i); got != tt.want {
			t.Errorf("%+v: request %d named %q, want %q", tt.spec, tt.i, got, tt.want)
		}
	}
}

// fakeBackends are backends a tally reads, which come, go and restart as
// a test says.
type fakeBackends map[string]int64 // count by address; -1: listed, unreadable

func (f fakeBackends) list(context.Context) ([]string, error) {
	var addrs []string
	for a := range f {
		addrs = append(addrs, a)
	}
	return addrs, nil
}

func (f fakeBackends) count(_ context.Context, addr string) (int64, error) {
	if n, ok := f[addr]; ok && n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("backend %s is gone", addr)
}

func TestTally_CountsBackendsThatComeGoAndRestart(t *testing.T) {
	ctx := testkit.Context(t)
	b := fakeBackends{"a": 10, "b": 5}
	tl, err := startTally(ctx, b.list, b.count)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		now   fakeBackends
		total int64
	}{
		{"both served", fakeBackends{"a": 15, "b": 8}, 5 + 3},
		{"b leaves (its last reading stays), c comes (from 0)", fakeBackends{"a": 16, "b": -1, "c": 4}, 6 + 3 + 4},
		{"b is no longer listed", fakeBackends{"a": 20, "c": 7}, 10 + 3 + 7},
		{"a restarts at its address", fakeBackends{"a": 2, "c": 7}, 10 + 2 + 3 + 7},
	}
	for _, s := range steps {
		clear(b)
		for a, n := range s.now {
			b[a] = n
		}
		tl.read(ctx)
		if got := tl.total(); got != s.total {
			t.Fatalf("%s: total %d, want %d", s.name, got, s.total)
		}
	}
}

func TestTally_FailsWhenABackendCannotBeReadAtTheStart(t *testing.T) {
	b := fakeBackends{"a": 1, "b": -1}
	if _, err := startTally(testkit.Context(t), b.list, b.count); err == nil {
		t.Error("startTally read every backend, want an error for b")
	}
	none := func(context.Context) ([]string, error) { return nil, errors.New("no such host") }
	if _, err := startTally(testkit.Context(t), none, b.count); err == nil {
		t.Error("startTally resolved the backends, want the resolver's error")
	}
}
