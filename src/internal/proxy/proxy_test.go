package proxy_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
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
	valid := proxy.Options{Backend: conn, Rules: passAll{}, KeyRule: rule}
	if _, err := proxy.New(valid); err != nil {
		t.Fatalf("New(valid options): %v", err)
	}
	tests := map[string]struct {
		breakIt func(*proxy.Options)
		want    string
	}{
		"no rules":                {func(o *proxy.Options) { o.Rules = nil }, "Options.Rules is required"},
		"no key rule":             {func(o *proxy.Options) { o.KeyRule = nil }, "Options.KeyRule is required"},
		"negative receive":        {func(o *proxy.Options) { o.ReceiveTimeout = -1 }, "Options.ReceiveTimeout -1 is negative"},
		"negative max recv":       {func(o *proxy.Options) { o.MaxRecvMsgBytes = -1 }, "Options.MaxRecvMsgBytes -1 is negative"},
		"negative max send":       {func(o *proxy.Options) { o.MaxSendMsgBytes = -1 }, "Options.MaxSendMsgBytes -1 is negative"},
		"negative backend calls":  {func(o *proxy.Options) { o.MaxBackendCalls = -1 }, "Options.MaxBackendCalls -1 is negative"},
		"negative cache bytes":    {func(o *proxy.Options) { o.Cache.MaxBytes = -1 }, "collapse: a negative limit in {MaxEntries:0 MaxBytes:-1"},
		"negative stream bytes":   {func(o *proxy.Options) { o.Streams.MaxHeldBytes = -1 }, "replay: a negative limit in {MaxBytes:0 MaxMessages:0 MaxHeldBytes:-1}"},
		"bad private header name": {func(o *proxy.Options) { o.PrivateHeaders = []string{"x-user;id"} }, `PrivateHeaders[0] "x-user;id"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o := valid
			tt.breakIt(&o)
			if _, err := proxy.New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestServerOptions_HealthIsServedOnTheSameServer(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{})

	resp, err := healthpb.NewHealthClient(s.conn).Check(testkit.Context(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health Check = %v, %v; want SERVING", resp, err)
	}
}

func TestServerOptions_PlainServerAndClientKeepStandardProtobuf(t *testing.T) {
	b := startBackend(t, nil)
	startProxy(t, b.addr, proxyConfig{}) // the proxy's codec exists in this process

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

// passAll passes every method through.
type passAll struct{}

func (passAll) Rule(string) policy.Rule { return policy.Rule{} }
