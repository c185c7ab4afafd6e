// Package hellotest serves the hello backend in-process, on a loopback
// port, for the tests of the packages that talk to it.
package hellotest

import (
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	"github.com/collapser/collapser/src/internal/hello"
)

// Serve serves a hello.Server built from o, with server reflection as the
// hello-backend binary serves it, on a grpc.Server built with opts, on
// 127.0.0.1:0 until the test ends, and returns its address.
func Serve(t testing.TB, o hello.Options, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ServeOn(t, lis, o, opts...)
	return lis.Addr().String()
}

// ServeOn is Serve on lis, which it closes when the test ends.
func ServeOn(t testing.TB, lis net.Listener, o hello.Options, opts ...grpc.ServerOption) {
	t.Helper()
	s, err := hello.New(o)
	if err != nil {
		t.Fatalf("hello.New: %v", err)
	}
	srv := grpc.NewServer(opts...)
	s.Register(srv)
	reflection.Register(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
}
