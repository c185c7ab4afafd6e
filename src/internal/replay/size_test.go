package replay

import (
	"context"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/testkit"
)

// pointing is an upstream whose source is a pointer, as the proxy's is.
type pointing struct {
	Upstream
	from *[40]byte
}

func (p pointing) Source() any { return p.from }

func TestStreams_AKeptRecordCountsWhatItsSourcePointsTo(t *testing.T) {
	// kept returns what one kept record of three messages counts, its
	// upstream wrapped by wrap.
	kept := func(wrap func(Upstream) Upstream) int64 {
		s := New(Options{})
		src := newSource(nil)
		rd, _ := s.Join("k", Life{TTL: time.Hour}, func(ctx context.Context) (Upstream, error) {
			up, err := src.open(ctx)
			return wrap(up), err
		})
		done := goRead(t, rd)
		testkit.Recv(t, "the open", src.started)
		send(t, src, 0, 3)
		close(src.up.msgs)
		if r := testkit.Recv(t, "the reader's end", done); r.err != nil {
			t.Fatalf("read: %v", r.err)
		}
		waitStats(t, s, func(st Stats) bool { return st.Held == 1 })
		return s.Stats().Bytes
	}
	silent := kept(func(u Upstream) Upstream { return u })
	sourced := kept(func(u Upstream) Upstream { return pointing{u, new([40]byte)} })
	if got, want := sourced-silent, heapsize.Of(40); got != want {
		t.Errorf("a record whose source points to 40 bytes counts %d more than one without, want %d", got, want)
	}
}
