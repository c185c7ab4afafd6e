package requestkey

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Schema builds the request part of a key from the request message read
// with its descriptor, not from the bytes a client happened to send:
// serialized protobuf is not canonical (a map in another order, a field
// written twice, the same message from another language's encoder), so
// equal messages may arrive as different bytes. A Schema's encoding is
// deterministic: known fields in number order, each value in its shortest
// form, repeated scalars packed, map entries in key order, and the unknown
// fields last, as the bytes they came in (in the order they came). Equal
// messages give equal bytes, and the bytes parse to the message (less the
// fields left out): equal keys mean equal messages. The encoding is read
// and written on the wire (canonical.go), without building a message.
// A message type with groups has no Schema.
//
// It leaves the fields its paths name out: a request_id or a client's clock
// that makes every request unique does not keep identical requests apart.
// Those fields still reach the backend, as the leader of a call sent them;
// a follower's values of them never do.
//
// A Schema is immutable and safe for concurrent use.
type Schema struct {
	desc protoreflect.MessageDescriptor
	plan *plan
}

// fieldPath is one path of fields left out of the key: every field but the
// last is a singular message field, the last is any field.
type fieldPath []protoreflect.FieldDescriptor

// NewSchema returns the Schema of requests of desc that leaves out the
// fields ignore names. A path is field names (as the .proto spells them)
// joined by dots, "request_id" or "meta.client_time"; every name but the
// last is a singular message field. A path that desc does not have is an
// error naming it.
func NewSchema(desc protoreflect.MessageDescriptor, ignore []string) (*Schema, error) {
	if desc == nil || desc.IsPlaceholder() {
		return nil, errors.New("requestkey: no descriptor of the request message")
	}
	var paths []fieldPath
	var errs []error
	for _, p := range ignore {
		path, err := resolvePath(desc, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, path)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pl := planner{byType: map[protoreflect.FullName]*plan{}}
	p, err := pl.build(desc, paths)
	if err != nil {
		return nil, fmt.Errorf("requestkey: %w", err)
	}
	return &Schema{desc: desc, plan: p}, nil
}

// ValidateFieldPath checks the syntax of a field path as NewSchema takes
// it, for a policy read before any descriptor is known.
func ValidateFieldPath(path string) error {
	if path == "" {
		return errors.New("empty field path")
	}
	for name := range strings.SplitSeq(path, ".") {
		if !protoreflect.Name(name).IsValid() {
			return fmt.Errorf("field path %q: %q is not a field name", path, name)
		}
	}
	return nil
}

// resolvePath finds the fields of path in desc.
func resolvePath(desc protoreflect.MessageDescriptor, path string) (fieldPath, error) {
	if err := ValidateFieldPath(path); err != nil {
		return nil, err
	}
	names := strings.Split(path, ".")
	fields := make(fieldPath, 0, len(names))
	m := desc
	for i, name := range names {
		fd := m.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, fmt.Errorf("field path %q: %s has no field %s", path, m.FullName(), name)
		}
		fields = append(fields, fd)
		if i == len(names)-1 {
			break
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("field path %q: %s.%s is not a singular message field: a path goes on only through one", path, m.FullName(), name)
		}
		m = fd.Message()
	}
	return fields, nil
}

// AppendKeyed appends to dst the bytes of a request payload, in the codec
// of content-subtype subtype, that its key holds: its canonical encoding
// when s is not nil, the codec is protobuf and the payload is a message of
// s's type; the payload itself otherwise (no message's encoding equals a
// payload that is no message, and the backend answers what it makes of it).
func (s *Schema) AppendKeyed(dst []byte, subtype string, payload []byte) []byte {
	if s == nil || (subtype != "" && subtype != protoSubtype) {
		return append(dst, payload...)
	}
	b, err := s.canonical(dst, payload)
	if err != nil {
		return append(dst, payload...)
	}
	return b
}

// canonical appends the canonical encoding of payload, a message of s's
// type, to dst.
func (s *Schema) canonical(dst, payload []byte) ([]byte, error) {
	b, err := s.plan.appendMessage(dst, payload, 0)
	if err != nil {
		return nil, fmt.Errorf("requestkey: the request is no %s: %w", s.desc.FullName(), err)
	}
	return b, nil
}
