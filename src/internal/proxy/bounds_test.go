package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestUnary_CallerThatNeverSendsItsRequestIsTimedOut(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{options: func(o *proxy.Options) { o.ReceiveTimeout = 50 * time.Millisecond }})
	// A stream opened without a deadline that sends nothing.
	stream, err := s.conn.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, methodSayHello)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(&hellov1.HelloReply{})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(status.Convert(err).Message(), "not received within 50ms") {
		t.Errorf("err = %v, want DEADLINE_EXCEEDED naming the receive timeout", err)
	}
	if got := s.waitForRequests(t, 1)[0]; got != (requestRecord{methodSayHello, "error", codes.DeadlineExceeded}) {
		t.Errorf("observed %+v", got)
	}
	// A caller with its own shorter deadline is bounded by it.
	if r := sayHello(testkit.Context(t), s.client, "ok", ""); r.err != nil {
		t.Errorf("normal call after the timeout: %v", r.err)
	}
}

func TestUnary_AbandonedCallsAreCancelledAtTheBackend(t *testing.T) {
	const n = 50
	hold := make(chan struct{}) // never released: only cancellation ends a call
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Hour})

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if r := sayHello(ctx, s.client, fmt.Sprint("distinct-", i), ""); status.Code(r.err) != codes.DeadlineExceeded {
				t.Errorf("caller %d: err %v, want its deadline", i, r.err)
			}
		})
	}
	wg.Wait()
	testkit.WaitFor(t, "the backend calls to end", func() bool { return b.abandoned.Load() == b.Calls.SayHello.Load() && s.proxy.Stats().InFlight == 0 })
	if got := b.Calls.SayHello.Load(); got > n {
		t.Errorf("backend calls = %d, want at most %d", got, n)
	}
}

// stuckBackend holds every unary call until release is closed, whatever the
// call's context says: the calls keep their slots.
type stuckBackend struct {
	grpc.ClientConnInterface
	release chan struct{}
	calls   atomic.Int64
}

func (b *stuckBackend) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	b.calls.Add(1)
	<-b.release
	return b.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func TestUnary_BackendCallsAreBoundedAndTheOverflowIsResourceExhausted(t *testing.T) {
	b := startBackend(t, nil)
	stuck := &stuckBackend{release: make(chan struct{})}
	s := startProxy(t, b.addr, proxyConfig{
		policy:  &policy.Defaults{Collapse: policy.Always, Timeout: 100 * time.Millisecond},
		options: func(o *proxy.Options) { o.MaxBackendCalls = 2 },
		wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
			stuck.ClientConnInterface = cc
			return stuck
		},
	})
	ctx := testkit.Context(t)
	first := goSayHello(ctx, s.client, "a", "")
	second := goSayHello(ctx, s.client, "b", "")
	testkit.WaitFor(t, "two backend calls", func() bool { return stuck.calls.Load() == 2 })

	// A third key finds no slot: with a deadline of its own, the caller stops there.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if r := sayHello(short, s.client, "c", ""); status.Code(r.err) != codes.DeadlineExceeded {
		t.Errorf("caller with a deadline: %v, want DEADLINE_EXCEEDED", r.err)
	}
	// Without one, the call's timeout ends its wait.
	if r := sayHello(ctx, s.client, "d", ""); status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("caller without a deadline: %v, want RESOURCE_EXHAUSTED", r.err)
	}
	if got := stuck.calls.Load(); got != 2 {
		t.Errorf("backend calls = %d, want 2: the queued calls never reached it", got)
	}
	close(stuck.release)
	for _, c := range []<-chan result{first, second} {
		testkit.Recv(t, "a call to finish", c)
	}
	if r := sayHello(ctx, s.client, "e", ""); r.err != nil {
		t.Errorf("call once the slots are free: %v", r.err)
	}
}

func TestRequests_CallersWhoseDeadlinePassedAreCountedDeadlineExceeded(t *testing.T) {
	const n = 100
	hold := make(chan struct{})
	b := startBackend(t, hold)
	defer close(hold)
	s := startProxy(t, b.addr, proxyConfig{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if r := sayHello(ctx, s.client, "slow", ""); status.Code(r.err) != codes.DeadlineExceeded {
				t.Errorf("caller got %v, want DEADLINE_EXCEEDED", r.err)
			}
		})
	}
	wg.Wait()
	for _, r := range s.waitForRequests(t, n) {
		if r.code != codes.DeadlineExceeded {
			t.Errorf("observed %+v, want code DeadlineExceeded: the status the caller got", r)
		}
	}
}
