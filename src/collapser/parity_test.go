package collapser

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// answerAsAsked is a Greeter whose SayHello answers as its request's name
// asks: "cookie" sets a cookie (a private answer), "cc=<value>" sends
// cache-control <value>, "missing" fails with NOT_FOUND; any other name is
// greeted.
func answerAsAsked() *testkit.Greeter {
	return &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		name := req.GetName()
		switch cc, ok := strings.CutPrefix(name, "cc="); {
		case name == "cookie":
			_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", "session=1"))
		case ok:
			_ = grpc.SetHeader(ctx, metadata.Pairs("cache-control", cc))
		case name == "missing":
			return nil, status.Error(codes.NotFound, "no such greeting")
		}
		return &hellov1.HelloReply{Message: "hello " + name, Call: testkit.CallNumber(ctx)}, nil
	}}
}

// step is one call of a parity case (name and request id, with
// authorization auth and header x-tenant tenant when not ""), or a purge
// of every answer of SayHello.
type step struct {
	name, id, auth, tenant string
	purge                  bool
}

// calls returns n steps calling for name with authorization auth.
func calls(n int, name, auth string) []step {
	s := make([]step, n)
	for i := range s {
		s[i] = step{name: name, auth: auth}
	}
	return s
}

// TestParity_TheSidecarAndTheInterceptorsDecideAlike runs each case
// through the engine as the sidecar serves it (its own server, before a
// backend), through the server interceptor (before the same handler) and
// through the client interceptor (before the calls leave the client), and
// checks that each makes the handler run as often as the case says and
// serves every call as the sidecar does (collapser_requests_total by
// outcome), and tells each caller so alike (its cache-status entries).
func TestParity_TheSidecarAndTheInterceptorsDecideAlike(t *testing.T) {
	const keep = "default:\n  collapse: true\n  cacheTTL: 1h\n"
	const ignoreRequestID = "methods:\n  - name: " + sayHello + "\n    keyIgnoreFields: [request_id]\n"
	tests := []struct {
		name   string
		policy string
		keys   func(*Options)
		steps  []step
		runs   int64 // handler runs
	}{
		{name: "auto: a method its descriptor calls free of side effects", policy: "default:\n  cacheTTL: 1h\n", steps: calls(3, "ann", ""), runs: 1},
		{name: "the method's own entry says never", policy: keep + "methods:\n  - name: " + sayHello + "\n    collapse: false\n", steps: calls(3, "ann", ""), runs: 3},
		{name: "the service's entry says never", policy: keep + "methods:\n  - name: hello.v1.Greeter/*\n    collapse: false\n", steps: calls(3, "ann", ""), runs: 3},
		{name: "the default says never", policy: "default:\n  collapse: false\n", steps: calls(3, "ann", ""), runs: 3},
		{name: "credentials are in the key", policy: keep, steps: []step{{name: "x", auth: "Bearer ann"}, {name: "x", auth: "Bearer bob"}, {name: "x", auth: "Bearer ann"}, {name: "x"}}, runs: 3},
		{name: "headers are in the key", policy: keep, steps: []step{{name: "x", tenant: "1"}, {name: "x", tenant: "2"}}, runs: 2},
		{name: "a header left out of the key", policy: keep, keys: func(o *Options) { o.Keys.IgnoreHeaders = []string{"x-tenant"} },
			steps: []step{{name: "x", tenant: "1"}, {name: "x", tenant: "2"}}, runs: 1},
		{name: "a private answer", policy: keep, steps: calls(3, "cookie", ""), runs: 3},
		{name: "cache-control no-store", policy: keep, steps: calls(3, "cc=no-store", ""), runs: 3},
		{name: "cache-control max-age=0", policy: keep, steps: calls(3, "cc=max-age=0", ""), runs: 3},
		{name: "cache-control max-age=3600 beside a TTL of 0", policy: "default:\n  collapse: true\n  cacheTTL: 0s\n", steps: calls(3, "cc=max-age=3600", ""), runs: 1},
		{name: "cache-control ignored", policy: "default:\n  collapse: true\n  cacheTTL: 0s\n  cacheControl: ignore\n", steps: calls(3, "cc=max-age=3600", ""), runs: 3},
		{name: "an error passed through", policy: "default:\n  collapse: false\n", steps: calls(3, "missing", ""), runs: 3},
		{name: "an error not kept", policy: keep, steps: calls(3, "missing", ""), runs: 3},
		{name: "an error kept", policy: keep + "  cacheCodes: [NOT_FOUND]\n  cacheCodesTTL: 1h\n", steps: calls(3, "missing", ""), runs: 1},
		{name: "a request field in the key", policy: keep, steps: []step{{name: "x", id: "1"}, {name: "x", id: "2"}}, runs: 2},
		{name: "a request field left out of the key", policy: keep + ignoreRequestID,
			steps: []step{{name: "x", id: "1"}, {name: "x", id: "2"}, {name: "y", id: "3"}}, runs: 2},
		{name: "credentials stay in the key beside a field left out", policy: keep + ignoreRequestID,
			steps: []step{{name: "x", id: "1", auth: "Bearer ann"}, {name: "x", id: "2", auth: "Bearer bob"}, {name: "x", id: "3", auth: "Bearer ann"}}, runs: 2},
		{name: "purge", policy: keep, steps: []step{{name: "x"}, {name: "x"}, {purge: true}, {name: "x"}, {name: "x"}}, runs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sidecar := runParity(t, tt.policy, tt.keys, tt.steps, frontSidecar)
			if sidecar.runs != tt.runs {
				t.Errorf("sidecar: handler runs %d, want %d", sidecar.runs, tt.runs)
			}
			for _, front := range []front{frontServer, frontClient} {
				got := runParity(t, tt.policy, tt.keys, tt.steps, front)
				if got.runs != tt.runs {
					t.Errorf("%s: handler runs %d, want %d", front, got.runs, tt.runs)
				}
				if !maps.Equal(got.outcomes, sidecar.outcomes) {
					t.Errorf("outcomes: %s %v, sidecar %v; want the same", front, got.outcomes, sidecar.outcomes)
				}
				if !slices.Equal(got.entries, sidecar.entries) {
					t.Errorf("cache-status entries: %s %q, sidecar %q; want the same", front, got.entries, sidecar.entries)
				}
			}
		})
	}
}

// front is where a parity case's calls meet the engine.
type front string

// The fronts.
const (
	frontSidecar front = "sidecar"            // the engine's own server, before the backend
	frontServer  front = "server interceptor" // before the handler, in the server
	frontClient  front = "client interceptor" // in the client, before its calls leave
)

// served is how a parity case's calls were served at one front.
type served struct {
	runs     int64          // the handler's runs
	outcomes map[string]int // collapser_requests_total by outcome
	entries  []string       // each call's cache-status entries, in its header and trailer, ttl left out
}

// runParity runs steps through a Collapser of policy and keys at front,
// and returns how they were served.
func runParity(t *testing.T, policy string, keys func(*Options), steps []step, at front) served {
	t.Helper()
	g := answerAsAsked()
	var backend grpc.ClientConnInterface
	if at == frontSidecar {
		backend = dial(t, g.Start(t))
	}
	c, reg, err := tryCollapser(t, policy, keys, backend)
	if err != nil {
		t.Fatal(err)
	}
	var client hellov1.GreeterClient
	switch at {
	case frontSidecar:
		client = hellov1.NewGreeterClient(dial(t, serveEngine(t, c)))
	case frontServer:
		client = serveGreeter(t, c, g)
	case frontClient:
		client = clientOf(t, c, g.Start(t))
	}
	ctx := testkit.Context(t)
	var entries []string
	for _, s := range steps {
		if s.purge {
			c.proxy.PurgeMethod(sayHello, proxy.Purge{})
			continue
		}
		callCtx := ctx
		if s.tenant != "" {
			callCtx = metadata.AppendToOutgoingContext(callCtx, "x-tenant", s.tenant)
		}
		if s.auth != "" {
			callCtx = metadata.AppendToOutgoingContext(callCtx, "authorization", s.auth)
		}
		var header, trailer metadata.MD
		_, _ = client.SayHello(callCtx, &hellov1.HelloRequest{Name: s.name, RequestId: s.id}, // an error is the case's answer
			grpc.Header(&header), grpc.Trailer(&trailer))
		entry := fmt.Sprintf("header %q, trailer %q", header.Get("cache-status"), trailer.Get("cache-status"))
		entries = append(entries, ttlValue.ReplaceAllString(entry, "ttl=N")) // TTLs are jittered by key
	}
	return served{runs: g.Calls.SayHello.Load(), outcomes: outcomes(t, reg), entries: entries}
}

// ttlValue is the ttl parameter of a cache-status entry.
var ttlValue = regexp.MustCompile(`ttl=[0-9]+`)
