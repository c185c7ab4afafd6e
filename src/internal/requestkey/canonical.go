package requestkey

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDepth bounds how deep the messages of a request nest for its key to
// be built from them; a deeper request is keyed by its bytes.
const maxDepth = 100

// errMalformed means a request is not a well-formed message of its type.
var errMalformed = errors.New("not a well-formed message of its type")

// The canonical encoding is protobuf's wire format, read and written on the
// wire, without building a message: the bytes a request came in are read
// field by field and written again in one order, with the meaning protobuf
// gives them (the last value of a singular field wins, the occurrences of a
// singular message merge, a oneof keeps its last member set, a later map
// entry replaces an earlier one with its key). What it writes parses to
// the message its input parses to, less the ignored fields: equal keys
// mean equal messages. Unknown fields (and fields on the wire in a type
// their descriptor does not take, which protobuf keeps as unknown) are
// kept as they came, in their order, after the rest.

// plan is how the fields of one message type are written in a key.
type plan struct {
	fields map[protowire.Number]*fieldPlan
	oneofs int // the type's real oneofs
}

// fieldPlan is how one field is written.
type fieldPlan struct {
	fd      protoreflect.FieldDescriptor
	wire    protowire.Type // the wire type of one value; BytesType for a map's entries
	ignored bool           // left out of the key
	oneof   int            // 1 + the index of its real oneof; 0 for none
	message *plan          // a message field's type (a map's: its message values')
	key     *fieldPlan     // a map's entry key; nil for other fields
	value   *fieldPlan     // a map's entry value
}

// planner builds plans: one per message type, shared, and one more for
// each message on the way of an ignored field's path.
type planner struct {
	byType map[protoreflect.FullName]*plan
}

// build returns the plan of desc with paths (relative to it) ignored.
func (pl *planner) build(desc protoreflect.MessageDescriptor, paths []fieldPath) (*plan, error) {
	if len(paths) == 0 {
		if p, ok := pl.byType[desc.FullName()]; ok {
			return p, nil // built, or being built higher up (a type that holds itself)
		}
	}
	p := &plan{fields: map[protowire.Number]*fieldPlan{}}
	if len(paths) == 0 {
		pl.byType[desc.FullName()] = p
	}
	for _, o := range rangeOf(desc.Oneofs()) {
		if !o.IsSynthetic() {
			p.oneofs++
		}
	}
	for _, fd := range rangeOf(desc.Fields()) {
		if fd.Kind() == protoreflect.GroupKind {
			return nil, fmt.Errorf("%s is a group, which keys do not read: its method's requests are keyed by their bytes", fd.FullName())
		}
		f := &fieldPlan{fd: fd, wire: wireType(fd.Kind())}
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			f.oneof = o.Index() + 1
		}
		var sub []fieldPath
		for _, path := range paths {
			switch {
			case path[0].Number() != fd.Number():
			case len(path) == 1:
				f.ignored = true
			default:
				sub = append(sub, path[1:])
			}
		}
		var err error
		switch {
		case f.ignored:
		case fd.IsMap():
			f.wire = protowire.BytesType
			f.key = &fieldPlan{fd: fd.MapKey(), wire: wireType(fd.MapKey().Kind())}
			f.value = &fieldPlan{fd: fd.MapValue(), wire: wireType(fd.MapValue().Kind())}
			if m := fd.MapValue().Message(); m != nil {
				f.value.message, err = pl.build(m, nil)
			}
		case fd.Message() != nil:
			f.message, err = pl.build(fd.Message(), sub)
		}
		if err != nil {
			return nil, err
		}
		p.fields[fd.Number()] = f
	}
	return p, nil
}

// rangeOf returns the elements of a descriptor list.
func rangeOf[T any](l interface {
	Len() int
	Get(int) T
}) []T {
	out := make([]T, l.Len())
	for i := range out {
		out[i] = l.Get(i)
	}
	return out
}

// wireType is the wire type of one value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// accepts reports whether a value of f on the wire in type typ is f's, as
// protobuf reads it; protobuf keeps any other as an unknown field.
func (f *fieldPlan) accepts(typ protowire.Type) bool {
	if typ == f.wire {
		return true
	}
	// A repeated scalar may come packed.
	return typ == protowire.BytesType && f.fd.IsList() && f.wire != protowire.BytesType
}

// occurrence is one field of a message as it came.
type occurrence struct {
	f     *fieldPlan // nil: unknown, kept as it came
	wire  protowire.Type
	value []byte // known: its value (a run of bytes without its length); unknown: the whole field
	drop  bool   // a oneof member another replaced
}

// order sorts known fields by number, before the unknown ones.
func order(a, b occurrence) int {
	switch {
	case a.f == nil || b.f == nil:
		return boolInt(a.f == nil) - boolInt(b.f == nil)
	}
	return int(a.f.fd.Number()) - int(b.f.fd.Number())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nextField reads the first field of b: its number, its wire type, its
// value (a run of bytes without its length) and its length, tag included;
// n < 0 when b starts with no well-formed field.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, value []byte, n int) {
	num, typ, t := protowire.ConsumeTag(b)
	if t < 0 {
		return 0, 0, nil, -1
	}
	m := protowire.ConsumeFieldValue(num, typ, b[t:])
	if m < 0 {
		return 0, 0, nil, -1
	}
	value = b[t : t+m]
	if typ == protowire.BytesType {
		value, _ = protowire.ConsumeBytes(value)
	}
	return num, typ, value, t + m
}

// appendMessage appends the canonical encoding of b, a message of p's
// type, to dst.
func (p *plan) appendMessage(dst, b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("messages nest deeper than %d", maxDepth)
	}
	var stack [16]occurrence
	occ := stack[:0]
	for len(b) > 0 {
		num, typ, value, n := nextField(b)
		if n < 0 {
			return nil, errMalformed
		}
		o := occurrence{wire: typ, value: b[:n]}
		if f := p.fields[num]; f != nil && f.accepts(typ) {
			o.f, o.value = f, value
		}
		occ = append(occ, o)
		b = b[n:]
	}
	p.dropReplaced(occ)
	slices.SortStableFunc(occ, order)
	for i := 0; i < len(occ); {
		j := i + 1
		for j < len(occ) && occ[j].f == occ[i].f && occ[i].f != nil {
			j++
		}
		var err error
		if dst, err = occ[i].f.appendField(dst, occ[i:j], depth); err != nil {
			return nil, err
		}
		i = j
	}
	return dst, nil
}

// dropReplaced marks the occurrences of oneof members that a later member
// of their oneof replaced: a oneof holds the member set last, and what it
// held before that member was set is gone, even that member's own earlier
// values.
func (p *plan) dropReplaced(occ []occurrence) {
	if p.oneofs == 0 {
		return
	}
	type state struct {
		winner protowire.Number
		closed bool
	}
	var stack [4]state
	states := stack[:0]
	if p.oneofs > len(stack) {
		states = make([]state, 0, p.oneofs)
	}
	states = states[:p.oneofs]
	clear(states)
	for i := len(occ) - 1; i >= 0; i-- {
		f := occ[i].f
		if f == nil || f.oneof == 0 {
			continue
		}
		s := &states[f.oneof-1]
		switch num := f.fd.Number(); {
		case s.closed:
		case s.winner == 0:
			s.winner = num
			continue
		case s.winner == num:
			continue
		default:
			s.closed = true
		}
		occ[i].drop = true
	}
}

// appendField appends field f's canonical encoding, from its occurrences
// occ (in the order they came); a nil f appends the unknown fields occ as
// they came.
func (f *fieldPlan) appendField(dst []byte, occ []occurrence, depth int) ([]byte, error) {
	kept := slices.DeleteFunc(occ, func(o occurrence) bool { return o.drop }) // occ is the caller's scratch
	switch {
	case f == nil:
		for _, o := range occ {
			dst = append(dst, o.value...)
		}
		return dst, nil
	case f.ignored || len(kept) == 0:
		return dst, nil
	case f.fd.IsMap():
		return f.appendMap(dst, kept, depth)
	case f.fd.IsList() && f.wire == protowire.BytesType:
		// Messages, strings and bytes: one field per element.
		for _, o := range kept {
			dst = protowire.AppendTag(dst, f.fd.Number(), protowire.BytesType)
			if f.message == nil {
				dst = protowire.AppendBytes(dst, o.value)
				continue
			}
			start := len(dst)
			var err error
			if dst, err = f.message.appendMessage(dst, o.value, depth+1); err != nil {
				return nil, err
			}
			dst = prefixLength(dst, start)
		}
		return dst, nil
	case f.fd.IsList():
		return f.appendPacked(dst, kept)
	case f.message != nil:
		// The occurrences of a singular message merge: read as one run.
		value := kept[0].value
		if len(kept) > 1 {
			value = nil
			for _, o := range kept {
				value = append(value, o.value...)
			}
		}
		dst = protowire.AppendTag(dst, f.fd.Number(), protowire.BytesType)
		start := len(dst)
		dst, err := f.message.appendMessage(dst, value, depth+1)
		if err != nil {
			return nil, err
		}
		return prefixLength(dst, start), nil
	}
	// A singular scalar: the last value wins; without presence, its zero
	// is no value at all.
	last := kept[len(kept)-1]
	mark := len(dst)
	dst = protowire.AppendTag(dst, f.fd.Number(), f.wire)
	dst, zero, err := appendScalar(dst, f.fd.Kind(), last.value)
	if err != nil {
		return nil, err
	}
	if zero && !f.fd.HasPresence() {
		dst = dst[:mark]
	}
	return dst, nil
}

// appendPacked appends the values of a repeated number, from occurrences
// packed or not, as one packed run.
func (f *fieldPlan) appendPacked(dst []byte, occ []occurrence) ([]byte, error) {
	mark := len(dst)
	dst = protowire.AppendTag(dst, f.fd.Number(), protowire.BytesType)
	start := len(dst)
	for _, o := range occ {
		if o.wire != protowire.BytesType {
			var err error
			if dst, _, err = appendScalar(dst, f.fd.Kind(), o.value); err != nil {
				return nil, err
			}
			continue
		}
		for run := o.value; len(run) > 0; {
			n := protowire.ConsumeFieldValue(0, f.wire, run)
			if n < 0 {
				return nil, errMalformed
			}
			var err error
			if dst, _, err = appendScalar(dst, f.fd.Kind(), run[:n]); err != nil {
				return nil, err
			}
			run = run[n:]
		}
	}
	if len(dst) == start {
		return dst[:mark], nil // no value: an empty list, as if it had not come
	}
	return prefixLength(dst, start), nil
}

// appendMap appends a map's entries, each written as its key then its
// value (a zero one too), in the order of their keys' encodings; of the
// entries with one key, the last.
func (f *fieldPlan) appendMap(dst []byte, occ []occurrence, depth int) ([]byte, error) {
	type entry struct{ start, key, end int } // offsets in buf: key, then value
	var buf []byte
	entries := make([]entry, 0, len(occ))
	for _, o := range occ {
		var keyRun, valueRun []byte
		var values [][]byte
		for b := o.value; len(b) > 0; {
			num, typ, value, n := nextField(b)
			if n < 0 {
				return nil, errMalformed
			}
			switch {
			case num == 1 && typ == f.key.wire:
				keyRun = value
			case num == 2 && typ == f.value.wire && f.value.message != nil:
				values = append(values, value) // the occurrences of a message value merge
			case num == 2 && typ == f.value.wire:
				valueRun = value
			}
			b = b[n:]
		}
		e := entry{start: len(buf)}
		var err error
		if buf, _, err = appendScalarField(buf, f.key, keyRun); err != nil {
			return nil, err
		}
		e.key = len(buf)
		if f.value.message != nil {
			buf = protowire.AppendTag(buf, 2, protowire.BytesType)
			start := len(buf)
			value := bytes.Join(values, nil)
			if len(values) == 1 {
				value = values[0]
			}
			if buf, err = f.value.message.appendMessage(buf, value, depth+1); err != nil {
				return nil, err
			}
			buf = prefixLength(buf, start)
		} else if buf, _, err = appendScalarField(buf, f.value, valueRun); err != nil {
			return nil, err
		}
		e.end = len(buf)
		entries = append(entries, e)
	}
	keyOf := func(e entry) []byte { return buf[e.start:e.key] }
	slices.SortStableFunc(entries, func(a, b entry) int { return bytes.Compare(keyOf(a), keyOf(b)) })
	for i, e := range entries {
		if i+1 < len(entries) && bytes.Equal(keyOf(e), keyOf(entries[i+1])) {
			continue // a later entry has its key
		}
		dst = protowire.AppendTag(dst, f.fd.Number(), protowire.BytesType)
		dst = protowire.AppendBytes(dst, buf[e.start:e.end])
	}
	return dst, nil
}

// appendScalarField appends field number f's tag and value (its zero when
// value is nil) in canonical form.
func appendScalarField(dst []byte, f *fieldPlan, value []byte) ([]byte, bool, error) {
	dst = protowire.AppendTag(dst, f.fd.Number(), f.wire)
	if value == nil {
		switch f.wire {
		case protowire.Fixed32Type:
			value = make([]byte, 4)
		case protowire.Fixed64Type:
			value = make([]byte, 8)
		case protowire.VarintType:
			value = []byte{0}
		}
	}
	return appendScalar(dst, f.fd.Kind(), value)
}

// appendScalar appends one value of kind k, as it came (a varint, 4 or 8
// bytes, or a run of bytes without its length), in canonical form: a
// varint as protobuf reads it into k (an int32 from its low 32 bits, sign
// extended; a bool as 0 or 1) and shortest, a run with its length. It
// reports whether the value is k's zero.
func appendScalar(dst []byte, k protoreflect.Kind, b []byte) ([]byte, bool, error) {
	switch wireType(k) {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 || n != len(b) {
			return nil, false, errMalformed
		}
		switch k {
		case protoreflect.Int32Kind, protoreflect.EnumKind:
			v = uint64(int64(int32(v)))
		case protoreflect.Uint32Kind, protoreflect.Sint32Kind:
			v = uint64(uint32(v))
		case protoreflect.BoolKind:
			v = protowire.EncodeBool(v != 0)
		}
		return protowire.AppendVarint(dst, v), v == 0, nil
	case protowire.Fixed32Type, protowire.Fixed64Type:
		if len(b) != 4 && len(b) != 8 {
			return nil, false, errMalformed
		}
		return append(dst, b...), allZero(b), nil
	}
	return protowire.AppendBytes(dst, b), len(b) == 0, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// prefixLength puts the length of dst[start:], a run just appended, before
// it.
func prefixLength(dst []byte, start int) []byte {
	n := len(dst) - start
	size := protowire.SizeVarint(uint64(n))
	dst = append(dst, make([]byte, size)...)
	copy(dst[start+size:], dst[start:start+n])
	protowire.AppendVarint(dst[start:start], uint64(n))
	return dst
}
