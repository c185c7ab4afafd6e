package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Payloads of SayHello: ghz fills in {{.RequestNumber}} for each request.
const (
	identicalData = `{"name":"bench"}`
	distinctData  = `{"name":"bench {{.RequestNumber}}"}`
)

// ghzTimeout bounds each call of a run.
const ghzTimeout = 30 * time.Second

// ghzRun is what one ghz run measured. Latencies are of successful calls
// only (ghz's default).
type ghzRun struct {
	Requests int64         // calls made, failed ones included
	Errors   int64         // calls that did not end OK
	Wall     time.Duration // from the first call to the last answer
	RPS      float64
	P50, P99 time.Duration
	// ClientCPU is ghz's own user+system CPU time.
	ClientCPU time.Duration
}

// runGhz sends l to addr with ghz, pinned to cpus ("" = not pinned), and
// returns what its JSON report (written into the workdir) says.
func runGhz(ctx context.Context, cfg config, cpus, addr string, l load) (ghzRun, error) {
	out := filepath.Join(cfg.workdir, "ghz.json")
	argv := pinned(cpus, append([]string{cfg.ghz}, ghzArgs(cfg.proto, out, addr, l)...))
	// The run, its last calls and start-up.
	ctx, cancel := context.WithTimeout(ctx, l.duration+ghzTimeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // killed with the harness
	if msg, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil { // interrupted, or it ran past its bound
			return ghzRun{}, fmt.Errorf("ghz %s: stopped: %w", addr, ctx.Err())
		}
		return ghzRun{}, fmt.Errorf("ghz %s: %w: %s", addr, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return ghzRun{}, fmt.Errorf("ghz %s: read its report: %w", addr, err)
	}
	r, err := parseGhzReport(b)
	if err != nil {
		return ghzRun{}, fmt.Errorf("ghz %s: %w", addr, err)
	}
	r.ClientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// A report holds every call's details: tens of MB over a benchmark.
	return r, os.Remove(out)
}

// ghzArgs returns ghz's arguments for l: SayHello over plaintext, a steady
// run that lets its last calls finish, or a burst of l.requests calls.
func ghzArgs(proto, out, addr string, l load) []string {
	data := identicalData
	if l.distinct {
		data = distinctData
	}
	args := []string{
		"--insecure", "--proto", proto, "--call", "hello.v1.Greeter.SayHello", "--data", data,
		"--concurrency", strconv.Itoa(l.concurrency), "--connections", strconv.Itoa(l.connections),
		"--timeout", ghzTimeout.String(), "--format", "json", "--output", out,
	}
	if l.duration > 0 {
		args = append(args, "--duration", l.duration.String(), "--duration-stop", "wait")
	} else {
		args = append(args, "--total", strconv.Itoa(l.requests))
	}
	return append(args, addr)
}

// ghzReport is the part of ghz's JSON report the harness reads. Durations
// are in nanoseconds.
type ghzReport struct {
	Count               int64   `json:"count"`
	Total               int64   `json:"total"`
	RPS                 float64 `json:"rps"`
	LatencyDistribution []struct {
		Percentage int   `json:"percentage"`
		Latency    int64 `json:"latency"`
	} `json:"latencyDistribution"`
	StatusCodeDistribution map[string]int64 `json:"statusCodeDistribution"`
}

// parseGhzReport reads a ghz JSON report.
func parseGhzReport(b []byte) (ghzRun, error) {
	var rep ghzReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return ghzRun{}, fmt.Errorf("parse report: %w", err)
	}
	if rep.Count == 0 {
		return ghzRun{}, fmt.Errorf("report counts no calls")
	}
	r := ghzRun{
		Requests: rep.Count,
		Errors:   rep.Count - rep.StatusCodeDistribution["OK"],
		Wall:     time.Duration(rep.Total),
		RPS:      rep.RPS,
	}
	for _, p := range rep.LatencyDistribution {
		switch p.Percentage {
		case 50:
			r.P50 = time.Duration(p.Latency)
		case 99:
			r.P99 = time.Duration(p.Latency)
		}
	}
	return r, nil
}

// pinned returns argv run under taskset -c cpus, or argv itself for "".
// taskset execs the program, so its pid is the program's.
func pinned(cpus string, argv []string) []string {
	if cpus == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpus}, argv...)
}
