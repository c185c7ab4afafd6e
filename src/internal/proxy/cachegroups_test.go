package proxy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseStringList(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  []string
		ok    bool
	}{
		{``, nil, true},
		{`"scripts"`, []string{"scripts"}, true},
		{` "scripts", "shared"`, []string{"scripts", "shared"}, true},
		{`"a";p=1, "b";q;r="x";s=?0;t=:AA==:;u=tok/1.5;v=-2.5`, []string{"a", "b"}, true},
		{`"say \"hi\" \\ there"`, []string{`say "hi" \ there`}, true},
		{`"a",,"b"`, nil, false},
		{`"a",`, nil, false},
		{`scripts`, nil, false}, // a token, not a String
		{`("a" "b")`, nil, false},
		{`"unterminated`, nil, false},
		{`"bad \escape"`, nil, false},
		{"\"tab\tinside\"", nil, false},
		{`"a" "b"`, nil, false},
		{`"a";P=1`, nil, false},
	} {
		t.Run(tt.value, func(t *testing.T) {
			got, ok := parseStringList(tt.value)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Errorf("parseStringList(%q) = %q, %v; want %q, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzParseStringList checks that a list parseStringList reads, written
// again as Structured Fields write it, reads as the same strings.
func FuzzParseStringList(f *testing.F) {
	for _, s := range []string{`"a", "b";x=1`, `"q\"uote"`, ``, `"a",`, `tok`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseStringList(v)
		if !ok {
			return
		}
		quoted := make([]string, len(got))
		for i, s := range got {
			quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		again, ok := parseStringList(strings.Join(quoted, ", "))
		if !ok || !slices.Equal(again, got) {
			t.Fatalf("%q read as %q; written again, read as %q (%v)", v, got, again, ok)
		}
		for _, s := range got {
			if strconv.QuoteToASCII(s) != strconv.Quote(s) {
				t.Fatalf("%q read a group with a character outside printable ASCII: %q", v, s)
			}
		}
	})
}
