package requestkey

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

// tuple is the normalised content a key stands for.
type tuple struct {
	method, subtype string
	payload         string
	headers         []namedValues // names strictly ascending
}

type namedValues struct {
	name   string
	values []string
}

// normalise computes, independently of Key's encoder, the tuple Key must encode.
func normalise(r *Rule, method, subtype string, payload []byte, md metadata.MD) tuple {
	if subtype == "" {
		subtype = "proto"
	}
	byName := map[string][]string{}
	origs := slices.Sorted(func(yield func(string) bool) {
		for k := range md {
			if !yield(k) {
				return
			}
		}
	})
	for _, orig := range origs {
		name := strings.ToLower(orig)
		if r.keeps(name) {
			byName[name] = append(byName[name], md[orig]...)
		}
	}
	t := tuple{method: method, subtype: subtype, payload: string(payload)}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range byName {
			if !yield(k) {
				return
			}
		}
	}) {
		if len(byName[name]) > 0 {
			t.headers = append(t.headers, namedValues{name, byName[name]})
		}
	}
	return t
}

// decodeKey parses a key back into its tuple; it fails unless the key is
// exactly one well-formed encoding.
func decodeKey(key string) (tuple, error) {
	d := decoder{s: key}
	t := tuple{method: d.field(), subtype: d.field(), payload: d.field()}
	for d.err == nil && d.s != "" {
		h := namedValues{name: d.field()}
		n := d.uvarint()
		for i := uint64(0); i < n && d.err == nil; i++ {
			h.values = append(h.values, d.field())
		}
		if n == 0 {
			return tuple{}, errors.New("header without values")
		}
		if len(t.headers) > 0 && t.headers[len(t.headers)-1].name >= h.name {
			return tuple{}, fmt.Errorf("header %q not in ascending order", h.name)
		}
		t.headers = append(t.headers, h)
	}
	return t, d.err
}

type decoder struct {
	s   string
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint([]byte(d.s[:min(len(d.s), binary.MaxVarintLen64)]))
	if n <= 0 {
		d.err = errors.New("bad length prefix")
		return 0
	}
	d.s = d.s[n:]
	return x
}

func (d *decoder) field() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)) {
		d.err = errors.New("field longer than the key")
		return ""
	}
	f := d.s[:n]
	d.s = d.s[n:]
	return f
}

// fuzzNames mixes credentials, ignored, upper-case and binary names so fuzzed
// metadata collides often.
var fuzzNames = []string{"authorization", "cookie", "x-a", "X-A", "x-b", "x-b-bin", "user-agent", "traceparent", "x-envoy-x", "x-tenant", "a"}

// mdFromBytes turns fuzz input into metadata: each step picks a name and
// appends a value made of the next few bytes.
func mdFromBytes(b []byte) metadata.MD {
	md := metadata.MD{}
	for len(b) >= 2 {
		name := fuzzNames[int(b[0])%len(fuzzNames)]
		n := min(int(b[1])%4, len(b)-2)
		if b[1]&0x80 != 0 && md[name] == nil {
			md[name] = []string{} // a header without values
		} else {
			md[name] = append(md[name], string(b[2:2+n]))
		}
		b = b[2+n:]
	}
	return md
}

var fuzzRules = []RuleOptions{
	{},
	{KeyHeaders: []string{"x-a", "x-b*"}},
	{ShareAcrossCredentials: true, IgnoreHeaders: []string{"x-b-bin"}},
}

func FuzzKeyInjective(f *testing.F) {
	f.Add(uint8(0), "/s/ab", "", []byte("c"), []byte("\x02\x01z"), "/s/a", "proto", []byte("bc"), []byte("\x03\x01z"))
	f.Add(uint8(1), "/m", "json", []byte{}, []byte("\x02\x02ab\x02\x01c"), "/m", "json", []byte{}, []byte("\x02\x01a\x02\x02bc"))
	f.Add(uint8(2), "/m", "", []byte("p"), []byte("\x00\x01a\x05\x81"), "/m", "", []byte("p"), []byte("\x01\x01a"))
	f.Fuzz(func(t *testing.T, ruleIdx uint8, m1, s1 string, p1, h1 []byte, m2, s2 string, p2, h2 []byte) {
		r, err := NewRule(fuzzRules[int(ruleIdx)%len(fuzzRules)])
		if err != nil {
			t.Fatal(err)
		}
		md1, md2 := mdFromBytes(h1), mdFromBytes(h2)
		k1, k2 := key(r, m1, s1, p1, md1), key(r, m2, s2, p2, md2)
		n1, n2 := normalise(r, m1, s1, p1, md1), normalise(r, m2, s2, p2, md2)

		// A method's keys are exactly those starting with its prefix.
		if strings.HasPrefix(k1, MethodPrefix(m2)) != (m1 == m2) {
			t.Fatalf("key of %q has the prefix of %q: %v", m1, m2, m1 != m2)
		}
		if (k1 == k2) != reflect.DeepEqual(n1, n2) {
			t.Fatalf("keys equal = %v but normalised tuples equal = %v:\n%+v\n%+v", k1 == k2, !(k1 == k2), n1, n2)
		}
		for _, c := range []struct {
			key  string
			want tuple
		}{{k1, n1}, {k2, n2}} {
			got, err := decodeKey(c.key)
			if err != nil {
				t.Fatalf("decode key %q: %v", c.key, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("key decodes to %+v, want %+v", got, c.want)
			}
		}
	})
}
