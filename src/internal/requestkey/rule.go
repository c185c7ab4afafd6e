package requestkey

import (
	"fmt"
	"strings"
)

// RuleOptions selects the headers that are part of the key.
//
// A header is in the key when it is selected and not ignored:
//   - default mode (KeyHeaders empty): every header is selected; DefaultIgnored
//     and IgnoreHeaders are ignored.
//   - allow-list mode (KeyHeaders non-empty): the KeyHeaders and the
//     credentials are selected; only IgnoreHeaders are ignored.
//
// A credential is a header Credentials names, or one whose name has a word
// that says it carries one (credentialWords: "x-vault-token",
// "x-authorization", "x-api-secret").
//
// Entries are header names, case-insensitive; a trailing "*" matches a prefix.
type RuleOptions struct {
	// KeyHeaders switches to allow-list mode when non-empty: only these headers
	// (plus the credentials) are in the key.
	KeyHeaders []string
	// IgnoreHeaders extends DefaultIgnored. It may not match a credential
	// unless ShareAcrossCredentials is set.
	IgnoreHeaders []string
	// ShareAcrossCredentials is UNSAFE: it drops the credentials from the key
	// (except those named in KeyHeaders), so callers with different
	// credentials share one response. Only for backends whose answers do not
	// depend on who asks.
	ShareAcrossCredentials bool
}

// Rule decides which request headers are part of the key. It is immutable and
// safe for concurrent use.
type Rule struct {
	allowList bool
	selected  matcher // allow-list mode: KeyHeaders
	ignored   matcher // DefaultIgnored (default mode only) + IgnoreHeaders
	// dropCredentials is ShareAcrossCredentials: credentials are not selected
	// by being credentials.
	dropCredentials bool
}

// credentialSet matches the Credentials.
var credentialSet = newMatcher(Credentials)

// NewRule validates o and builds its Rule. It rejects invalid header names,
// pseudo-headers, a header both kept and ignored, and ignoring a credential
// header without ShareAcrossCredentials; errors name the bad entry.
func NewRule(o RuleOptions) (*Rule, error) {
	keep, err := normalizePatterns("KeyHeaders", o.KeyHeaders)
	if err != nil {
		return nil, err
	}
	ignore, err := normalizePatterns("IgnoreHeaders", o.IgnoreHeaders)
	if err != nil {
		return nil, err
	}
	for _, p := range ignore {
		for _, k := range keep {
			if p == k {
				return nil, fmt.Errorf("requestkey: header %q is in both KeyHeaders and IgnoreHeaders", p)
			}
		}
		if o.ShareAcrossCredentials {
			continue
		}
		for _, c := range Credentials {
			if overlaps(p, c) {
				return nil, fmt.Errorf("requestkey: IgnoreHeaders entry %q would drop the credential header %q from the key, "+
					"letting callers with different credentials share responses; remove it or set ShareAcrossCredentials (unsafe)", p, c)
			}
		}
		if credentialName(strings.TrimSuffix(p, "*")) {
			return nil, fmt.Errorf("requestkey: IgnoreHeaders entry %q names a credential (a word of its name says so: token, auth..., key, secret, session, password, signature, cookie), "+
				"letting callers with different credentials share responses; remove it or set ShareAcrossCredentials (unsafe)", p)
		}
	}
	r := &Rule{
		allowList:       len(keep) > 0,
		selected:        newMatcher(keep),
		dropCredentials: o.ShareAcrossCredentials,
	}
	if r.allowList {
		r.ignored = newMatcher(ignore)
	} else {
		r.ignored = newMatcher(append(append([]string(nil), DefaultIgnored...), ignore...))
	}
	return r, nil
}

// keeps reports whether the lower-case header name is part of the key.
func (r *Rule) keeps(name string) bool {
	if name == Connection {
		return true
	}
	if r.ignored.match(name) {
		return false
	}
	if r.allowList {
		return name == Authority || r.selected.match(name) || (!r.dropCredentials && isCredential(name))
	}
	return !r.dropCredentials || !isCredential(name)
}

// overlaps reports whether the patterns a and b match a common header name.
func overlaps(a, b string) bool {
	pa, wa := strings.CutSuffix(a, "*")
	pb, wb := strings.CutSuffix(b, "*")
	switch {
	case wa && wb:
		return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
	case wa:
		return strings.HasPrefix(b, pa)
	case wb:
		return strings.HasPrefix(a, pb)
	}
	return a == b
}
