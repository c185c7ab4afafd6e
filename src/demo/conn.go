package demo

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
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
// waits until all are ready.
func dial(ctx context.Context, target, backend string, n int) (*conns, error) {
	c := &conns{}
	for range n {
		conn, err := connect(ctx, "target", target)
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
		conn, err := connect(ctx, "backend", backend)
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

// connect dials addr (plaintext) and waits, up to DefaultConnectTimeout, for
// the connection to be ready; the first failed attempt is an error, so an
// unreachable address is reported at once rather than as N failed requests.
func connect(ctx context.Context, role, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// No service config is looked up: a DNS TXT query for it can wait seconds
		// for an answer that never comes where names outside the cluster do not resolve.
		grpc.WithDisableServiceConfig())
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", role, addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	conn.Connect()
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			return conn, nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return nil, errors.Join(fmt.Errorf("%s %s is unreachable (connection %s)", role, addr, state), conn.Close())
		}
		if !conn.WaitForStateChange(ctx, state) {
			return nil, errors.Join(fmt.Errorf("connect to %s %s: %w", role, addr, ctx.Err()), conn.Close())
		}
	}
}
