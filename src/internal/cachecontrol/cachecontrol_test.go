package cachecontrol

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name   string
		values []string
		want   Freshness
	}{
		{"nothing", nil, Freshness{}},
		{"empty value", []string{""}, Freshness{}},
		{"only unknown directives", []string{"public, immutable, x-ext=1"}, Freshness{}},
		{"max-age", []string{"max-age=60"}, Freshness{Declared: true, TTL: 60 * s}},
		{"max-age zero", []string{"max-age=0"}, Freshness{Declared: true}},
		{"names are case-insensitive", []string{"Max-Age=5, STALE-WHILE-REVALIDATE=7"}, Freshness{Declared: true, TTL: 5 * s, StaleWhileRevalidate: 7 * s}},
		{"quoted value", []string{`max-age="30"`}, Freshness{Declared: true, TTL: 30 * s}},
		{"spaces around items", []string{"  max-age = 3 ,  stale-if-error=4  "}, Freshness{Declared: true, TTL: 3 * s, StaleIfError: 4 * s}},
		{"all windows", []string{"max-age=10, stale-while-revalidate=20, stale-if-error=30"}, Freshness{Declared: true, TTL: 10 * s, StaleWhileRevalidate: 20 * s, StaleIfError: 30 * s}},
		{"stale windows without max-age: stale at once, served stale", []string{"stale-while-revalidate=20"}, Freshness{Declared: true, StaleWhileRevalidate: 20 * s}},
		{"s-maxage wins for a shared cache", []string{"max-age=10, s-maxage=100"}, Freshness{Declared: true, TTL: 100 * s}},
		{"s-maxage forbids stale serving", []string{"s-maxage=100, stale-while-revalidate=20, stale-if-error=30"}, Freshness{Declared: true, TTL: 100 * s}},
		{"must-revalidate forbids stale serving", []string{"max-age=10, must-revalidate, stale-if-error=30"}, Freshness{Declared: true, TTL: 10 * s}},
		{"proxy-revalidate forbids stale serving", []string{"max-age=10, proxy-revalidate, stale-while-revalidate=30"}, Freshness{Declared: true, TTL: 10 * s}},
		{"no-store", []string{"no-store"}, Freshness{Declared: true, NoStore: true}},
		{"no-cache keeps nothing", []string{"no-cache"}, Freshness{Declared: true, NoStore: true}},
		{"qualified no-cache keeps nothing", []string{`no-cache="x-user"`}, Freshness{Declared: true, NoStore: true}},
		{"the most restrictive wins: no-store over max-age", []string{"max-age=60, no-store"}, Freshness{Declared: true, NoStore: true}},
		{"private", []string{"private, max-age=60"}, Freshness{Declared: true, Private: true}},
		{"the first of a directive given twice counts", []string{"max-age=5, max-age=500"}, Freshness{Declared: true, TTL: 5 * s}},
		{"values in order", []string{"max-age=5", "max-age=500, stale-if-error=9"}, Freshness{Declared: true, TTL: 5 * s, StaleIfError: 9 * s}},
		{"invalid number: stale at once", []string{"max-age=soon, stale-while-revalidate=20"}, Freshness{Declared: true}},
		{"negative number is invalid", []string{"max-age=-1"}, Freshness{Declared: true}},
		{"fraction is invalid", []string{"max-age=1.5"}, Freshness{Declared: true}},
		{"number without value is invalid", []string{"max-age"}, Freshness{Declared: true}},
		{"a later invalid duplicate is ignored", []string{"max-age=5, max-age=x"}, Freshness{Declared: true, TTL: 5 * s}},
		{"too large saturates", []string{"max-age=99999999999999999999999"}, Freshness{Declared: true, TTL: maxDelta * s}},
		{"comma inside a quoted string", []string{`x-ext="a,max-age=9", max-age=4`}, Freshness{Declared: true, TTL: 4 * s}},
		{"escaped quote inside a quoted string", []string{`x-ext="a\",max-age=9", max-age=4`}, Freshness{Declared: true, TTL: 4 * s}},
		{"empty items", []string{",,max-age=2,,"}, Freshness{Declared: true, TTL: 2 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.values); got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.values, got, tt.want)
			}
		})
	}
	// The header's fields come before the trailer's.
	if got, want := Parse([]string{"max-age=5"}, []string{"max-age=500, no-store"}), (Freshness{Declared: true, NoStore: true}); got != want {
		t.Errorf("Parse(header, trailer) = %+v, want %+v", got, want)
	}
	if got, want := Parse(nil, []string{"max-age=7"}), (Freshness{Declared: true, TTL: 7 * s}); got != want {
		t.Errorf("Parse(nil, trailer) = %+v, want %+v", got, want)
	}
}

// FuzzParse: any input parses without panicking into a Freshness that keeps
// the package's promises.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"max-age=60", "s-maxage=1, stale-if-error=2", `no-cache="a,b"`, "private", "max-age=99999999999999999999", `"`, `x="\`} {
		f.Add(seed, "")
	}
	f.Add("max-age=5", "stale-while-revalidate=3")
	f.Fuzz(func(t *testing.T, header, trailer string) {
		got := Parse([]string{header}, []string{trailer})
		if !got.Declared && got != (Freshness{}) {
			t.Fatalf("undeclared but %+v", got)
		}
		for _, d := range []time.Duration{got.TTL, got.StaleWhileRevalidate, got.StaleIfError} {
			if d < 0 || d > maxDelta*time.Second {
				t.Fatalf("window %v out of [0, %ds]: %+v", d, maxDelta, got)
			}
		}
		if (got.NoStore || got.Private) && (got.TTL != 0 || got.StaleWhileRevalidate != 0 || got.StaleIfError != 0) {
			t.Fatalf("kept windows for an answer not to keep: %+v", got)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	header := []string{"max-age=10, stale-while-revalidate=20, stale-if-error=30"}
	for b.Loop() {
		Parse(header, nil)
	}
}
