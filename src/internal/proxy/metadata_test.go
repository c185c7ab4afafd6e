package proxy

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
	"unsafe"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/heapsize"
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

func TestResponseSize_CountsPayloadAndMetadataAsAllocated(t *testing.T) {
	r := &Response{
		Payload: make([]byte, 10, 20),
		Header:  metadata.Pairs("ab", "cde"),
		Trailer: metadata.Pairs("f", "g"),
	}
	want := heapsize.Of(int(unsafe.Sizeof(*r))) + heapsize.Of(20) + heapsize.MD(r.Header) + heapsize.MD(r.Trailer)
	if got := responseSize(r); got != want {
		t.Errorf("responseSize = %d, want %d", got, want)
	}
	if got := responseSize(nil); got != 0 {
		t.Errorf("responseSize(nil) = %d, want 0", got)
	}
}

func TestKept_DropsHopHeadersAndKeepsNothingOfAnEmptyMap(t *testing.T) {
	many := metadata.MD{"content-type": {"application/grpc"}}
	for i := range 8 {
		many[fmt.Sprintf("x-%d", i)] = []string{"v"}
	}
	tests := []struct {
		name string
		md   metadata.MD
		want metadata.MD
	}{
		{"nil", nil, nil},
		{"only hop headers", metadata.Pairs("content-type", "application/grpc", "grpc-status", "0"), nil},
		{"application headers stay", metadata.Pairs("content-type", "application/grpc", "x-a", "1"), metadata.Pairs("x-a", "1")},
		{"a map that shrinks past a group", many, func() metadata.MD {
			want := maps.Clone(many)
			delete(want, "content-type")
			return want
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kept(tt.md); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("kept = %v, want %v", got, tt.want)
			}
		})
	}
}
