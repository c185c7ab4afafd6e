package collapser_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/collapser"
)

// greeter answers SayHello and counts how often it ran: its own count is
// the truth.
type greeter struct {
	hellov1.UnimplementedGreeterServer
	runs atomic.Int64
}

func (g *greeter) SayHello(_ context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
	g.runs.Add(1)
	return &hellov1.HelloReply{Message: "hello " + req.GetName()}, nil
}

// serve serves g on a loopback port with opts, and returns a connection
// to it made with dial, and a function that stops both.
func serve(g *greeter, opts []grpc.ServerOption, dial ...grpc.DialOption) (*grpc.ClientConn, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	hellov1.RegisterGreeterServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	return conn, func() { conn.Close(); srv.Stop() }
}

// A server collapses identical calls in front of its own handlers: no
// sidecar, no hop. SayHello is declared free of side effects
// (idempotency_level), so the default policy collapses it.
func ExampleCollapser_UnaryServerInterceptor() {
	o := collapser.DefaultOptions()
	o.Policy.CacheTTL = time.Minute // keep answers a minute
	c, err := collapser.New(o)
	if err != nil {
		log.Fatal(err)
	}
	g := &greeter{}
	// Interceptors that authenticate a call go before it in the chain.
	conn, stop := serve(g, []grpc.ServerOption{grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor())})
	defer stop()

	client := hellov1.NewGreeterClient(conn)
	for range 5 {
		reply, err := client.SayHello(context.Background(), &hellov1.HelloRequest{Name: "ann"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(reply.GetMessage())
	}
	fmt.Println("handler runs:", g.runs.Load())
	// Output:
	// hello ann
	// hello ann
	// hello ann
	// hello ann
	// hello ann
	// handler runs: 1
}

// A gateway collapses its own identical outgoing calls before they leave
// the process.
func ExampleCollapser_UnaryClientInterceptor() {
	o := collapser.DefaultOptions()
	o.Policy.CacheTTL = time.Minute
	c, err := collapser.New(o)
	if err != nil {
		log.Fatal(err)
	}
	g := &greeter{}
	conn, stop := serve(g, nil, grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()))
	defer stop()

	client := hellov1.NewGreeterClient(conn)
	for _, name := range []string{"ann", "bob", "ann", "ann", "bob"} {
		if _, err := client.SayHello(context.Background(), &hellov1.HelloRequest{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("server runs:", g.runs.Load())
	// Output: server runs: 2
}
