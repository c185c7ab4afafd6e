package hello

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestCaller_TakesCredentialAfterSchemeOrWholeValue(t *testing.T) {
	tests := []struct{ authorization, want string }{
		{"Bearer alice", "alice"},
		{"Basic  bob ", "bob"},
		{"alice", "alice"},
		{"  carol  ", "carol"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Caller(tt.authorization); got != tt.want {
			t.Errorf("Caller(%q) = %q, want %q", tt.authorization, got, tt.want)
		}
	}
}

func TestCallerFrom_UsesFirstAuthorizationHeaderOrEmpty(t *testing.T) {
	tests := []struct {
		name string
		md   metadata.MD
		want string
	}{
		{"absent", metadata.MD{}, ""},
		{"bearer", metadata.Pairs("authorization", "Bearer alice"), "alice"},
		{"first of two", metadata.Pairs("authorization", "Bearer alice", "authorization", "Bearer bob"), "alice"},
	}
	for _, tt := range tests {
		ctx := metadata.NewIncomingContext(context.Background(), tt.md)
		if got := callerFrom(ctx); got != tt.want {
			t.Errorf("%s: callerFrom = %q, want %q", tt.name, got, tt.want)
		}
	}
}
