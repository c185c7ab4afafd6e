package policy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/testkit"
)

// configMap writes files the way the kubelet updates a mounted ConfigMap:
// each version in a new directory, published by renaming the ..data
// symlink, with policy.yaml a symlink through ..data.
type configMap struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMap(t *testing.T, content string) (*configMap, string) {
	c := &configMap{t: t, dir: t.TempDir()}
	c.write(content)
	path := filepath.Join(c.dir, "policy.yaml")
	if err := os.Symlink(filepath.Join("..data", "policy.yaml"), path); err != nil {
		t.Fatal(err)
	}
	return c, path
}

func (c *configMap) write(content string) {
	c.t.Helper()
	c.n++
	version := fmt.Sprintf("..v%d", c.n)
	if err := os.Mkdir(filepath.Join(c.dir, version), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, version, "policy.yaml"), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
}

// reloads counts ObservePolicyReload calls.
type reloads struct{ ok, failed atomic.Int64 }

func (r *reloads) ObservePolicyReload(ok bool) {
	if ok {
		r.ok.Add(1)
	} else {
		r.failed.Add(1)
	}
}

// runStore runs s.Run with a short interval until the test ends.
func runStore(t *testing.T, s *Store) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx, 5*time.Millisecond) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func ttlOf(s *Store) time.Duration {
	return s.Policy().Rule("/a.B/C", noSideEffects).Call.TTL
}

func TestStore_ReloadsAValidFileAndKeepsThePolicyOnABadOne(t *testing.T) {
	cm, path := newConfigMap(t, "default:\n  cacheTTL: 1s\n")
	logs := &logrecorder.Recorder{}
	var seen reloads
	s, err := NewStore(defaults, path, nil, slog.New(logs), &seen)
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)
	if got := ttlOf(s); got != time.Second {
		t.Fatalf("TTL at start = %v, want 1s", got)
	}

	cm.write("default:\n  cacheTTL: 2s\n")
	testkit.WaitFor(t, "the new policy", func() bool { return ttlOf(s) == 2*time.Second })
	if seen.ok.Load() != 1 {
		t.Errorf("successful reloads = %d, want 1", seen.ok.Load())
	}

	cm.write("default:\n  cacheTTL: soon\n")
	testkit.WaitFor(t, "the failed reload", func() bool { return seen.failed.Load() >= 1 })
	if got := ttlOf(s); got != 2*time.Second {
		t.Errorf("TTL after a bad file = %v, want 2s kept", got)
	}
	if n := logs.Count(slog.LevelError, "policy file not applied", "", ""); n != 1 {
		t.Errorf("bad file logged %d times, want once", n)
	}

	cm.write("default:\n  cacheTTL: 3s\n")
	testkit.WaitFor(t, "recovery", func() bool { return ttlOf(s) == 3*time.Second })
}

func TestStore_ReloadKeepsThePolicyWhenAWriteWouldBeCollapsed(t *testing.T) {
	const write = "  - name: /a.B/Set\n    invalidates:\n      responseTags: true\n"
	cm, path := newConfigMap(t, "default:\n  cacheTTL: 1s\nmethods:\n"+write)
	logs := &logrecorder.Recorder{}
	var seen reloads
	s, err := NewStore(defaults, path, nil, slog.New(logs), &seen)
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)
	cm.write("default:\n  cacheTTL: 2s\n  collapse: true\nmethods:\n" + write)
	testkit.WaitFor(t, "the failed reload", func() bool { return seen.failed.Load() >= 1 })
	if got := ttlOf(s); got != time.Second {
		t.Errorf("TTL after a refused file = %v, want 1s kept", got)
	}
	if n := logs.Count(slog.LevelError, "policy file not applied", "", ""); n != 1 {
		t.Errorf("refused file logged %d times, want once", n)
	}
	if r := s.Policy().Rule("/a.B/Set", unannotated); r.Action != Passthrough || r.Invalidates == nil {
		t.Errorf("the write's rule after a refused file = %+v, want it passed through, invalidating", r)
	}
}

func TestNewStore_BadFileIsAStartupError(t *testing.T) {
	_, path := newConfigMap(t, "default:\n  collapse: sometimes\n")
	_, err := NewStore(defaults, path, nil, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "policy file "+path) || !strings.Contains(err.Error(), `collapse "sometimes"`) {
		t.Errorf("err = %v", err)
	}
	_, err = NewStore(defaults, filepath.Join(t.TempDir(), "missing.yaml"), nil, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "read policy file") {
		t.Errorf("missing file: err = %v", err)
	}
}

// kinds is a fixed methodkind table.
type kinds map[string]methodkind.Method

func (k kinds) Method(m string) methodkind.Method { return k[m] }
func (k kinds) Generation() uint64                { return 0 } // never changes
func (k kinds) Methods() []string {
	var names []string
	for m := range k {
		names = append(names, m)
	}
	return names
}

func TestDecider_ExplainsEachPassedThroughMethodOnce(t *testing.T) {
	s, err := NewStore(defaults, "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logrecorder.Recorder{}
	d := NewDecider(s, kinds{"/a.B/Create": unannotated, "/a.B/Get": noSideEffects}, slog.New(logs))
	for range 3 {
		d.Rule("/a.B/Create")
		d.Rule("/a.B/Get")
		d.Rule("/x.Y/Unknown")
	}
	if n := logs.Count(slog.LevelWarn, "unary method passes through", "method", "/a.B/Create"); n != 1 {
		t.Errorf("unannotated method logged %d times, want once", n)
	}
	if n := logs.Count(slog.LevelWarn, "unary method passes through", "hint", "if it has no side effects, annotate it with option idempotency_level = NO_SIDE_EFFECTS, "+
		"or set COLLAPSER_COLLAPSE_METHODS=/a.B/Create, or COLLAPSER_DEFAULT_COLLAPSE=all to collapse every unary method"); n != 1 {
		t.Errorf("hint names the variable %d times, want once", n)
	}
	if n := logs.Count(slog.LevelWarn, "method kind unknown", "method", "/x.Y/Unknown"); n != 1 {
		t.Errorf("unknown method logged %d times, want once", n)
	}
	if n := logs.Count(slog.LevelWarn, "", "method", "/a.B/Get"); n != 0 {
		t.Errorf("collapsed method logged %d times", n)
	}
}

func TestDecider_ExplainsOnceAWriteItsDescriptorCallsIdempotent(t *testing.T) {
	_, path := newConfigMap(t, "default:\n  stream: replay\nmethods:\n"+
		"  - {name: /a.B/Set, invalidates: {responseTags: true}}\n"+
		"  - {name: /a.B/Put, invalidates: {responseTags: true}}\n"+
		"  - {name: /a.B/Create, invalidates: {responseTags: true}}\n"+
		"  - {name: /a.B/Watch, invalidates: {responseTags: true}}\n"+
		"  - {name: /a.B/Off, collapse: false, invalidates: {responseTags: true}}\n")
	s, err := NewStore(defaults, path, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logrecorder.Recorder{}
	d := NewDecider(s, kinds{"/a.B/Set": noSideEffects, "/a.B/Put": idempotent, "/a.B/Create": unannotated, "/a.B/Watch": serverStream, "/a.B/Off": idempotent},
		slog.New(logs))
	for range 3 {
		for _, m := range []string{"/a.B/Set", "/a.B/Put", "/a.B/Create", "/a.B/Watch", "/a.B/Off"} {
			if r := d.Rule(m); r.Action != Passthrough || r.Invalidates == nil {
				t.Fatalf("Rule(%s) = %+v, want it passed through, invalidating", m, r)
			}
		}
	}
	const unary = "unary method passes through: its descriptor calls it idempotent, but its policy names what its success invalidates"
	tests := []struct {
		method, prefix string
		want           int
	}{
		{"/a.B/Set", unary, 1},
		{"/a.B/Put", unary, 1},
		{"/a.B/Watch", "server-streaming method passes through: its rule says stream: replay, but its policy names what its success invalidates", 1},
		// Nothing to explain: the policy says it writes, and nothing
		// says otherwise.
		{"/a.B/Create", "", 0},
		{"/a.B/Off", "", 0},
	}
	for _, tt := range tests {
		if n := logs.Count(slog.LevelWarn, tt.prefix, "method", tt.method); n != tt.want {
			t.Errorf("%s logged %d times, want %d", tt.method, n, tt.want)
		}
	}
	if n := logs.Count(slog.LevelWarn, unary, "idempotency_level", "IDEMPOTENT"); n != 1 {
		t.Errorf("the log names the idempotency level %d times, want once", n)
	}
}

func TestDecider_HintNamesThePolicyFile(t *testing.T) {
	_, path := newConfigMap(t, "methods: []\n")
	s, err := NewStore(defaults, path, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logrecorder.Recorder{}
	NewDecider(s, kinds{"/a.B/Create": unannotated}, slog.New(logs)).Rule("/a.B/Create")
	if n := logs.Count(slog.LevelWarn, "", "hint", `if it has no side effects, add to `+path+` under methods: "- {name: /a.B/Create, collapse: true}", `+
		`or annotate it with option idempotency_level = NO_SIDE_EFFECTS`); n != 1 {
		t.Errorf("hint with the policy line logged %d times, want once", n)
	}
}

func TestDecider_BoundsWhatItRemembersAndShortensNames(t *testing.T) {
	s, err := NewStore(defaults, "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logrecorder.Recorder{}
	d := NewDecider(s, kinds{}, slog.New(logs))
	long := "/" + strings.Repeat("a", 256<<10) + "/M"
	for i := range 300 {
		d.Rule(fmt.Sprintf("%s%d", long, i))
	}
	// 300 names of 256 KiB each: 75 MiB if logged whole.
	if logged := logs.Bytes(); logged > 64<<10 {
		t.Errorf("logged %d bytes, want the names shortened", logged)
	}
	for i := range 2 * maxExplained {
		d.Rule(fmt.Sprintf("/a.B/M%d", i))
	}
	if n := logs.Count(slog.LevelWarn, "method kind unknown", "", ""); n > maxExplained {
		t.Errorf("logged %d methods, want at most %d", n, maxExplained)
	}
	if n := logs.Count(slog.LevelWarn, "too many distinct methods", "", ""); n != 1 {
		t.Errorf("bound reached logged %d times, want once", n)
	}
}

func TestDecider_RulesCoverKnownAndNamedMethods(t *testing.T) {
	s, err := NewStore(Defaults{Timeout: time.Second, CollapseMethods: []string{"/a.B/Listed"}}, "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := NewDecider(s, kinds{"/a.B/Get": noSideEffects}, nil).Rules()
	if len(rules) != 2 || rules["/a.B/Get"].Action != Collapse || rules["/a.B/Listed"].Reason != ReasonUnknownKind {
		t.Errorf("Rules() = %+v", rules)
	}
}

// described is a SayHello whose request descriptor is known, as reflection
// or a descriptor set tells it.
var described = methodkind.Method{Kind: methodkind.Unary, Idempotency: methodkind.NoSideEffects,
	Request: (&hellov1.HelloRequest{}).ProtoReflect().Descriptor()}

const sayHello = "/hello.v1.Greeter/SayHello"

func TestStore_AFieldTheRequestDoesNotHaveIsRefusedAtLoadAndReload(t *testing.T) {
	const good = "methods:\n  - name: " + sayHello + "\n    keyIgnoreFields: [request_id, meta.client_time_unix_ms]\n"
	const bad = "methods:\n  - name: " + sayHello + "\n    keyIgnoreFields: [request_id, meta.clock]\n"
	known := kinds{sayHello: described}

	_, path := newConfigMap(t, bad)
	_, err := NewStore(defaults, path, known, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "methods[0] ("+sayHello+"): keyIgnoreFields: field path \"meta.clock\": hello.v1.RequestMeta has no field clock") {
		t.Fatalf("a start on a field the request does not have: err = %v", err)
	}
	if _, err := NewStore(defaults, path, kinds{}, nil, nil); err != nil {
		t.Fatalf("a start before the method's descriptor is known: %v", err)
	}

	cm, path := newConfigMap(t, good)
	var seen reloads
	s, err := NewStore(defaults, path, known, slog.New(slog.DiscardHandler), &seen)
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)
	cm.write(bad)
	testkit.WaitFor(t, "the refused reload", func() bool { return seen.failed.Load() >= 1 })
	if got := s.Policy().Rule(sayHello, described).KeyIgnoreFields; !slices.Equal(got, []string{"request_id", "meta.client_time_unix_ms"}) {
		t.Errorf("fields left out after a refused file = %v, want the first file's", got)
	}
}

func TestDecider_SchemaKeysLeaveOutOnlyFieldsTheRequestHas(t *testing.T) {
	a := &hellov1.HelloRequest{Name: "ann", RequestId: "1", Meta: &hellov1.RequestMeta{ClientTimeUnixMs: 1, Client: "app"}}
	b := &hellov1.HelloRequest{Name: "ann", RequestId: "2", Meta: &hellov1.RequestMeta{ClientTimeUnixMs: 2, Client: "app"}}
	for _, tt := range []struct {
		name, ignore string
		shared       bool
		logged       int
	}{
		{"fields it has", "[request_id, meta.client_time_unix_ms]", true, 0},
		// Reflection told the descriptor after the policy was checked.
		{"a field it does not have", "[request_id, meta.clock]", false, 1},
		{"none", "[]", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, path := newConfigMap(t, "methods:\n  - name: "+sayHello+"\n    collapse: true\n    keyIgnoreFields: "+tt.ignore+"\n")
			s, err := NewStore(defaults, path, kinds{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			logs := &logrecorder.Recorder{}
			d := NewDecider(s, kinds{sayHello: described}, slog.New(logs))
			keyed := func(m *hellov1.HelloRequest) string {
				payload, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				r := d.Rule(sayHello)
				if r.Schema == nil {
					t.Fatal("no schema for a method whose request descriptor is known")
				}
				return string(r.Schema.AppendKeyed(nil, "", payload))
			}
			if shared := keyed(a) == keyed(b); shared != tt.shared {
				t.Errorf("requests that differ in request_id and client time share a key: %v, want %v", shared, tt.shared)
			}
			if n := logs.Count(slog.LevelError, "keyIgnoreFields cannot be applied", "method", sayHello); n != tt.logged {
				t.Errorf("logged %d times, want %d", n, tt.logged)
			}
			first, again := d.Rule(sayHello), d.Rule(sayHello)
			if first.Schema != again.Schema {
				t.Error("the schema is built again for each call")
			}
		})
	}
}

// relearned is a kinds table that reflection may teach again: each
// relearn replaces it and moves its generation.
type relearned struct {
	kinds
	generation uint64
}

func (k *relearned) Generation() uint64 { return k.generation }

func (k *relearned) relearn(m kinds) { k.kinds, k.generation = m, k.generation+1 }

func TestDecider_DecidesAgainWhenThePolicyOrTheKindsChange(t *testing.T) {
	cm, path := newConfigMap(t, "default:\n  cacheTTL: 1s\n")
	known := &relearned{kinds: kinds{"/a.B/Get": unannotated}}
	s, err := NewStore(defaults, path, known, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)
	d := NewDecider(s, known, nil)
	if r := d.Rule("/a.B/Get"); r.Action != Passthrough {
		t.Fatalf("unannotated Get: %v, want passed through", r.Action)
	}

	known.relearn(kinds{"/a.B/Get": noSideEffects})
	if r := d.Rule("/a.B/Get"); r.Action != Collapse || r.Call.TTL != time.Second {
		t.Fatalf("Get relearned without side effects: %v, ttl %v; want collapsed, 1s", r.Action, r.Call.TTL)
	}

	cm.write("default:\n  cacheTTL: 2s\n")
	testkit.WaitFor(t, "the new policy's rule", func() bool { return d.Rule("/a.B/Get").Call.TTL == 2*time.Second })
}

func TestDecider_RemembersOnlyMethodsOfAKnownKind(t *testing.T) {
	s, err := NewStore(defaults, "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecider(s, kinds{"/a.B/Get": noSideEffects}, nil)
	d.Rule("/a.B/Get")
	for i := range 1000 {
		d.Rule("/x.Y/Invented" + strconv.Itoa(i)) // names a caller chooses
	}
	remembered := 0
	d.decided.Range(func(any, any) bool { remembered++; return true })
	if remembered != 1 {
		t.Errorf("decided holds %d methods, want 1 (Get)", remembered)
	}
}
