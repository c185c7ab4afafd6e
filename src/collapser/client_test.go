package collapser

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// clientOf returns a Greeter client of addr whose calls go through c's
// client interceptor, on a connection of its own.
func clientOf(t *testing.T, c *Collapser, addr string) hellov1.GreeterClient {
	t.Helper()
	return hellov1.NewGreeterClient(dial(t, addr, grpc.WithUnaryInterceptor(c.UnaryClientInterceptor())))
}

func TestClient_WhatMayNotShareIsACallOfItsOwn(t *testing.T) {
	tests := []struct {
		name string
		// call makes the second call, after one for "ann" with
		// authorization "Bearer ann" on the first connection.
		call func(ctx context.Context, first, second hellov1.GreeterClient) error
	}{
		{"other credentials", func(ctx context.Context, first, _ hellov1.GreeterClient) error {
			return sayHelloAs(ctx, first, "ann", "Bearer bob").err
		}},
		{"another connection", func(ctx context.Context, _, second hellov1.GreeterClient) error {
			return sayHelloAs(ctx, second, "ann", "Bearer ann").err
		}},
		{"per-call credentials", func(ctx context.Context, first, _ hellov1.GreeterClient) error {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ann")
			_, err := first.SayHello(ctx, &hellov1.HelloRequest{Name: "ann"}, grpc.PerRPCCredentials(insecureToken{}))
			return err
		}},
		{"another request", func(ctx context.Context, first, _ hellov1.GreeterClient) error {
			return sayHelloAs(ctx, first, "bob", "Bearer ann").err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hold := make(chan struct{})
			close(hold)
			g := heldGreeter(hold)
			addr := g.Start(t)
			c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
			first, second := clientOf(t, c, addr), clientOf(t, c, addr)
			ctx := testkit.Context(t)
			if r := sayHelloAs(ctx, first, "ann", "Bearer ann"); r.err != nil {
				t.Fatal(r.err)
			}
			if r := sayHelloAs(ctx, first, "ann", "Bearer ann"); r.err != nil {
				t.Fatal(r.err)
			}
			if got := g.Calls.SayHello.Load(); got != 1 {
				t.Fatalf("server calls = %d, want 1: the same call is served what was kept", got)
			}
			if err := tt.call(ctx, first, second); err != nil {
				t.Fatal(err)
			}
			if got := g.Calls.SayHello.Load(); got != 2 {
				t.Errorf("server calls = %d, want 2", got)
			}
		})
	}
}

// insecureToken is per-call credentials that send a token over plain text.
type insecureToken struct{}

func (insecureToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"x-token": "t"}, nil
}

func (insecureToken) RequireTransportSecurity() bool { return false }

func TestClient_RepliesAreEveryCallersOwn(t *testing.T) {
	// Callers change the replies they got, at once, while others are being
	// served: run with -race, no caller sees another's change, and what is
	// kept stays as it came.
	hold := make(chan struct{})
	close(hold)
	g := heldGreeter(hold)
	c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
	client := clientOf(t, c, g.Start(t))
	ctx := testkit.Context(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := sayHelloAs(ctx, client, "ann", "")
			if r.err != nil || r.msg.GetMessage() != "hello ann" {
				t.Errorf("reply = %v, %v; want hello ann", r.msg, r.err)
				return
			}
			r.msg.Message = "changed by caller " + strconv.Itoa(i)
		})
	}
	wg.Wait()
	if r := sayHelloAs(ctx, client, "ann", ""); r.err != nil || r.msg.GetMessage() != "hello ann" {
		t.Errorf("reply after the changes = %v, %v; want hello ann", r.msg, r.err)
	}
	if got := g.Calls.SayHello.Load(); got != 1 {
		t.Errorf("server calls = %d, want 1", got)
	}
}

func TestClient_AConnectionsNameGoesWithIt(t *testing.T) {
	// connIDs holds a connection weakly: once the connection is collected,
	// its name goes, so a process that dials again and again holds only the
	// names of the connections it still has; a live one keeps its name.
	c, _ := newCollapser(t, "", nil)
	g := &testkit.Greeter{SayHello: func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		return &hellov1.HelloReply{}, nil
	}}
	addr := g.Start(t)
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()))
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	live := dial()
	defer live.Close()
	if r := sayHelloAs(testkit.Context(t), hellov1.NewGreeterClient(live), "ann", ""); r.err != nil {
		t.Fatal(r.err)
	}
	name := c.conns.of(live)
	// The closed connections are named as the interceptor names them, but
	// carry no call: grpc-go itself may hold a connection a call was made on
	// for a while after it is closed (under -race on a busy machine, past
	// 30 s), which is no name's doing.
	for range 20 {
		conn := dial()
		c.conns.of(conn)
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the closed connections' names to go", func() bool {
		runtime.GC()
		return names(&c.conns) == 1
	})
	if got := c.conns.of(live); got != name {
		t.Errorf("the live connection's name = %s, want %s as before", got, name)
	}
}

// names returns how many connections ids holds a name of.
func names(ids *connIDs) int {
	n := 0
	ids.ids.Range(func(any, any) bool { n++; return true })
	return n
}
