package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// result is what one SayHello caller got.
type result struct {
	reply           *hellov1.HelloReply
	header, trailer metadata.MD
	err             error
}

// sayHello calls SayHello as auth ("" sends no authorization header).
func sayHello(ctx context.Context, c hellov1.GreeterClient, name, auth string, opts ...grpc.CallOption) result {
	if auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	var r result
	opts = append(opts, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.reply, r.err = c.SayHello(ctx, &hellov1.HelloRequest{Name: name}, opts...)
	return r
}

// goSayHello runs sayHello on a goroutine; the channel receives its result.
func goSayHello(ctx context.Context, c hellov1.GreeterClient, name, auth string, opts ...grpc.CallOption) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- sayHello(ctx, c, name, auth, opts...) }()
	return ch
}

// startHeld starts n identical held calls and waits until all wait in the engine.
func startHeld(t *testing.T, ctx context.Context, s *runningProxy, n int, name, auth string) []<-chan result {
	t.Helper()
	chans := make([]<-chan result, n)
	for i := range chans {
		chans[i] = goSayHello(ctx, s.client, name, auth)
	}
	s.waitForWaiters(t, n)
	return chans
}

func TestUnary_IdenticalConcurrentCallsShareOneBackendCall(t *testing.T) {
	const n = 20
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	chans := startHeld(t, ctx, s, n, "ann", "Bearer ann")
	close(hold)
	first := testkit.Recv(t, "the first call to finish", chans[0])
	if first.err != nil {
		t.Fatalf("SayHello: %v", first.err)
	}
	want := &hellov1.HelloReply{Message: "hello ann", Caller: "Bearer ann", Call: 1}
	if !proto.Equal(first.reply, want) {
		t.Errorf("reply = %v, want %v", first.reply, want)
	}
	if got := first.header.Get(backendHeaderKey); len(got) != 1 || got[0] != "h-ann" {
		t.Errorf("header %s = %q, want [h-ann]", backendHeaderKey, got)
	}
	if got := first.trailer.Get(backendTrailerKey); len(got) != 1 || got[0] != "t-ann" {
		t.Errorf("trailer %s = %q, want [t-ann]", backendTrailerKey, got)
	}
	for i, ch := range chans[1:] {
		r := testkit.Recv(t, "a call to finish", ch)
		if r.err != nil {
			t.Fatalf("caller %d: %v", i+1, r.err)
		}
		if !proto.Equal(r.reply, first.reply) {
			t.Errorf("caller %d reply = %v, want %v", i+1, r.reply, first.reply)
		}
		if !mdEqual(r.header, first.header, backendHeaderKey) || !mdEqual(r.trailer, first.trailer, backendTrailerKey) {
			t.Errorf("caller %d metadata = %v / %v, want %v / %v", i+1, r.header, r.trailer, first.header, first.trailer)
		}
	}
	if got := b.Calls.SayHello.Load(); got != 1 {
		t.Errorf("backend SayHello calls = %d, want 1", got)
	}
	outcomes := map[string]int{}
	for _, r := range s.waitForRequests(t, n) {
		outcomes[r.outcome+"/"+r.code.String()]++
	}
	if outcomes["leader/OK"] != 1 || outcomes["joined/OK"] != n-1 {
		t.Errorf("observed outcomes = %v, want 1 leader/OK and %d joined/OK", outcomes, n-1)
	}
	if _, calls := s.observed.snapshot(); len(calls) != 1 || calls[0] != (backendRecord{methodSayHello, codes.OK, false}) {
		t.Errorf("observed backend calls = %v, want one OK SayHello", calls)
	}
}

// mdEqual reports whether a and b hold the same values for key.
func mdEqual(a, b metadata.MD, key string) bool {
	return strings.Join(a.Get(key), "\x00") == strings.Join(b.Get(key), "\x00")
}

func TestUnary_DifferentAuthorizationNeverSharesAResponse(t *testing.T) {
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Minute})
	ctx := testkit.Context(t)

	alice := goSayHello(ctx, s.client, "same", "Bearer alice")
	bob := goSayHello(ctx, s.client, "same", "Bearer bob")
	none := goSayHello(ctx, s.client, "same", "")
	s.waitForWaiters(t, 3)
	close(hold)
	for ch, want := range map[<-chan result]string{alice: "Bearer alice", bob: "Bearer bob", none: ""} {
		if r := testkit.Recv(t, "a call to finish", ch); r.err != nil || r.reply.GetCaller() != want {
			t.Errorf("caller %q got reply %v, err %v", want, r.reply, r.err)
		}
	}
	// The cache holds alice's and bob's answers; carol must not get either.
	if r := sayHello(ctx, s.client, "same", "Bearer carol"); r.err != nil || r.reply.GetCaller() != "Bearer carol" {
		t.Errorf("carol got reply %v, err %v", r.reply, r.err)
	}
	if got := b.Calls.SayHello.Load(); got != 4 {
		t.Errorf("backend SayHello calls = %d, want 4", got)
	}
}

func TestUnary_DifferentPayloadsAreNotCollapsed(t *testing.T) {
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Minute})
	ctx := testkit.Context(t)

	names := []string{"a", "b", "c"}
	chans := map[string]<-chan result{}
	for _, name := range names {
		chans[name] = goSayHello(ctx, s.client, name, "")
	}
	s.waitForWaiters(t, len(names))
	close(hold)
	for name, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); r.err != nil || r.reply.GetMessage() != "hello "+name {
			t.Errorf("%s got reply %v, err %v", name, r.reply, r.err)
		}
	}
	if got := b.Calls.SayHello.Load(); got != int64(len(names)) {
		t.Errorf("backend SayHello calls = %d, want %d", got, len(names))
	}
}

func TestUnary_LeaderCancellationDoesNotFailFollowers(t *testing.T) {
	const followers = 5
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	leaderCtx, cancelLeader := context.WithCancel(ctx)
	leader := goSayHello(leaderCtx, s.client, "x", "")
	s.waitForWaiters(t, 1)
	chans := make([]<-chan result, followers)
	for i := range chans {
		chans[i] = goSayHello(ctx, s.client, "x", "")
	}
	s.waitForWaiters(t, 1+followers)

	cancelLeader()
	if r := testkit.Recv(t, "the leader's call to finish", leader); status.Code(r.err) != codes.Canceled {
		t.Errorf("leader err = %v, want Canceled", r.err)
	}
	close(hold)
	for i, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); r.err != nil || r.reply.GetMessage() != "hello x" {
			t.Errorf("follower %d got reply %v, err %v", i, r.reply, r.err)
		}
	}
	if got := b.Calls.SayHello.Load(); got != 1 {
		t.Errorf("backend SayHello calls = %d, want 1", got)
	}
}

func TestUnary_FollowerDeadlineEndsOnlyThatFollower(t *testing.T) {
	hold := make(chan struct{})
	b := startBackend(t, hold)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	chans := startHeld(t, ctx, s, 2, "x", "")
	shortCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	short := goSayHello(shortCtx, s.client, "x", "")
	if r := testkit.Recv(t, "the short call to finish", short); status.Code(r.err) != codes.DeadlineExceeded {
		t.Errorf("follower with deadline: err = %v, want DeadlineExceeded", r.err)
	}
	// The proxy's side of the short call ends on its own deadline, which
	// it started counting when the call arrived: later than the client's.
	// The flight is released only once the proxy saw that end.
	s.waitForRequests(t, 1)
	close(hold)
	for i, ch := range chans {
		if r := testkit.Recv(t, "a call to finish", ch); r.err != nil {
			t.Errorf("caller %d: %v", i, r.err)
		}
	}
	// The proxy sees the caller's deadline pass, or the caller's
	// cancellation when the caller's own timer fired first.
	got := map[string]int{}
	for _, r := range s.waitForRequests(t, 3) {
		if r.code == codes.DeadlineExceeded {
			r.code = codes.Canceled
		}
		got[r.outcome+"/"+r.code.String()]++
	}
	if got["leader/OK"] != 1 || got["joined/OK"] != 1 || got["joined/Canceled"] != 1 {
		t.Errorf("observed = %v, want leader/OK, joined/OK and joined with DeadlineExceeded or Canceled", got)
	}
}

func TestUnary_GzipCompressedCallIsServed(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := testkit.Context(t)

	r := sayHello(ctx, s.client, "zip", "", grpc.UseCompressor(gzip.Name))
	if r.err != nil || r.reply.GetMessage() != "hello zip" {
		t.Errorf("gzip call got reply %v, err %v", r.reply, r.err)
	}
}
