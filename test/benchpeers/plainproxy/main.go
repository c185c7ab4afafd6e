// Command plainproxy is the plain Go proxy of make bench-peers: a minimal
// transparent gRPC proxy written the usual grpc-go way, with no collapsing,
// no cache and no metrics. It is the bar collapser's pass-through path is
// measured against.
//
// Every call, whatever its service, reaches one handler registered with
// grpc.UnknownServiceHandler, which forwards it to --backend frame by frame
// with a raw codec: messages are never decoded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// main repeats src/internal/command.Main, which this module cannot import.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "plainproxy:", err)
		os.Exit(1)
	}
}

// run parses args, serves on --listen and forwards to --backend until ctx
// ends. It prints one line with the bound address to stderr when serving.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("plainproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		listen  = fs.String("listen", "127.0.0.1:50053", "gRPC `address` to serve on")
		backend = fs.String("backend", "127.0.0.1:50051", "gRPC `address` every call is forwarded to (plaintext)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := grpc.NewClient(*backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial backend %s: %w", *backend, err)
	}
	defer conn.Close()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	server := newServer(conn)
	fmt.Fprintf(stderr, "plainproxy: serving on %s, backend %s\n", lis.Addr(), *backend)
	go func() {
		<-ctx.Done()
		server.GracefulStop()
	}()
	if err := server.Serve(lis); err != nil {
		return fmt.Errorf("serve on %s: %w", lis.Addr(), err)
	}
	return nil
}

// newServer returns a server that forwards every call to backend.
func newServer(backend *grpc.ClientConn) *grpc.Server {
	return grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(forwarder(backend)),
	)
}
