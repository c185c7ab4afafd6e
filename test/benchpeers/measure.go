package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// measurement is one run against one target in one round. CPU times are
// per call made; the proxy's is summed over the target's processes, absent
// for direct.
type measurement struct {
	Target        string   `json:"target"`
	Round         int      `json:"round,omitempty"` // 1-based; 0 for a warm-up run and in medians
	Requests      int64    `json:"requests"`
	Errors        int64    `json:"errors"`
	RPS           float64  `json:"rps"`
	RatioToDirect float64  `json:"rps_ratio_to_direct"`
	P50Ms         float64  `json:"p50_ms"`
	P99Ms         float64  `json:"p99_ms"`
	WallMs        float64  `json:"wall_ms"`
	ProxyCPUUs    *float64 `json:"proxy_cpu_us_per_request"`
	BackendCPUUs  float64  `json:"backend_cpu_us_per_request"`
	ClientCPUUs   float64  `json:"client_cpu_us_per_request"`
	BackendCalls  int64    `json:"backend_calls"`
}

// runScenarios starts the servers of every scenario, measures them and
// stops them. The rounds are interleaved across scenarios as well as
// across targets: each round runs every scenario's targets in turn, so
// that a ratio of two scenarios (a miss's CPU over a pass-through's)
// compares runs as close in time as the targets of one scenario are,
// however the machine's speed moves over the minutes of the whole run.
func runScenarios(ctx context.Context, cfg config, meter cpuMeter, scenarios []scenario, progress io.Writer) (res []scenarioResult, err error) {
	stacks := make([]*stack, 0, len(scenarios))
	defer func() {
		for _, st := range stacks {
			err = errors.Join(err, st.stop())
		}
	}()
	for _, sc := range scenarios {
		fmt.Fprintf(progress, "==> start %s\n", sc.Title)
		st, err := startStack(ctx, cfg, sc)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.ID, err)
		}
		stacks = append(stacks, st)
	}
	res = make([]scenarioResult, len(scenarios))
	for i, sc := range scenarios {
		res[i] = scenarioResult{Scenario: sc, LoadBefore: loadAverage()}
		if err := warmUp(ctx, cfg, meter, sc, stacks[i]); err != nil {
			return nil, fmt.Errorf("scenario %s: warm-up: %w", sc.ID, err)
		}
	}
	for round := 1; round <= cfg.rounds; round++ {
		for i, sc := range scenarios {
			runs, err := measureRound(ctx, cfg, meter, sc, stacks[i], round, progress)
			if err != nil {
				return nil, fmt.Errorf("scenario %s: round %d: %w", sc.ID, round, err)
			}
			res[i].Runs = append(res[i].Runs, runs...)
		}
	}
	after := loadAverage()
	for i := range res {
		res[i].LoadAfter = after
	}
	return res, nil
}

// warmUp makes one unrecorded run against each of st's targets.
func warmUp(ctx context.Context, cfg config, meter cpuMeter, sc scenario, st *stack) error {
	if cfg.warmup <= 0 {
		return nil
	}
	warmup := cfg.loadOf(sc, true)
	for _, t := range st.targets {
		if _, err := measure(ctx, cfg, meter, st, t, warmup); err != nil {
			return err
		}
	}
	return nil
}

// measureRound runs round of sc: one recorded run of every target of st
// in turn (targetNames' order), each RPS as a ratio to direct's.
func measureRound(ctx context.Context, cfg config, meter cpuMeter, sc scenario, st *stack, round int, progress io.Writer) ([]measurement, error) {
	var runs []measurement
	var directRPS float64
	recorded := cfg.loadOf(sc, false)
	for _, t := range st.targets {
		m, err := measure(ctx, cfg, meter, st, t, recorded)
		if err != nil {
			return nil, err
		}
		m.Round = round
		if t.name == targetDirect {
			directRPS = m.RPS
		}
		m.RatioToDirect = m.RPS / directRPS
		runs = append(runs, m)
		fmt.Fprintf(progress, "  round %d/%d %-20s %-15s %9.0f rps (%.2fx) p50 %7.2f ms p99 %7.2f ms proxy cpu %s backend calls %d errors %d\n",
			round, cfg.rounds, sc.ID, t.name, m.RPS, m.RatioToDirect, m.P50Ms, m.P99Ms, formatCPU(m.ProxyCPUUs), m.BackendCalls, m.Errors)
	}
	return runs, nil
}

// measure makes one ghz run against t and reads, before and after, the CPU
// time of t's proxies and of the backend, and the backend's own count of
// SayHello calls. The harness's own GetCounts calls fall outside the CPU
// window.
func measure(ctx context.Context, cfg config, meter cpuMeter, st *stack, t target, l load) (measurement, error) {
	calls0, err := st.counts.sayHelloCalls(ctx)
	if err != nil {
		return measurement{}, err
	}
	backend0, proxy0, err := cpuOf(meter, st.backend, t.proxies)
	if err != nil {
		return measurement{}, err
	}
	g, err := runGhz(ctx, cfg, st.clientCPUs, t.addr, l)
	if err != nil {
		return measurement{}, fmt.Errorf("%s: %w", t.name, err)
	}
	backend1, proxy1, err := cpuOf(meter, st.backend, t.proxies)
	if err != nil {
		return measurement{}, err
	}
	calls1, err := st.counts.sayHelloCalls(ctx)
	if err != nil {
		return measurement{}, err
	}

	perCall := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(g.Requests) }
	m := measurement{
		Target:       t.name,
		Requests:     g.Requests,
		Errors:       g.Errors,
		RPS:          g.RPS,
		P50Ms:        ms(g.P50),
		P99Ms:        ms(g.P99),
		WallMs:       ms(g.Wall),
		BackendCPUUs: perCall(backend1 - backend0),
		ClientCPUUs:  perCall(g.ClientCPU),
		BackendCalls: calls1 - calls0,
	}
	if len(t.proxies) > 0 {
		us := perCall(proxy1 - proxy0)
		m.ProxyCPUUs = &us
	}
	return m, nil
}

// cpuOf returns the CPU time used so far by the backend and by the proxies
// together (0 for none).
func cpuOf(meter cpuMeter, backend *process, proxies []*process) (b, p time.Duration, err error) {
	if b, err = meter.groupCPU(backend.pid()); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", backend.name, err)
	}
	for _, proxy := range proxies {
		cpu, err := meter.groupCPU(proxy.pid())
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", proxy.name, err)
		}
		p += cpu
	}
	return b, p, nil
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
