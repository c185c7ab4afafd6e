package hello

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestSayHello_RepliesWithGreetingCallerAndCallNumber(t *testing.T) {
	c := startServer(t, Options{})
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), "authorization", "Bearer alice")
	for want := int64(1); want <= 2; want++ {
		r, err := c.greeter.SayHello(ctx, &hellov1.HelloRequest{Name: "world"})
		if err != nil {
			t.Fatalf("SayHello: %v", err)
		}
		if r.GetMessage() != "Hello, world" || r.GetCaller() != "alice" || r.GetCall() != want {
			t.Errorf("reply = %+v, want message %q caller %q call %d", r, "Hello, world", "alice", want)
		}
	}
}

func TestSayHello_SendsCallHeaderAndServedByTrailer(t *testing.T) {
	tests := []struct{ servedBy, want string }{{"", DefaultServedBy}, {"pod-1", "pod-1"}}
	for _, tt := range tests {
		c := startServer(t, Options{ServedBy: tt.servedBy})
		var header, trailer metadata.MD
		if _, err := c.greeter.SayHello(testkit.Context(t), &hellov1.HelloRequest{}, grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
			t.Fatalf("SayHello: %v", err)
		}
		if got := header.Get(HeaderCall); len(got) != 1 || got[0] != "1" {
			t.Errorf("header %s = %q, want [1]", HeaderCall, got)
		}
		if got := trailer.Get(TrailerServedBy); len(got) != 1 || got[0] != tt.want {
			t.Errorf("trailer %s = %q, want [%s]", TrailerServedBy, got, tt.want)
		}
	}
}

func TestSayHello_ConcurrentRequestsGetDistinctCallNumbers(t *testing.T) {
	const n = 50
	c := startServer(t, Options{Latency: time.Millisecond})
	ctx := testkit.Context(t)
	calls := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := c.greeter.SayHello(ctx, &hellov1.HelloRequest{Name: "x"})
			calls[i], errs[i] = r.GetCall(), err
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("SayHello: %v", errs[i])
		}
		if calls[i] < 1 || calls[i] > n || seen[calls[i]] {
			t.Errorf("call number %d repeated or outside [1, %d]", calls[i], n)
		}
		seen[calls[i]] = true
	}
}

func TestSayHello_CallerContextEndEndsTheWait(t *testing.T) {
	c := startServer(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(testkit.Context(t), 20*time.Millisecond)
	defer cancel()
	_, err := c.greeter.SayHello(ctx, &hellov1.HelloRequest{})
	if got := status.Code(err); got != codes.DeadlineExceeded {
		t.Errorf("SayHello with 20ms deadline against 1h latency: code %v, want DeadlineExceeded", got)
	}
}

func TestStreamHellos_SendsCountRepliesOrRejectsOutOfRange(t *testing.T) {
	tests := []struct {
		count       int32
		wantReplies int
		wantCode    codes.Code
	}{
		{0, 1, codes.OK},
		{1, 1, codes.OK},
		{3, 3, codes.OK},
		{-1, 0, codes.InvalidArgument},
		{MaxStreamCount + 1, 0, codes.InvalidArgument},
	}
	c := startServer(t, Options{})
	for i, tt := range tests {
		stream, err := c.greeter.StreamHellos(testkit.Context(t), &hellov1.HelloRequest{Name: "bob", Count: tt.count})
		if err != nil {
			t.Fatalf("StreamHellos: %v", err)
		}
		replies, err := drain(stream.Recv)
		if status.Code(err) != tt.wantCode || len(replies) != tt.wantReplies {
			t.Errorf("count %d: %d replies, err %v; want %d replies, code %v", tt.count, len(replies), err, tt.wantReplies, tt.wantCode)
		}
		for _, r := range replies {
			if r.GetMessage() != "Hello, bob" || r.GetCall() != int64(i+1) {
				t.Errorf("count %d: reply %+v, want Hello, bob call %d", tt.count, r, i+1)
			}
		}
	}
}

func TestStreamHellos_PacesRepliesAndFailsWhereAsked(t *testing.T) {
	c := startServer(t, Options{StreamInterval: 5 * time.Millisecond})
	tests := []struct {
		name        string
		req         *hellov1.HelloRequest
		wantReplies int
		wantCode    codes.Code
		atLeast     time.Duration
	}{
		{"the server's interval", &hellov1.HelloRequest{Count: 5}, 5, codes.OK, 4 * 5 * time.Millisecond},
		{"the request's interval", &hellov1.HelloRequest{Count: 3, IntervalMs: 20}, 3, codes.OK, 2 * 20 * time.Millisecond},
		{"fail after 2", &hellov1.HelloRequest{Count: 5, FailAfter: 2}, 2, codes.Aborted, 0},
		{"fail after the end: never", &hellov1.HelloRequest{Count: 2, FailAfter: 9}, 2, codes.OK, 0},
		{"interval out of range", &hellov1.HelloRequest{IntervalMs: -1}, 0, codes.InvalidArgument, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			stream, err := c.greeter.StreamHellos(testkit.Context(t), tt.req)
			if err != nil {
				t.Fatalf("StreamHellos: %v", err)
			}
			replies, err := drain(stream.Recv)
			if status.Code(err) != tt.wantCode || len(replies) != tt.wantReplies {
				t.Errorf("%d replies, err %v; want %d replies, code %v", len(replies), err, tt.wantReplies, tt.wantCode)
			}
			if took := time.Since(start); took < tt.atLeast {
				t.Errorf("stream took %v, want at least %v", took, tt.atLeast)
			}
		})
	}
}

func TestCollectHellos_GreetsAllNamesOnce(t *testing.T) {
	c := startServer(t, Options{})
	stream, err := c.greeter.CollectHellos(metadata.AppendToOutgoingContext(testkit.Context(t), "authorization", "carol"))
	if err != nil {
		t.Fatalf("CollectHellos: %v", err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := stream.Send(&hellov1.HelloRequest{Name: name}); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	r, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	if r.GetMessage() != "Hello, a, b, c" || r.GetCaller() != "carol" || r.GetCall() != 1 {
		t.Errorf("reply = %+v, want Hello, a, b, c from carol, call 1", r)
	}
}

func TestChat_RepliesToEachMessage(t *testing.T) {
	c := startServer(t, Options{})
	stream, err := c.greeter.Chat(testkit.Context(t))
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	for _, name := range []string{"x", "y"} {
		if err := stream.Send(&hellov1.HelloRequest{Name: name}); err != nil {
			t.Fatalf("Send: %v", err)
		}
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if r.GetMessage() != "Hello, "+name || r.GetCall() != 1 {
			t.Errorf("reply = %+v, want Hello, %s call 1", r, name)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	if rest, err := drain(stream.Recv); err != nil || len(rest) != 0 {
		t.Errorf("after CloseSend: %d more replies, err %v; want none, nil", len(rest), err)
	}
	if got := stream.Trailer().Get(TrailerServedBy); len(got) != 1 {
		t.Errorf("trailer %s = %q, want one value", TrailerServedBy, got)
	}
	header, err := stream.Header()
	if got := header.Get(HeaderCall); err != nil || len(got) != 1 || got[0] != "1" {
		t.Errorf("header = %v, %v; want %s: 1", header, err, HeaderCall)
	}
}

// drain receives until the stream ends; a clean end returns a nil error.
func drain(recv func() (*hellov1.HelloReply, error)) ([]*hellov1.HelloReply, error) {
	var out []*hellov1.HelloReply
	for {
		r, err := recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}
