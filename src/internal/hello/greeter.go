package hello

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

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
	return g.s.reply(ctx, req.GetName(), call), nil
}

// StreamHellos sends max(count, 1) identical replies after one wait, the
// request's interval_ms (or the server's StreamInterval) apart, and ends
// with ABORTED after fail_after replies when that is positive.
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
	interval := g.s.streamInterval
	if ms := req.GetIntervalMs(); ms < 0 || ms > MaxStreamIntervalMs {
		return status.Errorf(codes.InvalidArgument, "interval_ms %d out of range [0, %d]", ms, MaxStreamIntervalMs)
	} else if ms > 0 {
		interval = time.Duration(ms) * time.Millisecond
	}
	if err := g.s.wait(ctx); err != nil {
		return err
	}
	r := g.s.reply(ctx, req.GetName(), call)
	for i := range max(count, 1) {
		if i > 0 && interval > 0 {
			if err := sleep(ctx, interval); err != nil {
				return err
			}
		}
		if n := req.GetFailAfter(); n > 0 && i == n {
			return status.Errorf(codes.Aborted, "hello: failed after %d replies, as the request asked", n)
		}
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
	return stream.SendAndClose(g.s.reply(ctx, strings.Join(names, ", "), call))
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
		if err := stream.Send(g.s.reply(ctx, req.GetName(), call)); err != nil {
			return err
		}
	}
}
