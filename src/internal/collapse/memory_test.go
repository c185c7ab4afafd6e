package collapse

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/testkit"
)

// TestEntryOverhead_IsWhatTheHeapHolds holds many results whose values the
// heap holds once for all, and compares the heap's growth with what they
// count: their keys and EntryOverhead. Each call takes its context and a
// timeout, as the proxy's backend calls do, so that what a call leaves
// behind in its entry would show.
func TestEntryOverhead_IsWhatTheHeapHolds(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts CallOptions
	}{
		{"fresh results", CallOptions{TTL: time.Hour, Timeout: time.Hour}},
		{"results kept for their stale windows", CallOptions{TTL: time.Hour, StaleWhileRevalidate: time.Hour, StaleIfError: time.Hour, Timeout: time.Hour}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 50_000
			val := new(byte) // one value for all: only the entries grow
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("/pkg.Service/Method\x00key-%07d", i)
			}
			g := New(Options[*byte]{Limits: Limits{MaxEntries: n, MaxBytes: 1 << 40}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := testkit.LiveHeap()
			for _, k := range keys {
				g.Do(ctx, k, &tt.opts, func(c *Call) (*byte, error) {
					return val, c.Context().Err()
				})
			}
			grown := testkit.LiveHeap() - before
			st := g.Stats()
			if st.Entries != n {
				t.Fatalf("%d results held, want %d", st.Entries, n)
			}
			// The keys were made before the measure: what they count is
			// left out of the comparison.
			var keyBytes int64
			for _, k := range keys {
				keyBytes += heapsize.String(k)
			}
			if want := keyBytes + n*EntryOverhead; st.Bytes != want {
				t.Errorf("results count %d bytes, want their keys and EntryOverhead, %d", st.Bytes, want)
			}
			counted := n * EntryOverhead
			perEntry := float64(grown) / n
			t.Logf("held %d: %.0f bytes each on the heap, EntryOverhead %d", n, perEntry, EntryOverhead)
			if ratio := float64(counted) / float64(grown); ratio < 0.9 || ratio > 1.25 {
				t.Errorf("%d results grew the heap by %.0f bytes each, EntryOverhead is %d (%.2f×): the overhead counted is not what an entry holds",
					n, perEntry, EntryOverhead, ratio)
			}
			runtime.KeepAlive(g)
		})
	}
}
