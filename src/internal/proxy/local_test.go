package proxy_test

import (
	"bytes"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// localBackend is a proxy.LocalBackend that answers reply, with header,
// and counts its runs. A call made on it as a connection fails the test.
type localBackend struct {
	t       testing.TB
	reply   []byte
	header  metadata.MD
	runs    atomic.Int64
	request atomic.Pointer[[]byte] // the last run's
	sends   atomic.Int64           // outgoing headers its last run's context carried
}

func (l *localBackend) RunLocal(ctx context.Context, _ string, request []byte) ([]byte, metadata.MD, metadata.MD, error) {
	l.runs.Add(1)
	l.request.Store(&request)
	md, _ := metadata.FromOutgoingContext(ctx)
	l.sends.Store(int64(len(md)))
	return l.reply, l.header.Copy(), nil, nil
}

func (l *localBackend) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	l.t.Error("a local backend's call made as a connection's")
	return status.Error(codes.Internal, "not a connection")
}

func (l *localBackend) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Internal, "not a connection")
}

func TestCall_RunsALocalBackendOnTheRequestAlone(t *testing.T) {
	s := startProxy(t, (&testkit.Greeter{}).Start(t), proxyConfig{ttl: time.Minute})
	reply, err := proto.Marshal(&hellov1.HelloReply{Message: "hello ann"})
	if err != nil {
		t.Fatal(err)
	}
	local := &localBackend{t: t, reply: reply, header: metadata.Pairs("x-served-by", "the handler")}
	payload, err := proto.Marshal(&hellov1.HelloRequest{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	md := metadata.Pairs(":authority", "greeter", "authorization", "Bearer ann", "x-a", "1")
	rule := s.proxy.Rule(methodSayHello)
	for i := range 2 { // a miss, then a hit
		resp, _, err := proxy.Call(s.proxy, testkit.Context(t), methodSayHello, rule, payload, md, local)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Equal(resp.Payload, reply) || !slices.Equal(resp.Header.Get("x-served-by"), []string{"the handler"}) {
			t.Errorf("call %d: answer %x with header %v, want the local backend's", i, resp.Payload, resp.Header)
		}
	}
	if n := local.runs.Load(); n != 1 {
		t.Fatalf("local runs = %d, want 1", n)
	}
	if got := *local.request.Load(); !bytes.Equal(got, payload) {
		t.Errorf("the run got request %x, want %x", got, payload)
	}
	if n := local.sends.Load(); n != 0 {
		t.Errorf("the run's context carries %d outgoing headers, want none: a local backend reads its caller's", n)
	}
	if _, backend := s.observed.snapshot(); len(backend) != 1 {
		t.Errorf("backend calls counted: %d, want 1", len(backend))
	}
}
