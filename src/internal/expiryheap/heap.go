// Package expiryheap holds items in the order they expire, first to expire
// first, and keeps each item's position so that an item can be removed from
// anywhere in O(log n): the collapse engine's held results and the replayed
// streams kept for replay are both dropped at their expiry or to make room.
//
// The heap keeps each item's expiry beside it, read once when the item is
// pushed or fixed: ordering the heap reads its own array, never the items,
// which lie wherever they were allocated (a cache holds many, and a sweep
// compares a dozen of them at a cache miss each otherwise).
package expiryheap

// Item is what a Heap holds: typically a pointer to a struct with the
// fields these methods read and write.
type Item interface {
	// Expiry returns when the item expires, in any unit that orders: the
	// Heap reads it when the item is pushed or fixed.
	Expiry() int64
	// HeapIndex returns the field where the Heap keeps the item's position:
	// -1 while the item is not in a Heap.
	HeapIndex() *int
}

// Heap is a min-heap of items by expiry. The zero value is empty and ready.
// It is not safe for concurrent use.
type Heap[T Item] struct {
	slots []slot[T]
}

// slot is an item and its expiry as the Heap read it.
type slot[T Item] struct {
	at   int64
	item T
}

// Len returns the number of items held.
func (h *Heap[T]) Len() int { return len(h.slots) }

// First returns the item that expires first; the Heap must not be empty.
func (h *Heap[T]) First() T { return h.slots[0].item }

// FirstExpiry returns the expiry of the item that expires first, as it was
// read; the Heap must not be empty.
func (h *Heap[T]) FirstExpiry() int64 { return h.slots[0].at }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	i := len(h.slots)
	h.slots = append(h.slots, slot[T]{at: x.Expiry(), item: x})
	*x.HeapIndex() = i
	h.up(i)
}

// Fix restores x's place after its expiry changed; the Heap must hold x.
func (h *Heap[T]) Fix(x T) {
	i := *x.HeapIndex()
	h.slots[i].at = x.Expiry()
	if !h.down(i) {
		h.up(i)
	}
}

// Remove takes out x, which the Heap holds, and sets its index to -1.
func (h *Heap[T]) Remove(x T) {
	i := *x.HeapIndex()
	last := len(h.slots) - 1
	if i != last {
		h.swap(i, last)
	}
	h.slots[last] = slot[T]{} // let go of x
	h.slots = h.slots[:last]
	*x.HeapIndex() = -1
	if i != last && !h.down(i) {
		h.up(i)
	}
}

// up moves the slot at i towards the root while it expires before its
// parent.
func (h *Heap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h.slots[parent].at <= h.slots[i].at {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down moves the slot at i towards the leaves while a child expires before
// it, and reports whether it moved.
func (h *Heap[T]) down(i int) bool {
	start, n := i, len(h.slots)
	for {
		child := 2*i + 1
		if child >= n || child < 0 { // child < 0: overflow
			break
		}
		if right := child + 1; right < n && h.slots[right].at < h.slots[child].at {
			child = right
		}
		if h.slots[i].at <= h.slots[child].at {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}

// swap exchanges the slots at i and j, and tells both items where they are.
func (h *Heap[T]) swap(i, j int) {
	h.slots[i], h.slots[j] = h.slots[j], h.slots[i]
	*h.slots[i].item.HeapIndex() = i
	*h.slots[j].item.HeapIndex() = j
}
