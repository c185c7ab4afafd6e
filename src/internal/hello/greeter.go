package hello

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// greeter implements hellov1.GreeterServer; see the package doc for what is
// counted and when each method waits.
type greeter struct {
	hellov1.UnimplementedGreeterServer
	s *Server
}

// SayHello answers one greeting after the configured latency.
func (g greeter) SayHello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	call, err := g.s.receive(ctx, sayHello)
	if err != nil {
		return nil, err
	}
	if err := g.s.wait(ctx); err != nil {
		return nil, err
	}
	return reply(ctx, req.GetName(), call), nil
}

// StreamHellos sends max(count, 1) identical replies after one wait.
func (g greeter) StreamHellos(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
	ctx := stream.Context()
	call, err := g.s.receive(ctx, streamHellos)
	if err != nil {
		return err
	}
	count := req.GetCount()
	if count < 0 || count > MaxStreamCount {
		return status.Errorf(codes.InvalidArgument, "count %d out of range [0, %d]", count, MaxStreamCount)
	}
	if err := g.s.wait(ctx); err != nil {
		return err
	}
	r := reply(ctx, req.GetName(), call)
	for range max(count, 1) {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}

// CollectHellos reads greetings until the client closes its side, waits, and
// greets all the names at once ("Hello, alice, bob").
func (g greeter) CollectHellos(stream grpc.ClientStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	ctx := stream.Context()
	call, err := g.s.receive(ctx, collectHellos)
	if err != nil {
		return err
	}
	var names []string
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, req.GetName())
	}
	if err := g.s.wait(ctx); err != nil {
		return err
	}
	return stream.SendAndClose(reply(ctx, strings.Join(names, ", "), call))
}

// Chat answers every greeting as it arrives, each after the configured latency.
func (g greeter) Chat(stream grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
	ctx := stream.Context()
	call, err := g.s.receive(ctx, chat)
	if err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := g.s.wait(ctx); err != nil {
			return err
		}
		if err := stream.Send(reply(ctx, req.GetName(), call)); err != nil {
			return err
		}
	}
}
