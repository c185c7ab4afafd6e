package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestPassthrough_ServerStreamingDeliversEveryFrameWithMetadata(t *testing.T) {
	const frames = 1000
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), "authorization", "Bearer ann")

	stream, err := s.client.StreamHellos(ctx, &hellov1.HelloRequest{Name: "ann", Count: frames})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	header, err := stream.Header()
	if err != nil || !mdEqual(header, metadata.Pairs(backendHeaderKey, "h-ann"), backendHeaderKey) {
		t.Errorf("header = %v, %v; want %s: h-ann", header, err, backendHeaderKey)
	}
	for i := range frames {
		reply, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv frame %d: %v", i, err)
		}
		want := &hellov1.HelloReply{Message: fmt.Sprintf("hello ann #%d", i), Caller: "Bearer ann", Call: int64(i)}
		if !proto.Equal(reply, want) {
			t.Fatalf("frame %d = %v, want %v", i, reply, want)
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after %d frames: %v, want io.EOF", frames, err)
	}
	if got := stream.Trailer(); !mdEqual(got, metadata.Pairs(backendTrailerKey, "t-ann"), backendTrailerKey) {
		t.Errorf("trailer = %v, want %s: t-ann", got, backendTrailerKey)
	}
	if got := s.waitForRequests(t, 1)[0]; got != (requestRecord{methodStreamHellos, "passthrough", codes.OK}) {
		t.Errorf("observed request = %v, want passthrough OK", got)
	}
}

func TestPassthrough_ClientStreamingForwardsEveryMessage(t *testing.T) {
	const messages = 50
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})

	stream, err := s.client.CollectHellos(testkit.Context(t))
	if err != nil {
		t.Fatalf("CollectHellos: %v", err)
	}
	for i := range messages {
		if err := stream.Send(&hellov1.HelloRequest{Name: fmt.Sprint(i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	reply, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v", err)
	}
	if reply.GetCall() != messages || !strings.HasPrefix(reply.GetMessage(), "hello 0,1,2,") {
		t.Errorf("reply = %v, want %d names in order", reply, messages)
	}
	if got := stream.Trailer(); !mdEqual(got, metadata.Pairs(backendTrailerKey, "collected"), backendTrailerKey) {
		t.Errorf("trailer = %v, want %s: collected", got, backendTrailerKey)
	}
}

func TestPassthrough_BidiStreamingInterleaves(t *testing.T) {
	const rounds = 20
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})

	stream, err := s.client.Chat(testkit.Context(t))
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	// Each answer must arrive before the next message is sent: nothing may
	// wait for the caller to close its side.
	for i := range rounds {
		name := fmt.Sprint("n", i)
		if err := stream.Send(&hellov1.HelloRequest{Name: name}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		reply, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if reply.GetMessage() != "hello "+name || reply.GetCall() != int64(i) {
			t.Fatalf("reply %d = %v", i, reply)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after CloseSend: %v, want io.EOF", err)
	}
}

func TestPassthrough_BackendErrorStatusAndMetadataForwarded(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	want := status.Convert(errorStatus()).Proto()

	for _, name := range []string{nameError, nameErrorOnly} {
		t.Run(name, func(t *testing.T) {
			stream, err := s.client.StreamHellos(testkit.Context(t), &hellov1.HelloRequest{Name: name})
			if err != nil {
				t.Fatalf("StreamHellos: %v", err)
			}
			_, err = stream.Recv()
			if got := status.Convert(err).Proto(); !proto.Equal(got, want) {
				t.Errorf("status = %v, want %v", got, want)
			}
			if name == nameErrorOnly {
				return
			}
			if header, _ := stream.Header(); !mdEqual(header, metadata.Pairs(backendHeaderKey, "h-error"), backendHeaderKey) {
				t.Errorf("header = %v, want %s: h-error", header, backendHeaderKey)
			}
			if got := stream.Trailer(); !mdEqual(got, metadata.Pairs(backendTrailerKey, "t-error"), backendTrailerKey) {
				t.Errorf("trailer = %v, want %s: t-error", got, backendTrailerKey)
			}
		})
	}
}

func TestPassthrough_CancellationReachesTheBackend(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	ctx, cancel := context.WithCancel(testkit.Context(t))
	defer cancel()

	stream, err := s.client.StreamHellos(ctx, &hellov1.HelloRequest{Name: nameHold})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("Recv first frame: %v", err)
	}
	cancel()
	if err := testkit.Recv(t, "the backend stream to end", b.streamEnded); !errors.Is(err, context.Canceled) {
		t.Errorf("backend stream ended with %v, want context.Canceled", err)
	}
	if got := s.waitForRequests(t, 1)[0]; got.code != codes.Canceled {
		t.Errorf("observed request = %v, want code Canceled", got)
	}
}

func TestPassthrough_DeadlineReachesTheBackend(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	deadline := time.Now().Add(testkit.DefaultTimeout / 2) // well before testContext's own
	ctx, cancel := context.WithDeadline(testkit.Context(t), deadline)
	defer cancel()

	stream, err := s.client.StreamHellos(ctx, &hellov1.HelloRequest{Name: nameDeadline})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("Recv: %v", err)
	}
	got := testkit.Recv(t, "the backend to report its deadline", b.deadlines)
	// Each hop sends the remaining time, which the next one adds to its own
	// clock: the deadline moves by the transit time, no more.
	if diff := got.Sub(deadline).Abs(); diff > time.Second {
		t.Errorf("backend deadline = %v, want within 1s of %v", got, deadline)
	}
}

func TestPassthrough_BackendDownGivesUnavailable(t *testing.T) {
	b := startBackend(t, nil)
	b.Stop()
	s := startProxy(t, b.addr, proxyConfig{})

	stream, err := s.client.Chat(testkit.Context(t))
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Recv: %v, want Unavailable", err)
	}
}

func TestPassthrough_MethodOfUnknownKindIsNotCollapsed(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{ttl: time.Minute, kinds: kinds{}})
	ctx := testkit.Context(t)

	for i := range 2 {
		r := sayHello(ctx, s.client, "x", "")
		if r.err != nil || r.reply.GetCall() != int64(i+1) {
			t.Errorf("call %d got reply %v, err %v; want backend call %d", i, r.reply, r.err, i+1)
		}
	}
	for _, got := range s.waitForRequests(t, 2) {
		if got != (requestRecord{methodSayHello, "passthrough", codes.OK}) {
			t.Errorf("observed request = %v, want passthrough OK", got)
		}
	}
	if _, calls := s.observed.snapshot(); len(calls) != 2 || calls[0].stream || calls[1].stream {
		t.Errorf("observed backend calls = %v, want 2 told as calls (a latency is taken)", calls)
	}
}

func TestPassthrough_StreamsAreToldAsStreams(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})
	stream, err := s.client.StreamHellos(testkit.Context(t), &hellov1.HelloRequest{Name: "ann", Count: 3})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Recv: %v", err)
			}
			break
		}
	}
	s.waitForRequests(t, 1)
	if _, calls := s.observed.snapshot(); len(calls) != 1 || calls[0] != (backendRecord{methodStreamHellos, codes.OK, true}) {
		t.Errorf("observed backend calls = %v, want one stream: its length is no latency", calls)
	}
}
