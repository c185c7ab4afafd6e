package proxy_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestNew_RejectsIncompleteOptions(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rule, err := requestkey.NewRule(requestkey.RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	group := collapse.New(collapse.Options[*proxy.Response]{})
	defer group.Close()
	valid := proxy.Options{Backend: conn, Group: group, Kinds: greeterKinds, KeyRule: rule}
	if _, err := proxy.New(valid); err != nil {
		t.Fatalf("New(valid options): %v", err)
	}
	tests := map[string]func(*proxy.Options){
		"no backend":               func(o *proxy.Options) { o.Backend = nil },
		"no group":                 func(o *proxy.Options) { o.Group = nil },
		"no kinds":                 func(o *proxy.Options) { o.Kinds = nil },
		"no key rule":              func(o *proxy.Options) { o.KeyRule = nil },
		"negative backend timeout": func(o *proxy.Options) { o.BackendTimeout = -1 },
		"negative max recv":        func(o *proxy.Options) { o.MaxRecvMsgBytes = -1 },
		"negative max send":        func(o *proxy.Options) { o.MaxSendMsgBytes = -1 },
	}
	for name, breakIt := range tests {
		t.Run(name, func(t *testing.T) {
			o := valid
			breakIt(&o)
			if _, err := proxy.New(o); err == nil {
				t.Error("New succeeded, want an error")
			}
		})
	}
}

func TestServerOptions_HealthIsServedOnTheSameServer(t *testing.T) {
	b := startBackend(t, nil)
	s := startSidecar(t, b.addr, sidecarConfig{})

	resp, err := healthpb.NewHealthClient(s.conn).Check(testkit.Context(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health Check = %v, %v; want SERVING", resp, err)
	}
}

func TestServerOptions_PlainServerAndClientKeepStandardProtobuf(t *testing.T) {
	b := startBackend(t, nil)
	startSidecar(t, b.addr, sidecarConfig{}) // the proxy's codec exists in this process

	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply, err := hellov1.NewGreeterClient(conn).SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "direct"})
	if err != nil || reply.GetMessage() != "hello direct" {
		t.Errorf("direct SayHello = %v, %v; want hello direct", reply, err)
	}
}
