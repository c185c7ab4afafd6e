package expiryheap_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/collapser/collapser/src/internal/expiryheap"
)

// benchItem is about the size of the collapse engine's entry, so that the
// items a heap holds spread over memory as its entries do.
type benchItem struct {
	item
	_ [192]byte
}

// BenchmarkHeap_SteadyState is a cache shard's heap at rest: each step
// holds two new items, which go last, removes one from anywhere (a result
// replaced) and the first (a result gone). It holds a shard's share of the
// collapse engine's default limit (10,000 results over 32 shards), then of
// ten times that.
func BenchmarkHeap_SteadyState(b *testing.B) {
	for _, held := range []int{312, 3125} {
		b.Run(fmt.Sprint("held=", held), func(b *testing.B) {
			var h expiryheap.Heap[*item]
			items := make([]*item, 0, held)
			at := 0
			hold := func() {
				at++
				it := &benchItem{item: item{expires: at, index: -1}}
				h.Push(&it.item)
				items = append(items, &it.item)
			}
			for range held {
				hold()
			}
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				hold()
				hold()
				for {
					if it := items[r.IntN(len(items))]; it.index >= 0 {
						h.Remove(it)
						break
					}
				}
				h.Remove(h.First())
				if len(items) > 4*held {
					items = slicesLive(items)
				}
			}
		})
	}
}

// slicesLive returns the items of s still held, in s's array.
func slicesLive(s []*item) []*item {
	live := s[:0]
	for _, it := range s {
		if it.index >= 0 {
			live = append(live, it)
		}
	}
	clear(s[len(live):])
	return live
}
