package sidecar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The backends of the memory tests' loads whose answers the hello backend
// does not give: answers with several tags, and kept errors.

// tagging returns a backend whose SayHello answers as greet does and names
// n tags of the answer's own (its name's) in the default tags header.
func tagging(n int) func(testing.TB) string {
	return func(t testing.TB) string {
		return startBackend(t, &testkit.Greeter{SayHello: func(ctx context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			tags := make([]string, n)
			for i := range tags {
				tags[i] = fmt.Sprintf("%s-tag-%d", req.GetName(), i)
			}
			if err := grpc.SetHeader(ctx, metadata.Pairs(proxy.DefaultTagsHeader, strings.Join(tags, " "))); err != nil {
				return nil, err
			}
			return greet(ctx, req)
		}})
	}
}

// notFound returns a backend whose SayHello answers NOT_FOUND, with details
// of about detailBytes: a ResourceInfo naming the request's name, with a
// description that long.
func notFound(detailBytes int) func(testing.TB) string {
	return func(t testing.TB) string {
		return startBackend(t, &testkit.Greeter{SayHello: func(_ context.Context, req *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
			st, err := status.New(codes.NotFound, "no greeting for "+req.GetName()).WithDetails(&errdetails.ResourceInfo{
				ResourceType: "greeting",
				ResourceName: req.GetName(),
				Description:  strings.Repeat(".", detailBytes),
			})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		}})
	}
}

// keepNotFound returns an edit that gives the sidecar a policy keeping
// SayHello's answers, NOT_FOUND ones too, for a minute.
func keepNotFound(t testing.TB) func(*config.Settings) {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	file := fmt.Sprintf("methods:\n  - name: %s\n    cacheTTL: 1m\n    cacheCodes: [NOT_FOUND]\n", sayHello)
	if err := os.WriteFile(policy, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *config.Settings) { c.PolicyFile = policy }
}
