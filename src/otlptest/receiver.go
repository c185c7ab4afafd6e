// Package otlptest is an OTLP trace receiver for tests: the collector's
// TraceService on a loopback port (or an address a kind cluster's pods
// reach), which keeps every span it is sent, and the environment that makes
// the sidecar's tracing (package tracing) export to it. Only tests import
// it: this module's, and the e2e tests of the test/ module, which is why it
// is not internal.
package otlptest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/testkit"
)

// Receiver is an OTLP/gRPC trace receiver serving on a loopback port until
// the test that started it ends.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	addr string

	mu      sync.Mutex
	spans   Spans
	raw     [][]byte      // every export request as it came, for what no span may carry
	fail    codes.Code    // OK: accept exports; else answer them with this code
	hold    chan struct{} // nil: answer at once; else wait until it is closed
	discard bool          // accept exports and keep nothing of them
}

// Start serves a Receiver on a loopback port until the test ends. Start it
// before the sidecars that export to it: they stop first, and flush their
// last spans to it.
func Start(t testing.TB) *Receiver {
	t.Helper()
	return StartOn(t, "127.0.0.1:0")
}

// StartOn is Start on addr: an address pods of a kind cluster reach, say.
func StartOn(t testing.TB, addr string) *Receiver {
	t.Helper()
	r := &Receiver{}
	lis := testkit.Listen(t, addr)
	r.addr = lis.Addr().String()
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

// Addr returns the address r serves on.
func (r *Receiver) Addr() string { return r.addr }

// Setenv points the OTLP exporter of package tracing at r for the rest of
// the test, in plain text, with batches sent every 10 milliseconds: tracing
// is on for every sidecar the test starts afterwards.
func (r *Receiver) Setenv(t testing.TB) {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.Addr())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
}

// Export keeps the spans of req.
func (r *Receiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	hold, fail, discard := r.hold, r.fail, r.discard
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if fail != codes.OK {
		return nil, status.Error(fail, "otlptest: refused as the test asked")
	}
	if discard {
		return &coltracepb.ExportTraceServiceResponse{}, nil
	}
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "otlptest: marshal the request again: %v", err)
	}
	spans := flatten(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	r.spans = append(r.spans, spans...)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans returns a copy of the spans received so far.
func (r *Receiver) Spans() Spans {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(Spans(nil), r.spans...)
}

// WaitFor waits until the spans received satisfy cond, and returns them.
func (r *Receiver) WaitFor(t testing.TB, what string, cond func(Spans) bool) Spans {
	t.Helper()
	var spans Spans
	testkit.WaitFor(t, what, func() bool {
		spans = r.Spans()
		return cond(spans)
	})
	return spans
}

// Received reports whether any export request r kept holds s, anywhere:
// a name, an attribute's key or value, an event, a link, a resource.
func (r *Receiver) Received(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range r.raw {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// Discard makes r accept every export from now on and keep nothing of it:
// a collector for benchmarks, whose memory does not grow with b.N.
func (r *Receiver) Discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discard = true
}

// Refuse makes r answer every export from now on with code (codes.OK
// accepts them again).
func (r *Receiver) Refuse(code codes.Code) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = code
}

// Hold makes every export from now on wait until release is called, or
// until the exporter gives up on it.
func (r *Receiver) Hold() (release func()) {
	hold := make(chan struct{})
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.hold = nil
			r.mu.Unlock()
			close(hold)
		})
	}
}
