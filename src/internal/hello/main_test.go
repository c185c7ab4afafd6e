package hello

import (
	"errors"
	"net"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testClients are clients of one in-process hello server on 127.0.0.1:0.
type testClients struct {
	greeter hellov1.GreeterClient
	stats   hellov1.StatsClient
}

// startServer serves a Server built from o until the test ends.
func startServer(t *testing.T, o Options) testClients {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	s.Register(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close conn: %v", err)
		}
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	return testClients{greeter: hellov1.NewGreeterClient(conn), stats: hellov1.NewStatsClient(conn)}
}
