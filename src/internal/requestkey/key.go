package requestkey

import (
	"encoding/binary"
	"slices"
	"strings"
)

// protoSubtype is the content-subtype of the default codec; a call without a
// subtype ("application/grpc") uses it too.
const protoSubtype = "proto"

// stackHeaders is how many kept headers Headers holds without a heap
// allocation.
const stackHeaders = 32

// header is one metadata entry kept for the key.
type header struct {
	name   string // lower case
	orig   string // as found in the MD, to order duplicates after lower-casing
	values []string
}

// Headers are the headers of one call that a Rule keeps in its key, added
// one by one in any order (Rule.Keep), so that a walk over a call's
// metadata that reads the names for needs of its own builds the key in the
// same pass. The zero value holds none; it holds stackHeaders without a
// heap allocation.
type Headers struct {
	stack [stackHeaders]header
	n     int      // held in stack
	more  []header // every one, once there are more than stack holds
}

// Keep adds the header name, with values, to h when r keeps it in the key:
// a header without values never is, and a name is compared in lower case.
// It reports whether name has an upper-case letter (HasUpper), which a
// name grpc-go's transport received never has, whether it is kept or not.
func (r *Rule) Keep(h *Headers, name string, values []string) (upper bool) {
	lower := name
	if upper = HasUpper(name); upper {
		lower = strings.ToLower(name)
	}
	if len(values) == 0 || !r.keeps(lower) {
		return upper
	}
	e := header{name: lower, orig: name, values: values}
	switch {
	case h.more != nil:
		h.more = append(h.more, e)
	case h.n < len(h.stack):
		h.stack[h.n] = e
		h.n++
	default:
		h.more = append(append(make([]header, 0, 2*len(h.stack)), h.stack[:]...), e)
	}
	return upper
}

// kept returns the headers h holds.
func (h *Headers) kept() []header {
	if h.more != nil {
		return h.more
	}
	return h.stack[:h.n]
}

// AppendKey appends the full-content key of a call to dst and returns the
// extended buffer, h being the headers its Rule kept of its metadata
// (Keep):
//
//	uvarint(len) method | uvarint(len) subtype | uvarint(len) payload |
//	for each kept header, names sorted:
//	    uvarint(len) name | uvarint(count) | uvarint(len) value ...
//
// The subtype "" is normalised to "proto". Header names are lower-cased;
// values keep their order and are compared as bytes (binary "-bin" values are
// the decoded bytes). Names whose lower-case forms coincide are merged, values
// ordered by original name; headers without values are left out. Equal keys
// <=> equal normalised (method, subtype, payload, kept headers) tuples.
//
// It allocates nothing when dst has room for the key, h holds at most 32
// headers and all names are already lower case (always true for metadata
// received by gRPC): a cache hit can be looked up by the bytes, and a
// string made of them only when they are kept. It sorts what h holds.
func (h *Headers) AppendKey(dst []byte, method, subtype string, payload []byte) []byte {
	if subtype == "" {
		subtype = protoSubtype
	}
	kept := h.kept()
	slices.SortFunc(kept, compareHeaders)

	size := fieldLen(len(method)) + fieldLen(len(subtype)) + fieldLen(len(payload))
	for i, e := range kept {
		if i == 0 || kept[i-1].name != e.name {
			size += fieldLen(len(e.name)) + uvarintLen(uint64(valueCount(kept[i:])))
		}
		for _, v := range e.values {
			size += fieldLen(len(v))
		}
	}

	b := slices.Grow(dst, size)
	b = appendField(b, method)
	b = appendField(b, subtype)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	b = append(b, payload...)
	for i, e := range kept {
		if i == 0 || kept[i-1].name != e.name {
			b = appendField(b, e.name)
			b = binary.AppendUvarint(b, uint64(valueCount(kept[i:])))
		}
		for _, v := range e.values {
			b = appendField(b, v)
		}
	}
	return b
}

// MethodPrefix returns how every key of method starts: the keys of one
// method are exactly those with this prefix, since the method is the key's
// first field, length-prefixed.
func MethodPrefix(method string) string {
	return string(appendField(make([]byte, 0, fieldLen(len(method))), method))
}

// compareHeaders orders by lower-case name, then by original name so merged
// duplicates have a deterministic value order.
func compareHeaders(a, b header) int {
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return strings.Compare(a.orig, b.orig)
}

// valueCount is the number of values of the header starting hs, counting the
// following entries with the same lower-case name.
func valueCount(hs []header) int {
	n := 0
	for _, h := range hs {
		if h.name != hs[0].name {
			break
		}
		n += len(h.values)
	}
	return n
}

// HasUpper reports whether the metadata name s has an upper-case ASCII
// letter: grpc-go's transport writes names in lower case, and a name
// attached otherwise must be lowered before it is compared.
func HasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func fieldLen(n int) int { return uvarintLen(uint64(n)) + n }

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendField appends s, after its length.
func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
