package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// Request names that make the test backend misbehave.
const (
	nameError     = "error"      // answer errorStatus after sending headers
	nameErrorOnly = "error-only" // answer errorStatus trailers-only (streams)
	namePanic     = "panic"      // panic in the handler
	nameHold      = "hold"       // StreamHellos: send one frame, then wait for cancellation
	nameDeadline  = "deadline"   // StreamHellos: report the deadline the backend saw
	prefixBig     = "big:"       // "big:N": answer a message of N bytes
	prefixCookie  = "cookie:"    // "cookie:V": set a cookie "session=V-<call>"
	prefixPrivate = "private:"   // "private:V": a trailer x-user-trailer "V-<call>"
)

// Metadata the test backend sets on every answer.
const (
	backendHeaderKey  = "x-backend-header"
	backendTrailerKey = "x-backend-trailer"
)

// testBackend is the proxy tests' hello backend: a testkit.Greeter whose
// answers the names above steer, and what the tests read of its calls. Its
// Calls are the backend's own count.
type testBackend struct {
	*testkit.Greeter
	addr string

	// hold, when non-nil, keeps SayHello calls waiting until it is closed.
	hold chan struct{}
	// arrived receives a value per SayHello call (up to its buffer), before
	// the call waits on hold.
	arrived chan struct{}
	// streamEnded receives the context error a held StreamHellos ended with.
	streamEnded chan error
	// deadlines receives the deadline a "deadline" StreamHellos saw.
	deadlines chan time.Time

	abandoned atomic.Int64 // SayHello calls whose context ended while held

	mu          sync.Mutex
	authorities []string // the :authority of every SayHello call
}

// startBackend serves a testBackend on 127.0.0.1:0 until the test ends.
// hold is nil for a backend that answers at once.
func startBackend(t testing.TB, hold chan struct{}) *testBackend {
	t.Helper()
	b := &testBackend{
		hold:        hold,
		arrived:     make(chan struct{}, 1000),
		streamEnded: make(chan error, 1),
		deadlines:   make(chan time.Time, 1),
	}
	b.Greeter = &testkit.Greeter{SayHello: b.hello, StreamHellos: b.streamHellos, CollectHellos: collectHellos, Chat: chat}
	// Like production servers, recover handler panics into an error
	// instead of crashing the process (here: the test binary).
	b.addr = b.Start(t, grpc.UnaryInterceptor(recoverUnary))
	return b
}

func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (_ any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "backend panic: %v", r)
		}
	}()
	return h(ctx, req)
}

// errorStatus is the status the backend answers "error" requests with.
func errorStatus() error {
	st, err := status.New(codes.FailedPrecondition, "greeting refused").
		WithDetails(&errdetails.ErrorInfo{Reason: "REFUSED", Domain: "hello.test"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// callerOf returns the authorization header the backend received.
func callerOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return strings.Join(md.Get("authorization"), ",")
}

// hello is SayHello: it answers "hello <name>", or as the name asks.
func (b *testBackend) hello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	call := testkit.CallNumber(ctx)
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		b.mu.Lock()
		b.authorities = append(b.authorities, md.Get(":authority")...)
		b.mu.Unlock()
	}
	select {
	case b.arrived <- struct{}{}:
	default: // nobody is counting arrivals (benchmarks)
	}
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
			b.abandoned.Add(1)
			return nil, ctx.Err()
		}
	}
	name := req.GetName()
	if err := grpc.SetHeader(ctx, metadata.Pairs(backendHeaderKey, "h-"+name)); err != nil {
		return nil, err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs(backendTrailerKey, "t-"+name)); err != nil {
		return nil, err
	}
	msg := "hello " + name
	switch v := strings.SplitN(name, ":", 2); {
	case strings.HasPrefix(name, prefixCookie):
		if err := grpc.SetHeader(ctx, metadata.Pairs("set-cookie", fmt.Sprintf("session=%s-%d", v[1], call))); err != nil {
			return nil, err
		}
	case strings.HasPrefix(name, prefixPrivate):
		if err := grpc.SetTrailer(ctx, metadata.Pairs("x-user-trailer", fmt.Sprintf("%s-%d", v[1], call))); err != nil {
			return nil, err
		}
	}
	switch {
	case name == nameError:
		return nil, errorStatus()
	case name == namePanic:
		panic("backend handler panicked")
	case strings.HasPrefix(name, prefixBig):
		n, err := strconv.Atoi(strings.TrimPrefix(name, prefixBig))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "bad size: %v", err)
		}
		msg = strings.Repeat("x", n)
	}
	return &hellov1.HelloReply{Message: msg, Caller: callerOf(ctx), Call: call}, nil
}

// authoritiesSeen returns the :authority of every SayHello call so far.
func (b *testBackend) authoritiesSeen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.authorities)
}

// streamHellos is StreamHellos: it sends count replies "hello <name> #i",
// or does as the name asks.
func (b *testBackend) streamHellos(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
	ctx := stream.Context()
	name := req.GetName()
	switch name {
	case nameErrorOnly:
		return errorStatus()
	case nameError:
		if err := stream.SendHeader(metadata.Pairs(backendHeaderKey, "h-"+name)); err != nil {
			return err
		}
		stream.SetTrailer(metadata.Pairs(backendTrailerKey, "t-"+name))
		return errorStatus()
	case nameHold:
		if err := stream.Send(&hellov1.HelloReply{Message: "first"}); err != nil {
			return err
		}
		<-ctx.Done()
		b.streamEnded <- ctx.Err()
		return ctx.Err()
	case nameDeadline:
		d, _ := ctx.Deadline()
		b.deadlines <- d
		return stream.Send(&hellov1.HelloReply{Message: "deadline seen"})
	}
	if err := stream.SendHeader(metadata.Pairs(backendHeaderKey, "h-"+name)); err != nil {
		return err
	}
	for i := range req.GetCount() {
		reply := &hellov1.HelloReply{Message: fmt.Sprintf("hello %s #%d", name, i), Caller: callerOf(ctx), Call: int64(i)}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs(backendTrailerKey, "t-"+name))
	return nil
}

// collectHellos is CollectHellos: it answers "hello" and the names it read.
func collectHellos(stream grpc.ClientStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	var names []string
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			stream.SetTrailer(metadata.Pairs(backendTrailerKey, "collected"))
			return stream.SendAndClose(&hellov1.HelloReply{
				Message: "hello " + strings.Join(names, ","),
				Caller:  callerOf(stream.Context()),
				Call:    int64(len(names)),
			})
		}
		if err != nil {
			return err
		}
		names = append(names, req.GetName())
	}
}

// chat is Chat: it answers each name as it arrives.
func chat(stream grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	for i := int64(0); ; i++ {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&hellov1.HelloReply{Message: "hello " + req.GetName(), Call: i}); err != nil {
			return err
		}
	}
}
