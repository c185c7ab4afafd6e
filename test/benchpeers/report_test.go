package main

import (
	"strings"
	"testing"
)

func TestMedian_OfOddAndEvenCounts(t *testing.T) {
	v := []float64{3, 1, 2}
	if got := median(v); got != 2 {
		t.Errorf("median(3, 1, 2) = %v, want 2", got)
	}
	if v[0] != 3 {
		t.Error("median sorted its argument")
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median(4, 1, 3, 2) = %v, want 2.5", got)
	}
}

func TestSummarize_TakesMediansAndSumsErrors(t *testing.T) {
	cpu := func(v float64) *float64 { return &v }
	runs := []measurement{
		{Target: targetNginx, RPS: 100, ProxyCPUUs: cpu(30), Errors: 1},
		{Target: targetNginx, RPS: 300, ProxyCPUUs: cpu(10), Errors: 2},
		{Target: targetNginx, RPS: 200, ProxyCPUUs: cpu(20)},
	}
	s := summarize(targetNginx, runs)
	if s.RPS != 200 || *s.ProxyCPUUs != 20 || s.Errors != 3 || s.Rounds != 3 {
		t.Errorf("summary = rps %v, proxy cpu %v, errors %d, rounds %d; want 200, 20, 3, 3", s.RPS, *s.ProxyCPUUs, s.Errors, s.Rounds)
	}
	if d := summarize(targetDirect, []measurement{{Target: targetDirect}}); d.ProxyCPUUs != nil {
		t.Error("direct got a proxy CPU time")
	}
}

func TestProblems_FlagsErrorsWrongCountsAndACollapserThatDidNotCollapse(t *testing.T) {
	passthrough, hit := allScenarios[0], scenario{ID: "hit"}
	miss, missPeers := scenario{ID: "miss", Distinct: true}, scenario{ID: "miss-peers", Distinct: true, Peers: 3}
	cases := []struct {
		sc   scenario
		m    measurement
		want string // "" = no problem
	}{
		{passthrough, measurement{Target: targetPlain, Requests: 10, BackendCalls: 10}, ""},
		{passthrough, measurement{Target: targetCollapser, Requests: 10, BackendCalls: 4}, "counted 4 calls for 10"},
		{passthrough, measurement{Target: targetNginx, Requests: 10, BackendCalls: 9, Errors: 1}, "1 of 10 calls failed"},
		{hit, measurement{Target: targetCollapser, Requests: 10, BackendCalls: 1}, ""},
		{hit, measurement{Target: targetCollapser, Requests: 10, BackendCalls: 10}, "nothing was collapsed"},
		{hit, measurement{Target: targetDirect, Requests: 10, BackendCalls: 1}, "counted 1 calls for 10"},
		{miss, measurement{Target: targetCollapser, Requests: 10, BackendCalls: 10}, ""},
		{miss, measurement{Target: targetCollapser, Requests: 10, BackendCalls: 9}, "counted 9 calls for 10"},
		{missPeers, measurement{Target: targetPeers, Requests: 10, BackendCalls: 10}, ""},
		{missPeers, measurement{Target: targetPeers, Requests: 10, BackendCalls: 11}, "counted 11 calls for 10"},
		{hit, measurement{Target: targetPeers, Requests: 10, BackendCalls: 10}, "nothing was collapsed"},
	}
	for _, c := range cases {
		got := problems(c.sc, []measurement{c.m})
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s %s: unexpected problems %q", c.sc.ID, c.m.Target, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s %s: problems %q, want one with %q", c.sc.ID, c.m.Target, got, c.want)
		}
	}
}
