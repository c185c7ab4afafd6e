package expiryheap_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/expiryheap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type item struct {
	expires int
	index   int
}

func (i *item) ExpiresBefore(o *item) bool { return i.expires < o.expires }
func (i *item) HeapIndex() *int            { return &i.index }

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
