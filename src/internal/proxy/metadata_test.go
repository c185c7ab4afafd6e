package proxy

import (
	"reflect"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestForwardable_DropsTransportHeadersKeepsTheRest(t *testing.T) {
	in := metadata.MD{
		":authority":           {"sidecar:50052"},
		"content-type":         {"application/grpc"},
		"user-agent":           {"grpc-go/1.85.0"},
		"te":                   {"trailers"},
		"grpc-timeout":         {"1S"},
		"grpc-encoding":        {"gzip"},
		"grpc-accept-encoding": {"gzip"},
		"grpc-message-type":    {"x"},
		"grpc-status":          {"0"},
		"grpc-message":         {"ok"},
		"authorization":        {"Bearer ann"},
		"x-custom":             {"a", "b"},
		"trace-bin":            {"\x00\x01"},
	}
	before := metadata.Join(in) // a deep copy
	want := metadata.MD{
		"authorization": {"Bearer ann"},
		"x-custom":      {"a", "b"},
		"trace-bin":     {"\x00\x01"},
	}
	if got := forwardable(in); !reflect.DeepEqual(got, want) {
		t.Errorf("forwardable = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, before) {
		t.Errorf("forwardable modified its input: %v, was %v", in, before)
	}
}

func TestContentSubtype(t *testing.T) {
	tests := []struct {
		contentType []string
		want        string
	}{
		{nil, ""},
		{[]string{"application/grpc"}, ""},
		{[]string{"application/grpc+proto"}, "proto"},
		{[]string{"application/grpc+json"}, "json"},
		{[]string{"Application/GRPC+JSON"}, "json"},
		{[]string{"application/grpc+json; charset=utf-8"}, "json"},
		{[]string{"application/grpc;x=y"}, ""},
		{[]string{"text/plain"}, ""},
	}
	for _, tt := range tests {
		md := metadata.MD{}
		if tt.contentType != nil {
			md["content-type"] = tt.contentType
		}
		if got := contentSubtype(md); got != tt.want {
			t.Errorf("contentSubtype(%q) = %q, want %q", tt.contentType, got, tt.want)
		}
	}
}

func TestResponseSize_CountsPayloadAndMetadata(t *testing.T) {
	r := &Response{
		Payload: make([]byte, 10),
		Header:  metadata.Pairs("ab", "cde"),
		Trailer: metadata.Pairs("f", "g"),
	}
	const mdEntryOverhead = 64 // mdsize's overhead of one entry
	want := int64(responseOverhead + 10 + 2*mdEntryOverhead + len("ab") + len("cde") + 16 + len("f") + len("g") + 16)
	if got := responseSize(r); got != want {
		t.Errorf("responseSize = %d, want %d", got, want)
	}
	if got := responseSize(nil); got != 0 {
		t.Errorf("responseSize(nil) = %d, want 0", got)
	}
}
