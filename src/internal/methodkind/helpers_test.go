package methodkind

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	sayHello      = "/hello.v1.Greeter/SayHello"
	streamHellos  = "/hello.v1.Greeter/StreamHellos"
	collectHellos = "/hello.v1.Greeter/CollectHellos"
	chat          = "/hello.v1.Greeter/Chat"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startBackend serves a Greeter, every method unimplemented, plus
// register's services, and returns a client connection to it.
func startBackend(t *testing.T, register func(*grpc.Server), opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	g := &testkit.Greeter{Services: register}
	return dial(t, g.Start(t, opts...))
}

// dial connects to addr with a short reconnect backoff, so a backend that
// comes up late is reached quickly.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// registerBoth registers reflection v1 and v1alpha, like most backends.
func registerBoth(s *grpc.Server) { reflection.Register(s) }

// registerV1Alpha registers only the v1alpha reflection service, like an
// older backend.
func registerV1Alpha(s *grpc.Server) {
	reflectionv1alpha.RegisterServerReflectionServer(s, reflection.NewServer(reflection.ServerOptions{Services: s}))
}

// newFiles builds files into a registry, as a backend's may be: an import
// missing from files is left a placeholder.
func newFiles(t *testing.T, files ...*descriptorpb.FileDescriptorProto) *protoregistry.Files {
	t.Helper()
	reg, err := protodesc.FileOptions{AllowUnresolvable: true}.NewFiles(&descriptorpb.FileDescriptorSet{File: files})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// startReflection starts a backend whose reflection v1 lists every service
// of files, and describes them from files alone; it returns a client
// connection to it.
func startReflection(t *testing.T, files *protoregistry.Files, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	return startBackend(t, func(s *grpc.Server) {
		reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(reflection.ServerOptions{Services: fileServices{files}, DescriptorResolver: files}))
	}, opts...)
}

// fileServices lists every service its files declare as served.
type fileServices struct{ files *protoregistry.Files }

func (s fileServices) GetServiceInfo() map[string]grpc.ServiceInfo {
	info := map[string]grpc.ServiceInfo{}
	s.files.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			info[string(f.Services().Get(i).FullName())] = grpc.ServiceInfo{}
		}
		return true
	})
	return info
}

// requestName returns the full name of m's Request, "" when it is nil.
func requestName(m Method) protoreflect.FullName {
	if m.Request == nil {
		return ""
	}
	return m.Request.FullName()
}

// runResolver runs r.Run until the end of the test and checks that it returns.
func runResolver(t *testing.T, r *Resolver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		testkit.Recv(t, "Run to return after its context ended", done)
	})
}
