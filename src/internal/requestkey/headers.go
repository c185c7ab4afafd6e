package requestkey

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultIgnored lists the transport and tracing headers that are never part
// of the key in the default mode: they differ from call to call without
// changing the answer, and none of them carries who the caller is or input
// to an authorization decision. An entry ending in "*" matches every header
// with that prefix. RuleOptions.IgnoreHeaders extends this list; in
// allow-list mode (RuleOptions.KeyHeaders) it does not apply.
//
// The backend sees the leader's value of every header left out of the key:
// a follower's own value of an ignored header never reaches it.
//
// Deliberately not ignored: ":authority" (virtual hosts may answer
// differently), "x-forwarded-for", "x-real-ip" and "forwarded" (client
// addresses feed allow-lists and rate limits), "x-forwarded-host" and
// "x-forwarded-proto", and Envoy's headers other than its retry and timeout
// hints ("x-envoy-peer-metadata", "x-envoy-external-address" and
// "x-envoy-internal" identify the caller).
var DefaultIgnored = []string{
	// transport
	"content-type",
	"te",
	"user-agent",
	"grpc-accept-encoding",
	"grpc-encoding",
	"grpc-timeout",
	"grpc-previous-rpc-attempts",
	// proxies' per-attempt hints
	"x-request-id",
	"x-envoy-attempt-count",
	"x-envoy-expected-rq-timeout-ms",
	"x-envoy-upstream-rq-timeout-ms",
	"x-envoy-upstream-rq-per-try-timeout-ms",
	"x-envoy-retry-on",
	"x-envoy-retry-grpc-on",
	"x-envoy-max-retries",
	"x-envoy-decorator-operation",
	"x-envoy-force-trace",
	"x-amzn-trace-id",
	"x-cloud-trace-context",
	// tracing
	"traceparent",
	"tracestate",
	"grpc-trace-bin",
	"b3",
	"x-b3-traceid",
	"x-b3-spanid",
	"x-b3-parentspanid",
	"x-b3-sampled",
	"x-b3-flags",
	"uber-trace-id",
	"x-ot-span-context",
	"x-datadog-trace-id",
	"x-datadog-parent-id",
	"x-datadog-sampling-priority",
	"x-datadog-origin",
}

// Credentials lists the headers that identify the caller or carry its
// authorization, as clients, API gateways, service meshes and auth proxies
// send them. They stay in the key in every mode, and RuleOptions.IgnoreHeaders
// may not name them, unless RuleOptions.ShareAcrossCredentials is set. An
// entry ending in "*" matches every header with that prefix. A header that
// is wrongly here costs only sharing; one missing would leak answers.
var Credentials = []string{
	// clients
	"authorization",
	"proxy-authorization",
	"cookie",
	"x-api-key",
	"api-key",
	"x-goog-api-key",
	"ocp-apim-subscription-key", // Azure API Management
	"x-auth-token",
	"x-access-token",
	"x-id-token",
	"x-csrf-token",
	"x-xsrf-token",
	"x-session-*",
	"x-amz-security-token",
	// mTLS peer identity forwarded by proxies
	"x-forwarded-client-cert", // Envoy, Istio
	"x-forwarded-tls-client-cert*",
	"x-client-cert*",
	"x-ssl-client-*",
	"ssl-client-*",
	// identity set by auth proxies and gateways
	"x-auth-*",           // oauth2-proxy (x-auth-request-*), Traefik forward auth
	"x-forwarded-user",   // oauth2-proxy, Apache
	"x-forwarded-email",  // oauth2-proxy
	"x-forwarded-groups", // oauth2-proxy
	"x-forwarded-preferred-username",
	"x-forwarded-access-token",
	"x-remote-user",
	"remote-user",
	"x-user*",           // x-user, x-user-id, x-userinfo (Kong OIDC)
	"x-authenticated-*", // x-authenticated-userid (Kong)
	"x-consumer-*",      // Kong
	"x-credential-identifier",
	"x-jwt-*",                   // x-jwt-payload, x-jwt-assertion (WSO2)
	"x-endpoint-api-userinfo",   // Google Cloud Endpoints (ESPv2)
	"x-apigateway-api-userinfo", // Google API Gateway
	"x-goog-iap-jwt-assertion",  // Google IAP
	"x-goog-authenticated-*",
	"x-ms-client-principal*", // Azure App Service authentication
	"x-ms-token-*",
	"x-amzn-oidc-*", // AWS ALB authentication
	"x-tenant-*",
}

// credentialWords are the words of a header's name that say it carries a
// credential, whatever the header: a name with one of them as a word
// (separated by '-', '_' or '.'), or a word starting with "auth" or ending
// with "token", "key" or "secret", is a credential too (isCredential), so
// that "x-vault-token" or "x-my-authorization" stay in the key though no
// list names them.
var credentialWords = map[string]bool{
	"token": true, "secret": true, "session": true, "key": true, "password": true, "passwd": true,
	"pwd": true, "signature": true, "sig": true, "cookie": true, "credential": true, "credentials": true,
	"jwt": true, "bearer": true, "apikey": true, "otp": true,
}

// isCredential reports whether the lower-case header name carries a
// credential: Credentials names it, or its words say so (credentialWords).
func isCredential(name string) bool {
	return credentialSet.match(name) || credentialName(name)
}

// credentialName reports whether a word of name says it carries a
// credential (credentialWords). It does not allocate: it runs for every
// header of a call in allow-list mode.
func credentialName(name string) bool {
	for name != "" {
		i := strings.IndexAny(name, "-_.")
		word := name
		if i >= 0 {
			word, name = name[:i], name[i+1:]
		} else {
			name = ""
		}
		if credentialWords[word] || strings.HasPrefix(word, "auth") ||
			strings.HasSuffix(word, "token") || strings.HasSuffix(word, "key") || strings.HasSuffix(word, "secret") {
			return true
		}
	}
	return false
}

// Authority is the pseudo-header naming the host a call was addressed to.
// It is part of the key in every mode (one sidecar may front several
// virtual hosts) unless RuleOptions.IgnoreHeaders names it.
const Authority = ":authority"

// Connection is the pseudo-header that names, in the key of a call the
// library's client interceptor collapses, the connection the call is made
// on: calls made on two connections never share an answer, since each may
// carry credentials of its own (a dial's per-RPC credentials) that no
// metadata shows. It is part of the key in every mode, whatever the rule
// says; no call on the wire carries it.
const Connection = ":collapser-connection"

// matcher matches header names against exact names and "prefix*" patterns.
// It is built once by NewRule and only read afterwards.
type matcher struct {
	exact    map[string]struct{}
	prefixes []string
}

func newMatcher(patterns []string) matcher {
	m := matcher{exact: make(map[string]struct{}, len(patterns))}
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			m.prefixes = append(m.prefixes, prefix)
			continue
		}
		m.exact[p] = struct{}{}
	}
	return m
}

// match reports whether the lower-case header name matches a pattern.
func (m matcher) match(name string) bool {
	if _, ok := m.exact[name]; ok {
		return true
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// normalizePatterns lower-cases and validates header names given by the
// operator. field names the option in errors ("KeyHeaders").
func normalizePatterns(field string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for i, raw := range in {
		p := strings.ToLower(raw)
		if err := validatePattern(p); err != nil {
			return nil, fmt.Errorf("requestkey: %s[%d] %q: %w", field, i, raw, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// validatePattern accepts a lower-case gRPC header name ([0-9a-z-_.]+),
// optionally ending in "*" to match a prefix ("*" alone matches every header).
func validatePattern(p string) error {
	if p == "" {
		return errors.New("empty header name")
	}
	if p[0] == ':' {
		if p == Authority {
			return nil
		}
		return errors.New(`pseudo-headers (":...") other than ":authority" cannot be configured`)
	}
	name := strings.TrimSuffix(p, "*")
	for i := 0; i < len(name); i++ {
		c := name[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '_' || c == '.' {
			continue
		}
		if c == '*' {
			return errors.New(`"*" is only allowed at the end, as a prefix wildcard`)
		}
		return fmt.Errorf("invalid character %q: header names may only contain letters, digits, '-', '_' and '.'", c)
	}
	return nil
}

// ValidateName checks a lower-case gRPC header name given by an operator
// (no pattern, no pseudo-header).
func ValidateName(name string) error {
	if strings.HasSuffix(name, "*") || strings.HasPrefix(name, ":") {
		return errors.New("want a header name, without \"*\" or \":\"")
	}
	return validatePattern(name)
}
