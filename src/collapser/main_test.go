package collapser

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Method names of the hello Greeter the tests call.
const (
	sayHello = "/hello.v1.Greeter/SayHello"
)

// newCollapser returns a Collapser of DefaultOptions with the policy file
// policyYAML ("" for none), changed by change (when not nil), whose
// metrics are registered on the registry returned.
func newCollapser(t testing.TB, policyYAML string, change func(*Options)) (*Collapser, *prometheus.Registry) {
	t.Helper()
	c, reg, err := tryCollapser(t, policyYAML, change, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

// tryCollapser is newCollapser that returns New's error, with the backend
// of the engine's own server (nil: none, as New).
func tryCollapser(t testing.TB, policyYAML string, change func(*Options), backend grpc.ClientConnInterface) (*Collapser, *prometheus.Registry, error) {
	t.Helper()
	o := DefaultOptions()
	if policyYAML != "" {
		o.PolicyFile = filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(o.PolicyFile, []byte(policyYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	if change != nil {
		change(&o)
	}
	c, err := build(o, backend)
	return c, reg, err
}

// serveGreeter serves g with c's server interceptor, and returns a client
// of it.
func serveGreeter(t testing.TB, c *Collapser, g *testkit.Greeter) hellov1.GreeterClient {
	t.Helper()
	addr := g.Start(t, grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor()))
	return hellov1.NewGreeterClient(dial(t, addr))
}

// serveEngine serves c's engine as the sidecar serves it (its own server,
// before the backend c was built with) until the test ends, and returns
// its address.
func serveEngine(t testing.TB, c *Collapser) string {
	t.Helper()
	srv := grpc.NewServer(c.proxy.ServerOptions()...)
	lis := testkit.Listen(t, "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// dial returns a plain-text client connection to addr, closed when the
// test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// outcomes returns the requests counted on reg (collapser_requests_total),
// by outcome, over every method and code.
func outcomes(t testing.TB, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, m := range series(t, reg, "collapser_requests_total") {
		if n := int(m.GetCounter().GetValue()); n > 0 {
			got[label(m, "outcome")] += n
		}
	}
	return got
}

// series returns the series of the metric named name on reg.
func series(t testing.TB, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// label returns the value of m's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
