package requestkey

import (
	"google.golang.org/grpc/metadata"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNewRule_RejectsBadOptionsNamingTheEntry(t *testing.T) {
	tests := []struct {
		name    string
		opts    RuleOptions
		wantErr []string // substrings the error must contain
	}{
		{"empty key header", RuleOptions{KeyHeaders: []string{"x-tenant", ""}}, []string{"KeyHeaders[1]", "empty"}},
		{"pseudo-header other than the authority", RuleOptions{IgnoreHeaders: []string{":path"}}, []string{`IgnoreHeaders[0] ":path"`, "pseudo", `other than ":authority"`}},
		{"space in name", RuleOptions{KeyHeaders: []string{"x tenant"}}, []string{`"x tenant"`, "invalid character"}},
		{"non-token character", RuleOptions{IgnoreHeaders: []string{"x-a;b"}}, []string{`"x-a;b"`, "invalid character"}},
		{"wildcard in the middle", RuleOptions{IgnoreHeaders: []string{"x-*-id"}}, []string{`"x-*-id"`, "prefix wildcard"}},
		{"non-ASCII", RuleOptions{KeyHeaders: []string{"x-tenänt"}}, []string{`"x-tenänt"`, "invalid character"}},
		{"ignore authorization", RuleOptions{IgnoreHeaders: []string{"Authorization"}}, []string{`"authorization"`, "ShareAcrossCredentials"}},
		{"ignore a credential by prefix", RuleOptions{IgnoreHeaders: []string{"x-forwarded-*"}}, []string{`"x-forwarded-*" would drop the credential header "x-forwarded-client-cert"`}},
		{"ignore inside a credential prefix", RuleOptions{IgnoreHeaders: []string{"x-auth-request-user"}}, []string{`"x-auth-*"`}},
		{"ignore cookie in allow-list mode", RuleOptions{KeyHeaders: []string{"x-tenant"}, IgnoreHeaders: []string{"cookie"}}, []string{`"cookie"`, "credential"}},
		{"wildcard covering x-api-key", RuleOptions{IgnoreHeaders: []string{"x-*"}}, []string{`"x-*"`, `"x-api-key"`}},
		{"kept and ignored", RuleOptions{KeyHeaders: []string{"X-Tenant"}, IgnoreHeaders: []string{"x-tenant"}}, []string{`"x-tenant"`, "both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRule(tt.opts)
			if err == nil {
				t.Fatalf("NewRule(%+v) = %v, want an error", tt.opts, r)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("NewRule(%+v) error %q does not contain %q", tt.opts, err, s)
				}
			}
		})
	}
}

func TestRule_KeepsHeadersByMode(t *testing.T) {
	tests := []struct {
		name string
		opts RuleOptions
		kept []string
		drop []string
	}{
		{
			name: "default mode keeps all but the ignored",
			opts: RuleOptions{},
			kept: []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "x-tenant", "accept-language", "custom-bin",
				":authority", "x-forwarded-for", "x-real-ip", "forwarded", "x-envoy-peer-metadata", "x-envoy-external-address", "baggage"},
			drop: []string{"user-agent", "grpc-timeout", "traceparent", "x-b3-traceid", "x-envoy-attempt-count", "x-request-id", "grpc-trace-bin"},
		},
		{
			name: "default mode with extra ignores, case-insensitive, prefix wildcard",
			opts: RuleOptions{IgnoreHeaders: []string{"X-Debug", "x-trace-*"}},
			kept: []string{"authorization", "x-tenant", "x-trac"},
			drop: []string{"x-debug", "x-trace-version", "x-trace-", "user-agent"},
		},
		{
			name: "allow-list mode keeps listed headers and credentials",
			opts: RuleOptions{KeyHeaders: []string{"x-tenant", "user-agent", "x-feature-*"}},
			kept: []string{"x-tenant", "user-agent", "x-feature-a", "authorization", "cookie", "proxy-authorization", "x-api-key",
				":authority", "x-forwarded-client-cert", "x-auth-request-user", "x-user-id", "x-goog-iap-jwt-assertion"},
			drop: []string{"accept-language", "traceparent", "x-other"},
		},
		{
			name: "allow-list mode applies IgnoreHeaders only",
			opts: RuleOptions{KeyHeaders: []string{"x-feature-*"}, IgnoreHeaders: []string{"x-feature-debug"}},
			kept: []string{"x-feature-a", "authorization"},
			drop: []string{"x-feature-debug", "x-tenant"},
		},
		{
			name: "unsafe sharing drops credentials in default mode",
			opts: RuleOptions{ShareAcrossCredentials: true},
			kept: []string{"x-tenant"},
			drop: []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "user-agent"},
		},
		{
			name: "unsafe sharing keeps only listed credentials in allow-list mode",
			opts: RuleOptions{KeyHeaders: []string{"authorization"}, ShareAcrossCredentials: true},
			kept: []string{"authorization"},
			drop: []string{"cookie", "x-api-key", "proxy-authorization"},
		},
		{
			name: "the authority may be ignored explicitly",
			opts: RuleOptions{KeyHeaders: []string{"x-tenant"}, IgnoreHeaders: []string{":authority"}},
			kept: []string{"x-tenant", "authorization"},
			drop: []string{":authority"},
		},
		{
			name: "unsafe sharing allows ignoring a credential",
			opts: RuleOptions{IgnoreHeaders: []string{"cookie"}, ShareAcrossCredentials: true},
			kept: []string{"x-tenant"},
			drop: []string{"cookie", "authorization"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRule(t, tt.opts)
			for _, h := range tt.kept {
				if !r.keeps(h) {
					t.Errorf("header %q not kept, want kept", h)
				}
			}
			for _, h := range tt.drop {
				if r.keeps(h) {
					t.Errorf("header %q kept, want dropped", h)
				}
			}
		})
	}
}

func TestDefaultIgnored_EntriesAreValidAndSpareCredentials(t *testing.T) {
	ignored := newMatcher(DefaultIgnored)
	for _, p := range DefaultIgnored {
		if p[0] == ':' {
			continue // pseudo-headers are valid here, only operators may not name them
		}
		if err := validatePattern(p); err != nil {
			t.Errorf("DefaultIgnored entry %q: %v", p, err)
		}
	}
	for _, c := range Credentials {
		if ignored.match(c) {
			t.Errorf("DefaultIgnored matches credential header %q", c)
		}
	}
}

func TestRule_AHeaderWhoseNameSaysCredentialStaysInTheKey(t *testing.T) {
	allowList, err := NewRule(RuleOptions{KeyHeaders: []string{"x-tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		kept bool
	}{
		{"x-api-token", true},
		{"x-vault-token", true},
		{"x-authorization", true},
		{"x-oauth2-code", false}, // "oauth2" is no word of a credential
		{"x-auth-user", true},
		{"x-api-secret", true},
		{"x-my-session", true},
		{"x-user-password", true},
		{"x-request-signature", true},
		{"x-idempotency-key", true},
		{"x-accesstoken", true},
		{"x-tenant", true},
		{"x-color", false},
		{"x-monkey-business", true}, // a word ending in "key": a false alarm costs sharing, never a leak
	} {
		if got := allowList.keeps(tt.name); got != tt.kept {
			t.Errorf("allow-list keeps(%q) = %v, want %v", tt.name, got, tt.kept)
		}
	}
	if _, err := NewRule(RuleOptions{IgnoreHeaders: []string{"x-vault-token"}}); err == nil || !strings.Contains(err.Error(), `"x-vault-token" names a credential`) {
		t.Errorf("ignoring x-vault-token: %v, want an error naming it", err)
	}
	if _, err := NewRule(RuleOptions{IgnoreHeaders: []string{"x-vault-token"}, ShareAcrossCredentials: true}); err != nil {
		t.Errorf("ignoring x-vault-token when credentials are shared: %v", err)
	}
	for _, h := range DefaultIgnored {
		if credentialName(strings.TrimSuffix(h, "*")) {
			t.Errorf("DefaultIgnored %q is a credential by its name", h)
		}
	}
}

func TestRule_TheConnectionIsInEveryKey(t *testing.T) {
	for _, o := range []RuleOptions{
		{},
		{KeyHeaders: []string{"x-tenant"}},
		{IgnoreHeaders: []string{"x-*"}, ShareAcrossCredentials: true},
	} {
		r, err := NewRule(o)
		if err != nil {
			t.Fatal(err)
		}
		one := key(r, "/s/M", "", nil, metadata.MD{Connection: {"1"}})
		two := key(r, "/s/M", "", nil, metadata.MD{Connection: {"2"}})
		if one == two {
			t.Errorf("%+v: calls on two connections have one key", o)
		}
	}
}
