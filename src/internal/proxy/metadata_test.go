package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"unsafe"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/requestkey"
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

func TestIncoming_ReadsTheCallsMetadataWithoutCopyingIt(t *testing.T) {
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs(":authority", "sidecar:50052", "authorization", "Bearer ann", "x-a", "1"))
	callers := &origin{clientCert: true}
	if n := testing.AllocsPerRun(100, func() { incoming(ctx, callers) }); n != 0 {
		t.Errorf("incoming allocates %v times, want 0: it reads grpc-go's own map", n)
	}
	want := metadata.MD{":authority": {"sidecar:50052"}, "authorization": {"Bearer ann"}, "x-a": {"1"}}
	if got := incoming(ctx, callers); !reflect.DeepEqual(got, want) {
		t.Errorf("incoming = %v, want %v", map[string][]string(got), map[string][]string(want))
	}
}

// incomingCase is a call's metadata, attached to ctx as it is (not
// through metadata.New), and what incoming makes of it.
type incomingCase struct {
	name string
	ctx  context.Context
	md   metadata.MD
	want metadata.MD
}

// incomingCases are the calls whose metadata incoming changes: in a copy.
func incomingCases(t *testing.T) []incomingCase {
	cert := &x509.Certificate{Raw: []byte("a caller's certificate")}
	sum := sha256.Sum256(cert.Raw)
	verified := peer.NewContext(t.Context(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		VerifiedChains: [][]*x509.Certificate{{cert}}, PeerCertificates: []*x509.Certificate{cert}}}})
	return []incomingCase{
		{
			name: "a peer's header is dropped",
			ctx:  t.Context(),
			md:   metadata.MD{peers.Headers[0]: {"forged"}, "x-a": {"1"}},
			want: metadata.MD{"x-a": {"1"}},
		},
		{
			name: "a verified certificate names the caller",
			ctx:  verified,
			md:   metadata.MD{ClientCertHeader: {"Hash=forged"}, "x-a": {"1"}},
			want: metadata.MD{ClientCertHeader: {"Hash=" + hex.EncodeToString(sum[:])}, "x-a": {"1"}},
		},
		{
			// An interceptor before may attach names grpc-go's transport
			// never writes: a credential must still be found by its name.
			name: "names in upper case are lowered",
			ctx:  t.Context(),
			md:   metadata.MD{"Authorization": {"Bearer ann"}},
			want: metadata.MD{"authorization": {"Bearer ann"}},
		},
	}
}

func TestIncoming_ChangesOnlyACopy(t *testing.T) {
	for _, tt := range incomingCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			attached := maps.Clone(tt.md)
			ctx := metadata.NewIncomingContext(tt.ctx, attached)
			if got := incoming(ctx, &origin{clientCert: true}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("incoming = %v, want %v", map[string][]string(got), map[string][]string(tt.want))
			}
			if !reflect.DeepEqual(attached, tt.md) {
				t.Errorf("the call's own metadata became %v, want it unchanged: %v", map[string][]string(attached), map[string][]string(tt.md))
			}
		})
	}
}

func TestIncomingKeyed_IsIncomingAndTheKeyOfIt(t *testing.T) {
	r, err := requestkey.NewRule(requestkey.RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{keyRule: r, callers: origin{clientCert: true}}
	unchanged := metadata.MD{":authority": {"sidecar:50052"}, "content-type": {"application/grpc+json"}, "authorization": {"Bearer ann"}}
	tests := append(incomingCases(t), incomingCase{name: "a map that needs no change is the call's own", ctx: t.Context(), md: unchanged, want: unchanged})
	const method = "/hello.v1.Greeter/SayHello"
	payload := []byte("request")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attached := maps.Clone(tt.md)
			ctx := metadata.NewIncomingContext(tt.ctx, attached)
			md, sub, key := p.incomingKeyed(ctx, nil, method, policy.Rule{}, payload)
			if !reflect.DeepEqual(md, tt.want) {
				t.Errorf("metadata = %v, want %v", map[string][]string(md), map[string][]string(tt.want))
			}
			if want := contentSubtype(tt.want); sub != want {
				t.Errorf("content-subtype = %q, want %q", sub, want)
			}
			if want := p.appendKey(nil, method, policy.Rule{}, sub, payload, tt.want); !bytes.Equal(key, want) {
				t.Errorf("key = %q, want the key of incoming's metadata: %q", key, want)
			}
			if !reflect.DeepEqual(attached, tt.md) {
				t.Errorf("the call's own metadata became %v, want it unchanged: %v", map[string][]string(attached), map[string][]string(tt.md))
			}
		})
	}
}
