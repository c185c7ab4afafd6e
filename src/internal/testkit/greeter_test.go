package testkit_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client returns a Greeter client of addr, closed when the test ends.
func client(t *testing.T, addr string) hellov1.GreeterClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return hellov1.NewGreeterClient(conn)
}

func TestGreeter_CallsAreNumberedAndCountedPerMethod(t *testing.T) {
	g := &testkit.Greeter{
		SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			return &hellov1.HelloReply{Message: req.GetName(), Call: testkit.CallNumber(ctx)}, nil
		},
		StreamHellos: func(_ *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
			return stream.Send(&hellov1.HelloReply{Call: testkit.CallNumber(stream.Context())})
		},
	}
	c := client(t, g.Start(t))
	ctx := testkit.Context(t)
	for want := int64(1); want <= 3; want++ {
		reply, err := c.SayHello(ctx, &hellov1.HelloRequest{Name: "a"})
		if err != nil || reply.GetCall() != want {
			t.Fatalf("SayHello: %v, %v; want call %d", reply, err, want)
		}
	}
	stream, err := c.StreamHellos(ctx, &hellov1.HelloRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := stream.Recv(); err != nil || reply.GetCall() != 1 {
		t.Errorf("StreamHellos: %v, %v; want call 1: each method counts its own calls", reply, err)
	}
	if got := g.Calls.SayHello.Load(); got != 3 {
		t.Errorf("Calls.SayHello = %d, want 3", got)
	}
	if got := g.Calls.StreamHellos.Load(); got != 1 {
		t.Errorf("Calls.StreamHellos = %d, want 1", got)
	}
	if got := testkit.CallNumber(ctx); got != 0 {
		t.Errorf("CallNumber outside a call = %d, want 0", got)
	}
}

func TestGreeter_MethodWithoutFunctionIsUnimplementedAndCounted(t *testing.T) {
	g := &testkit.Greeter{}
	c := client(t, g.Start(t))
	if _, err := c.SayHello(testkit.Context(t), &hellov1.HelloRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("SayHello: %v, want UNIMPLEMENTED", err)
	}
	chat, err := c.Chat(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("Chat: %v, want UNIMPLEMENTED", err)
	}
	if hellos, chats := g.Calls.SayHello.Load(), g.Calls.Chat.Load(); hellos != 1 || chats != 1 {
		t.Errorf("calls counted: SayHello %d, Chat %d; want 1 each", hellos, chats)
	}
}

func TestGreeter_StopEndsCallsInFlightUnavailable(t *testing.T) {
	arrived := make(chan struct{})
	g := &testkit.Greeter{SayHello: func(ctx context.Context, _ *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		close(arrived)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	c := client(t, g.Start(t))
	failed := make(chan error, 1)
	go func() {
		_, err := c.SayHello(testkit.Context(t), &hellov1.HelloRequest{})
		failed <- err
	}()
	testkit.Recv(t, "the call to arrive", arrived)
	g.Stop()
	if err := testkit.Recv(t, "the call to end", failed); status.Code(err) != codes.Unavailable {
		t.Errorf("call in flight at Stop: %v, want UNAVAILABLE", err)
	}
}
