package sidecar

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The backends of the memory tests' loads whose answers the hello backend
// does not give.

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
