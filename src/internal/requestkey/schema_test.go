package requestkey

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// helloSchema is the Schema of hello.v1.HelloRequest leaving out ignore.
func helloSchema(t testing.TB, ignore ...string) *Schema {
	t.Helper()
	s, err := NewSchema((&hellov1.HelloRequest{}).ProtoReflect().Descriptor(), ignore)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wire builds a HelloRequest's bytes field by field, in the order given,
// as another encoder may write them.
type wire []byte

func (w wire) str(num protowire.Number, v string) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendString(w, v)
}

func (w wire) label(k, v string) wire {
	entry := wire(nil).str(1, k).str(2, v)
	w = protowire.AppendTag(w, 6, protowire.BytesType)
	return protowire.AppendBytes(w, entry)
}

func (w wire) meta(clientTime int64, client string) wire {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(clientTime))
	m = wire(m).str(2, client)
	w = protowire.AppendTag(w, 7, protowire.BytesType)
	return protowire.AppendBytes(w, m)
}

func TestSchema_EqualMessagesGiveEqualKeys(t *testing.T) {
	s := helloSchema(t)
	for _, tc := range []struct {
		name string
		a, b wire
	}{
		{"map entries in another order",
			wire(nil).str(1, "ann").label("a", "1").label("b", "2"),
			wire(nil).str(1, "ann").label("b", "2").label("a", "1")},
		{"a field written twice",
			wire(nil).str(1, "bob").str(1, "ann"),
			wire(nil).str(1, "ann")},
		{"fields out of number order",
			wire(nil).label("a", "1").str(5, "r").str(1, "ann"),
			wire(nil).str(1, "ann").str(5, "r").label("a", "1")},
		{"a map key written twice",
			wire(nil).label("a", "0").label("a", "1"),
			wire(nil).label("a", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.Equal(tc.a, tc.b) {
				t.Fatal("the two encodings are the same bytes: the case tests nothing")
			}
			if ka, kb := mustCanonical(t, s, tc.a), mustCanonical(t, s, tc.b); !bytes.Equal(ka, kb) {
				t.Errorf("keys differ:\n%x\n%x", ka, kb)
			}
		})
	}
}

func TestSchema_LeavesOutTheFieldsItIgnoresAndNoOthers(t *testing.T) {
	s := helloSchema(t, "request_id", "meta.client_time_unix_ms")
	base := wire(nil).str(1, "ann").str(5, "r-1").meta(100, "app")
	for _, tc := range []struct {
		name  string
		other wire
		equal bool
	}{
		{"another request_id", wire(nil).str(1, "ann").str(5, "r-2").meta(100, "app"), true},
		{"no request_id", wire(nil).str(1, "ann").meta(100, "app"), true},
		{"another client time", wire(nil).str(1, "ann").str(5, "r-1").meta(999, "app"), true},
		{"another name", wire(nil).str(1, "bob").str(5, "r-1").meta(100, "app"), false},
		{"another client", wire(nil).str(1, "ann").str(5, "r-1").meta(100, "web"), false},
		{"an unknown field", protowire.AppendVarint(protowire.AppendTag(base, 99, protowire.VarintType), 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := bytes.Equal(mustCanonical(t, s, base), mustCanonical(t, s, tc.other))
			if got != tc.equal {
				t.Errorf("equal keys = %v, want %v", got, tc.equal)
			}
		})
	}
}

func TestSchema_IgnoresNothingUnlessTold(t *testing.T) {
	s := helloSchema(t)
	a := mustCanonical(t, s, wire(nil).str(1, "ann").str(5, "r-1"))
	b := mustCanonical(t, s, wire(nil).str(1, "ann").str(5, "r-2"))
	if bytes.Equal(a, b) {
		t.Error("requests with different request_ids have one key, though no field is ignored")
	}
}

func TestNewSchema_NamesAPathItCannotFollow(t *testing.T) {
	desc := (&hellov1.HelloRequest{}).ProtoReflect().Descriptor()
	for _, tc := range []struct{ path, want string }{
		{"request_idd", "hello.v1.HelloRequest has no field request_idd"},
		{"meta.client", ""},
		{"meta.clock", "hello.v1.RequestMeta has no field clock"},
		{"name.first", "hello.v1.HelloRequest.name is not a singular message field"},
		{"labels.key", "hello.v1.HelloRequest.labels is not a singular message field"},
		{"meta..client", `"" is not a field name`},
		{"", "empty field path"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := NewSchema(desc, []string{tc.path})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewSchema: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewSchema error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSchema_APayloadThatIsNoMessageIsAnError(t *testing.T) {
	if _, err := helloSchema(t).canonical(nil, []byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("Canonical of a truncated field: no error")
	}
}

// canonical is s.canonical(nil, payload), which must succeed.
func mustCanonical(t testing.TB, s *Schema, payload []byte) []byte {
	t.Helper()
	b, err := s.canonical(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// richFile declares a request with every kind of field a key reads:
// scalars of each wire type, packed lists, proto3 optional, a oneof, maps
// with scalar and message values, a type that holds itself, an enum, and
// fields declared out of number order.
const richFile = `
name: "keytest/rich.proto" package: "keytest" syntax: "proto3"
enum_type { name: "Color" value { name: "RED" number: 0 } value { name: "GREEN" number: 1 } }
message_type {
  name: "Rich"
  field { name: "late" number: 30 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "late" }
  field { name: "i32" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "i32" }
  field { name: "s32" number: 2 label: LABEL_OPTIONAL type: TYPE_SINT32 json_name: "s32" }
  field { name: "u32" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT32 json_name: "u32" }
  field { name: "i64" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 json_name: "i64" }
  field { name: "b" number: 5 label: LABEL_OPTIONAL type: TYPE_BOOL json_name: "b" }
  field { name: "color" number: 6 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".keytest.Color" json_name: "color" }
  field { name: "f32" number: 7 label: LABEL_OPTIONAL type: TYPE_FIXED32 json_name: "f32" }
  field { name: "d" number: 8 label: LABEL_OPTIONAL type: TYPE_DOUBLE json_name: "d" }
  field { name: "raw" number: 10 label: LABEL_OPTIONAL type: TYPE_BYTES json_name: "raw" }
  field { name: "ri" number: 11 label: LABEL_REPEATED type: TYPE_INT32 json_name: "ri" }
  field { name: "rs" number: 12 label: LABEL_REPEATED type: TYPE_SINT64 json_name: "rs" }
  field { name: "rf" number: 13 label: LABEL_REPEATED type: TYPE_FIXED64 json_name: "rf" }
  field { name: "rb" number: 14 label: LABEL_REPEATED type: TYPE_BYTES json_name: "rb" }
  field { name: "opt" number: 15 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 1 proto3_optional: true json_name: "opt" }
  field { name: "tag" number: 16 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 json_name: "tag" }
  field { name: "child" number: 17 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".keytest.Rich" oneof_index: 0 json_name: "child" }
  field { name: "number" number: 18 label: LABEL_OPTIONAL type: TYPE_INT32 oneof_index: 0 json_name: "number" }
  field { name: "by_id" number: 19 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".keytest.Rich.ByIdEntry" json_name: "byId" }
  field { name: "flags" number: 20 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".keytest.Rich.FlagsEntry" json_name: "flags" }
  field { name: "next" number: 22 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".keytest.Rich" json_name: "next" }
  field { name: "list" number: 23 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".keytest.Rich" json_name: "list" }
  field { name: "early" number: 25 label: LABEL_OPTIONAL type: TYPE_BYTES json_name: "early" }
  nested_type { name: "ByIdEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "key" }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".keytest.Rich" json_name: "value" } }
  nested_type { name: "FlagsEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_BOOL json_name: "key" }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".keytest.Color" json_name: "value" } }
  oneof_decl { name: "choice" }
  oneof_decl { name: "_opt" }
}`

// richRequest is the descriptor of richFile's message.
func richRequest(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(richFile), &fdp); err != nil {
		t.Fatal(err)
	}
	f, err := protodesc.NewFile(&fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Messages().ByName("Rich")
}

// FuzzSchemaCanonical checks, for any payload that protobuf reads as a
// request (a HelloRequest leaving two fields out, a Struct, a Rich), that
// its key's encoding is a fixed point, and reads as the same message, less
// the fields left out: equal keys mean equal messages.
func FuzzSchemaCanonical(f *testing.F) {
	f.Add(byte(0), []byte(wire(nil).str(1, "ann").label("b", "2").label("a", "1").str(5, "r").meta(7, "x")))
	f.Add(byte(0), []byte(wire(nil).str(1, "bob").str(1, "ann")))
	f.Add(byte(1), []byte{})
	rich := richRequest(f)
	for _, m := range []proto.Message{
		&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1), structpb.NewStringValue("x")}}), "b": structpb.NewBoolValue(true)}},
	} {
		b, _ := proto.MarshalOptions{}.Marshal(m)
		f.Add(byte(1), b)
	}
	seed := dynamicpb.NewMessage(rich)
	if err := prototext.Unmarshal([]byte(`late: "z" i32: -5 s32: -7 u32: 9 i64: -1 b: true color: GREEN f32: 3 d: 1.5 raw: "r"
		ri: [1, -2, 3] rs: [-4, 5] rf: [6] rb: ["a", ""] opt: 0 child { i32: 1 } by_id { key: 2 value { s32: 3 } } by_id { key: -1 value {} }
		flags { key: true value: GREEN } next { next { b: true } } list { u32: 1 } list {} early: "e"`), seed); err != nil {
		f.Fatal(err)
	}
	if b, err := proto.Marshal(seed); err == nil {
		f.Add(byte(2), b)
	}
	targets := []struct {
		schema *Schema
		clear  func(protoreflect.Message) // the fields left out
	}{
		{helloSchema(f, "request_id", "meta.client_time_unix_ms"), func(m protoreflect.Message) {
			fields := m.Descriptor().Fields()
			m.Clear(fields.ByName("request_id"))
			if meta := fields.ByName("meta"); m.Has(meta) {
				m.Mutable(meta).Message().Clear(meta.Message().Fields().ByName("client_time_unix_ms"))
			}
		}},
		{mustSchema(f, (&structpb.Struct{}).ProtoReflect().Descriptor()), func(protoreflect.Message) {}},
		{mustSchema(f, rich), func(protoreflect.Message) {}},
	}
	f.Fuzz(func(t *testing.T, which byte, payload []byte) {
		target := targets[int(which)%len(targets)]
		desc := target.schema.desc
		sent := dynamicpb.NewMessage(desc)
		if !reads(payload, sent) {
			return // protobuf reads no message: the payload's bytes are its key
		}
		key, err := target.schema.canonical(nil, payload)
		if err != nil {
			if strings.Contains(err.Error(), "nest deeper") {
				return
			}
			t.Fatalf("protobuf reads %x as a %s, the key cannot: %v", payload, desc.FullName(), err)
		}
		got := dynamicpb.NewMessage(desc)
		if err := proto.Unmarshal(key, got); err != nil {
			t.Fatalf("the canonical form %x is no %s: %v", key, desc.FullName(), err)
		}
		target.clear(sent)
		if !proto.Equal(got, sent) {
			t.Fatalf("canonical form of %x reads as\n%v\nwant\n%v", payload, got, sent)
		}
		if again := mustCanonical(t, target.schema, key); !bytes.Equal(again, key) {
			t.Fatalf("canonical form of the canonical form differs:\n%x\n%x", again, key)
		}
		// Another encoding of the same message has the same key.
		other, err := proto.MarshalOptions{Deterministic: true}.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		if again := mustCanonical(t, target.schema, other); !bytes.Equal(again, key) {
			t.Fatalf("protobuf's own encoding %x of the message has another key:\n%x\n%x", other, again, key)
		}
	})
}

// reads reports whether protobuf reads payload into m. Its reader of
// dynamic messages panics on a map entry whose key comes in another wire
// type (protobuf-go 1.36.12): that is no message either.
func reads(payload []byte, m proto.Message) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return proto.Unmarshal(payload, m) == nil
}

// mustSchema is the Schema of desc leaving nothing out.
func mustSchema(t testing.TB, desc protoreflect.MessageDescriptor) *Schema {
	t.Helper()
	s, err := NewSchema(desc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkSchemaKeyed is what building a key from the parsed request costs
// over taking its bytes (BenchmarkKey): a request of a name, a request_id,
// three labels and a meta, as bytes, canonical, and canonical without two
// fields.
func BenchmarkSchemaKeyed(b *testing.B) {
	payload := []byte(wire(nil).str(1, "ann").str(5, "req-1").label("a", "1").label("b", "2").label("c", "3").meta(7, "app"))
	for _, bc := range []struct {
		name   string
		schema *Schema
	}{
		{"bytes", nil},
		{"schema", helloSchema(b)},
		{"schema-ignoring-two", helloSchema(b, "request_id", "meta.client_time_unix_ms")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = bc.schema.AppendKeyed(buf[:0], "", payload)
			}
		})
	}
}

func TestNewSchema_AGroupLeavesTheRequestKeyedByItsBytes(t *testing.T) {
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(`name: "keytest/group.proto" package: "keytest" syntax: "proto2"
		message_type { name: "Old"
		  field { name: "g" number: 1 label: LABEL_OPTIONAL type: TYPE_GROUP type_name: ".keytest.Old.G" }
		  nested_type { name: "G" field { name: "x" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 } } }`), &fdp); err != nil {
		t.Fatal(err)
	}
	f, err := protodesc.NewFile(&fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSchema(f.Messages().ByName("Old"), nil); err == nil || !strings.Contains(err.Error(), "keytest.Old.g is a group") {
		t.Fatalf("NewSchema of a message with a group: err = %v, want one naming the group", err)
	}
}
