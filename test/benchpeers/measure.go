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

// runScenario starts sc's servers, measures them and stops them.
func runScenario(ctx context.Context, cfg config, meter cpuMeter, sc scenario, progress io.Writer) (scenarioResult, error) {
	st, err := startStack(ctx, cfg, sc)
	if err != nil {
		return scenarioResult{}, err
	}
	res, err := measureRounds(ctx, cfg, meter, sc, st, progress)
	return res, errors.Join(err, st.stop())
}

// measureRounds runs one unrecorded warm-up per target, then cfg.rounds
// rounds of every target in turn (targetNames' order).
func measureRounds(ctx context.Context, cfg config, meter cpuMeter, sc scenario, st *stack, progress io.Writer) (scenarioResult, error) {
	res := scenarioResult{Scenario: sc, LoadBefore: loadAverage()}
	warmup, recorded := cfg.loadOf(sc, true), cfg.loadOf(sc, false)
	if cfg.warmup > 0 {
		for _, t := range st.targets {
			if _, err := measure(ctx, cfg, meter, st, t, warmup); err != nil {
				return res, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for round := 1; round <= cfg.rounds; round++ {
		var directRPS float64
		for _, t := range st.targets {
			m, err := measure(ctx, cfg, meter, st, t, recorded)
			if err != nil {
				return res, fmt.Errorf("round %d: %w", round, err)
			}
			m.Round = round
			if t.name == targetDirect {
				directRPS = m.RPS
			}
			m.RatioToDirect = m.RPS / directRPS
			res.Runs = append(res.Runs, m)
			fmt.Fprintf(progress, "  round %d/%d %-15s %9.0f rps (%.2fx) p50 %7.2f ms p99 %7.2f ms proxy cpu %s backend calls %d errors %d\n",
				round, cfg.rounds, t.name, m.RPS, m.RatioToDirect, m.P50Ms, m.P99Ms, formatCPU(m.ProxyCPUUs), m.BackendCalls, m.Errors)
		}
	}
	res.LoadAfter = loadAverage()
	return res, nil
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
