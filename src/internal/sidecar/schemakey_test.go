package sidecar

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// schemaPolicy writes a policy that keeps SayHello's answers for ttl, its
// key leaving the fields ignore names out, and returns its path.
func schemaPolicy(t testing.TB, ttl time.Duration, ignore ...string) string {
	t.Helper()
	p := "methods:\n  - name: " + sayHello + "\n    collapse: true\n    cacheTTL: " + ttl.String() + "\n"
	if len(ignore) > 0 {
		p += "    keyIgnoreFields: [" + strings.Join(ignore, ", ") + "]\n"
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(p), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// greeters returns n backends that answer as greet does.
func greeters(n int) []*testkit.Greeter {
	gs := make([]*testkit.Greeter, n)
	for i := range gs {
		gs[i] = &testkit.Greeter{SayHello: greet}
	}
	return gs
}

// startFleet starts a peered replica in front of each of backends, with
// the settings edit makes.
func startFleet(t *testing.T, backends []*testkit.Greeter, edit func(*config.Settings)) []*replica {
	t.Helper()
	addrs := make([]string, len(backends))
	for i, b := range backends {
		addrs[i] = startBackend(t, b)
	}
	rs := startSidecars(t, addrs, true, edit)
	for i, r := range rs {
		r.backend = backends[i]
	}
	return rs
}

// rawCodec sends a request's bytes as they are given, as another
// language's encoder may have written them, and returns the reply's.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// Name is the codec the bytes are in: grpc-go sends it as the call's
// content-subtype.
func (rawCodec) Name() string { return "proto" }

// helloWire builds a HelloRequest's bytes field by field.
type helloWire []byte

func (w helloWire) name(v string) helloWire {
	return protowire.AppendString(protowire.AppendTag(w, 1, protowire.BytesType), v)
}

func (w helloWire) label(k, v string) helloWire {
	var entry []byte
	entry = protowire.AppendString(protowire.AppendTag(entry, 1, protowire.BytesType), k)
	entry = protowire.AppendString(protowire.AppendTag(entry, 2, protowire.BytesType), v)
	return protowire.AppendBytes(protowire.AppendTag(w, 6, protowire.BytesType), entry)
}

func TestSchemaKeys_EncodingsOfOneMessageMakeOneBackendCall(t *testing.T) {
	encodings := []helloWire{
		helloWire(nil).name("enc").label("a", "1").label("b", "2").label("c", "3"),
		helloWire(nil).name("enc").label("c", "3").label("b", "2").label("a", "1"),
		helloWire(nil).label("b", "2").name("enc").label("a", "1").label("c", "3"),
		helloWire(nil).name("someone else").name("enc").label("a", "1").label("b", "2").label("c", "3"),
		helloWire(nil).name("enc").label("a", "0").label("a", "1").label("b", "2").label("c", "3"),
		helloWire(nil).label("c", "3").label("a", "1").label("b", "2").name("enc"),
	}
	for _, tt := range []struct {
		name string
		edit func(*config.Settings)
		want int64
	}{
		// The backend's reflection describes SayHello's request: its key
		// is the message, whatever bytes it came in.
		{"schema known", func(c *config.Settings) { c.PolicyFile = schemaPolicy(t, time.Minute) }, 1},
		// Nothing describes it: each encoding is a key of its own.
		{"schema unknown", func(c *config.Settings) {
			c.Reflection = false
			c.Policy.CollapseMethods = []string{sayHello}
			c.Policy.CacheTTL = time.Minute
		}, int64(len(encodings))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := startFleet(t, greeters(3), tt.edit)
			ctx := testkit.Context(t)
			conns := make([]*grpc.ClientConn, len(rs))
			for i, r := range rs {
				conns[i] = dial(t, r.sidecar.addr, grpc.WithAuthority("hello.example"))
			}
			for i, enc := range encodings {
				in, out := []byte(enc), []byte(nil)
				if err := conns[i%len(conns)].Invoke(ctx, sayHello, &in, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
					t.Fatalf("encoding %d: %v", i, err)
				}
				var reply hellov1.HelloReply
				if err := proto.Unmarshal(out, &reply); err != nil || reply.GetMessage() != "Hello, enc" {
					t.Fatalf("encoding %d: reply %v (%v), want Hello, enc", i, &reply, err)
				}
			}
			if got := backendCalls(rs); got != tt.want {
				t.Errorf("%d encodings of one message over 3 replicas made %d backend calls, want %d", len(encodings), got, tt.want)
			}
		})
	}
}

func TestSchemaKeys_IgnoredFieldsShareAnswersWithinOneCredentialOnly(t *testing.T) {
	// The tenant run: 5 tenants of 50 tokens each, every request with a
	// request_id and a client time of its own, twice over.
	const tenants, tokens, rounds = 5, 50, 2
	for _, tt := range []struct {
		name   string
		ignore []string
		listed bool // SayHello is in COLLAPSER_COLLAPSE_METHODS too: known by name, described by reflection
		want   int64
	}{
		{"fields ignored", []string{"request_id", "meta.client_time_unix_ms"}, false, tenants * tokens},
		{"fields ignored, the method listed by name", []string{"request_id", "meta.client_time_unix_ms"}, true, tenants * tokens},
		{"no field ignored", nil, false, rounds * tenants * tokens},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := startFleet(t, greeters(3), func(c *config.Settings) {
				c.PolicyFile = schemaPolicy(t, time.Minute, tt.ignore...)
				if tt.listed {
					c.Policy.CollapseMethods = []string{sayHello}
				}
			})
			ctx := testkit.Context(t)
			var wg sync.WaitGroup
			for round := range rounds {
				for i := range tenants * tokens {
					wg.Go(func() {
						token := fmt.Sprintf("Bearer tenant-%d-token-%d", i/tokens, i%tokens)
						req := &hellov1.HelloRequest{Name: "ann",
							RequestId: fmt.Sprintf("req-%d-%d", round, i),
							Meta:      &hellov1.RequestMeta{ClientTimeUnixMs: int64(round*100000 + i), Client: "app"}}
						reply, err := rs[i%len(rs)].client.SayHello(metadata.AppendToOutgoingContext(ctx, "authorization", token), req)
						if err != nil {
							t.Errorf("caller %d: %v", i, err)
							return
						}
						if reply.GetCaller() != token {
							t.Errorf("caller %s got the answer of %s", token, reply.GetCaller())
						}
					})
				}
				wg.Wait()
			}
			if got := backendCalls(rs); got != tt.want {
				t.Errorf("%d rounds of %d callers over 3 replicas made %d backend calls, want %d", rounds, tenants*tokens, got, tt.want)
			}
		})
	}
}
