package hello

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGetCounts_CountsEveryGreeterRPCButNotStatsCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startServer(t, Options{Registerer: reg})
	ctx := testkit.Context(t)
	for range 2 {
		if _, err := c.greeter.SayHello(ctx, &hellov1.HelloRequest{}); err != nil {
			t.Fatalf("SayHello: %v", err)
		}
	}
	stream, err := c.greeter.StreamHellos(ctx, &hellov1.HelloRequest{Count: 5})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	if _, err := drain(stream.Recv); err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	if _, err := c.stats.GetCounts(ctx, &hellov1.GetCountsRequest{}); err != nil {
		t.Fatalf("GetCounts: %v", err)
	}

	got, err := c.stats.GetCounts(ctx, &hellov1.GetCountsRequest{})
	if err != nil {
		t.Fatalf("GetCounts: %v", err)
	}
	want := map[string]int64{
		hellov1.Greeter_SayHello_FullMethodName:      2,
		hellov1.Greeter_StreamHellos_FullMethodName:  1,
		hellov1.Greeter_CollectHellos_FullMethodName: 0,
		hellov1.Greeter_Chat_FullMethodName:          0,
		hellov1.Greeter_GetGreeting_FullMethodName:   0,
		hellov1.Greeter_SetGreeting_FullMethodName:   0,
	}
	if got.GetTotal() != 3 || len(got.GetByMethod()) != len(want) {
		t.Errorf("GetCounts = %v, want total 3 and %v", got, want)
	}
	for m, n := range want {
		if got.GetByMethod()[m] != n {
			t.Errorf("by_method[%s] = %d, want %d", m, got.GetByMethod()[m], n)
		}
	}

	wantMetric := `
# HELP hello_requests_total Greeter requests the hello backend received, by full gRPC method name.
# TYPE hello_requests_total counter
hello_requests_total{method="/hello.v1.Greeter/Chat"} 0
hello_requests_total{method="/hello.v1.Greeter/CollectHellos"} 0
hello_requests_total{method="/hello.v1.Greeter/GetGreeting"} 0
hello_requests_total{method="/hello.v1.Greeter/SayHello"} 2
hello_requests_total{method="/hello.v1.Greeter/SetGreeting"} 0
hello_requests_total{method="/hello.v1.Greeter/StreamHellos"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantMetric), "hello_requests_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("GatherAndLint = %v, %v; want no problems", problems, err)
	}
}

func TestNew_RejectsDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Registerer: reg}); err != nil {
		t.Fatalf("first New: %v", err)
	}
	if _, err := New(Options{Registerer: reg}); err == nil {
		t.Error("second New on one registry succeeded, want duplicate registration error")
	}
}
