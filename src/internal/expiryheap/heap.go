// Package expiryheap holds items in the order they expire, first to expire
// first, and keeps each item's position so that an item can be removed from
// anywhere in O(log n): the collapse engine's held results and the replayed
// streams kept for replay are both dropped at their expiry or to make room.
package expiryheap

import "container/heap"

// Item is what a Heap holds: typically a pointer to a struct with the
// fields these methods read and write.
type Item[T any] interface {
	// ExpiresBefore reports whether the item expires before other.
	ExpiresBefore(other T) bool
	// HeapIndex returns the field where the Heap keeps the item's position:
	// -1 while the item is not in a Heap.
	HeapIndex() *int
}

// Heap is a min-heap of items by expiry. The zero value is empty and ready.
// It is not safe for concurrent use.
type Heap[T Item[T]] struct {
	items items[T]
}

// Len returns the number of items held.
func (h *Heap[T]) Len() int { return len(h.items) }

// First returns the item that expires first; the Heap must not be empty.
func (h *Heap[T]) First() T { return h.items[0] }

// Push adds x.
func (h *Heap[T]) Push(x T) { heap.Push(&h.items, x) }

// Fix restores x's place after its expiry changed; the Heap must hold x.
func (h *Heap[T]) Fix(x T) { heap.Fix(&h.items, *x.HeapIndex()) }

// Remove takes out x, which the Heap holds, and sets its index to -1.
func (h *Heap[T]) Remove(x T) { heap.Remove(&h.items, *x.HeapIndex()) }

// items implements heap.Interface, keeping each item's index.
type items[T Item[T]] []T

func (s items[T]) Len() int           { return len(s) }
func (s items[T]) Less(i, j int) bool { return s[i].ExpiresBefore(s[j]) }
func (s items[T]) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	*s[i].HeapIndex(), *s[j].HeapIndex() = i, j
}

func (s *items[T]) Push(x any) {
	item := x.(T)
	*item.HeapIndex() = len(*s)
	*s = append(*s, item)
}

func (s *items[T]) Pop() any {
	old := *s
	item := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*s = old[:len(old)-1]
	*item.HeapIndex() = -1
	return item
}
