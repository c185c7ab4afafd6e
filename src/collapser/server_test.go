package collapser

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// heldGreeter is a Greeter whose SayHello waits for hold to close, then
// answers "hello <name>" with a header and a trailer that say the call's
// number.
func heldGreeter(hold <-chan struct{}) *testkit.Greeter {
	return &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		<-hold
		n := testkit.CallNumber(ctx)
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-call", string(rune('0'+n))))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-served", "yes"))
		return &hellov1.HelloReply{Message: "hello " + req.GetName(), Call: n}, nil
	}}
}

// reply is what a caller got of one SayHello.
type reply struct {
	msg             *hellov1.HelloReply
	header, trailer metadata.MD
	err             error
}

// goSayHello calls SayHello for name with authorization auth ("" for none)
// on its own goroutine.
func goSayHello(ctx context.Context, client hellov1.GreeterClient, name, auth string) <-chan reply {
	done := make(chan reply, 1)
	go func() { done <- sayHelloAs(ctx, client, name, auth) }()
	return done
}

// sayHelloAs calls SayHello for name with authorization auth ("" for none).
func sayHelloAs(ctx context.Context, client hellov1.GreeterClient, name, auth string) reply {
	if auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	var r reply
	r.msg, r.err = client.SayHello(ctx, &hellov1.HelloRequest{Name: name}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	return r
}

// held starts n identical calls, and waits until all wait for the one
// handler run.
func held(t *testing.T, c *Collapser, client hellov1.GreeterClient, n int, name, auth string) []<-chan reply {
	t.Helper()
	ctx := testkit.Context(t)
	calls := make([]<-chan reply, n)
	for i := range calls {
		calls[i] = goSayHello(ctx, client, name, auth)
	}
	testkit.WaitFor(t, "every call to wait for the run", func() bool { return c.proxy.Stats().Waiters == n })
	return calls
}

func TestServer_CallersWithOtherCredentialsNeverShare(t *testing.T) {
	hold := make(chan struct{})
	close(hold)
	g := heldGreeter(hold)
	c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
	client := serveGreeter(t, c, g)
	ctx := testkit.Context(t)
	for _, auth := range []string{"Bearer ann", "Bearer bob", "Bearer ann", "", "Bearer bob", ""} {
		if r := sayHelloAs(ctx, client, "x", auth); r.err != nil {
			t.Fatalf("SayHello as %q: %v", auth, r.err)
		}
	}
	if got := g.Calls.SayHello.Load(); got != 3 {
		t.Errorf("handler runs = %d, want 3: one per credential (ann, bob, none)", got)
	}
}

func TestServer_AnswerIsEveryCallersOwn(t *testing.T) {
	// The handler keeps the message it answered and changes it after; an
	// interceptor before the collapser changes each caller's reply to name
	// its caller. Run with -race: no caller sees another's change, and none
	// sees the handler's.
	var kept *hellov1.HelloReply
	var mu sync.Mutex
	g := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		mu.Lock()
		defer mu.Unlock()
		kept = &hellov1.HelloReply{Message: "hello " + req.GetName()}
		return kept, nil
	}}
	c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", func(o *Options) {
		o.Keys.IgnoreHeaders = []string{"x-caller"} // the callers share one answer
	})
	mark := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		out, err := handler(ctx, req)
		if r, ok := out.(*hellov1.HelloReply); ok {
			r.Message += " for " + strings.Join(metadata.ValueFromIncomingContext(ctx, "x-caller"), ",")
		}
		return out, err
	}
	addr := g.Start(t, grpc.ChainUnaryInterceptor(mark, c.UnaryServerInterceptor()))
	client := hellov1.NewGreeterClient(dial(t, addr))
	ctx := testkit.Context(t)
	if r := sayHelloAs(ctx, client, "ann", ""); r.err != nil {
		t.Fatal(r.err)
	}
	mu.Lock()
	kept.Message = "changed by the handler"
	mu.Unlock()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := strconv.Itoa(i)
			r := sayHelloAs(metadata.AppendToOutgoingContext(ctx, "x-caller", id), client, "ann", "")
			if want := "hello ann for " + id; r.err != nil || r.msg.GetMessage() != want {
				t.Errorf("reply = %v, %v; want %s", r.msg, r.err, want)
			}
		})
	}
	wg.Wait()
	if got := g.Calls.SayHello.Load(); got != 1 {
		t.Errorf("handler runs = %d, want 1", got)
	}
}

func TestServer_WhatIsNotCollapsedRunsTheHandlerEveryTime(t *testing.T) {
	tests := []struct {
		name, policy string
		private      bool // the handler's answer sets a cookie
		noStore      bool // the handler's answer says no-store
	}{
		{name: "a method the policy never collapses", policy: "methods:\n  - name: " + sayHello + "\n    collapse: false\n"},
		{name: "a private answer", policy: "default:\n  collapse: true\n  cacheTTL: 1h\n", private: true},
		{name: "an answer that says no-store", policy: "default:\n  collapse: true\n  cacheTTL: 1h\n", noStore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
				switch {
				case tt.private:
					_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", "session=1"))
				case tt.noStore:
					_ = grpc.SetHeader(ctx, metadata.Pairs("cache-control", "no-store"))
				}
				return &hellov1.HelloReply{Message: "hello"}, nil
			}}
			c, _ := newCollapser(t, tt.policy, nil)
			client := serveGreeter(t, c, g)
			for range 3 {
				if r := sayHelloAs(testkit.Context(t), client, "x", ""); r.err != nil {
					t.Fatal(r.err)
				}
			}
			if got := g.Calls.SayHello.Load(); got != 3 {
				t.Errorf("handler runs = %d, want 3", got)
			}
		})
	}
}

func TestServer_ErrorsAreEveryCallersAndNotKept(t *testing.T) {
	g := &testkit.Greeter{SayHello: func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		return nil, status.Error(codes.NotFound, "no such greeting")
	}}
	c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
	client := serveGreeter(t, c, g)
	for range 2 {
		r := sayHelloAs(testkit.Context(t), client, "x", "")
		if status.Code(r.err) != codes.NotFound || !strings.Contains(r.err.Error(), "no such greeting") {
			t.Errorf("err = %v, want the handler's NOT_FOUND", r.err)
		}
	}
	if got := g.Calls.SayHello.Load(); got != 2 {
		t.Errorf("handler runs = %d, want 2: an error is not kept unless the policy says so", got)
	}
}

func TestServer_PurgeOnTheApplicationsOwnServer(t *testing.T) {
	g := &testkit.Greeter{
		SayHello: func(context.Context, *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			return &hellov1.HelloReply{Message: "hello"}, nil
		},
	}
	c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
	g.Services = func(s *grpc.Server) { c.RegisterAdmin(s) }
	addr := g.Start(t, grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor()))
	conn := dial(t, addr)
	client := hellov1.NewGreeterClient(conn)
	ctx := testkit.Context(t)
	for range 2 {
		if r := sayHelloAs(ctx, client, "x", ""); r.err != nil {
			t.Fatal(r.err)
		}
	}
	purge, err := adminv1.NewCacheClient(conn).Purge(ctx, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}})
	if err != nil || purge.GetEntries() != 1 {
		t.Fatalf("Purge = %v, %v; want 1 entry taken back", purge, err)
	}
	if r := sayHelloAs(ctx, client, "x", ""); r.err != nil {
		t.Fatal(r.err)
	}
	if got := g.Calls.SayHello.Load(); got != 2 {
		t.Errorf("handler runs = %d, want 2: the purge took the kept answer back", got)
	}
}

func TestNew_BadSettingsAreErrorsNamingThem(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		change func(*Options)
		want   string
	}{
		{name: "policy file", policy: "default:\n  collapse: sometimes\n", want: "policy"},
		{name: "key headers", change: func(o *Options) { o.Keys.IgnoreHeaders = []string{"authorization"} }, want: "IgnoreHeaders"},
		{name: "admin token file", change: func(o *Options) { o.AdminTokenFile = "/nonexistent/token" }, want: "AdminTokenFile"},
		{name: "engine", change: func(o *Options) { o.Engine.MaxBackendCalls = -1 }, want: "MaxBackendCalls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := tryCollapser(t, tt.policy, tt.change, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestServer_PurgesOnTheApplicationsServerNeedTheTokenWhenThereIsOne(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	c, reg := newCollapser(t, "", func(o *Options) { o.AdminTokenFile = testkit.SecretFile(t, token) })
	g := &testkit.Greeter{Services: func(s *grpc.Server) { c.RegisterAdmin(s) }}
	conn := dial(t, g.Start(t, grpc.ChainUnaryInterceptor(c.UnaryServerInterceptor())))
	ctx := testkit.Context(t)
	req := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}
	if _, err := adminv1.NewCacheClient(conn).Purge(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Purge without the token: %v, want UNAUTHENTICATED", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, err := adminv1.NewCacheClient(conn).Purge(ctx, req); err != nil {
		t.Errorf("Purge with the token: %v", err)
	}
	// The engine's own purges are not the application's calls.
	if got := outcomes(t, reg); len(got) != 0 {
		t.Errorf("requests counted = %v, want none", got)
	}
}

func TestRun_ReloadsThePolicyFile(t *testing.T) {
	hold := make(chan struct{})
	close(hold)
	g := heldGreeter(hold)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("default:\n  collapse: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, reg := newCollapser(t, "", func(o *Options) { o.PolicyFile = policy })
	client := serveGreeter(t, c, g)
	ctx, cancel := context.WithCancel(testkit.Context(t))
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		c.Run(ctx)
	}()
	defer func() {
		cancel()
		testkit.Recv(t, "Run to return", ran)
	}()
	call := func() {
		t.Helper()
		if r := sayHelloAs(ctx, client, "ann", ""); r.err != nil {
			t.Fatal(r.err)
		}
	}
	call()
	call()
	if err := os.WriteFile(policy, []byte("default:\n  collapse: true\n  cacheTTL: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the policy to be reloaded", func() bool {
		for _, m := range series(t, reg, "collapser_policy_reloads_total") {
			if label(m, "result") == "success" && m.GetCounter().GetValue() == 1 {
				return true
			}
		}
		return false
	})
	call()
	call()
	if got := g.Calls.SayHello.Load(); got != 3 {
		t.Errorf("handler runs = %d, want 3: two passed through, then one collapsed", got)
	}
}

func TestInterceptors_TellTheCallerHowItsCallWasServed(t *testing.T) {
	for _, front := range []front{frontServer, frontClient} {
		t.Run(string(front), func(t *testing.T) {
			g := answerAsAsked()
			c, _ := newCollapser(t, "default:\n  collapse: true\n  cacheTTL: 1h\n", nil)
			var client hellov1.GreeterClient
			if front == frontClient {
				client = clientOf(t, c, g.Start(t))
			} else {
				client = serveGreeter(t, c, g)
			}
			ctx := testkit.Context(t)
			for _, want := range []string{"collapser; fwd=miss; stored; ttl=", "collapser; hit; ttl="} {
				r := sayHelloAs(ctx, client, "ann", "")
				if got := r.header.Get("cache-status"); r.err != nil || len(got) != 1 || !strings.HasPrefix(got[0], want) {
					t.Errorf("cache-status %q (%v), want one entry %s…", got, r.err, want)
				}
			}
		})
	}
}

func TestServer_TheHandlerSeesTheCallersMetadataAsSent(t *testing.T) {
	// The interceptor keys a call by grpc-go's own map of its metadata,
	// which the handler reads too, from its leader's context: it sees
	// every header it would see without the interceptor, transport headers
	// included.
	names := func(ctx context.Context, _ *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return &hellov1.HelloReply{Message: strings.Join(slices.Sorted(maps.Keys(md)), " ")}, nil
	}
	plain := hellov1.NewGreeterClient(dial(t, (&testkit.Greeter{SayHello: names}).Start(t)))
	c, _ := newCollapser(t, "default:\n  collapse: true\n", nil)
	collapsed := serveGreeter(t, c, &testkit.Greeter{SayHello: names})
	ctx := metadata.AppendToOutgoingContext(testkit.Context(t), "x-a", "1")
	want, err := plain.SayHello(ctx, &hellov1.HelloRequest{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := collapsed.SayHello(ctx, &hellov1.HelloRequest{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetMessage() != want.GetMessage() {
		t.Errorf("with the interceptor the handler sees the headers %q, want %q as without it", got.GetMessage(), want.GetMessage())
	}
}

func TestServer_TheHandlersOwnCallsSendOnlyWhatItAdds(t *testing.T) {
	// A run is shared: what an interceptor before this one set to go out
	// with its leader's calls does not go out with the handler's.
	sends := func(ctx context.Context, _ *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		md, _ := metadata.FromOutgoingContext(ctx)
		return &hellov1.HelloReply{Message: strings.Join(slices.Sorted(maps.Keys(md)), " ")}, nil
	}
	c, _ := newCollapser(t, "default:\n  collapse: true\n", nil)
	leaderSends := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(metadata.AppendToOutgoingContext(ctx, "x-leader", "ann"), req)
	}
	addr := (&testkit.Greeter{SayHello: sends}).Start(t, grpc.ChainUnaryInterceptor(leaderSends, c.UnaryServerInterceptor()))
	got, err := hellov1.NewGreeterClient(dial(t, addr)).SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetMessage() != "" {
		t.Errorf("the handler's calls would send %q, want nothing", got.GetMessage())
	}
}
