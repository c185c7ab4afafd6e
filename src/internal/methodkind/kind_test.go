package methodkind

import "testing"

func TestKindOf_MapsStreamingFlags(t *testing.T) {
	tests := []struct {
		client, server bool
		want           Kind
		str            string
	}{
		{false, false, Unary, "unary"},
		{false, true, ServerStreaming, "server_streaming"},
		{true, false, ClientStreaming, "client_streaming"},
		{true, true, BidiStreaming, "bidi_streaming"},
	}
	for _, tt := range tests {
		if got := kindOf(tt.client, tt.server); got != tt.want || got.String() != tt.str {
			t.Errorf("kindOf(client=%v, server=%v) = %v (%q), want %v (%q)", tt.client, tt.server, got, got.String(), tt.want, tt.str)
		}
	}
	if Unknown.String() != "unknown" {
		t.Errorf("Unknown.String() = %q", Unknown.String())
	}
}
