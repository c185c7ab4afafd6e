package requestkey

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
			if ka, kb := canonical(t, s, tc.a), canonical(t, s, tc.b); !bytes.Equal(ka, kb) {
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
			got := bytes.Equal(canonical(t, s, base), canonical(t, s, tc.other))
			if got != tc.equal {
				t.Errorf("equal keys = %v, want %v", got, tc.equal)
			}
		})
	}
}

func TestSchema_IgnoresNothingUnlessTold(t *testing.T) {
	s := helloSchema(t)
	a := canonical(t, s, wire(nil).str(1, "ann").str(5, "r-1"))
	b := canonical(t, s, wire(nil).str(1, "ann").str(5, "r-2"))
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
	if _, err := helloSchema(t).Canonical([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("Canonical of a truncated field: no error")
	}
}

// canonical is s.Canonical(payload), which must succeed.
func canonical(t testing.TB, s *Schema, payload []byte) []byte {
	t.Helper()
	b, err := s.Canonical(payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzSchemaCanonical checks, for any payload that is a HelloRequest, that
// its key's encoding is the same message without its ignored fields, and
// a fixed point: encoding it again changes nothing.
func FuzzSchemaCanonical(f *testing.F) {
	f.Add([]byte(wire(nil).str(1, "ann").label("b", "2").label("a", "1").str(5, "r").meta(7, "x")))
	f.Add([]byte(wire(nil).str(1, "bob").str(1, "ann")))
	f.Add([]byte{})
	s := helloSchema(f, "request_id", "meta.client_time_unix_ms")
	f.Fuzz(func(t *testing.T, payload []byte) {
		var sent hellov1.HelloRequest
		if proto.Unmarshal(payload, &sent) != nil {
			if _, err := s.Canonical(payload); err == nil {
				t.Fatal("a payload that is no HelloRequest has a canonical form")
			}
			return
		}
		key := canonical(t, s, payload)
		var got hellov1.HelloRequest
		if err := proto.Unmarshal(key, &got); err != nil {
			t.Fatalf("the canonical form is no HelloRequest: %v", err)
		}
		sent.RequestId = ""
		if sent.Meta != nil {
			sent.Meta.ClientTimeUnixMs = 0
		}
		if !proto.Equal(&got, &sent) {
			t.Fatalf("canonical form = %v, want %v", &got, &sent)
		}
		if again := canonical(t, s, key); !bytes.Equal(again, key) {
			t.Fatalf("canonical form of the canonical form differs:\n%x\n%x", again, key)
		}
	})
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
			for b.Loop() {
				bc.schema.Keyed("", payload)
			}
		})
	}
}
