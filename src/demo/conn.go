package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// conns are the run's connections: n to the target, and one to the
// backend (nil when there is no backend address), the first target
// connection when both addresses are the same.
type conns struct {
	targets []*grpc.ClientConn
	backend *grpc.ClientConn
}

// dial makes n connections to target and one to backend ("" = none), and
// waits, up to timeout each, until all are ready.
func dial(ctx context.Context, target, backend string, n int, timeout time.Duration) (*conns, error) {
	c := &conns{}
	for range n {
		conn, err := connect(ctx, "target", target, timeout)
		if err != nil {
			c.close()
			return nil, err
		}
		c.targets = append(c.targets, conn)
	}
	switch backend {
	case "":
	case target:
		c.backend = c.targets[0]
	default:
		conn, err := connect(ctx, "backend", backend, timeout)
		if err != nil {
			c.close()
			return nil, err
		}
		c.backend = conn
	}
	return c, nil
}

func (c *conns) close() {
	// Closing an idle client connection has nothing useful to report.
	for _, conn := range c.targets {
		_ = conn.Close()
	}
	if c.backend != nil && c.backend != c.targets[0] {
		_ = c.backend.Close()
	}
}

// reconnectBackoff is how gRPC spaces the demo's attempts to connect: a
// Service that has just become ready may refuse connections for a moment
// (kube-proxy programs its rules after the endpoints appear), so attempts come
// every second at most, not after grpc-go's default of up to two minutes.
var reconnectBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// connect dials addr (plaintext) and waits up to timeout for the connection
// to be ready, gRPC reconnecting meanwhile; an address still unreachable then
// is reported as one error rather than as N failed requests.
func connect(ctx context.Context, role, addr string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: timeout}),
		// No service config is looked up: a DNS TXT query for it can wait seconds
		// for an answer that never comes where names outside the cluster do not resolve.
		grpc.WithDisableServiceConfig())
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", role, addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			return conn, nil
		case connectivity.Shutdown:
			return nil, fmt.Errorf("%s %s: connection shut down", role, addr)
		}
		if !conn.WaitForStateChange(ctx, state) {
			// Between two refused attempts the state may be either
			// TRANSIENT_FAILURE or CONNECTING: the timeout is what counts.
			err := fmt.Errorf("connect to %s %s (connection %s): %w", role, addr, state, ctx.Err())
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%s %s is unreachable: not connected within %s (connection %s)", role, addr, timeout, state)
			}
			return nil, errors.Join(err, conn.Close())
		}
	}
}
