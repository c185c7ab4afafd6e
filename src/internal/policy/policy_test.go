package policy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodkind"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// defaults are the operator defaults of these tests.
var defaults = Defaults{CacheTTL: DefaultCacheTTL, Timeout: DefaultTimeout, CollapseMethodsSource: "COLLAPSER_COLLAPSE_METHODS"}

var (
	unannotated   = methodkind.Method{Kind: methodkind.Unary}
	noSideEffects = methodkind.Method{Kind: methodkind.Unary, Idempotency: methodkind.NoSideEffects}
	idempotent    = methodkind.Method{Kind: methodkind.Unary, Idempotency: methodkind.Idempotent}
	serverStream  = methodkind.Method{Kind: methodkind.ServerStreaming, Idempotency: methodkind.NoSideEffects}
)

func mustNew(t *testing.T, d Defaults, file string) *Policy {
	t.Helper()
	var data []byte
	if file != "" {
		data = []byte(file)
	}
	p, err := New(d, "policy.yaml", data)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// want is a rule as the tests describe it.
type want struct {
	action Action
	reason string
	ttl    time.Duration
	source string
}

func describe(r Rule) want {
	w := want{action: r.Action, reason: r.Reason, source: r.Source}
	if r.Call != nil {
		w.ttl = r.Call.TTL
	}
	return w
}

func TestPolicy_Rule(t *testing.T) {
	file := `
default:
  cacheTTL: 200ms
methods:
  - name: hello.v1.Greeter/*
    collapse: true
    cacheTTL: 1s
  - name: /hello.v1.Greeter/SayHello
    cacheTTL: 250ms
  - name: /hello.v1.Greeter/Delete
    collapse: false
  - name: /shop.v1.Orders/Get
    collapse: "true"
  - name: /feed.v1.Prices/*
    stream: replay
    cacheTTL: 2s
  - name: /feed.v1.Prices/Private
    collapse: false
`
	p := mustNew(t, defaults, file)
	tests := []struct {
		name   string
		method string
		m      methodkind.Method
		want   want
	}{
		{"exact entry inherits its service's collapse", "/hello.v1.Greeter/SayHello", unannotated, want{Collapse, "", 250 * time.Millisecond, "methods[1] (/hello.v1.Greeter/SayHello)"}},
		{"service entry", "/hello.v1.Greeter/Other", unannotated, want{Collapse, "", time.Second, "methods[0] (hello.v1.Greeter/*)"}},
		{"exact collapse false wins over the service", "/hello.v1.Greeter/Delete", noSideEffects, want{Passthrough, ReasonPolicy, 0, "methods[2] (/hello.v1.Greeter/Delete)"}},
		{"auto: no side effects is collapsed and cached", "/other.v1.S/Get", noSideEffects, want{Collapse, "", 200 * time.Millisecond, "default"}},
		{"auto: idempotent is collapsed, never cached", "/other.v1.S/Put", idempotent, want{Collapse, "", 0, "default"}},
		{"auto: unannotated passes through", "/other.v1.S/Create", unannotated, want{Passthrough, ReasonUnannotated, 0, "default"}},
		{"unknown kind passes through even with collapse true", "/shop.v1.Orders/Get", methodkind.Method{}, want{Passthrough, ReasonUnknownKind, 0, "methods[3] (/shop.v1.Orders/Get)"}},
		{"server streams pass through", "/hello.v1.Greeter/StreamHellos", serverStream, want{Passthrough, ReasonStreaming, 0, "methods[0] (hello.v1.Greeter/*)"}},
		{"stream: replay replays a server stream", "/feed.v1.Prices/Watch", serverStream, want{Replay, "", 2 * time.Second, "methods[4] (/feed.v1.Prices/*)"}},
		{"collapse false wins over replay", "/feed.v1.Prices/Private", serverStream, want{Passthrough, ReasonPolicy, 0, "methods[5] (/feed.v1.Prices/Private)"}},
		{"replay is for server streams only", "/feed.v1.Prices/Chat", methodkind.Method{Kind: methodkind.BidiStreaming}, want{Passthrough, ReasonStreaming, 0, "methods[4] (/feed.v1.Prices/*)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(p.Rule(tt.method, tt.m)); got != tt.want {
				t.Errorf("Rule(%s) = %+v, want %+v", tt.method, got, tt.want)
			}
		})
	}
}

func TestPolicy_WithoutFileTheDefaultsDecide(t *testing.T) {
	tests := []struct {
		name string
		d    Defaults
		m    methodkind.Method
		want want
	}{
		{"auto passes unannotated through", defaults, unannotated, want{Passthrough, ReasonUnannotated, 0, "default"}},
		{"all collapses every unary method", Defaults{Collapse: Always, CacheTTL: time.Second, Timeout: time.Second}, unannotated, want{Collapse, "", time.Second, "default"}},
		{"none passes even safe methods through", Defaults{Collapse: Never, Timeout: time.Second}, noSideEffects, want{Passthrough, ReasonPolicy, 0, "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(mustNew(t, tt.d, "").Rule("/a.B/C", tt.m)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPolicy_CollapseMethodsAreCollapsedUnlessTheFileSaysOtherwise(t *testing.T) {
	d := defaults
	d.CollapseMethods = []string{"/a.B/Listed", "/a.B/Overridden"}
	p := mustNew(t, d, `
methods:
  - name: /a.B/Overridden
    collapse: false
  - name: /a.B/Inherits
`)
	if got := describe(p.Rule("/a.B/Listed", unannotated)); got != (want{Collapse, "", DefaultCacheTTL, "COLLAPSER_COLLAPSE_METHODS"}) {
		t.Errorf("listed method: %+v", got)
	}
	if got := describe(p.Rule("/a.B/Overridden", unannotated)); got.action != Passthrough {
		t.Errorf("listed method the file overrides: %+v", got)
	}
}

func TestPolicy_CallOptions(t *testing.T) {
	p := mustNew(t, defaults, `
default:
  staleWhileRevalidate: 2s
  staleIfError: 30s
  finishAbandoned: true
  timeout: 3s
  maxWaiters: 100
  waitTimeout: 1s
  ttlJitter: 0.25
  earlyRefresh: true
methods:
  - name: /a.B/Codes
    staleIfErrorCodes: [INTERNAL]
  - name: /a.B/Exact
    ttlJitter: 0
    earlyRefresh: false
`)
	c := p.Rule("/a.B/Get", noSideEffects).Call
	if c.TTL != DefaultCacheTTL || c.StaleWhileRevalidate != 2*time.Second || c.StaleIfError != 30*time.Second || !c.Finish || c.Timeout != 3*time.Second ||
		c.MaxWaiters != 100 || c.WaitTimeout != time.Second || c.TTLJitter != 0.25 || !c.EarlyRefresh {
		t.Errorf("call options = %+v", c)
	}
	if c := p.Rule("/a.B/Exact", noSideEffects).Call; c.TTLJitter != 0 || c.EarlyRefresh {
		t.Errorf("a method's own ttlJitter: 0 and earlyRefresh: false: %+v", c)
	}
	stale := func(c *collapse.CallOptions, err error) bool { return c.StaleOn(err) }
	tests := []struct {
		method string
		err    error
		want   bool
	}{
		{"/a.B/Get", status.Error(codes.Unavailable, "down"), true},
		{"/a.B/Get", status.Error(codes.DeadlineExceeded, "slow"), true},
		{"/a.B/Get", status.Error(codes.InvalidArgument, "bad"), false},
		{"/a.B/Codes", status.Error(codes.Unavailable, "down"), false},
		{"/a.B/Codes", status.Error(codes.Internal, "bug"), true},
		{"/a.B/Codes", &collapse.PanicError{Value: "x"}, true},
		{"/a.B/Get", errors.Join(collapse.ErrOverloaded), false},
	}
	for _, tt := range tests {
		if got := stale(p.Rule(tt.method, noSideEffects).Call, tt.err); got != tt.want {
			t.Errorf("%s StaleOn(%v) = %v, want %v", tt.method, tt.err, got, tt.want)
		}
	}
	if c := p.Rule("/a.B/Put", idempotent).Call; c.TTL != 0 || c.StaleWhileRevalidate != 0 || c.StaleIfError != 0 || c.Timeout != 3*time.Second ||
		c.MaxWaiters != 100 || c.WaitTimeout != time.Second {
		t.Errorf("idempotent call options keep results: %+v", c)
	}
}

func TestNew_ErrorsNameFileEntryAndField(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"unknown field", "default:\n  cacheTtl: 1s\n", "policy file policy.yaml: yaml: unmarshal errors:\n  line 2: field cacheTtl not found"},
		{"unknown top-level key", "method: []\n", "field method not found"},
		{"bad collapse", "default:\n  collapse: maybe\n", `policy file policy.yaml: line 2: default: collapse "maybe": want auto, true or false`},
		{"bad duration", "methods:\n  - name: /a.B/C\n    cacheTTL: 10x\n", `line 3: methods[0] (/a.B/C): cacheTTL "10x": want a duration such as "250ms" or "2s"`},
		{"negative duration", "default:\n  staleIfError: -1s\n", `line 2: default: staleIfError "-1s": must not be negative`},
		{"zero timeout", "default:\n  timeout: 0s\n", `line 2: default: timeout "0s": must be positive`},
		{"bad code", "default:\n  staleIfErrorCodes: [UNAVAILABLE, Unavailable]\n", `line 2: default: staleIfErrorCodes[1] "Unavailable": want a gRPC status code name`},
		{"OK is no error", "default:\n  staleIfErrorCodes: [OK]\n", `staleIfErrorCodes[0] "OK": want a gRPC status code name`},
		{"bad bool", "default:\n  finishAbandoned: yes\n", `default: finishAbandoned "yes": want true or false`},
		{"jitter of the whole TTL", "default:\n  ttlJitter: 1\n", `default: ttlJitter "1": want a fraction of the TTL, at least 0 and under 1, such as 0.1`},
		{"jitter in percent", "methods:\n  - name: /a.B/C\n    ttlJitter: 10%\n", `line 3: methods[0] (/a.B/C): ttlJitter "10%": want a fraction`},
		{"bad earlyRefresh", "default:\n  earlyRefresh: on\n", `default: earlyRefresh "on": want true or false`},
		{"bad stream", "default:\n  stream: record\n", `stream "record": want passthrough or replay`},
		{"zero max TTL", "default:\n  maxTTL: 0s\n", `line 2: default: maxTTL "0s": must be positive`},
		{"failure in cacheCodes", "default:\n  cacheCodes: [NOT_FOUND, UNAVAILABLE]\n", `line 2: default: cacheCodes[1] "UNAVAILABLE": UNAVAILABLE says the call failed, not what its answer is: it is never kept (want a code such as NOT_FOUND)`},
		{"bad code in cacheCodes", "default:\n  cacheCodes: [not_found]\n", `cacheCodes[0] "not_found": want a gRPC status code name`},
		{"bad cacheCodesTTL", "default:\n  cacheCodesTTL: soon\n", `cacheCodesTTL "soon": want a duration`},
		{"negative maxWaiters", "default:\n  maxWaiters: -1\n", `line 2: default: maxWaiters "-1": want a whole number, 0 or more`},
		{"bad waitTimeout", "methods:\n  - name: /a.B/C\n    waitTimeout: -2s\n", `line 3: methods[0] (/a.B/C): waitTimeout "-2s": must not be negative`},
		{"bad cacheControl", "methods:\n  - name: /a.B/C\n    cacheControl: obey\n", `line 3: methods[0] (/a.B/C): cacheControl "obey": want honor or ignore`},
		{"invalidates on the default", "default:\n  invalidates:\n    responseTags: true\n", `default: invalidates: only a method's own entry may name what its success invalidates`},
		{"invalidates on a service", "methods:\n  - name: a.B/*\n    invalidates:\n      responseTags: true\n", `line 2: methods[0] (a.B/*): invalidates: only a method's own entry may name what its success invalidates, not a whole service's`},
		{"invalidates on a collapsed method", "methods:\n  - name: /a.B/Set\n    collapse: true\n    invalidates:\n      responseTags: true\n", `line 3: methods[0] (/a.B/Set): invalidates: a method whose success invalidates answers is a write, which passes through: drop collapse: true`},
		{"invalidates a malformed method", "methods:\n  - name: /a.B/Set\n    invalidates:\n      methods: [a.B.Get]\n", `line 4: methods[0] (/a.B/Set): invalidates.methods[0] "a.B.Get": want "/package.Service/Method"`},
		{"invalidates with a bad responseTags", "methods:\n  - name: /a.B/Set\n    invalidates:\n      responseTags: yes\n", `line 4: methods[0] (/a.B/Set): invalidates.responseTags "yes": want true or false`},
		{"invalidates nothing", "methods:\n  - name: /a.B/Set\n    invalidates:\n      methods: []\n", `methods[0] (/a.B/Set): invalidates: names nothing: list methods, or set responseTags: true`},
		{"keyIgnoreFields on the default", "default:\n  keyIgnoreFields: [request_id]\n", `default: keyIgnoreFields: only a method's own entry may name fields of its request`},
		{"keyIgnoreFields on a service", "methods:\n  - name: a.B/*\n    keyIgnoreFields: [request_id]\n", `line 2: methods[0] (a.B/*): keyIgnoreFields: only a method's own entry may name fields of its request, not a whole service's`},
		{"keyIgnoreFields not a path", "methods:\n  - name: /a.B/C\n    keyIgnoreFields: [meta..time]\n", `line 3: methods[0] (/a.B/C): keyIgnoreFields "meta..time": field path "meta..time": "" is not a field name`},
		{"unknown field of invalidates", "methods:\n  - name: /a.B/Set\n    invalidates:\n      tags: true\n", "field tags not found"},
		{"missing name", "methods:\n  - cacheTTL: 1s\n", `methods[0]: name: missing: want "/package.Service/Method" or "package.Service/*"`},
		{"malformed name", "methods:\n  - name: hello.Greeter.SayHello\n", `methods[0]: name: line 2: "hello.Greeter.SayHello": want "/package.Service/Method"`},
		{"malformed service", "methods:\n  - name: hello-v1/*\n", `methods[0]: name: line 2: "hello-v1/*": service name "hello-v1" is not a dot-separated proto name`},
		{"duplicate name", "methods:\n  - name: /a.B/C\n  - name: /a.B/C\n", `line 3: methods[1] (/a.B/C): name: /a.B/C is already named by methods[0] (/a.B/C)`},
		{"duplicate service spelled twice", "methods:\n  - name: a.B/*\n  - name: /a.B/*\n", `name: a.B/* is already named by methods[0] (a.B/*)`},
		{"a list where a value belongs", "default:\n  cacheTTL: [1s]\n", "line 2: want a single value, got a list"},
		{"not YAML", "default: [\n", "policy file policy.yaml: yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(defaults, "policy.yaml", []byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestPolicy_DeclaredWindowsAreBoundedAndOnlyForKeptResults(t *testing.T) {
	file := `
default:
  maxTTL: 1m
methods:
  - name: a.Cached/*
    maxTTL: 10s
  - name: /a.Cached/Ignored
    cacheControl: ignore
  - name: a.Ignored/*
    cacheControl: ignore
  - name: /a.Ignored/Honored
    cacheControl: honor
`
	p := mustNew(t, defaults, file)
	tests := []struct {
		method string
		m      methodkind.Method
		want   *Declared
	}{
		{"/a.Other/Get", noSideEffects, &Declared{MaxTTL: time.Minute}},
		{"/a.Cached/Get", noSideEffects, &Declared{MaxTTL: 10 * time.Second}},
		{"/a.Cached/Ignored", noSideEffects, nil},
		{"/a.Ignored/Get", noSideEffects, nil},
		{"/a.Ignored/Honored", noSideEffects, &Declared{MaxTTL: time.Minute}},
		// Collapsed in flight only: an answer's max-age never makes it kept.
		{"/a.Other/Put", idempotent, nil},
		// Replayed streams are kept for the rule's TTL alone.
		{"/a.Other/Watch", serverStream, nil},
	}
	for _, tt := range tests {
		got := p.Rule(tt.method, tt.m).Declared
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("Rule(%s).Declared = %+v, want %+v", tt.method, got, tt.want)
		}
	}
	if got := mustNew(t, defaults, "").Rule("/a.B/C", noSideEffects).Declared; got == nil || got.MaxTTL != DefaultMaxTTL {
		t.Errorf("without a file: Declared = %+v, want MaxTTL %v", got, DefaultMaxTTL)
	}
	ignoring := defaults
	ignoring.IgnoreCacheControl = true
	if got := mustNew(t, ignoring, "").Rule("/a.B/C", noSideEffects).Declared; got != nil {
		t.Errorf("defaults ignoring cache-control: Declared = %+v, want nil", got)
	}
}

func TestPolicy_AWriteThatInvalidatesAlwaysPassesThrough(t *testing.T) {
	file := `
methods:
  - name: /a.Users/Update
    invalidates:
      methods: [/a.Users/Get, /a.Users/List]
      responseTags: true
  - name: /a.Users/Touch
    invalidates:
      responseTags: true
`
	p := mustNew(t, defaults, file)
	both := &Invalidation{Methods: []string{"/a.Users/Get", "/a.Users/List"}, ResponseTags: true}
	tests := []struct {
		method string
		m      methodkind.Method
		want   *Invalidation
	}{
		{"/a.Users/Update", methodkind.Method{Kind: methodkind.Unary}, both},
		{"/a.Users/Update", methodkind.Method{Kind: methodkind.Unknown}, both},
		{"/a.Users/Update", methodkind.Method{Kind: methodkind.ClientStreaming}, both},
		{"/a.Users/Touch", methodkind.Method{Kind: methodkind.Unary}, &Invalidation{ResponseTags: true}},
		// Its descriptor says it has no side effects, its entry that it
		// writes: the entry wins.
		{"/a.Users/Touch", noSideEffects, &Invalidation{ResponseTags: true}},
		{"/a.Users/Get", methodkind.Method{Kind: methodkind.Unary}, nil},
	}
	for _, tt := range tests {
		r := p.Rule(tt.method, tt.m)
		got := r.Invalidates
		if (got == nil) != (tt.want == nil) || (got != nil && (!slices.Equal(got.Methods, tt.want.Methods) || got.ResponseTags != tt.want.ResponseTags)) {
			t.Errorf("Rule(%s, %v).Invalidates = %+v, want %+v", tt.method, tt.m, got, tt.want)
		}
		if got != nil && r.Action != Passthrough {
			t.Errorf("Rule(%s, %v).Action = %v, want passthrough", tt.method, tt.m, r.Action)
		}
	}
}

// TestPolicy_NoRouteCollapsesAWrite: whatever would collapse or replay a
// method whose entry names what its success invalidates, the method passes
// through; where the file or the operator's settings say so, the policy is
// refused, naming where.
func TestPolicy_NoRouteCollapsesAWrite(t *testing.T) {
	const entry = "methods:\n  - name: /a.Users/Set\n    invalidates:\n      responseTags: true\n"
	collapsing := defaults
	collapsing.Collapse = Always
	listing := defaults
	listing.CollapseMethods = []string{"/a.Users/Get", "/a.Users/Set"}
	tests := []struct {
		name    string
		d       Defaults
		file    string
		m       methodkind.Method
		wantErr string // "": the policy loads, and the method passes through
		source  string
	}{
		{"the file's default", defaults, "default:\n  collapse: true\n" + entry, unannotated,
			"policy file policy.yaml: line 4: methods[0] (/a.Users/Set): invalidates: the method would be collapsed by default: collapse: true (line 2); a write passes through: set collapse: false on its entry", ""},
		{"the operator's default", collapsing, entry, unannotated,
			"policy file policy.yaml: line 2: methods[0] (/a.Users/Set): invalidates: the method would be collapsed by COLLAPSER_DEFAULT_COLLAPSE=all; a write passes through: set collapse: false on its entry", ""},
		{"a service entry", defaults, "methods:\n  - name: a.Users/*\n    collapse: true\n  - name: /a.Users/Set\n    invalidates:\n      responseTags: true\n", unannotated,
			"policy file policy.yaml: line 4: methods[1] (/a.Users/Set): invalidates: the method would be collapsed by methods[0] (a.Users/*): collapse: true (line 3); a write passes through: set collapse: false on its entry", ""},
		{"COLLAPSER_COLLAPSE_METHODS", listing, entry, unannotated,
			"policy file policy.yaml: line 2: methods[0] (/a.Users/Set): invalidates: the method would be collapsed by COLLAPSER_COLLAPSE_METHODS, which lists it; a write passes through: set collapse: false on its entry", ""},
		{"collapse: true on its own entry", defaults, entry + "    collapse: true\n", unannotated,
			"policy file policy.yaml: line 5: methods[0] (/a.Users/Set): invalidates: a method whose success invalidates answers is a write, which passes through: drop collapse: true", ""},
		{"IDEMPOTENT under auto", defaults, entry, idempotent, "", "methods[0] (/a.Users/Set)"},
		{"NO_SIDE_EFFECTS under auto", defaults, entry, noSideEffects, "", "methods[0] (/a.Users/Set)"},
		{"unannotated under auto", defaults, entry, unannotated, "", "methods[0] (/a.Users/Set)"},
		{"a server stream under stream: replay", defaults, "default:\n  stream: replay\n" + entry, serverStream, "", "methods[0] (/a.Users/Set)"},
		{"collapse: false on its entry wins over the default's true", collapsing, entry + "    collapse: false\n", noSideEffects, "", "methods[0] (/a.Users/Set)"},
		{"collapse: auto on its entry wins over the service's true", defaults, "methods:\n  - name: a.Users/*\n    collapse: true\n" + strings.TrimPrefix(entry, "methods:\n") + "    collapse: auto\n", idempotent, "", "methods[1] (/a.Users/Set)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.d, "policy.yaml", []byte(tt.file))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("err = %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			r := p.Rule("/a.Users/Set", tt.m)
			want := Rule{Action: Passthrough, Reason: ReasonPolicy, Kind: tt.m.Kind, Source: tt.source}
			inv := r.Invalidates
			r.Invalidates = nil
			if !reflect.DeepEqual(r, want) {
				t.Errorf("Rule = %+v, want %+v", r, want)
			}
			if inv == nil || !inv.ResponseTags {
				t.Errorf("Rule.Invalidates = %+v, want responseTags kept", inv)
			}
		})
	}
}

func TestPolicy_NegativeCachingIsOptInAndOnlyForKeptResults(t *testing.T) {
	file := `
default:
  cacheTTL: 2s
methods:
  - name: a.Users/*
    cacheCodes: [NOT_FOUND, PERMISSION_DENIED]
  - name: /a.Users/Lookup
    cacheCodesTTL: 30s
  - name: /a.Users/Plain
    cacheCodes: []
`
	p := mustNew(t, defaults, file)
	tests := []struct {
		method  string
		m       methodkind.Method
		keeps   []codes.Code // nil: no Negative at all
		ttl     time.Duration
		refuses codes.Code
	}{
		{"/a.Users/Get", noSideEffects, []codes.Code{codes.NotFound, codes.PermissionDenied}, 2 * time.Second, codes.InvalidArgument},
		{"/a.Users/Lookup", noSideEffects, []codes.Code{codes.NotFound}, 30 * time.Second, codes.Unavailable},
		{"/a.Users/Plain", noSideEffects, nil, 0, 0},
		{"/a.Other/Get", noSideEffects, nil, 0, 0},
		// Collapsed in flight only: no answer of it is kept, errors included.
		{"/a.Users/Put", idempotent, nil, 0, 0},
	}
	for _, tt := range tests {
		n := p.Rule(tt.method, tt.m).Negative
		if tt.keeps == nil {
			if n != nil {
				t.Errorf("Rule(%s).Negative = %+v, want nil", tt.method, n)
			}
			continue
		}
		if n == nil {
			t.Errorf("Rule(%s).Negative = nil, want one keeping %v", tt.method, tt.keeps)
			continue
		}
		for _, c := range tt.keeps {
			if !n.Keeps(c) {
				t.Errorf("Rule(%s).Negative.Keeps(%v) = false", tt.method, c)
			}
		}
		if n.Keeps(tt.refuses) || n.Keeps(codes.OK) {
			t.Errorf("Rule(%s).Negative keeps %v or OK", tt.method, tt.refuses)
		}
		if n.TTL != tt.ttl {
			t.Errorf("Rule(%s).Negative.TTL = %v, want %v", tt.method, n.TTL, tt.ttl)
		}
	}
}

func TestNew_EveryErrorOfAFileAtOnce(t *testing.T) {
	_, err := New(defaults, "policy.yaml", []byte("default:\n  collapse: x\nmethods:\n  - name: /a.B/C\n    cacheTTL: y\n"))
	for _, want := range []string{`collapse "x"`, `cacheTTL "y"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
}

func TestNew_RejectsBadDefaults(t *testing.T) {
	if _, err := New(Defaults{}, "", nil); err == nil || !strings.Contains(err.Error(), "timeout 0s must be positive") {
		t.Errorf("zero timeout: err = %v", err)
	}
	d := defaults
	d.CollapseMethods = []string{"SayHello"}
	if _, err := New(d, "", nil); err == nil || !strings.Contains(err.Error(), `COLLAPSER_COLLAPSE_METHODS[0] "SayHello"`) {
		t.Errorf("bad method: err = %v", err)
	}
}

func TestNew_EmptyFileIsTheDefaults(t *testing.T) {
	p := mustNew(t, defaults, "# nothing yet\n")
	if got := describe(p.Rule("/a.B/C", noSideEffects)); got != (want{Collapse, "", DefaultCacheTTL, "default"}) {
		t.Errorf("got %+v", got)
	}
}

func TestPolicy_RuleDoesNotAllocate(t *testing.T) {
	p := mustNew(t, defaults, "methods:\n  - name: a.B/*\n    collapse: true\n")
	allocs := testing.AllocsPerRun(100, func() { p.Rule("/a.B/C", unannotated) })
	if allocs != 0 {
		t.Errorf("Rule allocates %v times per call", allocs)
	}
}
