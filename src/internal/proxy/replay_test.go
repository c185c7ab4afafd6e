package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// replayPolicy replays StreamHellos and keeps an ended stream for ttl.
func replayPolicy(ttl string) string {
	return "methods:\n  - name: " + methodStreamHellos + "\n    stream: replay\n    cacheTTL: " + ttl + "\n"
}

// streamed is what a caller read of one stream.
type streamed struct {
	header, trailer metadata.MD
	messages        []string
	err             error
}

// readStream makes one StreamHellos call for name and count through c and
// reads it to its end.
func readStream(t *testing.T, c hellov1.GreeterClient, name string, count int32) streamed {
	t.Helper()
	stream, err := c.StreamHellos(testkit.Context(t), &hellov1.HelloRequest{Name: name, Count: count})
	if err != nil {
		return streamed{err: err}
	}
	var got streamed
	got.header, _ = stream.Header()
	for {
		reply, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				got.err = err
			}
			break
		}
		got.messages = append(got.messages, reply.GetMessage())
	}
	got.trailer = stream.Trailer()
	return got
}

func TestReplay_EveryCallerOfAKeptStreamReadsTheOneBackendStream(t *testing.T) {
	const callers, count = 5, 20
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policyFile: replayPolicy("1h")})
	for i := range callers {
		got := readStream(t, s.client, "ann", count)
		if got.err != nil || len(got.messages) != count || got.messages[count-1] != fmt.Sprintf("hello ann #%d", count-1) {
			t.Fatalf("caller %d: %d messages, %v; want %d", i, len(got.messages), got.err, count)
		}
		if !mdEqual(got.header, metadata.Pairs(backendHeaderKey, "h-ann"), backendHeaderKey) ||
			!mdEqual(got.trailer, metadata.Pairs(backendTrailerKey, "t-ann"), backendTrailerKey) {
			t.Errorf("caller %d: header %v, trailer %v; want the backend's", i, got.header, got.trailer)
		}
	}
	if n := b.Calls.StreamHellos.Load(); n != 1 {
		t.Errorf("backend streams = %d, want 1", n)
	}
	want := []requestRecord{{methodStreamHellos, "leader", codes.OK}}
	for range callers - 1 {
		want = append(want, requestRecord{methodStreamHellos, "replayed", codes.OK})
	}
	testkit.WaitFor(t, "every stream observed", func() bool { return len(s.observed.routed(proxy.RouteStream)) == callers })
	if got := s.observed.routed(proxy.RouteStream); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stream requests = %v, want %v", got, want)
	}
}

func TestReplay_AFailedStreamReachesItsCallerAndIsNotKept(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policyFile: replayPolicy("1h")})
	for i := range 2 {
		got := readStream(t, s.client, nameError, 0)
		if status.Code(got.err) != codes.FailedPrecondition || len(status.Convert(got.err).Details()) != 1 {
			t.Errorf("caller %d: %v, want the backend's FAILED_PRECONDITION with its details", i, got.err)
		}
		if !mdEqual(got.trailer, metadata.Pairs(backendTrailerKey, "t-"+nameError), backendTrailerKey) {
			t.Errorf("caller %d: trailer %v, want the backend's", i, got.trailer)
		}
	}
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2: a failed stream is never replayed", n)
	}
}
