package demo

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

func TestSummarise_CountsErrorsMismatchesAndDistinctCalls(t *testing.T) {
	results := []result{
		{latency: time.Millisecond, code: codes.OK, caller: "alice", call: 7},
		{latency: 2 * time.Millisecond, code: codes.OK, caller: "alice", call: 7},
		{latency: 3 * time.Millisecond, code: codes.OK, caller: "bob", call: 8},
		{latency: time.Hour, code: codes.Unavailable},
		{latency: time.Hour, code: codes.DeadlineExceeded},
		{latency: time.Hour, code: codes.Unavailable},
	}
	b := summarise("alice", false, results, time.Second)
	if b.Requests != 6 || b.Errors != 3 || b.ErrorsByCode["Unavailable"] != 2 || b.ErrorsByCode["DeadlineExceeded"] != 1 {
		t.Errorf("requests=%d errors=%d by code=%v; want 6, 3, Unavailable=2 DeadlineExceeded=1", b.Requests, b.Errors, b.ErrorsByCode)
	}
	if b.Mismatched != 1 || b.DistinctCalls() != 2 || len(b.Replies["alice"]) != 1 || len(b.Replies["bob"]) != 1 {
		t.Errorf("mismatched=%d distinct=%d replies=%v; want 1 mismatch (bob), 2 distinct calls", b.Mismatched, b.DistinctCalls(), b.Replies)
	}
	if b.Latency.Max != 3*time.Millisecond {
		t.Errorf("latency max = %v, want 3ms (failed requests excluded)", b.Latency.Max)
	}
}

func TestCollapseRatio_IsShareOfSuccessesWithoutABackendCall(t *testing.T) {
	tests := []struct {
		backendCalls int64
		succeeded    int
		want         float64
	}{
		{10000, 10000, 0},
		{1, 10000, 0.9999},
		{2, 4, 0.5},
		{0, 4, 1},
		{12, 10, 0}, // more backend calls than successes (failures, other clients): clamped
		{3, 0, 0},   // nothing succeeded
	}
	for _, tt := range tests {
		if got := collapseRatio(tt.backendCalls, tt.succeeded); got != tt.want {
			t.Errorf("collapseRatio(%d, %d) = %v, want %v", tt.backendCalls, tt.succeeded, got, tt.want)
		}
	}
}

func testReport() *Report {
	ok := func(caller string, call int64, d time.Duration) result {
		return result{latency: d, code: codes.OK, caller: caller, call: call}
	}
	first := []result{ok("alice", 1, 50*time.Millisecond), ok("alice", 1, 52*time.Millisecond)}
	first[0].status, first[1].status = "collapser; fwd=miss; stored", "collapser; fwd=miss; collapsed; stored"
	second := []result{ok("bob", 2, 51*time.Millisecond), {latency: time.Millisecond, code: codes.Unavailable}}
	bursts := []Burst{summarise("alice", false, first, 60*time.Millisecond), summarise("bob", false, second, 61*time.Millisecond)}
	latencies := append(okLatencies(first), okLatencies(second)...)
	return newReport(hellov1.Greeter_SayHello_FullMethodName, bursts, 2, 62*time.Millisecond, latencies)
}

func TestReport_JSONHasContractKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := testReport().WriteJSON(&buf); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("unmarshal %s: %v", buf.String(), err)
	}
	want := map[string]any{
		"requests": 4.0, "errors": 1.0, "backend_calls": 2.0, "collapse_ratio": collapseRatio(2, 3),
		"latency_p50_ms": 51.0, "latency_p90_ms": 52.0, "latency_p99_ms": 52.0, "latency_max_ms": 52.0,
		"duration_ms": 62.0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	bursts, _ := got["bursts"].([]any)
	if len(bursts) != 2 {
		t.Fatalf("bursts = %v, want 2 objects", got["bursts"])
	}
	second, _ := bursts[1].(map[string]any)
	for k, v := range map[string]any{"caller": "bob", "requests": 2.0, "errors": 1.0, "distinct_calls": 1.0, "mismatched_replies": 0.0} {
		if second[k] != v {
			t.Errorf("bursts[1].%s = %v, want %v", k, second[k], v)
		}
	}
}

func TestReport_TextNamesEveryFigure(t *testing.T) {
	var buf bytes.Buffer
	if err := testReport().WriteText(&buf); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	for _, want := range []string{
		"requests        4 (errors 1: Unavailable=1)",
		"backend calls   2 (the backend's own SayHello count)",
		"collapse ratio  0.3333",
		"latency         p50 51ms p90 52ms p99 52ms max 52ms",
		`burst 2 caller "bob": requests 2, errors 1, distinct backend calls 1, mismatched replies 0`,
		"     1 × cache-status: collapser; fwd=miss; collapsed; stored\n",
		"     1 × cache-status: collapser; fwd=miss; stored\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestCacheStatusOf_LeavesOutTheTTLs(t *testing.T) {
	for _, tt := range []struct {
		header, trailer metadata.MD
		want            string
	}{
		{metadata.Pairs("cache-status", "origin; hit; ttl=30", "cache-status", "collapser; hit; ttl=3599"), nil, "origin; hit, collapser; hit"},
		{nil, metadata.Pairs("cache-status", "collapser; fwd=miss"), "collapser; fwd=miss"},
		{metadata.Pairs("cache-status", "collapser; hit; ttl=-2; detail=stale"), nil, "collapser; hit; detail=stale"},
		{nil, nil, ""},
	} {
		if got := cacheStatusOf(tt.header, tt.trailer); got != tt.want {
			t.Errorf("cacheStatusOf(%v, %v) = %q, want %q", tt.header, tt.trailer, got, tt.want)
		}
	}
}
