package proxy_test

import (
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// sendRaw opens a stream for method on cc, sends n requests, half-closes and
// returns the status the call ended with.
func sendRaw(t *testing.T, cc grpc.ClientConnInterface, method string, n int) *status.Status {
	t.Helper()
	stream, err := cc.NewStream(testkit.Context(t), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := stream.SendMsg(&hellov1.HelloRequest{Name: "n", Count: 1}); err != nil {
			break // the status comes from RecvMsg
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if err := stream.RecvMsg(&hellov1.HelloReply{}); err != nil {
			if err == io.EOF {
				return nil
			}
			return status.Convert(err)
		}
	}
}

func TestCardinalityViolationsAreAnsweredAsGrpcGoDoes(t *testing.T) {
	b := startBackend(t, nil)
	direct, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	proxies := map[string]*runningProxy{
		"collapsed":      startProxy(t, b.addr, proxyConfig{}),
		"passed through": startProxy(t, b.addr, proxyConfig{policy: &policy.Defaults{Collapse: policy.Never, Timeout: testkit.DefaultTimeout}}),
	}
	for path, s := range proxies {
		for _, method := range []string{methodSayHello, methodStreamHellos} {
			for _, n := range []int{0, 2} {
				want := sendRaw(t, direct, method, n)
				got := sendRaw(t, s.conn, method, n)
				if want == nil || got.Code() != want.Code() || got.Message() != want.Message() {
					t.Errorf("%s %s with %d requests: got %v, want grpc-go's own %v", path, method, n, got, want)
				}
			}
			if got := sendRaw(t, s.conn, method, 1); got != nil {
				t.Errorf("%s %s with 1 request: %v", path, method, got)
			}
		}
	}
}
