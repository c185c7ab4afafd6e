package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/otlptest"
)

// The traces tests run sidecars that export to an in-process OTLP receiver
// and assert the shape of what it received: which span is whose child, and
// which links to which.

// Secrets no span may carry: a caller's credential and its request.
const (
	secretToken = "Bearer s3cret-token-4b1d"
	payloadMark = "payload-mark-9c2e"
)

// traced starts a receiver and turns tracing on, towards it, for the
// sidecars the test starts afterwards.
func traced(t *testing.T) *otlptest.Receiver {
	t.Helper()
	r := otlptest.Start(t)
	r.Setenv(t)
	return r
}

// inTrace returns ctx with the headers of a caller in a sampled trace of
// its own, numbered n, and with the secret credential; and the trace's ID.
func inTrace(ctx context.Context, n int) (context.Context, string) {
	traceID := fmt.Sprintf("%032x", 0xc0ffee000+n)
	return metadata.AppendToOutgoingContext(ctx,
		"traceparent", fmt.Sprintf("00-%s-%016x-01", traceID, n+1),
		"authorization", secretToken), traceID
}

// Span shapes.
func isServer(s otlptest.Span) bool { return s.Kind == tracepb.Span_SPAN_KIND_SERVER }
func isClient(s otlptest.Span) bool { return s.Kind == tracepb.Span_SPAN_KIND_CLIENT }

// outcomes returns the server spans that say how their call was served.
func outcomes(spans otlptest.Spans) otlptest.Spans {
	return spans.Where(func(s otlptest.Span) bool { return isServer(s) && s.Attributes[string(proxy.OutcomeAttribute)] != "" })
}

// served returns the server spans whose call was served as outcome.
func served(spans otlptest.Spans, outcome string) otlptest.Spans {
	return spans.Where(isServer).WithAttribute(string(proxy.OutcomeAttribute), outcome)
}

// onlyChild returns the one span of spans that is parent's child and
// matches kind, failing the test if there is not exactly one.
func onlyChild(t *testing.T, spans otlptest.Spans, parent otlptest.Span, kind func(otlptest.Span) bool, what string) otlptest.Span {
	t.Helper()
	children := spans.ChildrenOf(parent).Where(kind)
	if len(children) != 1 {
		t.Fatalf("%s: %d children of span %q (%s), want 1", what, len(children), parent.Name, parent.SpanID)
	}
	return children[0]
}

// nothingSecretExported fails the test if any span r received carries the
// callers' credential or their request.
func nothingSecretExported(t *testing.T, r *otlptest.Receiver) {
	t.Helper()
	for _, s := range []string{secretToken, "s3cret", payloadMark} {
		if r.Received(s) {
			t.Errorf("a span carries %q", s)
		}
	}
}

func TestTraces_HundredCollapsedCallsLinkToTheLeadersBackendCall(t *testing.T) {
	const callers = 100
	r := traced(t)
	gate := make(chan struct{})
	backend := &testkit.Greeter{SayHello: gated(gate)}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} })
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	traces := make(map[string]bool, callers) // each caller's own trace
	var wg sync.WaitGroup
	for i := range callers {
		callCtx, traceID := inTrace(ctx, i)
		traces[traceID] = true
		wg.Go(func() {
			if _, err := client.SayHello(callCtx, &hellov1.HelloRequest{Name: payloadMark}); err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	testkit.WaitFor(t, "every caller waiting for one call", func() bool { return sc.proxy.Stats().Waiters == callers })
	close(gate)
	wg.Wait()
	if got := backend.Calls.SayHello.Load(); got != 1 {
		t.Fatalf("backend calls = %d, want 1", got)
	}
	spans := r.WaitFor(t, "every caller's span and the backend call's", func(s otlptest.Spans) bool {
		return len(outcomes(s)) == callers && len(s.Where(isClient)) == 1
	})

	leaders, joined := served(spans, "leader"), served(spans, "joined")
	if len(leaders) != 1 || len(joined) != callers-1 {
		t.Fatalf("%d leader and %d joined spans, want 1 and %d", len(leaders), len(joined), callers-1)
	}
	leader := leaders[0]
	call := onlyChild(t, spans, leader, func(s otlptest.Span) bool { return s.Name == proxy.CallSpanName }, "the leader's call")
	backendCall := onlyChild(t, spans, call, isClient, "the backend call")
	if backendCall.Name != strings.TrimPrefix(sayHello, "/") {
		t.Errorf("backend call span %q, want the method's name", backendCall.Name)
	}
	if len(leader.Links) != 0 {
		t.Errorf("the leader's span links to %v: its call is its child", leader.Links)
	}
	for _, j := range joined {
		if len(j.Links) != 1 || !j.LinksTo(call) {
			t.Fatalf("joined span %s links to %v, want only the leader's call %s", j.SpanID, j.Links, call.SpanID)
		}
	}
	for _, s := range outcomes(spans) {
		if !traces[s.TraceID] {
			t.Fatalf("server span in trace %s, not its caller's", s.TraceID)
		}
		delete(traces, s.TraceID)
	}
	nothingSecretExported(t, r)
	// The backend call's duration names the leader's trace as its exemplar.
	want := fmt.Sprintf(`# {trace_id="%s"}`, leader.TraceID)
	if page := sc.scrapeAs(t, "application/openmetrics-text; version=1.0.0"); !bytes.Contains(page, []byte(want)) {
		t.Errorf("no exemplar %s in the OpenMetrics page", want)
	}
}

func TestTraces_ACacheHitLinksToTheCallThatProducedItsAnswer(t *testing.T) {
	r := traced(t)
	sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	for range 2 {
		if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "cached"}); err != nil {
			t.Fatal(err)
		}
	}
	spans := r.WaitFor(t, "both callers' spans", func(s otlptest.Spans) bool { return len(outcomes(s)) == 2 })
	leaders, hits := served(spans, "leader"), served(spans, "cache_hit")
	if len(leaders) != 1 || len(hits) != 1 {
		t.Fatalf("%d leader and %d hit spans, want 1 and 1", len(leaders), len(hits))
	}
	call := onlyChild(t, spans, leaders[0], func(s otlptest.Span) bool { return s.Name == proxy.CallSpanName }, "the leader's call")
	if hit := hits[0]; hit.TraceID == call.TraceID || len(hit.Links) != 1 || !hit.LinksTo(call) {
		t.Errorf("the hit's span (trace %s) links to %v, want only the call that produced its answer, of trace %s", hit.TraceID, hit.Links, call.TraceID)
	}
}

func TestTraces_AStaleServeLinksToTheOldCallAndTheRefreshHasItsOwnBackendSpan(t *testing.T) {
	const ttl = 50 * time.Millisecond
	r := traced(t)
	backend := &testkit.Greeter{SayHello: greet}
	clock := fakeClock()
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = ttl
		c.Policy.StaleWhileRevalidate = time.Hour
	}, runOn(clock))
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "stale"}); err != nil {
		t.Fatal(err)
	}
	advance(t, clock, ttl+10*time.Millisecond, sc) // past the TTL: the answer is stale
	if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "stale"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the refresh at the backend", func() bool { return backend.Calls.SayHello.Load() == 2 })
	// The refresh runs after its caller has its answer, and its backend
	// call's span ends before the refresh's own: wait for both calls' spans.
	spans := r.WaitFor(t, "both callers' spans, both calls and both backend calls", func(s otlptest.Spans) bool {
		return len(outcomes(s)) == 2 && len(s.Named(proxy.CallSpanName)) == 2 && len(s.Where(isClient)) == 2
	})
	leaders, stale := served(spans, "leader"), served(spans, "stale")
	if len(leaders) != 1 || len(stale) != 1 {
		t.Fatalf("%d leader and %d stale spans, want 1 and 1", len(leaders), len(stale))
	}
	isCall := func(s otlptest.Span) bool { return s.Name == proxy.CallSpanName }
	old := onlyChild(t, spans, leaders[0], isCall, "the first call")
	if len(stale[0].Links) != 1 || !stale[0].LinksTo(old) {
		t.Errorf("the stale serve's span links to %v, want only the old call %s", stale[0].Links, old.SpanID)
	}
	// The refresh is the child of the span of the caller that found the
	// answer stale, with a backend call of its own.
	refresh := onlyChild(t, spans, stale[0], isCall, "the refresh")
	onlyChild(t, spans, refresh, isClient, "the refresh's backend call")
	onlyChild(t, spans, old, isClient, "the first backend call")
}

func TestTraces_TheOwnersBackendSpanIsInTheTraceOfTheForwardersLeader(t *testing.T) {
	r := traced(t)
	rs := startReplicas(t, true, &testkit.Greeter{SayHello: greet}, &testkit.Greeter{SayHello: greet}, &testkit.Greeter{SayHello: greet})
	ctx := testkit.Context(t)
	// A name whose key another replica owns: the first replica's leader
	// forwards its call there.
	var traceID string
	for i := 0; traceID == ""; i++ {
		if i == 50 {
			t.Fatal("50 names, each owned by the first replica itself")
		}
		callCtx, id := inTrace(ctx, i)
		if _, err := rs[0].client.SayHello(callCtx, &hellov1.HelloRequest{Name: fmt.Sprint("owned-", i)}); err != nil {
			t.Fatal(err)
		}
		if rs[0].sidecar.metricSum(t, "collapser_peer_calls_total", map[string]string{"owner": "peer"}) == 1 {
			traceID = id
		}
	}
	inTheTrace := func(s otlptest.Span) bool { return s.TraceID == traceID }
	// The forwarder's leader, its call, the call to the owner, the owner's
	// leader (the peer's call), its call and its backend call.
	spans := r.WaitFor(t, "the forwarded call's six spans", func(s otlptest.Spans) bool { return len(s.Where(inTheTrace)) == 6 }).Where(inTheTrace)
	isCall := func(s otlptest.Span) bool { return s.Name == proxy.CallSpanName }
	roots := spans.Where(func(s otlptest.Span) bool { _, ok := spans.ByID(s.TraceID, s.ParentSpanID); return !ok })
	if len(roots) != 1 || !isServer(roots[0]) {
		t.Fatalf("the trace's spans %+v have %d roots, want one: the forwarder's leader", spans, len(roots))
	}
	leader := roots[0]
	call := onlyChild(t, spans, leader, isCall, "the forwarder's call")
	toOwner := onlyChild(t, spans, call, isClient, "the call to the owner")
	owner := onlyChild(t, spans, toOwner, isServer, "the owner's leader")
	if got := owner.Attributes[string(proxy.OutcomeAttribute)]; got != "leader" {
		t.Errorf("the owner's span was served as %q, want leader", got)
	}
	ownerCall := onlyChild(t, spans, owner, isCall, "the owner's call")
	onlyChild(t, spans, ownerCall, isClient, "the owner's backend call")
}

func TestTraces_PassthroughSpansHaveNoLink(t *testing.T) {
	r := traced(t)
	// The backend's error repeats what it was asked: the caller gets it, no
	// span does.
	refuse := func(_ context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		return nil, status.Errorf(codes.NotFound, "no greeting for %s", req.GetName())
	}
	sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: refuse}), func(c *config.Settings) {
		c.Policy.Collapse = policy.Never
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	for i := range 2 {
		callCtx, _ := inTrace(ctx, i)
		_, err := client.SayHello(callCtx, &hellov1.HelloRequest{Name: payloadMark})
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), payloadMark) {
			t.Fatalf("caller %d: %v, want the backend's NOT_FOUND with its message", i, err)
		}
	}
	spans := r.WaitFor(t, "both callers' spans and their backend calls", func(s otlptest.Spans) bool {
		return len(outcomes(s)) == 2 && len(s.Where(isClient)) == 2
	})
	for _, s := range served(spans, proxy.OutcomePassthrough) {
		if len(s.Links) != 0 {
			t.Errorf("passthrough span links to %v", s.Links)
		}
		onlyChild(t, spans, s, isClient, "the passed-through call")
	}
	if n := len(spans.Named(proxy.CallSpanName)); n != 0 {
		t.Errorf("%d call spans: a passed-through call is the caller's own", n)
	}
	nothingSecretExported(t, r)
}

func TestTraces_ABadOTELValueStopsStartupAndAFailedStartLeavesNothingRunning(t *testing.T) {
	traced(t)
	cfg := config.Default()
	t.Setenv("OTEL_TRACES_SAMPLER", "sometimes")
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_SAMPLER") {
		t.Errorf("New with OTEL_TRACES_SAMPLER=sometimes: %v, want an error naming the variable", err)
	}
	// Tracing starts before the parts that fail here: its exporter and batch
	// processor are shut down again (goleak checks at the end).
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	cfg.PolicyFile = filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("New with a missing policy file succeeded")
	}
}

func TestTraces_ReplayedStreamsCallersLinkToTheSpanThatOpenedTheStream(t *testing.T) {
	r := traced(t)
	gate := make(chan struct{})
	backend := &testkit.Greeter{StreamHellos: func(req *hellov1.HelloRequest, stream grpc.ServerStreamingServer[hellov1.HelloReply]) error {
		if err := stream.Send(&hellov1.HelloReply{Message: "first"}); err != nil {
			return err
		}
		<-gate // live until the second caller has joined
		return stream.Send(&hellov1.HelloReply{Message: "second"})
	}}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) { c.PolicyFile = replayPolicy(t, time.Minute) })
	waitStreamLearned(t, sc)
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	read := func(n int) error {
		callCtx, _ := inTrace(ctx, n)
		stream, err := client.StreamHellos(callCtx, &hellov1.HelloRequest{Name: "feed"})
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	done := make(chan error, 2)
	go func() { done <- read(0) }()
	testkit.WaitFor(t, "the opener reading", func() bool { return sc.proxy.StreamStats().Readers == 1 })
	go func() { done <- read(1) }()
	testkit.WaitFor(t, "a second caller joined", func() bool { return sc.proxy.StreamStats().Readers == 2 })
	close(gate)
	for range 2 {
		if err := testkit.Recv(t, "a caller's stream", done); err != nil {
			t.Fatal(err)
		}
	}
	if err := read(2); err != nil { // the kept record, replayed
		t.Fatal(err)
	}
	if n := backend.Calls.StreamHellos.Load(); n != 1 {
		t.Fatalf("backend streams = %d, want 1", n)
	}
	spans := r.WaitFor(t, "the three callers' spans", func(s otlptest.Spans) bool { return len(outcomes(s)) == 3 })
	leaders := served(spans, "leader")
	if len(leaders) != 1 || len(leaders[0].Links) != 0 {
		t.Fatalf("leader spans %v, want one, without a link", leaders)
	}
	for _, outcome := range []string{"joined", "replayed"} {
		got := served(spans, outcome)
		if len(got) != 1 || len(got[0].Links) != 1 || !got[0].LinksTo(leaders[0]) {
			t.Errorf("%s spans %v, want one linking to the span that opened the stream", outcome, got)
		}
	}
}
