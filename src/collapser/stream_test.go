package collapser

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// streamHellos is the Greeter's server-streaming method.
const streamHellos = "/hello.v1.Greeter/StreamHellos"

// replayAnHour replays StreamHellos, its record kept an hour.
const replayAnHour = "methods:\n  - name: " + streamHellos + "\n    stream: replay\n    cacheTTL: 1h\n"

// streamingGreeter is a Greeter whose StreamHellos sends a header, then
// three messages for the request's name once hold is closed (started is
// told when a run starts), then a trailer; a name "missing" fails with
// NOT_FOUND after the first message.
func streamingGreeter(started chan<- struct{}, hold <-chan struct{}) *testkit.Greeter {
	return &testkit.Greeter{StreamHellos: func(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
		started <- struct{}{}
		<-hold
		if err := stream.SendHeader(metadata.Pairs("x-run", "1")); err != nil {
			return err
		}
		stream.SetTrailer(metadata.Pairs("x-done", "yes"))
		for i := range 3 {
			if err := stream.Send(&hellov1.HelloReply{Message: req.GetName(), Call: int64(i)}); err != nil {
				return err
			}
			if req.GetName() == "missing" {
				return status.Error(codes.NotFound, "no such stream")
			}
		}
		return nil
	}}
}

// readStream reads one StreamHellos call for name to its end.
func readStream(ctx context.Context, client hellov1.GreeterClient, name string) testkit.Streamed {
	return testkit.ReadStream(ctx, client, &hellov1.HelloRequest{Name: name})
}

func TestStream_IdenticalStreamsShareOneRunAndAreReplayed(t *testing.T) {
	for _, sidecar := range []bool{false, true} {
		name := map[bool]string{false: "library", true: "sidecar"}[sidecar]
		t.Run(name, func(t *testing.T) {
			const n = 5
			started, hold := make(chan struct{}, 10), make(chan struct{})
			g := streamingGreeter(started, hold)
			c, client := streamFront(t, g, replayAnHour, sidecar)
			ctx := testkit.Context(t)

			first := make(chan testkit.Streamed, 1)
			go func() { first <- readStream(ctx, client, "ann") }()
			testkit.Recv(t, "the run to start", started)
			rest := make([]chan testkit.Streamed, n-1)
			for i := range rest {
				rest[i] = make(chan testkit.Streamed, 1)
				go func() { rest[i] <- readStream(ctx, client, "ann") }()
			}
			testkit.WaitFor(t, "every stream to read the record", func() bool { return c.proxy.StreamStats().Readers == n })
			close(hold)
			got := []testkit.Streamed{testkit.Recv(t, "the first stream", first)}
			for _, r := range rest {
				got = append(got, testkit.Recv(t, "a stream", r))
			}
			got = append(got, readStream(ctx, client, "ann")) // replayed from the record
			for _, s := range got {
				if s.Err != nil || len(s.Replies) != 3 || s.Header.Get("x-run") == nil || s.Trailer.Get("x-done") == nil {
					t.Errorf("stream = %+v, want 3 messages, the run's header and trailer", s)
				}
			}
			if runs := g.Calls.StreamHellos.Load(); runs != 1 {
				t.Errorf("handler runs = %d, want 1", runs)
			}
		})
	}
}

func TestStream_WhatIsNotReplayedRunsTheHandlerEveryTime(t *testing.T) {
	tests := []struct {
		name, policy, request string
		code                  codes.Code
	}{
		{name: "a method passed through", policy: "", request: "ann"},
		{name: "a stream that fails", policy: replayAnHour, request: "missing", code: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started, hold := make(chan struct{}, 10), make(chan struct{})
			close(hold)
			g := streamingGreeter(started, hold)
			c, _ := newCollapser(t, tt.policy, nil)
			addr := g.Start(t, grpc.ChainStreamInterceptor(c.StreamServerInterceptor()))
			client := hellov1.NewGreeterClient(dial(t, addr))
			for range 2 {
				s := readStream(testkit.Context(t), client, tt.request)
				if status.Code(s.Err) != tt.code || len(s.Replies) == 0 || s.Trailer.Get("x-done") == nil {
					t.Errorf("stream = %+v, want code %v after the run's messages and trailer", s, tt.code)
				}
			}
			if runs := g.Calls.StreamHellos.Load(); runs != 2 {
				t.Errorf("handler runs = %d, want 2", runs)
			}
		})
	}
}

// streamFront serves g with a Collapser of policy, through the stream
// interceptor or, when sidecar, as the sidecar serves it, and returns the
// Collapser and a client.
func streamFront(t *testing.T, g *testkit.Greeter, policy string, sidecar bool) (*Collapser, hellov1.GreeterClient) {
	t.Helper()
	if !sidecar {
		c, _ := newCollapser(t, policy, nil)
		addr := g.Start(t, grpc.ChainStreamInterceptor(c.StreamServerInterceptor()))
		return c, hellov1.NewGreeterClient(dial(t, addr))
	}
	c, _, err := tryCollapser(t, policy, nil, dial(t, g.Start(t)))
	if err != nil {
		t.Fatal(err)
	}
	return c, hellov1.NewGreeterClient(dial(t, serveEngine(t, c)))
}

func TestStream_APassedThroughStreamIsToldSoAsTheSidecarTellsIt(t *testing.T) {
	const bypass = "collapser; fwd=bypass"
	tests := []struct {
		name            string
		send            func(grpc.ServerStreamingServer[hellov1.HelloReply]) error
		header, trailer []string // the cache-status entries each carries
		code            codes.Code
	}{
		{name: "the handler sends its header", header: []string{"backend; fwd=uri-miss", bypass},
			send: func(s grpc.ServerStreamingServer[hellov1.HelloReply]) error {
				if err := s.SendHeader(metadata.Pairs("cache-status", "backend; fwd=uri-miss")); err != nil {
					return err
				}
				return s.Send(&hellov1.HelloReply{Message: "one"})
			}},
		{name: "its first message sends the header", header: []string{bypass},
			send: func(s grpc.ServerStreamingServer[hellov1.HelloReply]) error {
				return s.Send(&hellov1.HelloReply{Message: "one"})
			}},
		{name: "no message: trailers only", trailer: []string{bypass},
			send: func(grpc.ServerStreamingServer[hellov1.HelloReply]) error { return nil }},
		{name: "it fails before any header: trailers only", trailer: []string{bypass}, code: codes.NotFound,
			send: func(grpc.ServerStreamingServer[hellov1.HelloReply]) error {
				return status.Error(codes.NotFound, "no such stream")
			}},
	}
	for _, tt := range tests {
		for _, sidecar := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/library", true: "/sidecar"}[sidecar], func(t *testing.T) {
				g := &testkit.Greeter{StreamHellos: func(_ *hellov1.HelloRequest, s grpc.ServerStreamingServer[hellov1.HelloReply]) error {
					return tt.send(s)
				}}
				_, client := streamFront(t, g, "", sidecar)
				s := readStream(testkit.Context(t), client, "ann")
				if status.Code(s.Err) != tt.code {
					t.Fatalf("stream ended with %v, want %v", s.Err, tt.code)
				}
				if got := s.Header.Get("cache-status"); !slices.Equal(got, tt.header) {
					t.Errorf("header's cache-status %q, want %q", got, tt.header)
				}
				if got := s.Trailer.Get("cache-status"); !slices.Equal(got, tt.trailer) {
					t.Errorf("trailer's cache-status %q, want %q", got, tt.trailer)
				}
			})
		}
	}
}
