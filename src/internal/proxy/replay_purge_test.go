package proxy_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// withStreamHeader is a backend connection whose streams' headers carry one
// more header, as a backend naming the tags of a stream would send.
type withStreamHeader struct {
	grpc.ClientConnInterface
	key, value string
}

func (w withStreamHeader) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := w.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}
	return headerStream{cs, w.key, w.value}, nil
}

type headerStream struct {
	grpc.ClientStream
	key, value string
}

func (s headerStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if md == nil {
		return md, err
	}
	return metadata.Join(md, metadata.Pairs(s.key, s.value)), err
}

// taggedStreams starts a proxy that replays StreamHellos and keeps an ended
// stream for an hour, whose backend names tags in every stream's header;
// peered, it is its own only peer (peer_test.go).
func taggedStreams(t *testing.T, b *testBackend, tags string, peered bool) *runningProxy {
	t.Helper()
	return startProxy(t, b.addr, proxyConfig{
		peered:     peered,
		policyFile: replayPolicy("1h"),
		options:    func(o *proxy.Options) { o.TagsHeader = proxy.DefaultTagsHeader },
		wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
			return withStreamHeader{cc, proxy.DefaultTagsHeader, tags}
		},
	})
}

// readAlice reads alice's stream of three messages through s, and checks
// that it came whole and without the tags header.
func readAlice(t *testing.T, s *runningProxy) {
	t.Helper()
	got := readStream(t, s.client, "alice", 3)
	if got.Err != nil || len(got.Replies) != 3 {
		t.Fatalf("StreamHellos: %d messages, %v; want 3", len(got.Replies), got.Err)
	}
	if v := got.Header.Get(proxy.DefaultTagsHeader); v != nil {
		t.Errorf("the caller saw the tags header %q: it is taken out", v)
	}
}

func TestPurge_TakesAReplayedStreamBackByRequestMethodAndTag(t *testing.T) {
	tests := []struct {
		name  string
		purge func(p *proxy.Proxy, authority string) int
	}{
		{"request", func(p *proxy.Proxy, authority string) int {
			payload, err := proto.Marshal(&hellov1.HelloRequest{Name: "alice", Count: 3})
			if err != nil {
				t.Fatal(err)
			}
			return p.PurgeRequest(methodStreamHellos, "", payload, metadata.Pairs(":authority", authority), proxy.Purge{})
		}},
		{"method", func(p *proxy.Proxy, _ string) int { return p.PurgeMethod(methodStreamHellos, proxy.Purge{}) }},
		{"tag", func(p *proxy.Proxy, _ string) int { return p.PurgeTag("user:alice", proxy.Purge{}) }},
		// A record has no stale window: a soft purge takes it back as a
		// hard one does.
		{"soft", func(p *proxy.Proxy, _ string) int { return p.PurgeMethod(methodStreamHellos, proxy.Purge{Soft: true}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, nil)
			s := taggedStreams(t, b, "user:alice org:7", false)
			readAlice(t, s)
			readAlice(t, s)
			if n := b.Calls.StreamHellos.Load(); n != 1 {
				t.Fatalf("backend streams before the purge = %d, want 1 (the stream kept)", n)
			}
			if n := tt.purge(s.proxy, s.conn.Target()); n != 1 {
				t.Errorf("purge took back %d answers, want 1 (the stream's record)", n)
			}
			readAlice(t, s)
			if n := b.Calls.StreamHellos.Load(); n != 2 {
				t.Errorf("backend streams after the purge = %d, want 2: the purged stream was replayed", n)
			}
			if n := tt.purge(s.proxy, s.conn.Target()); n != 1 {
				t.Errorf("second purge took back %d answers, want 1 (the new record)", n)
			}
		})
	}
}

func TestPurge_ScopesTakeBackTheOwnersRecordOrTheCopy(t *testing.T) {
	b := startBackend(t, nil)
	s := taggedStreams(t, b, "user:alice", true)
	readAlice(t, s)
	// The owner's record first: the copy this replica keeps for its
	// callers still replays.
	if n := s.proxy.PurgeMethod(methodStreamHellos, proxy.Purge{Scope: proxy.Owned}); n != 1 {
		t.Errorf("purge of the owned records took back %d, want 1", n)
	}
	readAlice(t, s)
	if n := b.Calls.StreamHellos.Load(); n != 1 {
		t.Errorf("backend streams after the owner's purge = %d, want 1: the caller's copy is kept", n)
	}
	// Then the copy, found by the tags the owner passed on to it.
	if n := s.proxy.PurgeTag("user:alice", proxy.Purge{Scope: proxy.Callers}); n != 1 {
		t.Errorf("purge of the callers' records by tag took back %d, want 1", n)
	}
	readAlice(t, s)
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams after both purges = %d, want 2", n)
	}
	if n := s.proxy.PurgeTag("user:alice", proxy.Purge{}); n != 2 {
		t.Errorf("purge of every record by tag took back %d, want 2 (the owner's and the copy)", n)
	}
}

func TestPurge_DetachesALiveReplayedStream(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{policyFile: replayPolicy("1h")})
	// open starts a "hold" stream: one message, then it waits for its end.
	open := func() context.CancelFunc {
		t.Helper()
		ctx, cancel := context.WithCancel(testkit.Context(t))
		stream, err := s.client.StreamHellos(ctx, &hellov1.HelloRequest{Name: nameHold})
		if err != nil {
			t.Fatal(err)
		}
		if reply, err := stream.Recv(); err != nil || reply.GetMessage() != "first" {
			t.Fatalf("first message: %v, %v", reply, err)
		}
		return cancel
	}
	first := open()
	if n := s.proxy.PurgeMethod(methodStreamHellos, proxy.Purge{}); n != 0 {
		t.Errorf("purge of a live stream counted %d, want 0: nothing of it was kept", n)
	}
	second := open()
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2: a caller after the purge does not join the live stream", n)
	}
	first()
	testkit.Recv(t, "the first backend stream's end", b.streamEnded)
	second()
	testkit.Recv(t, "the second backend stream's end", b.streamEnded)
}

func TestReplay_AStreamWithTooManyTagsIsNeverKept(t *testing.T) {
	tags := strings.Repeat("t ", proxy.MaxTags+1)
	b := startBackend(t, nil)
	s := taggedStreams(t, b, tags, false)
	readAlice(t, s)
	readAlice(t, s)
	if n := b.Calls.StreamHellos.Load(); n != 2 {
		t.Errorf("backend streams = %d, want 2: a purge by tag could not find such a stream, so it is not kept", n)
	}
}

func TestReplay_ForwardTagsHeaderKeepsAStreamsTagsForCallers(t *testing.T) {
	b := startBackend(t, nil)
	s := startProxy(t, b.addr, proxyConfig{
		policyFile: replayPolicy("1h"),
		options: func(o *proxy.Options) {
			o.TagsHeader = proxy.DefaultTagsHeader
			o.ForwardTagsHeader = true
		},
		wrapBackend: func(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
			return withStreamHeader{cc, proxy.DefaultTagsHeader, "user:alice"}
		},
	})
	if got := readStream(t, s.client, "alice", 3); got.Err != nil || strings.Join(got.Header.Get(proxy.DefaultTagsHeader), ",") != "user:alice" {
		t.Errorf("with ForwardTagsHeader: header %v, %v; want the tags header", got.Header, got.Err)
	}
}
