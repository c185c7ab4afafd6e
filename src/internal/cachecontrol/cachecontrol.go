// Package cachecontrol reads what a backend's cache-control metadata says
// of its answer, as a shared cache reads an HTTP response's Cache-Control
// field (RFC 9111 §5.2.2, with stale-while-revalidate and stale-if-error
// from RFC 5861).
//
// It is a pure function of the field's values: it never consults a clock or
// a policy. Freshness reports each thing the answer declares apart (its
// lifetime, its stale windows, whether it may be served stale, kept or
// shared); combining that with the caller's own windows, and bounding it,
// is the caller's to do.
//
// # Directives
//
// The directives read, all others ignored:
//
//   - max-age=N (RFC 9111 §5.2.2.1): the answer declares its lifetime: fresh
//     for N seconds (Declared, TTL).
//   - s-maxage=N (§5.2.2.10): the lifetime for a shared cache, which a
//     collapser is: it wins over max-age, which is then not read. As the
//     RFC says, it also forbids serving stale, as proxy-revalidate does.
//   - must-revalidate (§5.2.2.2), proxy-revalidate (§5.2.2.8): never to be
//     served stale (NoStale), whatever sets the lifetime, the answer or the
//     caller. Neither declares a lifetime.
//   - stale-while-revalidate=N, stale-if-error=N (RFC 5861 §3, §4): stale
//     windows after the lifetime, the answer's or, when it declares none,
//     the caller's. They do not "affect freshness": neither declares a
//     lifetime. Ignored when the answer may not be served stale.
//   - no-store (§5.2.2.5): the answer is not kept (NoStore).
//   - no-cache (§5.2.2.4): the answer may be reused only once the origin
//     has validated it; a collapser cannot validate, so it is read as
//     no-store (NoStore). The qualified form, no-cache="field", which lets
//     a cache keep the answer without the listed fields, is read as the
//     unqualified one, as the RFC notes caches often do.
//   - private (§5.2.2.7): for its own caller alone (Private). The qualified
//     form, private="field", likewise.
//
// An answer that is no-store, no-cache or private says nothing else: the
// most restrictive directive wins (§4.2.1), so its lifetime and stale
// windows are not read. public (§5.2.2.9), no-transform (§5.2.2.6),
// immutable (RFC 8246) and unknown directives are ignored (§5.2.3), and so
// is must-understand (§5.2.2.3): a no-store beside it still holds, as it
// does for a cache that does not claim to understand the status code.
//
// # Answers not kept
//
// An answer that is no-store, no-cache or private goes to the caller whose
// call produced it and to no one else, and is never kept: each caller that
// was waiting for the same call makes a call of its own (ten callers, ten
// backend calls). A collapser's waiters are other requests, and RFC 9111
// lets none of them reuse such an answer: no-cache, not without the
// origin's validation (§5.2.2.4), which a collapser cannot ask for;
// no-store, not stored at all (§5.2.2.5); private, not by a shared cache
// (§5.2.2.7). HTTP caches that collapse requests do the same: Varnish and
// Fastly send the requests waiting for an uncacheable response to the
// origin, each on its own. Package proxy reads NoStore and Private as the
// answer's Response.Private, which tells its collapse.Group so.
//
// # Syntax
//
// RFC 9111 §5.2 and RFC 9110 §5.6: directive names are compared without
// regard to ASCII case; a value is a token or a quoted-string, whose
// quoted-pairs are unescaped and whose commas do not end the directive.
// Whitespace around a directive, and around its "=", is ignored, and so are
// empty list elements (",,"). The values are read in order, the header's
// before the trailer's, as one list; a quoted-string left open ends with
// its value.
//
// Numbers are delta-seconds (§1.2.2): digits only, and one too large for
// the cache is 2147483648 s. An invalid max-age or s-maxage, the one that
// sets the lifetime (a value missing or empty, signed, fractional, ...), is
// invalid freshness information: the answer is stale at once (TTL 0), and
// its stale windows still apply (§4.2.1). An invalid stale-while-revalidate
// or stale-if-error is that directive ignored. A directive given more than
// once counts the first time, valid or not (§4.2.1 allows that, or treating
// the answer as stale).
package cachecontrol

import (
	"strings"
	"time"
)

// Header is the metadata key the backend declares freshness in, in the
// response's header or trailer.
const Header = "cache-control"

// maxDelta is what a delta-seconds value too large to represent counts as
// (RFC 9111 §1.2.2).
const maxDelta = 2147483648

// Freshness is what a response's cache-control says of it. The zero value
// says nothing: the caller's own windows apply.
type Freshness struct {
	// Declared is true when the answer declares how long it is fresh: a
	// lifetime (max-age, s-maxage), or none at all (no-store, no-cache,
	// private). TTL, StaleWhileRevalidate and StaleIfError then replace
	// the caller's windows. When false, TTL is zero and the caller's own
	// lifetime stays.
	Declared bool
	// TTL is how long the answer is fresh: s-maxage, else max-age; zero
	// when that value is invalid.
	TTL time.Duration
	// StaleWhileRevalidate and StaleIfError are the stale windows the
	// answer declares, each zero unless its Has field is set.
	StaleWhileRevalidate time.Duration
	StaleIfError         time.Duration
	// HasStaleWhileRevalidate and HasStaleIfError are true when the answer
	// declares that window, zero included, with or without a lifetime; an
	// invalid value declares nothing, and neither is set when NoStale is.
	HasStaleWhileRevalidate bool
	HasStaleIfError         bool
	// NoStale is true when the answer must never be served stale
	// (must-revalidate, proxy-revalidate, s-maxage), whatever sets its
	// lifetime: the caller's own stale windows do not apply either.
	NoStale bool
	// NoStore is true when the answer must not be kept (no-store, no-cache).
	NoStore bool
	// Private is true when the answer is for its own caller alone.
	Private bool
}

// directives are the directives read, as found, before they are combined.
type directives struct {
	maxAge, sMaxAge, swr, sie    delta
	noStore, private, revalidate bool
}

// delta is the first occurrence of a delta-seconds directive.
type delta struct {
	seconds int64
	given   bool // the directive was present
	valid   bool // and its first value is delta-seconds
}

// Parse reads the values of cache-control fields, in order (the header's
// before the trailer's), into the answer's Freshness.
func Parse(fields ...[]string) Freshness {
	var d directives
	for _, values := range fields {
		for _, v := range values {
			d.read(v)
		}
	}
	if d.noStore || d.private {
		return Freshness{Declared: true, NoStore: d.noStore, Private: d.private}
	}
	f := Freshness{NoStale: d.revalidate || d.sMaxAge.given}
	lifetime := d.maxAge
	if d.sMaxAge.given {
		lifetime = d.sMaxAge
	}
	f.Declared, f.TTL = lifetime.given, lifetime.duration()
	if !f.NoStale {
		f.HasStaleWhileRevalidate, f.StaleWhileRevalidate = d.swr.valid, d.swr.duration()
		f.HasStaleIfError, f.StaleIfError = d.sie.valid, d.sie.duration()
	}
	return f
}

// read adds the directives of one field value.
func (d *directives) read(v string) {
	for v != "" {
		var item string
		item, v = nextItem(v)
		name, value, hasValue := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		switch {
		case is(name, "max-age"):
			d.maxAge.read(value, hasValue)
		case is(name, "s-maxage"):
			d.sMaxAge.read(value, hasValue)
		case is(name, "stale-while-revalidate"):
			d.swr.read(value, hasValue)
		case is(name, "stale-if-error"):
			d.sie.read(value, hasValue)
		case is(name, "no-store"), is(name, "no-cache"):
			d.noStore = true
		case is(name, "private"):
			d.private = true
		case is(name, "must-revalidate"), is(name, "proxy-revalidate"):
			d.revalidate = true
		}
	}
}

// is reports whether name is want, a lower-case directive name, in any
// ASCII case (RFC 9111 §5.2): unlike strings.EqualFold, "ſ" is not "s".
func is(name, want string) bool {
	if len(name) != len(want) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

// read records the directive's value the first time it is given.
func (d *delta) read(value string, hasValue bool) {
	if d.given {
		return
	}
	d.given = true
	if hasValue {
		d.seconds, d.valid = parseDelta(unquote(strings.TrimSpace(value)))
	}
}

// duration is the value as a duration; zero when it is invalid or absent.
func (d delta) duration() time.Duration {
	if !d.valid {
		return 0
	}
	return time.Duration(d.seconds) * time.Second
}

// parseDelta reads delta-seconds: one or more digits, saturating at maxDelta.
func parseDelta(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int64(c-'0'), maxDelta)
	}
	return n, true
}

// nextItem splits the first comma-separated item off v, keeping a comma
// inside a quoted string in its item.
func nextItem(v string) (item, rest string) {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// unquote returns the content of s when s is exactly one quoted-string,
// each quoted-pair replaced by the octet it escapes (RFC 9110 §5.6.4);
// otherwise s as it is, which no number is.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' {
		return s
	}
	var b []byte // made at the first quoted-pair only
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[1:i]...)
			}
			i++
			b = append(b, s[i])
		case c == '"':
			if i != len(s)-1 {
				return s // text after the closing quote
			}
			if b == nil {
				return s[1:i]
			}
			return string(b)
		case b != nil:
			b = append(b, c)
		}
	}
	return s // never closed
}
