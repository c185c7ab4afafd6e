package peers

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/collapser/collapser/src/internal/secretfile"
)

// MinTokenBytes is the shortest peer token a sidecar takes: 32 bytes, a
// 256-bit secret when random, beyond guessing.
const MinTokenBytes = 32

// errUnauthenticated refuses a call to the peer port that does not carry
// the release's peer token.
var errUnauthenticated = status.Error(codes.Unauthenticated, "collapser: a call to the peer port must carry the release's peer token")

// Credentials returns the dial option that presents token, the release's
// peer token as it reads now, on every call to a peer: a forwarded call, a
// purge, a Sync alike.
func Credentials(token *secretfile.Value) grpc.DialOption {
	return grpc.WithPerRPCCredentials(tokenCredentials{token})
}

// tokenCredentials presents the peer token in TokenHeader.
type tokenCredentials struct{ token *secretfile.Value }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{TokenHeader: c.token.Current()}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// token goes on plain connections too, inside the pod network.
func (tokenCredentials) RequireTransportSecurity() bool { return false }

// Authenticate returns the server option of the peer listener: every call
// must carry the release's peer token, as it reads now or as it read
// before a rotation (compared in constant time), or it is refused with
// UNAUTHENTICATED before its stream is made: nothing of it is read, and
// nothing reaches the cache or the backend. It is the server's tap
// (grpc.InTapHandle), of which a server has one.
func Authenticate(token *secretfile.Value) grpc.ServerOption {
	return grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if got := info.Header.Get(TokenHeader); len(got) != 1 || !token.Matches(got[0]) {
			return nil, errUnauthenticated
		}
		return ctx, nil
	})
}
