package requestkey

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultIgnored lists the transport and tracing headers that are never part
// of the key in the default mode: they differ from call to call without
// changing the answer. An entry ending in "*" matches every header with that
// prefix. RuleOptions.IgnoreHeaders extends this list; in allow-list mode
// (RuleOptions.KeyHeaders) it does not apply.
var DefaultIgnored = []string{
	// transport
	":authority",
	"content-type",
	"te",
	"user-agent",
	"grpc-accept-encoding",
	"grpc-encoding",
	"grpc-timeout",
	"grpc-previous-rpc-attempts",
	// proxies and load balancers
	"forwarded",
	"x-forwarded-for",
	"x-forwarded-host",
	"x-forwarded-port",
	"x-forwarded-proto",
	"x-real-ip",
	"x-request-id",
	"x-envoy-*",
	"x-amzn-trace-id",
	"x-cloud-trace-context",
	// tracing
	"traceparent",
	"tracestate",
	"grpc-trace-bin",
	"grpc-tags-bin",
	"b3",
	"x-b3-traceid",
	"x-b3-spanid",
	"x-b3-parentspanid",
	"x-b3-sampled",
	"x-b3-flags",
	"uber-trace-id",
	"x-ot-span-context",
	"x-datadog-*",
}

// Credentials lists the headers that identify the caller. They stay in the key
// in every mode, and RuleOptions.IgnoreHeaders may not name them, unless
// RuleOptions.ShareAcrossCredentials is set.
var Credentials = []string{
	"authorization",
	"cookie",
	"proxy-authorization",
	"x-api-key",
}

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
		return errors.New("pseudo-headers (\":...\") cannot be configured")
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
