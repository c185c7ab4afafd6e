package peers

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
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

// Trust is how replicas prove to each other that they are the release's:
// the peer token every call carries, and, when set, mutual TLS on every
// connection between them.
type Trust struct {
	// Token is the release's peer token.
	Token *secretfile.Value
	// TLS are the credentials of every connection between replicas, both
	// ways (tlsfiles.Source.Mutual); nil: plain text, the token in the
	// clear.
	TLS credentials.TransportCredentials
}

// DialOptions are the options of every connection to a replica: its
// transport, and the token on every call (a forwarded call, a purge, a
// Sync alike), as it reads now.
func (t Trust) DialOptions() []grpc.DialOption {
	transport := t.TLS
	if transport == nil {
		transport = insecure.NewCredentials()
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(transport), grpc.WithPerRPCCredentials(tokenCredentials{t.Token})}
}

// ServerOptions are the options of the peer listener: its transport, and
// authenticate.
func (t Trust) ServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{authenticate(t.Token)}
	if t.TLS != nil {
		opts = append(opts, grpc.Creds(t.TLS))
	}
	return opts
}

// tokenCredentials presents the peer token in TokenHeader.
type tokenCredentials struct{ token *secretfile.Value }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{TokenHeader: c.token.Current()}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// token goes on plain connections too, where a release has no TLS.
func (tokenCredentials) RequireTransportSecurity() bool { return false }

// authenticate returns the tap of the peer listener: every call must carry
// the release's peer token, as it reads now or as it read before a
// rotation (compared in constant time), or it is refused with
// UNAUTHENTICATED before its stream is made: nothing of it is read, and
// nothing reaches the cache or the backend. A server has one tap
// (grpc.InTapHandle).
func authenticate(token *secretfile.Value) grpc.ServerOption {
	return grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if got := info.Header.Get(TokenHeader); len(got) != 1 || !token.Matches(got[0]) {
			return nil, errUnauthenticated
		}
		return ctx, nil
	})
}
