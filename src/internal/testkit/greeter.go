package testkit

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// Greeter is a hello Greeter backend whose methods a test writes, in the
// shape of grpc-go's internal/stubserver: each method runs the function in
// its field, and a method whose field is nil answers UNIMPLEMENTED, as a
// backend without it does. Greeter numbers and counts each method's calls
// as they arrive, before the function runs: Calls is the backend's own
// count, and CallNumber tells a call its number. Set the fields before
// Start and start a Greeter once.
type Greeter struct {
	SayHello      func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error)
	StreamHellos  func(*hellov1.HelloRequest, grpc.ServerStreamingServer[hellov1.HelloReply]) error
	CollectHellos func(grpc.ClientStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error
	Chat          func(grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error

	// Services, when set, registers more services beside the Greeter before
	// the server serves: server reflection, say, as most backends serve it.
	Services func(*grpc.Server)

	// Calls counts the calls each method received.
	Calls GreeterCalls

	srv *grpc.Server // written once by Serve
}

// GreeterCalls counts a Greeter's calls, one counter per method. A call is
// counted when it arrives, whatever it ends with.
type GreeterCalls struct {
	SayHello, StreamHellos, CollectHellos, Chat atomic.Int64
}

// Start serves g on 127.0.0.1:0, on a grpc.Server built with opts, until the
// test ends, and returns its address.
func (g *Greeter) Start(t testing.TB, opts ...grpc.ServerOption) string {
	t.Helper()
	lis := Listen(t, "127.0.0.1:0")
	g.Serve(t, lis, opts...)
	return lis.Addr().String()
}

// Serve is Start on lis, for a test that holds its listener first: a
// backend that comes up late, or on an address chosen before. The server
// closes lis when it stops.
func (g *Greeter) Serve(t testing.TB, lis net.Listener, opts ...grpc.ServerOption) {
	t.Helper()
	g.srv = grpc.NewServer(opts...)
	hellov1.RegisterGreeterServer(g.srv, greeterServer{g: g})
	if g.Services != nil {
		g.Services(g.srv)
	}
	served := make(chan error, 1)
	go func() { served <- g.srv.Serve(lis) }()
	t.Cleanup(func() {
		g.srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve Greeter: %v", err)
		}
	})
}

// Service returns g as a hellov1.GreeterServer, for a test that registers
// it on a server of its own (through a registrar that must see it);
// its calls are counted as Serve's are.
func (g *Greeter) Service() hellov1.GreeterServer { return greeterServer{g: g} }

// Stop stops g's server at once, before the test ends: its connections
// close and the calls in flight end UNAVAILABLE at their callers.
func (g *Greeter) Stop() { g.srv.Stop() }

// callNumberKey is the context key of a Greeter call's number.
type callNumberKey struct{}

// CallNumber returns the number a Greeter gave the call whose context ctx
// is: its method's count when the call arrived, from 1. Outside a call it
// returns 0.
func CallNumber(ctx context.Context) int64 {
	n, _ := ctx.Value(callNumberKey{}).(int64)
	return n
}

// numbered returns ctx carrying a call's number n.
func numbered(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, callNumberKey{}, n)
}

// greeterServer is the hellov1.GreeterServer that counts a Greeter's calls
// and runs its functions; what it embeds answers those it has none for.
type greeterServer struct {
	hellov1.UnimplementedGreeterServer
	g *Greeter
}

func (s greeterServer) SayHello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	ctx = numbered(ctx, s.g.Calls.SayHello.Add(1))
	if s.g.SayHello == nil {
		return s.UnimplementedGreeterServer.SayHello(ctx, req)
	}
	return s.g.SayHello(ctx, req)
}

func (s greeterServer) StreamHellos(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
	stream = serverStream{stream, numbered(stream.Context(), s.g.Calls.StreamHellos.Add(1))}
	if s.g.StreamHellos == nil {
		return s.UnimplementedGreeterServer.StreamHellos(req, stream)
	}
	return s.g.StreamHellos(req, stream)
}

func (s greeterServer) CollectHellos(stream grpc.ClientStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	stream = clientStream{stream, numbered(stream.Context(), s.g.Calls.CollectHellos.Add(1))}
	if s.g.CollectHellos == nil {
		return s.UnimplementedGreeterServer.CollectHellos(stream)
	}
	return s.g.CollectHellos(stream)
}

func (s greeterServer) Chat(stream grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	stream = bidiStream{stream, numbered(stream.Context(), s.g.Calls.Chat.Add(1))}
	if s.g.Chat == nil {
		return s.UnimplementedGreeterServer.Chat(stream)
	}
	return s.g.Chat(stream)
}

// serverStream, clientStream and bidiStream are a stream whose Context
// carries the call's number.
type (
	serverStream struct {
		grpc.ServerStreamingServer[hellov1.HelloReply]
		ctx context.Context
	}
	clientStream struct {
		grpc.ClientStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]
		ctx context.Context
	}
	bidiStream struct {
		grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]
		ctx context.Context
	}
)

func (s serverStream) Context() context.Context { return s.ctx }
func (s clientStream) Context() context.Context { return s.ctx }
func (s bidiStream) Context() context.Context   { return s.ctx }
