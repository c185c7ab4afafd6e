package proxy_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// Tests of how unary calls fail: every waiter gets the same error, nothing
// hangs, the proxy survives.

func TestUnary_BackendDownGivesUnavailableToEveryWaiter(t *testing.T) {
	s := startProxy(t, testkit.ClosedAddr(t), proxyConfig{})
	ctx := testkit.Context(t)

	chans := make([]<-chan result, 10)
	for i := range chans {
		chans[i] = goSayHello(ctx, s.client, "x", "")
	}
	for i, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); status.Code(r.err) != codes.Unavailable {
			t.Errorf("caller %d: err = %v, want Unavailable", i, r.err)
		}
	}
}

func TestUnary_BackendErrorReachesEveryWaiterAndIsNotCached(t *testing.T) {
	const n = 5
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Minute})
	ctx := testkit.Context(t)

	chans := startHeld(t, ctx, s, n, nameError, "")
	close(hold)
	want := status.Convert(errorStatus()).Proto()
	for i, ch := range chans {
		r := testkit.Recv(t, "a call to finish", ch)
		if got := status.Convert(r.err).Proto(); !proto.Equal(got, want) {
			t.Errorf("caller %d: status = %v, want %v", i, got, want)
		}
		if !mdEqual(r.header, metadata.Pairs(backendHeaderKey, "h-error"), backendHeaderKey) ||
			!mdEqual(r.trailer, metadata.Pairs(backendTrailerKey, "t-error"), backendTrailerKey) {
			t.Errorf("caller %d: metadata = %v / %v, want the backend's", i, r.header, r.trailer)
		}
	}
	if r := sayHello(ctx, s.client, nameError, ""); status.Code(r.err) != codes.FailedPrecondition {
		t.Errorf("second call: err = %v, want FailedPrecondition", r.err)
	}
	if got := b.Calls.SayHello.Load(); got != 2 {
		t.Errorf("backend SayHello calls = %d, want 2 (errors are not cached)", got)
	}
}

func TestUnary_BackendHandlerPanicGivesErrorAndProxySurvives(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	if r := sayHello(ctx, s.client, namePanic, ""); status.Code(r.err) != codes.Internal {
		t.Errorf("panicking call: err = %v, want Internal", r.err)
	}
	if r := sayHello(ctx, s.client, "after", ""); r.err != nil {
		t.Errorf("call after the panic: %v", r.err)
	}
}

// panickingBackend panics in its first Invoke once hold is closed, as a bug
// in the shared call would.
type panickingBackend struct {
	grpc.ClientConnInterface
	hold     chan struct{}
	panicked atomic.Bool
}

func (p *panickingBackend) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if p.panicked.CompareAndSwap(false, true) {
		<-p.hold
		panic("shared call panicked")
	}
	return p.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func TestUnary_PanicInSharedCallGivesInternalToEveryWaiter(t *testing.T) {
	const n = 5
	b := startBackend(t, nil)
	panicking := &panickingBackend{hold: make(chan struct{})}
	wrap := func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
		panicking.ClientConnInterface = cc
		return panicking
	}
	s := startProxy(t, b.addr, proxyConfig{wrapBackend: wrap})
	ctx := testkit.Context(t)

	chans := startHeld(t, ctx, s, n, "x", "")
	close(panicking.hold)
	for i, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); status.Code(r.err) != codes.Internal {
			t.Errorf("caller %d: err = %v, want Internal", i, r.err)
		}
	}
	if r := sayHello(ctx, s.client, "x", ""); r.err != nil {
		t.Errorf("call after the panic: %v", r.err)
	}
}

func TestUnary_BackendStoppedMidCallFailsEveryWaiter(t *testing.T) {
	const n = 5
	hold := make(chan struct{})
	defer close(hold)
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	chans := startHeld(t, ctx, s, n, "x", "")
	b.Stop()
	for i, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); status.Code(r.err) != codes.Unavailable {
			t.Errorf("caller %d: err = %v, want Unavailable", i, r.err)
		}
	}
}

func TestUnary_OversizeMessagesAreResourceExhausted(t *testing.T) {
	const limit = 1024
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{options: func(o *proxy.Options) { o.MaxRecvMsgBytes = limit }})
	ctx := testkit.Context(t)

	if r := sayHello(ctx, s.client, strings.Repeat("n", 2*limit), ""); status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("oversize request: err = %v, want ResourceExhausted", r.err)
	}
	if got := s.waitForRequests(t, 1)[0]; got != (requestRecord{methodSayHello, "error", codes.ResourceExhausted}) {
		t.Errorf("observed request = %v, want outcome error", got)
	}
	if r := sayHello(ctx, s.client, "big:2048", ""); status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("oversize response: err = %v, want ResourceExhausted", r.err)
	}
	if got := b.Calls.SayHello.Load(); got != 1 {
		t.Errorf("backend SayHello calls = %d, want 1 (the oversize request never reaches it)", got)
	}
}
