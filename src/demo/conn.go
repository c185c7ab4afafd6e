package demo

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// conns are the run's connections; backend is target when both addresses
// are the same, nil when there is no backend address.
type conns struct {
	target, backend *grpc.ClientConn
}

// dial connects to target and backend ("" = none) and waits until both are ready.
func dial(ctx context.Context, target, backend string) (*conns, error) {
	c := &conns{}
	var err error
	if c.target, err = connect(ctx, "target", target); err != nil {
		return nil, err
	}
	c.backend = c.target
	if backend == "" {
		c.backend = nil
	} else if backend != target {
		if c.backend, err = connect(ctx, "backend", backend); err != nil {
			return nil, errors.Join(err, c.target.Close())
		}
	}
	return c, nil
}

func (c *conns) close() {
	_ = c.target.Close() // closing an idle client connection has nothing useful to report
	if c.backend != nil && c.backend != c.target {
		_ = c.backend.Close()
	}
}

// connect dials addr (plaintext) and waits, up to DefaultConnectTimeout, for
// the connection to be ready; the first failed attempt is an error, so an
// unreachable address is reported at once rather than as N failed requests.
func connect(ctx context.Context, role, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
