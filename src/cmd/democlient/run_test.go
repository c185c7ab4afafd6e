package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/hello"
	"github.com/collapser/collapser/src/internal/hello/hellotest"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startHello serves an in-process hello backend on 127.0.0.1:0 until the test
// ends and returns its address.
func startHello(t *testing.T, latency time.Duration) string {
	t.Helper()
	return hellotest.Serve(t, hello.Options{Latency: latency})
}

func TestRun_JSONReportsBackendCallsWithoutCollapsing(t *testing.T) {
	addr := startHello(t, time.Millisecond)
	var stdout, stderr bytes.Buffer
	args := []string{"--target", addr, "--backend", addr, "--requests", "25", "--authorization", "Bearer alice", "--second-authorization", "Bearer bob", "--json"}
	if err := run(testkit.Context(t), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr.String())
	}
	var got struct {
		Requests      int     `json:"requests"`
		Errors        int     `json:"errors"`
		BackendCalls  int     `json:"backend_calls"`
		CollapseRatio float64 `json:"collapse_ratio"`
		Bursts        []struct {
			Caller     string `json:"caller"`
			Mismatched int    `json:"mismatched_replies"`
		} `json:"bursts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	if got.Requests != 50 || got.Errors != 0 || got.BackendCalls != 50 || got.CollapseRatio != 0 || len(got.Bursts) != 2 {
		t.Errorf("report %+v: want 50 requests, 0 errors, 50 backend calls, ratio 0, 2 bursts", got)
	}
	if stderr.Len() != 0 {
		t.Errorf("--json wrote to stderr: %q", stderr.String())
	}
}

func TestRun_TextReportOnStdoutProgressOnStderr(t *testing.T) {
	addr := startHello(t, 0)
	var stdout, stderr bytes.Buffer
	if err := run(testkit.Context(t), []string{"--target", addr, "--backend", addr, "--requests", "10"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(stdout.String(), "backend calls   10") || !strings.Contains(stdout.String(), "collapse ratio  0.0000") {
		t.Errorf("stdout lacks backend calls and ratio:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "done 10/10") {
		t.Errorf("stderr lacks the final progress line: %q", stderr.String())
	}
}

func TestRun_FailedRequestsMakeTheRunFailAfterTheReport(t *testing.T) {
	addr := startHello(t, time.Hour)
	var stdout bytes.Buffer
	err := run(testkit.Context(t), []string{"--target", addr, "--backend", addr, "--requests", "3", "--timeout", "20ms", "--quiet"}, &stdout, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "3 of 3 requests failed") {
		t.Errorf("err = %v, want 3 of 3 requests failed", err)
	}
	if !strings.Contains(stdout.String(), "DeadlineExceeded=3") {
		t.Errorf("report lacks the error codes:\n%s", stdout.String())
	}
}

func TestRun_UnreachableTargetIsAClearError(t *testing.T) {
	addr := testkit.ClosedAddr(t)
	err := run(testkit.Context(t), []string{"--target", addr, "--backend", addr, "--connect-timeout", "200ms"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "target "+addr+" is unreachable") {
		t.Errorf("err = %v, want one naming the unreachable target", err)
	}
}

func TestRun_BadFlagsAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(testkit.Context(t), []string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout.String(), "-second-authorization") {
		t.Errorf("-h: err = %v, stdout = %q; want flag.ErrHelp and usage on stdout", err, stdout.String())
	}
	if err := run(testkit.Context(t), []string{"--requests", "many"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("--requests many: no error")
	}
	if err := run(testkit.Context(t), []string{"--requests", "0"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "requests must be positive") {
		t.Errorf("--requests 0: err = %v, want requests must be positive", err)
	}
}

func TestRun_BelowMinCollapseRatioFailsAfterTheReport(t *testing.T) {
	addr := startHello(t, 0)
	var stdout bytes.Buffer
	// Straight to the backend nothing is collapsed: ratio 0.
	err := run(testkit.Context(t), []string{"--target", addr, "--backend", addr, "--requests", "5", "--quiet", "--min-collapse-ratio", "0.5"}, &stdout, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "below --min-collapse-ratio") {
		t.Errorf("run: err = %v, want the collapse ratio below the minimum", err)
	}
	if !strings.Contains(stdout.String(), "collapse ratio") {
		t.Errorf("no report before the failure:\n%s", stdout.String())
	}
	if err := run(testkit.Context(t), []string{"--min-collapse-ratio", "1.5"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "between 0 and 1") {
		t.Errorf("--min-collapse-ratio 1.5: err = %v", err)
	}
}
