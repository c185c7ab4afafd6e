package proxy

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

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

func TestWithStatus_AnAnswerWithoutHeaderSharesOneHeaderPerEntry(t *testing.T) {
	hit := served{outcome: collapse.Hit, left: collapse.Windows{TTL: 3 * time.Second}}
	for _, header := range []metadata.MD{nil, {}} {
		if got := withStatus(header, hit.entry()); len(got) != 1 || !slices.Equal(got[CacheStatusHeader], []string{"collapser; hit; ttl=3"}) {
			t.Fatalf("header %v, want the entry alone", got)
		}
	}
	var e entryHeaders
	first := e.alone(hit.entry())
	if again := e.alone(hit.entry()); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Error("the same entry got a header of its own: want the one built before")
	}
	// A hit's entry, built again within the same second, is the string of
	// the header kept for it: the caller's header costs nothing.
	if n := testing.AllocsPerRun(100, func() { _ = withStatus(nil, hit.entry()) }); n != 0 {
		t.Errorf("a hit's header built again: %v allocations, want 0", n)
	}

	// An answer's own header is every caller's: the entry goes into a copy.
	theirs := metadata.MD{CacheStatusHeader: {"backend; hit"}, "x-a": {"1"}}
	got := withStatus(theirs, hit.entry())
	if want := []string{"backend; hit", "collapser; hit; ttl=3"}; !slices.Equal(got[CacheStatusHeader], want) || got.Get("x-a")[0] != "1" {
		t.Errorf("header %v, want x-a and entries %q", got, want)
	}
	if !slices.Equal(theirs[CacheStatusHeader], []string{"backend; hit"}) {
		t.Errorf("the answer's header changed to %v", theirs)
	}
}

// TestEntryHeaders_EveryCallerGetsItsOwnEntry asks, at once from many
// goroutines, for the headers of more entries than there are slots:
// whichever header a slot keeps, each caller gets its own entry alone.
func TestEntryHeaders_EveryCallerGetsItsOwnEntry(t *testing.T) {
	var e entryHeaders
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				want := fmt.Sprintf("collapser; hit; ttl=%d", (g*500+i)%(4*entrySlots))
				if h := e.alone(want); len(h) != 1 || !slices.Equal(h[CacheStatusHeader], []string{want}) {
					t.Errorf("alone(%q) = %v", want, h)
					return
				}
				if got := e.entry([]byte(want)); got != want {
					t.Errorf("entry(%q) = %q", want, got)
					return
				}
			}
		})
	}
	wg.Wait()
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
