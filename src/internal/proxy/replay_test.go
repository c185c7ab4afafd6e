package proxy_test

import (
	"fmt"
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

// readStream makes one StreamHellos call for name and count through c and
// reads it to its end.
func readStream(t *testing.T, c hellov1.GreeterClient, name string, count int32) testkit.Streamed {
	t.Helper()
	return testkit.ReadStream(testkit.Context(t), c, &hellov1.HelloRequest{Name: name, Count: count})
}

func TestReplay_EveryCallerOfAKeptStreamReadsTheOneBackendStream(t *testing.T) {
	const callers, count = 5, 20
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policyFile: replayPolicy("1h")})
	for i := range callers {
		got := readStream(t, s.client, "ann", count)
		if got.Err != nil || len(got.Replies) != count || got.Messages()[count-1] != fmt.Sprintf("hello ann #%d", count-1) {
			t.Fatalf("caller %d: %d messages, %v; want %d", i, len(got.Replies), got.Err, count)
		}
		if !mdEqual(got.Header, metadata.Pairs(backendHeaderKey, "h-ann"), backendHeaderKey) ||
			!mdEqual(got.Trailer, metadata.Pairs(backendTrailerKey, "t-ann"), backendTrailerKey) {
			t.Errorf("caller %d: header %v, trailer %v; want the backend's", i, got.Header, got.Trailer)
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
		if status.Code(got.Err) != codes.FailedPrecondition || len(status.Convert(got.Err).Details()) != 1 {
			t.Errorf("caller %d: %v, want the backend's FAILED_PRECONDITION with its details", i, got.Err)
		}
		if !mdEqual(got.Trailer, metadata.Pairs(backendTrailerKey, "t-"+nameError), backendTrailerKey) {
			t.Errorf("caller %d: trailer %v, want the backend's", i, got.Trailer)
		}
	}
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2: a failed stream is never replayed", n)
	}
}
