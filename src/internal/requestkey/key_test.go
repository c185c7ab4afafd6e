package requestkey

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

const method = "/hello.v1.Greeter/SayHello"

// key is r's key of a call, as a string.
func key(r *Rule, method, subtype string, payload []byte, md metadata.MD) string {
	return string(appendKey(r, nil, method, subtype, payload, md))
}

// appendKey appends the key of a call with metadata md to dst, as the
// proxy builds it: r keeps md's headers, then the key is appended.
func appendKey(r *Rule, dst []byte, method, subtype string, payload []byte, md metadata.MD) []byte {
	var h Headers
	for name, values := range md {
		r.Keep(&h, name, values)
	}
	return h.AppendKey(dst, method, subtype, payload)
}

func mustRule(t testing.TB, o RuleOptions) *Rule {
	t.Helper()
	r, err := NewRule(o)
	if err != nil {
		t.Fatalf("NewRule(%+v): %v", o, err)
	}
	return r
}

func TestKey_DifferentCredentialsNeverShare(t *testing.T) {
	rules := map[string]RuleOptions{
		"default mode":    {},
		"allow-list mode": {KeyHeaders: []string{"x-tenant"}},
	}
	for name, o := range rules {
		t.Run(name, func(t *testing.T) {
			r := mustRule(t, o)
			for _, pattern := range Credentials {
				cred := strings.Replace(pattern, "*", "example", 1)
				a := key(r, method, "", []byte("payload"), metadata.Pairs(cred, "alice"))
				b := key(r, method, "", []byte("payload"), metadata.Pairs(cred, "bob"))
				none := key(r, method, "", []byte("payload"), nil)
				if a == b || a == none || b == none {
					t.Errorf("%s: keys for alice, bob and no credential are not all different", cred)
				}
			}
		})
	}
}

func TestKey_UnsafeSharingIgnoresCredentials(t *testing.T) {
	r := mustRule(t, RuleOptions{ShareAcrossCredentials: true})
	a := key(r, method, "", []byte("p"), metadata.Pairs("authorization", "alice"))
	b := key(r, method, "", []byte("p"), metadata.Pairs("authorization", "bob"))
	if a != b {
		t.Error("keys differ by authorization although ShareAcrossCredentials is set")
	}
}

func TestKey_IgnoredHeadersDoNotChangeTheKey(t *testing.T) {
	r := mustRule(t, RuleOptions{IgnoreHeaders: []string{"x-debug"}})
	base := metadata.Pairs("authorization", "alice", "x-tenant", "t1")
	noisy := metadata.Join(base, metadata.Pairs(
		"user-agent", "grpc-go/1.85.0", "grpc-timeout", "99m", "traceparent", "00-abc-def-01",
		"x-b3-traceid", "1234", "x-envoy-attempt-count", "2", "x-debug", "1", "grpc-trace-bin", "\x00\x01",
	))
	if key(r, method, "", []byte("p"), base) != key(r, method, "", []byte("p"), noisy) {
		t.Error("ignored headers changed the key")
	}
}

func TestKey_AllowListModeKeepsOnlyListedHeadersAndCredentials(t *testing.T) {
	r := mustRule(t, RuleOptions{KeyHeaders: []string{"x-tenant"}})
	keyOf := func(md metadata.MD) string { return key(r, method, "", []byte("p"), md) }
	if keyOf(metadata.Pairs("x-tenant", "a")) == keyOf(metadata.Pairs("x-tenant", "b")) {
		t.Error("listed header x-tenant does not change the key")
	}
	if keyOf(metadata.Pairs("cookie", "a")) == keyOf(metadata.Pairs("cookie", "b")) {
		t.Error("credential header cookie does not change the key in allow-list mode")
	}
	if keyOf(metadata.Pairs("x-other", "a")) != keyOf(metadata.Pairs("x-other", "b")) {
		t.Error("unlisted header x-other changes the key in allow-list mode")
	}
}

func TestKey_HeaderNameOrderDoesNotMatterValueOrderDoes(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	ab := metadata.MD{"x-a": {"1"}, "x-b": {"2"}}
	ba := metadata.MD{"x-b": {"2"}, "x-a": {"1"}}
	// Map iteration order is random; repeat so both orders are exercised.
	for range 20 {
		if key(r, method, "", nil, ab) != key(r, method, "", nil, ba) {
			t.Fatal("the order of header names changed the key")
		}
	}
	v12 := metadata.MD{"x-a": {"1", "2"}}
	v21 := metadata.MD{"x-a": {"2", "1"}}
	if key(r, method, "", nil, v12) == key(r, method, "", nil, v21) {
		t.Error("the order of header values did not change the key")
	}
}

func TestKey_NormalisesNamesAndSubtype(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	if key(r, method, "", nil, nil) != key(r, method, "proto", nil, nil) {
		t.Error(`subtype "" and "proto" give different keys`)
	}
	if key(r, method, "proto", nil, nil) == key(r, method, "json", nil, nil) {
		t.Error(`subtypes "proto" and "json" give the same key`)
	}
	if key(r, method, "", nil, metadata.MD{"X-Tenant": {"a"}}) != key(r, method, "", nil, metadata.MD{"x-tenant": {"a"}}) {
		t.Error("header name case changed the key")
	}
	if key(r, method, "", nil, metadata.MD{"x-empty": {}}) != key(r, method, "", nil, nil) {
		t.Error("a header without values changed the key")
	}
}

func TestKey_FieldBoundariesAreUnambiguous(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	pairs := []struct {
		name string
		a, b func() string
	}{
		{"method/payload boundary",
			func() string { return key(r, "/s/ab", "", []byte("c"), nil) },
			func() string { return key(r, "/s/a", "", []byte("bc"), nil) }},
		{"value split",
			func() string { return key(r, method, "", nil, metadata.MD{"x": {"ab"}}) },
			func() string { return key(r, method, "", nil, metadata.MD{"x": {"a", "b"}}) }},
		{"value moved between headers",
			func() string { return key(r, method, "", nil, metadata.MD{"x": {"1", "2"}, "y": {"3"}}) },
			func() string { return key(r, method, "", nil, metadata.MD{"x": {"1"}, "y": {"2", "3"}}) }},
		{"binary value bytes",
			func() string { return key(r, method, "", nil, metadata.MD{"x-bin": {"\x00\xff"}}) },
			func() string { return key(r, method, "", nil, metadata.MD{"x-bin": {"\x00\xfe"}}) }},
	}
	for _, p := range pairs {
		if p.a() == p.b() {
			t.Errorf("%s: different tuples share a key", p.name)
		}
	}
}

func TestKey_AllocatesNothingInABufferWithRoom(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	md := benchMD()
	payload := make([]byte, 256)
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = appendKey(r, buf[:0], method, "", payload, md) }); n != 0 {
		t.Errorf("Keep and AppendKey allocate %v times, want 0", n)
	}
}

func TestKey_HoldsHeadersPastWhatTheStackHolds(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	md := metadata.MD{}
	for i := range stackHeaders + 8 {
		md[fmt.Sprintf("x-h%02d", i)] = []string{strconv.Itoa(i)}
	}
	k := key(r, method, "", []byte("p"), md)
	got, err := decodeKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if want := normalise(r, method, "", []byte("p"), md); !reflect.DeepEqual(got, want) {
		t.Errorf("key of %d headers decodes to %+v, want %+v", len(md), got, want)
	}
}

func benchMD() metadata.MD {
	return metadata.Pairs(
		"authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.sig",
		"x-tenant", "acme",
		"accept-language", "en",
		"user-agent", "grpc-go/1.85.0",
		"grpc-accept-encoding", "gzip",
		"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		":authority", "localhost:50052",
		"content-type", "application/grpc",
	)
}

func BenchmarkKey(b *testing.B) {
	r := mustRule(b, RuleOptions{})
	md := benchMD()
	payload := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		key(r, method, "", payload, md)
	}
}

func TestKeep_ReportsANameInUpperCaseKeptOrNot(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	tests := []struct {
		name   string
		values []string
		upper  bool
		kept   bool
	}{
		{"x-a", []string{"1"}, false, true},
		{"X-A", []string{"1"}, true, true},
		{"X-A", nil, true, false},                  // no values: never kept
		{"User-Agent", []string{"a"}, true, false}, // ignored by default
		{"user-agent", []string{"a"}, false, false},
	}
	for _, tt := range tests {
		var h Headers
		if got := r.Keep(&h, tt.name, tt.values); got != tt.upper {
			t.Errorf("Keep(%q, %q) reports upper case %v, want %v", tt.name, tt.values, got, tt.upper)
		}
		if kept := len(h.kept()) == 1; kept != tt.kept {
			t.Errorf("Keep(%q, %q) kept it: %v, want %v", tt.name, tt.values, kept, tt.kept)
		}
	}
}
