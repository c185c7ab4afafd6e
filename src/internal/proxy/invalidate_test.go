package proxy_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// invalidation is one call of an Invalidator.
type invalidation struct {
	methods, tags []string
}

// invalidatorFunc is a proxy.Invalidator.
type invalidatorFunc func(ctx context.Context, methods, tags []string) error

func (f invalidatorFunc) Invalidate(ctx context.Context, methods, tags []string) error {
	return f(ctx, methods, tags)
}

func TestPassthrough_AWriteInvalidatesBeforeItsCallerIsAnswered(t *testing.T) {
	const policyFile = `
methods:
  - name: /hello.v1.Greeter/SayHello
    collapse: false
    invalidates:
      methods: [/hello.v1.Greeter/StreamHellos]
      responseTags: true
`
	for _, tt := range []struct {
		name        string
		code        codes.Code // the backend's answer
		forwardTags bool
		want        *invalidation // nil: Invalidate is not called
	}{
		{"success", codes.OK, false, &invalidation{[]string{methodStreamHellos}, []string{"user:1", "org:2"}}},
		{"success, tags forwarded", codes.OK, true, &invalidation{[]string{methodStreamHellos}, []string{"user:1", "org:2"}}},
		{"failure", codes.NotFound, false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backend := &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
				if err := grpc.SetHeader(ctx, metadata.Pairs(proxy.DefaultTagsHeader, "user:1 org:2")); err != nil {
					return nil, err
				}
				if tt.code != codes.OK {
					return nil, status.Error(tt.code, "no such user")
				}
				return &hellov1.HelloReply{Message: "written"}, nil
			}}
			var answered atomic.Bool
			entered, release := make(chan invalidation, 1), make(chan struct{})
			s := startProxy(t, backend.Start(t), proxyConfig{policyFile: policyFile, options: func(o *proxy.Options) {
				o.TagsHeader, o.ForwardTagsHeader = proxy.DefaultTagsHeader, tt.forwardTags
			}, invalidator: invalidatorFunc(func(_ context.Context, methods, tags []string) error {
				if answered.Load() {
					t.Error("the caller was answered before its write's purge")
				}
				entered <- invalidation{methods, tags}
				<-release
				return nil
			})})
			done := make(chan error, 1)
			var header metadata.MD
			go func() {
				_, err := s.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "w"}, grpc.Header(&header))
				answered.Store(true)
				done <- err
			}()
			if tt.want != nil {
				got := testkit.Recv(t, "the write's purge", entered)
				if !slices.Equal(got.methods, tt.want.methods) || !slices.Equal(got.tags, tt.want.tags) {
					t.Errorf("Invalidate(%v, %v), want (%v, %v)", got.methods, got.tags, tt.want.methods, tt.want.tags)
				}
				if answered.Load() {
					t.Error("the caller was answered while its write's purge ran")
				}
			}
			close(release)
			if err := testkit.Recv(t, "the write's answer", done); status.Code(err) != tt.code {
				t.Fatalf("SayHello: %v, want %v", err, tt.code)
			}
			if tt.want == nil && len(entered) != 0 {
				t.Errorf("a failed write invalidated %v", <-entered)
			}
			if tt.code == codes.OK && (header.Get(proxy.DefaultTagsHeader) != nil) != tt.forwardTags {
				t.Errorf("the caller saw the tags header %q; forwarded = %v", header.Get(proxy.DefaultTagsHeader), tt.forwardTags)
			}
		})
	}
}
