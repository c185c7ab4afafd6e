package requestkey

import (
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

const method = "/hello.v1.Greeter/SayHello"

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
				a := r.Key(method, "", []byte("payload"), metadata.Pairs(cred, "alice"))
				b := r.Key(method, "", []byte("payload"), metadata.Pairs(cred, "bob"))
				none := r.Key(method, "", []byte("payload"), nil)
				if a == b || a == none || b == none {
					t.Errorf("%s: keys for alice, bob and no credential are not all different", cred)
				}
			}
		})
	}
}

func TestKey_UnsafeSharingIgnoresCredentials(t *testing.T) {
	r := mustRule(t, RuleOptions{ShareAcrossCredentials: true})
	a := r.Key(method, "", []byte("p"), metadata.Pairs("authorization", "alice"))
	b := r.Key(method, "", []byte("p"), metadata.Pairs("authorization", "bob"))
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
	if r.Key(method, "", []byte("p"), base) != r.Key(method, "", []byte("p"), noisy) {
		t.Error("ignored headers changed the key")
	}
}

func TestKey_AllowListModeKeepsOnlyListedHeadersAndCredentials(t *testing.T) {
	r := mustRule(t, RuleOptions{KeyHeaders: []string{"x-tenant"}})
	key := func(md metadata.MD) string { return r.Key(method, "", []byte("p"), md) }
	if key(metadata.Pairs("x-tenant", "a")) == key(metadata.Pairs("x-tenant", "b")) {
		t.Error("listed header x-tenant does not change the key")
	}
	if key(metadata.Pairs("cookie", "a")) == key(metadata.Pairs("cookie", "b")) {
		t.Error("credential header cookie does not change the key in allow-list mode")
	}
	if key(metadata.Pairs("x-other", "a")) != key(metadata.Pairs("x-other", "b")) {
		t.Error("unlisted header x-other changes the key in allow-list mode")
	}
}

func TestKey_HeaderNameOrderDoesNotMatterValueOrderDoes(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	ab := metadata.MD{"x-a": {"1"}, "x-b": {"2"}}
	ba := metadata.MD{"x-b": {"2"}, "x-a": {"1"}}
	// Map iteration order is random; repeat so both orders are exercised.
	for range 20 {
		if r.Key(method, "", nil, ab) != r.Key(method, "", nil, ba) {
			t.Fatal("the order of header names changed the key")
		}
	}
	v12 := metadata.MD{"x-a": {"1", "2"}}
	v21 := metadata.MD{"x-a": {"2", "1"}}
	if r.Key(method, "", nil, v12) == r.Key(method, "", nil, v21) {
		t.Error("the order of header values did not change the key")
	}
}

func TestKey_NormalisesNamesAndSubtype(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	if r.Key(method, "", nil, nil) != r.Key(method, "proto", nil, nil) {
		t.Error(`subtype "" and "proto" give different keys`)
	}
	if r.Key(method, "proto", nil, nil) == r.Key(method, "json", nil, nil) {
		t.Error(`subtypes "proto" and "json" give the same key`)
	}
	if r.Key(method, "", nil, metadata.MD{"X-Tenant": {"a"}}) != r.Key(method, "", nil, metadata.MD{"x-tenant": {"a"}}) {
		t.Error("header name case changed the key")
	}
	if r.Key(method, "", nil, metadata.MD{"x-empty": {}}) != r.Key(method, "", nil, nil) {
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
			func() string { return r.Key("/s/ab", "", []byte("c"), nil) },
			func() string { return r.Key("/s/a", "", []byte("bc"), nil) }},
		{"value split",
			func() string { return r.Key(method, "", nil, metadata.MD{"x": {"ab"}}) },
			func() string { return r.Key(method, "", nil, metadata.MD{"x": {"a", "b"}}) }},
		{"value moved between headers",
			func() string { return r.Key(method, "", nil, metadata.MD{"x": {"1", "2"}, "y": {"3"}}) },
			func() string { return r.Key(method, "", nil, metadata.MD{"x": {"1"}, "y": {"2", "3"}}) }},
		{"binary value bytes",
			func() string { return r.Key(method, "", nil, metadata.MD{"x-bin": {"\x00\xff"}}) },
			func() string { return r.Key(method, "", nil, metadata.MD{"x-bin": {"\x00\xfe"}}) }},
	}
	for _, p := range pairs {
		if p.a() == p.b() {
			t.Errorf("%s: different tuples share a key", p.name)
		}
	}
}

func TestKey_AllocatesOnlyTheResult(t *testing.T) {
	r := mustRule(t, RuleOptions{})
	md := benchMD()
	payload := make([]byte, 256)
	if n := testing.AllocsPerRun(100, func() { r.Key(method, "", payload, md) }); n != 1 {
		t.Errorf("Key allocates %v times, want 1", n)
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
		r.Key(method, "", payload, md)
	}
}
