package hello

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"
)

// Caller returns who an authorization header value names: the credential
// after the scheme ("Bearer alice" -> "alice"), the whole value when it has no
// scheme ("alice" -> "alice"), "" for an empty value. The hello backend puts
// it in every reply, so a client can check that no reply was shared across
// credentials.
func Caller(authorization string) string {
	authorization = strings.TrimSpace(authorization)
	if _, credential, ok := strings.Cut(authorization, " "); ok {
		return strings.TrimSpace(credential)
	}
	return authorization
}

// callerFrom returns the Caller named by the request's first authorization
// header, "" when there is none.
func callerFrom(ctx context.Context) string {
	values := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(values) == 0 {
		return ""
	}
	return Caller(values[0])
}
