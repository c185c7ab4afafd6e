package methodkind

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
)

var greeterKinds = map[string]Kind{
	sayHello:      Unary,
	streamHellos:  ServerStreaming,
	collectHellos: ClientStreaming,
	chat:          BidiStreaming,
}

func TestResolver_LearnsKindsFromReflection(t *testing.T) {
	tests := []struct {
		name     string
		register func(*grpc.Server)
		version  string
	}{
		{"v1 and v1alpha", registerBoth, "v1"},
		{"v1alpha only falls back", registerV1Alpha, "v1alpha"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logrecorder.Recorder{}
			r, err := NewResolver(Options{Backend: startBackend(t, tt.register), UseReflection: true, Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			runResolver(t, r)
			testkit.WaitFor(t, "kinds learned", func() bool { return logs.Count(slog.LevelInfo, "learned method kinds", "reflection", tt.version) == 1 })
			for m, k := range greeterKinds {
				if got := r.Method(m).Kind; got != k {
					t.Errorf("Kind(%s) = %v, want %v", m, got, k)
				}
			}
			if got := r.Method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo").Kind; got != BidiStreaming {
				t.Errorf("reflection's own method: Kind = %v, want bidi_streaming", got)
			}
			for m, want := range map[string]protoreflect.FullName{
				sayHello:                    "hello.v1.HelloRequest",
				"/hello.v1.Stats/GetCounts": "hello.v1.GetCountsRequest",
				"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": "grpc.reflection.v1alpha.ServerReflectionRequest",
			} {
				if got := requestName(r.Method(m)); got != want {
					t.Errorf("Method(%s).Request = %q, want %q", m, got, want)
				}
			}
		})
	}
}

func TestResolver_BackendWithoutReflectionLeavesMethodsUnknownAndLogsItOnce(t *testing.T) {
	logs := &logrecorder.Recorder{}
	r, err := NewResolver(Options{Backend: startBackend(t, nil), UseReflection: true, Logger: slog.New(logs), RefreshInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "missing reflection reported", func() bool { return logs.Count(slog.LevelWarn, "method kinds cannot be learned", "", "") == 1 })
	testkit.WaitFor(t, "ready: the backend said it serves no reflection", func() bool { return r.Ready() == nil })
	for range 3 {
		if got := r.Method(sayHello).Kind; got != Unknown {
			t.Fatalf("Kind(%s) = %v, want unknown", sayHello, got)
		}
	}
	// Each lookup woke Run; a refresh after the wake-ups must not repeat the warning.
	if n := logs.Count(slog.LevelWarn, "method kinds cannot be learned", "", ""); n != 1 {
		t.Errorf("missing reflection logged %d times, want once", n)
	}
}

func TestResolver_LearnsFromBackendThatStartsAfterRun(t *testing.T) {
	lis := testkit.Listen(t, "127.0.0.1:0")
	var up atomic.Bool
	cc := dial(t, lis.Addr().String(), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		if !up.Load() {
			return nil, errors.New("backend not started yet")
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}))
	logs := &logrecorder.Recorder{}
	r, err := NewResolver(Options{Backend: cc, UseReflection: true, Logger: slog.New(logs), RefreshInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "first refresh to fail", func() bool { return logs.Count(slog.LevelInfo, "cannot learn method kinds", "", "") == 1 })
	if got := r.Method(sayHello).Kind; got != Unknown {
		t.Fatalf("before the backend starts: Kind = %v, want unknown", got)
	}
	if r.Ready() == nil {
		t.Error("Ready before reflection answered, want an error: calls would pass through")
	}

	(&testkit.Greeter{Services: registerBoth}).Serve(t, lis)
	up.Store(true)
	testkit.WaitFor(t, "SayHello learned", func() bool { return r.Method(sayHello).Kind == Unary })
	testkit.WaitFor(t, "ready", func() bool { return r.Ready() == nil })
}

// changingServices hides the server's services until shown, like a backend
// whose reflection learns of services later.
type changingServices struct {
	srv   *grpc.Server
	shown atomic.Bool
}

func (c *changingServices) GetServiceInfo() map[string]grpc.ServiceInfo {
	if !c.shown.Load() {
		return nil
	}
	return c.srv.GetServiceInfo()
}

// refreshLog records when the backend saw each reflection stream start.
type refreshLog struct {
	mu     sync.Mutex
	starts []time.Time
}

func (l *refreshLog) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName {
		l.mu.Lock()
		l.starts = append(l.starts, time.Now())
		l.mu.Unlock()
	}
	return handler(srv, ss)
}

func (l *refreshLog) snapshot() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.starts)
}

func TestResolver_UnknownMethodWakesRateLimitedRefresh(t *testing.T) {
	const interval = 100 * time.Millisecond
	services := &changingServices{}
	refreshes := &refreshLog{}
	cc := startBackend(t, func(s *grpc.Server) {
		services.srv = s
		reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(reflection.ServerOptions{Services: services}))
	}, grpc.StreamInterceptor(refreshes.intercept))
	r, err := NewResolver(Options{Backend: cc, UseReflection: true, RefreshInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "the initial refresh", func() bool { return len(refreshes.snapshot()) == 1 })

	services.shown.Store(true)
	testkit.WaitFor(t, "SayHello learned after a wake-up", func() bool { return r.Method(sayHello).Kind == Unary })

	// Keep asking for an unknown method: refreshes follow, one interval apart.
	testkit.WaitFor(t, "four refreshes", func() bool {
		r.Method("/hello.v1.Greeter/Missing")
		return len(refreshes.snapshot()) >= 4
	})
	// A refresh starts at least interval after the previous one ended.
	starts := refreshes.snapshot()
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < interval {
			t.Errorf("refresh %d started %v after the previous one, want at least %v", i, gap, interval)
		}
	}
}

func TestResolver_ExplicitKindsWinOverReflection(t *testing.T) {
	// The descriptor set claims SayHello is server-streaming; reflection says unary.
	path := writeDescriptorSet(t, helloFile(func(f *descriptorpb.FileDescriptorProto) {
		f.Service[0].Method[0].ServerStreaming = proto.Bool(true)
	}))
	logs := &logrecorder.Recorder{}
	r, err := NewResolver(Options{Backend: startBackend(t, registerBoth), UseReflection: true, DescriptorSetPath: path, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "kinds learned", func() bool { return logs.Count(slog.LevelInfo, "learned method kinds", "", "") == 1 })
	if got := r.Method(sayHello).Kind; got != ServerStreaming {
		t.Errorf("Kind(%s) = %v, want the descriptor set's server_streaming", sayHello, got)
	}
	if n := logs.Count(slog.LevelWarn, "explicit method kind overrides", "method", sayHello); n != 1 {
		t.Errorf("override logged %d times, want once", n)
	}
}

func TestResolver_AMethodListedByNameTakesItsRequestFromReflection(t *testing.T) {
	// The list says StreamHellos is unary, against reflection: a request
	// reflection describes for another kind is not taken.
	const streamHellos = "/hello.v1.Greeter/StreamHellos"
	logs := &logrecorder.Recorder{}
	r, err := NewResolver(Options{Backend: startBackend(t, registerBoth), UseReflection: true,
		UnaryMethods: []string{sayHello, streamHellos}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Method(sayHello); got.Kind != Unary || got.Request != nil {
		t.Fatalf("before reflection answered: Method(%s) = %+v, want unary without a request", sayHello, got)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "kinds learned", func() bool { return logs.Count(slog.LevelInfo, "learned method kinds", "", "") == 1 })
	if got := requestName(r.Method(sayHello)); got != "hello.v1.HelloRequest" {
		t.Errorf("Method(%s).Request = %q, want reflection's hello.v1.HelloRequest", sayHello, got)
	}
	if got := r.Method(streamHellos); got.Kind != Unary || got.Request != nil {
		t.Errorf("Method(%s) = %+v, want the list's unary, without reflection's server-streaming request", streamHellos, got)
	}
}

func TestResolver_RunWithoutReflectionReturnsWhenContextEnds(t *testing.T) {
	r, err := NewResolver(Options{UnaryMethods: []string{sayHello}})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r) // checks, when the test ends, that Run returns
	r.Method(chat)    // wakes nobody, must not block
	if err := r.Ready(); err != nil {
		t.Errorf("Ready without reflection: %v, want nil", err)
	}
}

func TestAnswered_OnlyAConnectionFailureLeavesReflectionUnanswered(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{status.Error(codes.Canceled, "stopping"), false},
		{status.Error(codes.Internal, "broken descriptor"), true},
		{status.Error(codes.PermissionDenied, "reflection needs a token"), true},
	} {
		if got := answered(tt.err); got != tt.want {
			t.Errorf("answered(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestResolver_KnowsTheProcesssOwnDescriptors(t *testing.T) {
	r, err := NewResolver(Options{Files: protoregistry.GlobalFiles})
	if err != nil {
		t.Fatal(err)
	}
	for method, kind := range greeterKinds {
		if got := r.Method(method).Kind; got != kind {
			t.Errorf("Kind(%s) = %v, want %v", method, got, kind)
		}
	}
	if got := r.Method(sayHello).Idempotency; got != NoSideEffects {
		t.Errorf("Idempotency(%s) = %v, want no side effects", sayHello, got)
	}
	// The registry's own descriptor, the one generated code uses.
	if got, want := r.Method(sayHello).Request, (&hellov1.HelloRequest{}).ProtoReflect().Descriptor(); got != want {
		t.Errorf("Request(%s) = %v, want the generated hello.v1.HelloRequest", sayHello, got)
	}
	if _, err := NewResolver(Options{Files: protoregistry.GlobalFiles, UnaryMethods: []string{streamHellos}}); err == nil || !strings.Contains(err.Error(), "declares it server_streaming") {
		t.Errorf("a listed streaming method: err = %v, want one naming its kind", err)
	}
}
