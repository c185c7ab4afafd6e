// Package cachecontrol reads the freshness a backend declares for its answer
// in cache-control metadata, as a shared cache reads an HTTP response's
// Cache-Control field (RFC 9111 §5.2.2, with stale-while-revalidate and
// stale-if-error from RFC 5861).
//
// It is a pure function of the field's values: it never consults a clock or
// a policy. What a collapser does with the result (bound it, ignore it) is
// the caller's to decide.
//
// The directives read, all others ignored:
//
//   - max-age=N: fresh for N seconds; s-maxage=N wins over it, as it does for
//     every shared cache, and also forbids serving stale (RFC 9111 §5.2.2.10).
//   - stale-while-revalidate=N, stale-if-error=N: the stale windows after it.
//   - no-store, no-cache: not kept (a collapser cannot revalidate a kept
//     answer, so no-cache keeps nothing, as no-store); still shared with the
//     callers already waiting for the call.
//   - private: for its own caller alone, never shared nor kept.
//   - must-revalidate, proxy-revalidate: never served stale.
//
// Names are case-insensitive; a value may be a token or a quoted string. A
// directive given twice counts the first time (RFC 9111 §4.2.1). A number
// that is not delta-seconds makes the answer stale at once (TTL 0, no stale
// windows: "invalid freshness information" in §4.2.1), and one too large
// for the cache is 2147483648 s (§1.2.2).
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

// Freshness is what a response's cache-control says of it.
type Freshness struct {
	// Declared is true when a directive read here was present; otherwise
	// the other fields are zero and the caller's own windows apply.
	Declared bool
	// TTL is how long the answer is fresh: max-age, or s-maxage.
	TTL time.Duration
	// StaleWhileRevalidate and StaleIfError are the stale windows after TTL;
	// both are zero when the answer must be revalidated.
	StaleWhileRevalidate time.Duration
	StaleIfError         time.Duration
	// NoStore is true when the answer must not be kept (no-store, no-cache).
	NoStore bool
	// Private is true when the answer is for its own caller alone.
	Private bool
}

// directives are the fields read, as found, before they are combined.
type directives struct {
	maxAge, sMaxAge, swr, sie    delta
	noStore, private, revalidate bool
	invalid                      bool // a freshness number that is not delta-seconds
	declared                     bool
}

// delta is a delta-seconds value and whether it was given.
type delta struct {
	seconds int64
	set     bool
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
	if !d.declared {
		return Freshness{}
	}
	f := Freshness{Declared: true, NoStore: d.noStore, Private: d.private}
	ttl := d.maxAge
	if d.sMaxAge.set {
		ttl, d.revalidate = d.sMaxAge, true
	}
	if d.invalid || f.NoStore || f.Private {
		return f
	}
	f.TTL = ttl.duration()
	if !d.revalidate {
		f.StaleWhileRevalidate = d.swr.duration()
		f.StaleIfError = d.sie.duration()
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
		value = unquote(strings.TrimSpace(value))
		switch {
		case strings.EqualFold(name, "max-age"):
			d.number(&d.maxAge, value, hasValue)
		case strings.EqualFold(name, "s-maxage"):
			d.number(&d.sMaxAge, value, hasValue)
		case strings.EqualFold(name, "stale-while-revalidate"):
			d.number(&d.swr, value, hasValue)
		case strings.EqualFold(name, "stale-if-error"):
			d.number(&d.sie, value, hasValue)
		case strings.EqualFold(name, "no-store"), strings.EqualFold(name, "no-cache"):
			d.noStore, d.declared = true, true
		case strings.EqualFold(name, "private"):
			d.private, d.declared = true, true
		case strings.EqualFold(name, "must-revalidate"), strings.EqualFold(name, "proxy-revalidate"):
			d.revalidate, d.declared = true, true
		}
	}
}

// number records a delta-seconds directive the first time it is given.
func (d *directives) number(to *delta, value string, hasValue bool) {
	d.declared = true
	if to.set {
		return
	}
	n, ok := parseDelta(value)
	if !hasValue || !ok {
		d.invalid = true
		return
	}
	*to = delta{seconds: n, set: true}
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

func (d delta) duration() time.Duration {
	return time.Duration(d.seconds) * time.Second
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

// unquote returns a quoted-string's content (escapes kept: no number has
// one), or s as it is.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
