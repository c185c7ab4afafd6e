package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// goneOwner is a ring in which the proxy owns every key, and every key's
// previous owner is a replica that is gone: its connection is never made,
// and an ask for an answer waits until its deadline.
type goneOwner struct{ asked atomic.Int64 }

func (g *goneOwner) Invoke(ctx context.Context, _ string, _, _ any, _ ...grpc.CallOption) error {
	g.asked.Add(1)
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

func (g *goneOwner) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unavailable, "gone")
}

func (g *goneOwner) Owner(string) (self, known bool) { return true, true }

func (g *goneOwner) Previous(string) (grpc.ClientConnInterface, bool) { return g, false }

// A replica gone answers no ask: the first waits for its connection, and
// fails; for a while after, no key is asked of a replica whose connection
// is not made, and each call is made at once. The pause is on the proxy's
// clock.
func TestHandoff_AFailedAskForAConnectionNotMadePausesSuchAsks(t *testing.T) {
	b := startBackend(t, nil)
	clock := testkit.NewClock(time.Unix(1e9, 0))
	ring := &goneOwner{}
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Hour, options: func(o *proxy.Options) {
		o.Peers, o.Now = ring, clock.Now
	}})
	read := func(keys ...int) {
		t.Helper()
		for _, k := range keys {
			if r := sayHello(testkit.Context(t), s.client, fmt.Sprint("key-", k), ""); r.err != nil {
				t.Fatal(r.err)
			}
		}
	}
	read(0, 1, 2, 3, 4)
	if got := ring.asked.Load(); got != 1 {
		t.Errorf("asks of the gone replica for 5 keys = %d, want 1: the others in its pause", got)
	}
	clock.Advance(time.Second)
	read(5, 6)
	if got := ring.asked.Load(); got != 2 {
		t.Errorf("asks after the pause = %d, want 2: one more, which failed and paused them again", got)
	}
	if n := b.Calls.SayHello.Load(); n != 7 {
		t.Errorf("backend calls = %d, want 7: each key's call made here", n)
	}
	s.observed.mu.Lock()
	defer s.observed.mu.Unlock()
	if want := []string{proxy.HandoffFailed, proxy.HandoffFailed}; !slices.Equal(s.observed.handoffs, want) {
		t.Errorf("handoffs observed %v, want %v: an ask that timed out is a failure", s.observed.handoffs, want)
	}
}
