// Package heapsize tells what the Go heap really holds for the objects the
// sidecar keeps (cached answers, replayed streams), so that the bounds on
// them count what is held: an object's bytes rounded up to the allocator's
// size class, a map's groups and tables, a slice's capacity, a status
// error's decoded message.
//
// The figures are the runtime's own: size classes are read from the
// allocator at start-up (how append rounds a new slice's capacity), and the
// map layout is that of Go's Swiss-table maps, checked against the live heap
// by this package's tests.
package heapsize

import (
	"math/bits"
	"slices"

	"google.golang.org/grpc/metadata"
)

// maxSmall is the largest object the allocator serves from a size class;
// larger ones take whole pages.
const maxSmall = 32 << 10

// pageSize is the allocator's page, the unit of a large object.
const pageSize = 8 << 10

// classes are the allocator's size classes up to maxSmall, ascending.
var classes = func() []int {
	var cs []int
	for n := 1; n <= maxSmall; {
		// A slice grown from nothing gets the capacity of the size class
		// its bytes fall in: the allocator's own rounding.
		c := cap(slices.Grow([]byte(nil), n))
		cs = append(cs, c)
		n = c + 1
	}
	return cs
}()

// Of returns the bytes the allocator holds for an object of n bytes: its
// size class, or whole pages for a large object; 0 for n <= 0.
func Of(n int) int64 {
	switch {
	case n <= 0:
		return 0
	case n > maxSmall:
		return int64((n + pageSize - 1) / pageSize * pageSize)
	}
	i, _ := slices.BinarySearch(classes, n)
	return int64(classes[i])
}

// Bytes returns what b's backing array holds: its capacity, rounded up.
func Bytes(b []byte) int64 {
	return Of(cap(b))
}

// The layout of a Go map (Swiss tables, Go 1.24 and later): a header, then
// groups of eight slots behind one control word each. A map of at most
// eight entries has one group and no table; a larger one has a directory
// of tables, each at most maxTableSlots slots, filled to at most 7/8.
const (
	mapHeader     = 48
	tableHeader   = 32
	groupSlots    = 8
	controlWord   = 8
	maxTableSlots = 1024
)

// Map returns what a map of n entries, made with room for n, holds besides
// what its keys and values point to, for slots of slotBytes (a key's and
// its value's size together).
func Map(n int, slotBytes int) int64 {
	group := controlWord + groupSlots*slotBytes
	if n <= groupSlots {
		if n == 0 {
			return mapHeader // groups are made on the first insert
		}
		return mapHeader + Of(group)
	}
	want := (n*8 + 6) / 7 // slots for n at the maximum load
	tables := pow2((want + maxTableSlots - 1) / maxTableSlots)
	slots := pow2((want + tables - 1) / tables)
	perTable := tableHeader + Of(slots/groupSlots*group)
	return mapHeader + Of(tables*8) + int64(tables)*perTable
}

// pow2 returns the least power of two that is at least n (n >= 1).
func pow2(n int) int {
	return 1 << bits.Len(uint(n-1))
}

// stringHeader is a string's pointer and length, in a slice or a map slot.
const stringHeader = 16

// Chan is what an unbuffered channel holds: the runtime's channel header
// (104 bytes in Go 1.26) in its 112-byte size class.
const Chan = 112

// IndexSlot is what an object kept in a map by a string key and in an
// expiryheap costs those two beside itself: a map slot of the key's string
// header and the pointer, with its control byte, at the map's average load
// of 3/4, and the heap array's slot (the pointer and its expiry) at its
// average fill, 3/4.
const IndexSlot = (stringHeader+8+1)*4/3 + (8+8)*4/3

// mdSlot is one metadata.MD slot: a string key and a []string value.
const mdSlot = stringHeader + 24

// MD returns what md holds: the map, every name and value, and the value
// slices' backing arrays (at their capacity). A nil map holds nothing.
func MD(md metadata.MD) int64 {
	if md == nil {
		return 0
	}
	n := Map(len(md), mdSlot)
	for k, vs := range md {
		n += String(k) + Strings(vs)
	}
	return n
}

// Strings returns what ss holds: its backing array, at its capacity, and
// every string's bytes.
func Strings(ss []string) int64 {
	n := Of(cap(ss) * stringHeader)
	for _, s := range ss {
		n += String(s)
	}
	return n
}

// String returns what s's bytes hold.
func String(s string) int64 {
	return Of(len(s))
}
