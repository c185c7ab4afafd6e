package main

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// defaultTestTimeout bounds every call of a test.
const defaultTestTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// greeter answers with the caller's authorization header, sets a header and a
// trailer, and fails for the name "fail".
type greeter struct {
	hellov1.UnimplementedGreeterServer
}

func (greeter) SayHello(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if err := grpc.SetHeader(ctx, metadata.Pairs("x-backend-header", "h")); err != nil {
		return nil, err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs("x-backend-trailer", "t")); err != nil {
		return nil, err
	}
	if req.GetName() == "fail" {
		return nil, status.Error(codes.NotFound, "no such greeting")
	}
	var caller string
	if v := md.Get("authorization"); len(v) > 0 {
		caller = v[0]
	}
	return &hellov1.HelloReply{Message: "Hello, " + req.GetName(), Caller: caller}, nil
}

func (greeter) StreamHellos(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
	for range req.GetCount() {
		if err := stream.Send(&hellov1.HelloReply{Message: "Hello, " + req.GetName()}); err != nil {
			return err
		}
	}
	return nil
}

// serve serves s on a free loopback port until the test ends and returns
// its address.
func serve(t *testing.T, s *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial returns a client connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// proxied returns a Greeter client whose calls go through a plain proxy to
// an in-process greeter.
func proxied(t *testing.T) hellov1.GreeterClient {
	t.Helper()
	backend := grpc.NewServer()
	hellov1.RegisterGreeterServer(backend, greeter{})
	proxy := newServer(dial(t, serve(t, backend)))
	return hellov1.NewGreeterClient(dial(t, serve(t, proxy)))
}

func TestPlainProxy_ForwardsReplyMetadataHeaderAndTrailer(t *testing.T) {
	client := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer alice")

	var header, trailer metadata.MD
	reply, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "bench"}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatalf("SayHello: %v", err)
	}
	if reply.GetMessage() != "Hello, bench" || reply.GetCaller() != "Bearer alice" {
		t.Errorf("reply = %q from %q, want %q from %q", reply.GetMessage(), reply.GetCaller(), "Hello, bench", "Bearer alice")
	}
	if got := header.Get("x-backend-header"); len(got) != 1 || got[0] != "h" {
		t.Errorf("header x-backend-header = %q, want [h]", got)
	}
	if got := trailer.Get("x-backend-trailer"); len(got) != 1 || got[0] != "t" {
		t.Errorf("trailer x-backend-trailer = %q, want [t]", got)
	}
}

func TestPlainProxy_ForwardsTheBackendsStatus(t *testing.T) {
	client := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()

	_, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "fail"})
	if s := status.Convert(err); s.Code() != codes.NotFound || s.Message() != "no such greeting" {
		t.Errorf("status = %v %q, want NotFound %q", s.Code(), s.Message(), "no such greeting")
	}
}

func TestPlainProxy_ForwardsEveryMessageOfAServerStream(t *testing.T) {
	client := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()

	stream, err := client.StreamHellos(ctx, &hellov1.HelloRequest{Name: "s", Count: 3})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	n := 0
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv after %d messages: %v", n, err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("received %d messages, want 3", n)
	}
}
