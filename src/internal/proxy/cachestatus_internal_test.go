package proxy

import (
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/collapse"
)

func TestServed_EntrySaysHowTheCallWasServed(t *testing.T) {
	kept := collapse.Windows{TTL: 90*time.Second + 500*time.Millisecond}
	for _, tt := range []struct {
		served served
		want   string
	}{
		{served{outcome: collapse.Hit, left: kept}, "collapser; hit; ttl=90"},
		{served{outcome: collapse.Stale}, "collapser; hit; ttl=0; detail=stale"},
		{served{outcome: collapse.StaleOnError}, "collapser; fwd=stale; detail=stale-if-error"},
		{served{outcome: collapse.Lead, left: kept}, "collapser; fwd=miss; stored; ttl=90"},
		{served{outcome: collapse.Lead}, "collapser; fwd=miss"},
		{served{outcome: collapse.Lead, left: kept, forwarded: true}, "collapser; fwd=miss; stored; ttl=90; detail=forwarded"},
		{served{outcome: collapse.Join, left: kept}, "collapser; fwd=miss; collapsed; stored; ttl=90"},
		{served{outcome: collapse.Join, forwarded: true}, "collapser; fwd=miss; collapsed; detail=forwarded"},
		{served{outcome: collapse.Lead, private: true}, "collapser; fwd=miss; detail=private"},
		{served{outcome: collapse.Private}, "collapser; fwd=miss; detail=private"},
		{served{outcome: collapse.Own}, "collapser; fwd=miss; detail=own-call"},
		{served{outcome: collapse.Pass}, "collapser; fwd=bypass; detail=hit-for-pass"},
	} {
		if got := tt.served.entry(); got != tt.want {
			t.Errorf("%+v: entry %q, want %q", tt.served, got, tt.want)
		}
		if _, ok := parseStatusEntry(tt.want); !ok {
			t.Errorf("%q is no RFC 9211 entry", tt.want)
		}
	}
}

// parseStatusEntry reads one cache-status entry as RFC 9211 defines it: a
// token, then parameters whose values are what the RFC says they are.
func parseStatusEntry(s string) (map[string]string, bool) {
	p := sfParser{s: s}
	if !p.key() || p.s[:p.i] != cacheName {
		return nil, false
	}
	params := map[string]string{}
	for p.peek(';') {
		p.i++
		p.skip(" ")
		start := p.i
		if !p.key() {
			return nil, false
		}
		name := p.s[start:p.i]
		value := "?1"
		if p.peek('=') {
			p.i++
			v := p.i
			if !p.bareItem() {
				return nil, false
			}
			value = p.s[v:p.i]
		}
		params[name] = value
	}
	return params, p.i == len(p.s)
}
