package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// sayHello is the method every run calls and whose backend count is read.
const sayHello = hellov1.Greeter_SayHello_FullMethodName

// callTimeout bounds each call the harness makes itself.
const callTimeout = 5 * time.Second

// client is a connection to a target, for the harness's own calls.
type client struct {
	addr string
	conn *grpc.ClientConn
}

// dial returns a client of addr (plaintext); it connects on first use.
func dial(addr string) (*client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &client{addr: addr, conn: conn}, nil
}

// close closes the connection.
func (c *client) close() {
	_ = c.conn.Close() // nothing is in flight; no error would matter
}

// sayHelloCalls returns the backend's own count of SayHello calls
// (Stats/GetCounts): c must be a client of the backend.
func (c *client) sayHelloCalls(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	reply, err := hellov1.NewStatsClient(c.conn).GetCounts(ctx, &hellov1.GetCountsRequest{})
	if err != nil {
		return 0, fmt.Errorf("backend %s: GetCounts: %w", c.addr, err)
	}
	return reply.GetByMethod()[sayHello], nil
}

// sayHello makes one SayHello call through c's target.
func (c *client) sayHello(ctx context.Context) error {
	return c.greet(ctx, "ready")
}

// greet makes one SayHello call for name through c's target.
func (c *client) greet(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := hellov1.NewGreeterClient(c.conn).SayHello(ctx, &hellov1.HelloRequest{Name: name}); err != nil {
		return fmt.Errorf("SayHello through %s: %w", c.addr, err)
	}
	return nil
}
