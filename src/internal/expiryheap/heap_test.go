package expiryheap_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/expiryheap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type item struct {
	expires int
	index   int
}

func (i *item) Expiry() int64   { return int64(i.expires) }
func (i *item) HeapIndex() *int { return &i.index }

func TestHeap_FirstToExpireFirstAndRemovalFromAnywhere(t *testing.T) {
	var h expiryheap.Heap[*item]
	items := map[int]*item{}
	for _, e := range []int{50, 10, 40, 30, 20} {
		items[e] = &item{expires: e, index: -1}
		h.Push(items[e])
	}
	h.Remove(items[30]) // from the middle
	if got := items[30].index; got != -1 {
		t.Errorf("removed item's index = %d, want -1", got)
	}
	for _, want := range []int{10, 20, 40, 50} {
		if h.Len() == 0 {
			t.Fatalf("empty before %d", want)
		}
		first := h.First()
		if first.expires != want {
			t.Fatalf("First() expires at %d, want %d", first.expires, want)
		}
		if *first.HeapIndex() != 0 {
			t.Errorf("First()'s index = %d, want 0", first.index)
		}
		h.Remove(first)
	}
	if h.Len() != 0 {
		t.Errorf("Len() = %d after removing everything, want 0", h.Len())
	}
}

func TestHeap_FixMovesAnItemWhoseExpiryChanged(t *testing.T) {
	var h expiryheap.Heap[*item]
	items := []*item{{expires: 1}, {expires: 2}, {expires: 3}}
	for _, it := range items {
		h.Push(it)
	}
	items[2].expires = 0
	h.Fix(items[2])
	if h.First() != items[2] {
		t.Fatalf("First() expires %d, want the item moved to 0", h.First().expires)
	}
	items[2].expires = 9
	h.Fix(items[2])
	if h.First() != items[0] {
		t.Fatalf("First() expires %d, want 1 after the item moved back", h.First().expires)
	}
}

func TestHeap_AnyPushesFixesAndRemovalsKeepTheOrder(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var h expiryheap.Heap[*item]
		var live []*item
		for range 500 {
			switch op := r.IntN(4); {
			case op < 2 || len(live) == 0:
				it := &item{expires: r.IntN(100), index: -1}
				h.Push(it)
				live = append(live, it)
			case op == 2:
				it := live[r.IntN(len(live))]
				it.expires = r.IntN(100)
				h.Fix(it)
			default:
				i := r.IntN(len(live))
				h.Remove(live[i])
				if live[i].index != -1 {
					t.Fatalf("seed %d: removed item's index = %d, want -1", seed, live[i].index)
				}
				live = slices.Delete(live, i, i+1)
			}
			checkIndexes(t, &h, live)
		}
		for len(live) > 0 {
			first := h.First()
			if min := slices.MinFunc(live, func(a, b *item) int { return a.expires - b.expires }); first.expires != min.expires {
				t.Fatalf("seed %d: First() expires at %d, want %d", seed, first.expires, min.expires)
			}
			if h.FirstExpiry() != int64(first.expires) {
				t.Fatalf("seed %d: FirstExpiry() = %d, want %d", seed, h.FirstExpiry(), first.expires)
			}
			h.Remove(first)
			live = slices.DeleteFunc(live, func(it *item) bool { return it == first })
		}
	}
}

// checkIndexes fails unless the Heap holds exactly live, each at an index
// of its own.
func checkIndexes(t *testing.T, h *expiryheap.Heap[*item], live []*item) {
	t.Helper()
	if h.Len() != len(live) {
		t.Fatalf("Len() = %d, want %d", h.Len(), len(live))
	}
	seen := make([]bool, len(live))
	for _, it := range live {
		if it.index < 0 || it.index >= len(live) || seen[it.index] {
			t.Fatalf("index %d of %d items, or taken twice", it.index, len(live))
		}
		seen[it.index] = true
	}
}
