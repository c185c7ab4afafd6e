package cachecontrol

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const s = time.Second
	// lifetime is an answer that declares its lifetime, fresh for ttl.
	lifetime := func(ttl time.Duration) Freshness { return Freshness{Declared: true, TTL: ttl} }
	tests := []struct {
		name   string
		values []string
		want   Freshness
	}{
		// Nothing read.
		{"nothing", nil, Freshness{}},
		{"empty value", []string{""}, Freshness{}},
		{"only empty items", []string{" , ,,"}, Freshness{}},
		{"public, immutable, no-transform and extensions are ignored", []string{"public, immutable, no-transform, x-ext=1, x-flag"}, Freshness{}},
		{"must-understand is ignored", []string{"must-understand"}, Freshness{}},

		// max-age (§5.2.2.1) and s-maxage (§5.2.2.10): the lifetime.
		{"max-age", []string{"max-age=60"}, lifetime(60 * s)},
		{"max-age zero", []string{"max-age=0"}, lifetime(0)},
		{"leading zeros", []string{"max-age=007"}, lifetime(7 * s)},
		{"s-maxage wins for a shared cache", []string{"max-age=10, s-maxage=100"}, Freshness{Declared: true, TTL: 100 * s, NoStale: true}},
		{"s-maxage wins whatever the order", []string{"s-maxage=100, max-age=10"}, Freshness{Declared: true, TTL: 100 * s, NoStale: true}},
		{"s-maxage forbids stale serving", []string{"s-maxage=100, stale-while-revalidate=20, stale-if-error=30"}, Freshness{Declared: true, TTL: 100 * s, NoStale: true}},
		{"an invalid max-age beside a valid s-maxage does not matter", []string{"max-age=soon, s-maxage=9"}, Freshness{Declared: true, TTL: 9 * s, NoStale: true}},
		{"an invalid s-maxage: stale at once, never served stale", []string{"max-age=60, s-maxage=soon"}, Freshness{Declared: true, NoStale: true}},

		// Invalid freshness information (§4.2.1): stale at once; its stale
		// windows still apply.
		{"invalid max-age: stale at once", []string{"max-age=soon"}, lifetime(0)},
		{"invalid max-age keeps the stale windows", []string{"max-age=soon, stale-while-revalidate=20"}, Freshness{Declared: true, StaleWhileRevalidate: 20 * s, HasStaleWhileRevalidate: true}},
		{"negative number is invalid", []string{"max-age=-1"}, lifetime(0)},
		{"signed number is invalid", []string{"max-age=+1"}, lifetime(0)},
		{"fraction is invalid", []string{"max-age=1.5"}, lifetime(0)},
		{"number without a value is invalid", []string{"max-age"}, lifetime(0)},
		{"empty number is invalid", []string{"max-age="}, lifetime(0)},
		{"empty quoted number is invalid", []string{`max-age=""`}, lifetime(0)},
		{"unterminated quoted number is invalid", []string{`max-age="5`}, lifetime(0)},
		{"text after a quoted number is invalid", []string{`max-age="5"0`}, lifetime(0)},
		{"too large saturates (§1.2.2)", []string{"max-age=99999999999999999999999"}, lifetime(maxDelta * s)},
		{"just below the saturation", []string{"max-age=2147483647"}, lifetime((maxDelta - 1) * s)},

		// stale-while-revalidate and stale-if-error (RFC 5861 §3, §4): stale
		// windows, no lifetime.
		{"all windows", []string{"max-age=10, stale-while-revalidate=20, stale-if-error=30"}, Freshness{Declared: true, TTL: 10 * s, StaleWhileRevalidate: 20 * s, StaleIfError: 30 * s, HasStaleWhileRevalidate: true, HasStaleIfError: true}},
		{"a lone stale-while-revalidate declares no lifetime", []string{"stale-while-revalidate=20"}, Freshness{StaleWhileRevalidate: 20 * s, HasStaleWhileRevalidate: true}},
		{"a lone stale-if-error declares no lifetime", []string{"stale-if-error=60"}, Freshness{StaleIfError: 60 * s, HasStaleIfError: true}},
		{"a stale window of zero is declared", []string{"stale-if-error=0"}, Freshness{HasStaleIfError: true}},
		{"an invalid stale-if-error keeps a valid max-age", []string{"max-age=60, stale-if-error=soon"}, lifetime(60 * s)},
		{"an invalid stale-while-revalidate is ignored alone", []string{"stale-while-revalidate=1.5, stale-if-error=4"}, Freshness{StaleIfError: 4 * s, HasStaleIfError: true}},
		{"a stale window without a value is ignored", []string{"max-age=3, stale-if-error"}, lifetime(3 * s)},

		// must-revalidate (§5.2.2.2), proxy-revalidate (§5.2.2.8): never
		// stale, no lifetime.
		{"a lone must-revalidate declares no lifetime", []string{"must-revalidate"}, Freshness{NoStale: true}},
		{"a lone proxy-revalidate declares no lifetime", []string{"proxy-revalidate"}, Freshness{NoStale: true}},
		{"must-revalidate beside a lone stale window", []string{"must-revalidate, stale-if-error=60"}, Freshness{NoStale: true}},
		{"must-revalidate forbids stale serving", []string{"max-age=10, must-revalidate, stale-if-error=30"}, Freshness{Declared: true, TTL: 10 * s, NoStale: true}},
		{"proxy-revalidate forbids stale serving", []string{"max-age=10, proxy-revalidate, stale-while-revalidate=30"}, Freshness{Declared: true, TTL: 10 * s, NoStale: true}},

		// no-store (§5.2.2.5), no-cache (§5.2.2.4), private (§5.2.2.7):
		// nothing kept, nothing else read.
		{"no-store", []string{"no-store"}, Freshness{Declared: true, NoStore: true}},
		{"no-cache keeps nothing", []string{"no-cache"}, Freshness{Declared: true, NoStore: true}},
		{"qualified no-cache keeps nothing", []string{`no-cache="x-user"`}, Freshness{Declared: true, NoStore: true}},
		{"qualified no-cache with a list", []string{`no-cache="set-cookie, x-user", max-age=60`}, Freshness{Declared: true, NoStore: true}},
		{"the most restrictive wins: no-store over max-age", []string{"max-age=60, no-store"}, Freshness{Declared: true, NoStore: true}},
		{"no-store beside must-understand still holds", []string{"must-understand, no-store"}, Freshness{Declared: true, NoStore: true}},
		{"no-store over a lone stale window", []string{"stale-if-error=60, no-store"}, Freshness{Declared: true, NoStore: true}},
		{"private", []string{"private, max-age=60"}, Freshness{Declared: true, Private: true}},
		{"qualified private", []string{`private="x-user", max-age=60`}, Freshness{Declared: true, Private: true}},
		{"private and no-store", []string{"private, no-store"}, Freshness{Declared: true, Private: true, NoStore: true}},

		// Duplicates (§4.2.1): the first occurrence counts, valid or not.
		{"the first max-age counts", []string{"max-age=5, max-age=500"}, lifetime(5 * s)},
		{"the first max-age counts across values", []string{"max-age=5", "max-age=500, stale-if-error=9"}, Freshness{Declared: true, TTL: 5 * s, StaleIfError: 9 * s, HasStaleIfError: true}},
		{"a later invalid duplicate is ignored", []string{"max-age=5, max-age=x"}, lifetime(5 * s)},
		{"an earlier invalid duplicate counts", []string{"max-age=x, max-age=5"}, lifetime(0)},
		{"the first stale-if-error counts, even invalid", []string{"max-age=1, stale-if-error=x, stale-if-error=5"}, lifetime(s)},

		// Syntax (§5.2, RFC 9110 §5.6).
		{"names are case-insensitive", []string{"Max-Age=5, STALE-WHILE-REVALIDATE=7, No-Store"}, Freshness{Declared: true, NoStore: true}},
		{"names are case-insensitive in ASCII only", []string{"max-age=5, \u017f-maxage=9"}, lifetime(5 * s)},
		{"quoted value", []string{`max-age="30"`}, lifetime(30 * s)},
		{"quoted-pair in a quoted value", []string{`max-age="3\0"`}, lifetime(30 * s)},
		{"spaces and tabs around items and =", []string{" \tmax-age = 3 ,  stale-if-error=4\t "}, Freshness{Declared: true, TTL: 3 * s, StaleIfError: 4 * s, HasStaleIfError: true}},
		{"comma inside a quoted string", []string{`x-ext="a,max-age=9", max-age=4`}, lifetime(4 * s)},
		{"escaped quote inside a quoted string", []string{`x-ext="a\",max-age=9", max-age=4`}, lifetime(4 * s)},
		{"empty items", []string{",,max-age=2,,"}, lifetime(2 * s)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.values); got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.values, got, tt.want)
			}
		})
	}
}

func TestParse_HeaderThenTrailer(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name            string
		header, trailer []string
		want            Freshness
	}{
		{"the trailer's no-store holds", []string{"max-age=5"}, []string{"max-age=500, no-store"}, Freshness{Declared: true, NoStore: true}},
		{"the header's max-age comes first", []string{"max-age=5"}, []string{"max-age=500"}, Freshness{Declared: true, TTL: 5 * s}},
		{"a trailer alone", nil, []string{"max-age=7"}, Freshness{Declared: true, TTL: 7 * s}},
		{"an open quote ends with its field", []string{`x="open`}, []string{"max-age=7"}, Freshness{Declared: true, TTL: 7 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.header, tt.trailer); got != tt.want {
				t.Errorf("Parse(%q, %q) = %+v, want %+v", tt.header, tt.trailer, got, tt.want)
			}
		})
	}
}

// FuzzParse: any input parses without panicking into a Freshness that keeps
// the package's promises.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"max-age=60", "s-maxage=1, stale-if-error=2", `no-cache="a,b"`, "private", "max-age=99999999999999999999",
		`"`, `x="\`, "must-revalidate", "stale-if-error=60", "max-age=soon, stale-while-revalidate=3", `max-age="1\2"`} {
		f.Add(seed, "")
	}
	f.Add("max-age=5", "stale-while-revalidate=3")
	f.Add(`x="open`, "max-age=1")
	f.Fuzz(func(t *testing.T, header, trailer string) {
		got := Parse([]string{header}, []string{trailer})
		for _, d := range []time.Duration{got.TTL, got.StaleWhileRevalidate, got.StaleIfError} {
			if d < 0 || d > maxDelta*time.Second {
				t.Fatalf("window %v out of [0, %ds]: %+v", d, maxDelta, got)
			}
		}
		if (got.NoStore || got.Private) && got != (Freshness{Declared: true, NoStore: got.NoStore, Private: got.Private}) {
			t.Fatalf("an answer not to keep declares more: %+v", got)
		}
		if !got.Declared && got.TTL != 0 {
			t.Fatalf("a lifetime without Declared: %+v", got)
		}
		if !got.HasStaleWhileRevalidate && got.StaleWhileRevalidate != 0 || !got.HasStaleIfError && got.StaleIfError != 0 {
			t.Fatalf("a stale window not declared: %+v", got)
		}
		if got.NoStale && (got.HasStaleWhileRevalidate || got.HasStaleIfError) {
			t.Fatalf("stale windows for an answer never served stale: %+v", got)
		}
		if again := Parse([]string{header, trailer}); again != got {
			t.Fatalf("one field of two values %+v, two fields %+v", again, got)
		}
		if twice := Parse([]string{header}, []string{header}); twice != Parse([]string{header}) {
			t.Fatalf("a value repeated changes the answer: %+v, once %+v", twice, Parse([]string{header}))
		}
		if !quoteOpen(header) {
			if joined := Parse([]string{header + ", " + trailer}); joined != got {
				t.Fatalf("joined with \", \": %+v, apart %+v", joined, got)
			}
		}
	})
}

// quoteOpen reports whether v ends inside a quoted string: joined to the
// next value, that value would be read as part of it.
func quoteOpen(v string) bool {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && quoted:
			i++
		case v[i] == '"':
			quoted = !quoted
		}
	}
	return quoted
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	header := []string{"max-age=10, stale-while-revalidate=20, stale-if-error=30"}
	for b.Loop() {
		Parse(header, nil)
	}
}
