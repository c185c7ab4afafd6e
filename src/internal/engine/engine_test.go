package engine

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/collapser/collapser/src/api/hello/v1" // registers the Greeter's descriptors
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// valid returns options New accepts: the library's, without a backend.
func valid() Options {
	return Options{
		Policy: policy.Defaults{CacheTTL: policy.DefaultCacheTTL, Timeout: policy.DefaultTimeout},
		Kinds:  methodkind.Options{Files: protoregistry.GlobalFiles},
	}
}

func TestNew_AssemblesThePartsOnOneRecorder(t *testing.T) {
	e, err := New(valid())
	if err != nil {
		t.Fatal(err)
	}
	const sayHello = "/hello.v1.Greeter/SayHello"
	if got := e.Rules.Rule(sayHello).Action; got != policy.Collapse {
		t.Errorf("rule of %s = %v, want collapse: the descriptors the process registered say it has no side effects", sayHello, got)
	}
	src := e.Sources()
	if src.Stats == nil || src.Streams == nil || src.Methods == nil {
		t.Errorf("Sources = %+v, want the proxy's and the rules'", src)
	}
	if _, ok := src.Methods()[sayHello]; !ok {
		t.Errorf("Sources.Methods lacks %s", sayHello)
	}
}

func TestNew_BadSettingsAreErrorsNamingTheirPart(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"keys", func(o *Options) { o.Keys.KeyHeaders = []string{":path"} }, "key headers:"},
		{"kinds", func(o *Options) { o.Kinds.UseReflection = true }, "method kinds:"},
		{"policy", func(o *Options) { o.Policy.Timeout = 0 }, "timeout"},
		{"policy file", func(o *Options) { o.PolicyFile = "/nonexistent/policy.yaml" }, "policy file"},
		{"proxy", func(o *Options) { o.Proxy.MaxBackendCalls = -1 }, "proxy:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.change(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
