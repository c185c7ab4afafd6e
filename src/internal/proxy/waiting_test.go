package proxy_test

import (
	"slices"
	"testing"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestUnary_WaitingListBoundsSendCallersToTheBackendWhileTheSharedCallHangs(t *testing.T) {
	tests := []struct {
		name       string
		policyFile string
		joined     int      // callers that wait for the hung call before the last one arrives
		want       []string // every caller's outcome, sorted
	}{
		// The waiting list is full: the next caller does not wait.
		{"maxWaiters", "default:\n  maxWaiters: 1\n", 1, []string{"joined", "leader", "own"}},
		// The caller waits, then gives up on the hung call.
		{"waitTimeout", "default:\n  waitTimeout: 1ms\n", 0, []string{"leader", "own"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hold := make(chan struct{})
			b := startBackend(t, hold)
			s := startProxy(t, b.addr, proxyConfig{policyFile: tt.policyFile})
			ctx := testkit.Context(t)

			callers := []<-chan result{goSayHello(ctx, s.client, "hung", "")}
			testkit.Recv(t, "the leader's backend call", b.arrived)
			for range tt.joined {
				callers = append(callers, goSayHello(ctx, s.client, "hung", ""))
			}
			s.waitForWaiters(t, 1+tt.joined)
			callers = append(callers, goSayHello(ctx, s.client, "hung", ""))
			testkit.Recv(t, "the own call's backend call", b.arrived)
			if got := b.Calls.SayHello.Load(); got != 2 {
				t.Errorf("backend calls while the first hangs = %d, want 2: the leader's and the own call", got)
			}
			close(hold)
			for _, c := range callers {
				if r := testkit.Recv(t, "a caller's result", c); r.err != nil {
					t.Errorf("caller: %v", r.err)
				}
			}
			var outcomes []string
			for _, r := range s.waitForRequests(t, len(tt.want)) {
				outcomes = append(outcomes, r.outcome)
			}
			slices.Sort(outcomes)
			if !slices.Equal(outcomes, tt.want) {
				t.Errorf("outcomes = %v, want %v", outcomes, tt.want)
			}
		})
	}
}
