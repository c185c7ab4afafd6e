// Package policy decides, per method, whether the sidecar collapses a call
// and how long its result is served. A Policy is built from the operator's
// defaults (flags and COLLAPSER_* variables) and an optional YAML file;
// its Rule is a pure function of the method and what methodkind knows of it.
// Store reloads the file when it changes; Decider is what the proxy asks
// per call.
//
// Rules are matched as gRPC service config matches them: the exact method,
// then its service ("pkg.Service/*"), then the default. Each level inherits
// the fields it does not set from the level below it.
//
// Safe by default: with collapse: auto (the default), a unary method is
// collapsed and its result cached only when its descriptor says
// idempotency_level = NO_SIDE_EFFECTS; IDEMPOTENT methods are collapsed
// while in flight but never cached; every other method passes through, so
// a write is never answered with another caller's result.
//
// A method whose entry names what its success invalidates is a write: it
// always passes through, never collapsed, replayed nor cached. A policy
// whose rule would collapse it (collapse: true from the default, its
// service's entry or COLLAPSER_COLLAPSE_METHODS) is refused, naming where
// that collapse: true comes from; where only what reflection tells at run
// time would have it shared (idempotency_level NO_SIDE_EFFECTS or
// IDEMPOTENT under collapse: auto, a server stream under stream: replay),
// the entry wins, and Decider logs the method once.
package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/callstatus"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// Defaults of the default rule, for settings the operator does not give.
const (
	// DefaultCacheTTL is how long a result is served fresh.
	DefaultCacheTTL = 100 * time.Millisecond
	// DefaultTTLJitter is the most a result's TTL is shortened by, as a
	// fraction of it, so that keys loaded together do not expire together.
	DefaultTTLJitter = 0.1
	// DefaultTimeout bounds each shared backend call.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxTTL bounds each window an answer's cache-control declares,
	// so that a backend's mistake cannot pin an answer for a day.
	DefaultMaxTTL = 5 * time.Minute
)

// DefaultStaleIfErrorCodes are the codes a stale result may answer when
// staleIfError is set and staleIfErrorCodes is not: the backend is down or
// too slow, as HTTP's stale-if-error serves on 503 and 504.
var DefaultStaleIfErrorCodes = []codes.Code{codes.Unavailable, codes.DeadlineExceeded}

// Mode is a rule's collapse setting.
type Mode uint8

// The collapse modes.
const (
	// Auto collapses by the method's idempotency_level (see the package doc).
	Auto Mode = iota
	// Always collapses and caches every unary method it covers.
	Always
	// Never passes the methods it covers through.
	Never
)

// String returns the mode as the policy file writes it.
func (m Mode) String() string {
	switch m {
	case Always:
		return "true"
	case Never:
		return "false"
	}
	return "auto"
}

// StreamMode is what a rule does with server-streaming methods.
type StreamMode uint8

// The stream modes.
const (
	// StreamPassthrough forwards server streams frame by frame.
	StreamPassthrough StreamMode = iota
	// StreamReplay shares one backend stream among identical calls and
	// replays it to late callers (see the replay package).
	StreamReplay
)

// Action is what the proxy does with a call.
type Action uint8

// The actions.
const (
	// Passthrough forwards the call unchanged, frame by frame.
	Passthrough Action = iota
	// Collapse shares one backend call among identical calls.
	Collapse
	// Replay shares one backend stream among identical server-streaming calls.
	Replay
)

// String returns "passthrough", "collapse" or "replay", the metric label.
func (a Action) String() string {
	switch a {
	case Collapse:
		return "collapse"
	case Replay:
		return "replay"
	}
	return "passthrough"
}

// Reasons a method passes through, as metric labels.
const (
	// ReasonPolicy: its rule says collapse: false, or its entry names what
	// its success invalidates (a write).
	ReasonPolicy = "policy"
	// ReasonUnannotated: collapse: auto and no idempotency_level says it is safe.
	ReasonUnannotated = "unannotated"
	// ReasonUnknownKind: nothing says it is unary.
	ReasonUnknownKind = "unknown_kind"
	// ReasonStreaming: a streaming method (passed through frame by frame).
	ReasonStreaming = "streaming"
)

// Rule is what the proxy does with one method's calls.
type Rule struct {
	// Action says whether calls are collapsed or passed through.
	Action Action
	// Reason says why a method passes through; "" when collapsed.
	Reason string
	// Call holds how a collapsed call is shared and its result served (for
	// Replay: its TTL is how long an ended stream is replayed); nil when
	// passed through. Shared by all calls of the rule: read only.
	Call *collapse.CallOptions
	// Declared says how a unary answer's own cache-control sets how long it
	// is served: a lifetime it declares replaces Call's windows, a stale
	// window alone replaces that window; nil when it may not (the rule
	// ignores it, or keeps no result). Shared by all calls: read only.
	Declared *Declared
	// Negative says which error answers of a unary method are kept, and for
	// how long; nil when none are (the rule names no cacheCodes, or keeps no
	// result). Shared by all calls: read only.
	Negative *Negative
	// Invalidates says what a call's success takes back (purge on write);
	// nil when nothing. A method that invalidates always passes through.
	// Shared by all calls: read only.
	Invalidates *Invalidation
	// KeyIgnoreFields are the request fields its key leaves out (field
	// paths, from the method's own entry) when it is collapsed or replayed;
	// nil for none. Shared by all calls of the rule: read only.
	KeyIgnoreFields []string
	// Schema builds the request part of its calls' keys from the request
	// message, leaving KeyIgnoreFields out, when its descriptor is known
	// (Decider sets it); nil keys the request's bytes as they came.
	Schema *requestkey.Schema
	// Kind is what is known of the method's call kind.
	Kind methodkind.Kind
	// Source names the policy entry that decided: "default",
	// "methods[2] (/pkg.Service/Method)" or an environment variable.
	Source string
}

// Declared bounds the windows an answer declares in its cache-control
// (package cachecontrol).
type Declared struct {
	// MaxTTL bounds each window declared: TTL, stale-while-revalidate and
	// stale-if-error.
	MaxTTL time.Duration
}

// Invalidation is what the success of a write takes back, on every
// replica, before its caller is answered: every answer of Methods, and
// every answer carrying one of the tags of the write's own answer when
// ResponseTags is set.
type Invalidation struct {
	Methods      []string
	ResponseTags bool
}

// Negative says which error answers are kept as answers (negative caching):
// the backend's NOT_FOUND is as much an answer as its OK.
type Negative struct {
	codes codeSet
	// TTL is how long such an answer is served fresh, unless its own
	// cache-control says otherwise (within Declared's bound).
	TTL time.Duration
}

// Keeps reports whether an answer with code c is kept.
func (n *Negative) Keeps(c codes.Code) bool { return n.codes.has(c) }

// Defaults describe the default rule when no file does, and what a file's
// default inherits. Zero durations are zero: take DefaultCacheTTL and
// DefaultTimeout from the constants.
type Defaults struct {
	// Collapse is the default mode (COLLAPSER_DEFAULT_COLLAPSE).
	Collapse Mode
	// CacheTTL, StaleWhileRevalidate and StaleIfError: see collapse.CallOptions.
	CacheTTL, StaleWhileRevalidate, StaleIfError time.Duration
	// Timeout bounds each shared backend call; it must be positive.
	Timeout time.Duration
	// MaxTTL bounds the windows an answer's cache-control declares; 0
	// takes DefaultMaxTTL. IgnoreCacheControl serves every answer for the
	// rule's own windows, whatever it declares.
	MaxTTL             time.Duration
	IgnoreCacheControl bool
	// TTLJitter and EarlyRefresh: see collapse.CallOptions.
	TTLJitter    float64
	EarlyRefresh bool
	// CollapseMethods are collapsed as if the policy named each with
	// collapse: true (COLLAPSER_COLLAPSE_METHODS); an entry of the file for
	// one of them still wins.
	CollapseMethods []string
	// CollapseMethodsSource names where CollapseMethods came from, for Rule.Source.
	CollapseMethodsSource string
}

// settings are a rule's fields after inheritance.
type settings struct {
	collapse           Mode
	ttl, swr, sie, tmo time.Duration
	maxTTL             time.Duration
	ignoreCC           bool
	cacheCodes         codeSet
	cacheCodesTTL      time.Duration // 0: the rule's ttl
	maxWaiters         int
	waitTimeout        time.Duration
	codes              codeSet
	finish             bool
	jitter             float64
	early              bool
	stream             StreamMode
	invalidates        *Invalidation
	ignoreFields       []string
	source             string
	collapseFrom       string // where collapse was set, for errors: "default: collapse: true (line 3)"
}

// codeSet is a set of gRPC codes (0 to 16) as a bit mask.
type codeSet uint32

func setOf(cs []codes.Code) codeSet {
	var s codeSet
	for _, c := range cs {
		s.add(c)
	}
	return s
}

func (s *codeSet) add(c codes.Code) { *s |= 1 << c }

func (s codeSet) has(c codes.Code) bool { return c <= codes.Unauthenticated && s&(1<<c) != 0 }

// check validates every field set in r; where names the rule.
func (r *ruleSpec) check(where string) []error {
	_, errs := settings{}.apply(r, where)
	return errs
}

// with returns s with the fields r sets; r has been checked.
func (s settings) with(r *ruleSpec, source string) settings {
	s, _ = s.apply(r, source)
	return s
}

// apply returns s with the fields r sets, from where (the rule's source),
// and an error naming the line, rule and field of each value that is
// wrong; a wrong value leaves its field as it was.
func (s settings) apply(r *ruleSpec, where string) (settings, []error) {
	s.source = where
	c := &checker{where: where}
	if r.Collapse.set {
		if m, err := parseCollapse(r.Collapse.value); c.valid(r.Collapse, "collapse", err) {
			s.collapse = m
			s.collapseFrom = fmt.Sprintf("%s: collapse: %s (line %d)", where, r.Collapse.value, r.Collapse.line)
		}
	}
	s.applyDurations(r, c)
	if r.StaleIfErrorCodes != nil {
		s.codes = c.codes(*r.StaleIfErrorCodes, "staleIfErrorCodes", parseCode)
	}
	if r.MaxWaiters.set {
		if n, err := parseCount(r.MaxWaiters.value); c.valid(r.MaxWaiters, "maxWaiters", err) {
			s.maxWaiters = n
		}
	}
	if r.CacheCodes != nil {
		s.cacheCodes = c.codes(*r.CacheCodes, "cacheCodes", parseCacheCode)
	}
	for _, f := range []struct {
		field string
		v     scalar
		dst   *bool
	}{{"finishAbandoned", r.FinishAbandoned, &s.finish}, {"earlyRefresh", r.EarlyRefresh, &s.early}} {
		if !f.v.set {
			continue
		}
		if b, err := parseBool(f.v.value); c.valid(f.v, f.field, err) {
			*f.dst = b
		}
	}
	if r.TTLJitter.set {
		if f, err := parseJitter(r.TTLJitter.value); c.valid(r.TTLJitter, "ttlJitter", err) {
			s.jitter = f
		}
	}
	if r.Stream.set {
		if m, err := parseStream(r.Stream.value); c.valid(r.Stream, "stream", err) {
			s.stream = m
		}
	}
	if r.CacheControl.set {
		if ignore, err := ParseCacheControl(r.CacheControl.value); c.valid(r.CacheControl, "cacheControl", err) {
			s.ignoreCC = ignore
		}
	}
	if r.Invalidates != nil {
		inv, ierrs := r.Invalidates.compile(where)
		s.invalidates, c.errs = inv, append(c.errs, ierrs...)
	}
	if r.KeyIgnoreFields != nil {
		s.ignoreFields = nil
		for _, f := range *r.KeyIgnoreFields {
			if c.valid(f, "keyIgnoreFields", requestkey.ValidateFieldPath(f.value)) {
				s.ignoreFields = append(s.ignoreFields, f.value)
			}
		}
	}
	return s, c.errs
}

// applyDurations sets the durations r sets, each checked by c.
func (s *settings) applyDurations(r *ruleSpec, c *checker) {
	for _, d := range []struct {
		field string
		v     scalar
		dst   *time.Duration
	}{{"cacheTTL", r.CacheTTL, &s.ttl}, {"staleWhileRevalidate", r.StaleWhileRevalidate, &s.swr}, {"staleIfError", r.StaleIfError, &s.sie}, {"timeout", r.Timeout, &s.tmo}, {"maxTTL", r.MaxTTL, &s.maxTTL}, {"cacheCodesTTL", r.CacheCodesTTL, &s.cacheCodesTTL}, {"waitTimeout", r.WaitTimeout, &s.waitTimeout}} {
		if !d.v.set {
			continue
		}
		v, err := parseDuration(d.v.value)
		if err == nil && (d.dst == &s.tmo || d.dst == &s.maxTTL) && v == 0 {
			err = errors.New("must be positive")
		}
		if c.valid(d.v, d.field, err) {
			*d.dst = v
		}
	}
}

// checker collects the errors of the values of the rule where names.
type checker struct {
	where string
	errs  []error
}

// valid reports whether err is nil, and keeps err, naming the line, rule
// and field of v, when it is not.
func (c *checker) valid(v scalar, field string, err error) bool {
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %s %q: %w", at(v, c.where), field, v.value, err))
	}
	return err == nil
}

// codes returns the set of the codes of list, the rule's field, each
// parsed by parse; a wrong one is left out.
func (c *checker) codes(list []scalar, field string, parse func(string) (codes.Code, error)) codeSet {
	var set codeSet
	for i, v := range list {
		if code, err := parse(v.value); c.valid(v, fmt.Sprintf("%s[%d]", field, i), err) {
			set.add(code)
		}
	}
	return set
}

// level is one compiled rule: its settings and the call options of its two
// ways of collapsing.
type level struct {
	settings
	cached   collapse.CallOptions // collapse and keep results
	inflight collapse.CallOptions // collapse while in flight, keep nothing
	declared *Declared            // how kept answers declare their windows; nil: they do not
	negative *Negative            // which error answers are kept; nil: none
}

func compile(s settings) *level {
	staleOn := func(err error) bool { return s.codes.has(callstatus.Code(err)) }
	var declared *Declared
	if !s.ignoreCC {
		declared = &Declared{MaxTTL: s.maxTTL}
	}
	var negative *Negative
	if s.cacheCodes != 0 {
		negative = &Negative{codes: s.cacheCodes, TTL: cmp.Or(s.cacheCodesTTL, s.ttl)}
	}
	return &level{
		settings: s,
		cached: collapse.CallOptions{
			TTL: s.ttl, StaleWhileRevalidate: s.swr, StaleIfError: s.sie, StaleOn: staleOn,
			Finish: s.finish, Timeout: s.tmo, MaxWaiters: s.maxWaiters, WaitTimeout: s.waitTimeout,
			TTLJitter: s.jitter, EarlyRefresh: s.early,
		},
		inflight: collapse.CallOptions{Finish: s.finish, Timeout: s.tmo, MaxWaiters: s.maxWaiters, WaitTimeout: s.waitTimeout},
		declared: declared,
		negative: negative,
	}
}

// Policy is a compiled policy. It is immutable and safe for concurrent use.
type Policy struct {
	file     string // the file it was read from; "" for none
	def      *level
	services map[string]*level // by "pkg.Service"
	exact    map[string]*level // by "/pkg.Service/Method"
}

// New compiles the policy of defaults d and, when data is not nil, of the
// policy file data read from file. Errors name the file, entry and field.
func New(d Defaults, file string, data []byte) (*Policy, error) {
	base, err := d.settings()
	if err != nil {
		return nil, err
	}
	f := &fileSpec{}
	if data != nil {
		if f, err = parseFile(file, data); err != nil {
			return nil, err
		}
	}
	def := base.with(&f.Default, "default")
	p := &Policy{file: file, def: compile(def), services: map[string]*level{}, exact: map[string]*level{}}

	serviceSpecs := map[string]settings{}
	var exact []methodSpec
	var exactWhere []string
	for i, m := range f.Methods {
		name, _ := normalizeName(m.Name)
		where := fmt.Sprintf("methods[%d] (%s)", i, m.Name.value)
		if svc, ok := strings.CutSuffix(name, "/*"); ok {
			serviceSpecs[svc] = def.with(&m.ruleSpec, where)
			continue
		}
		exact = append(exact, m)
		exactWhere = append(exactWhere, where)
	}
	for svc, s := range serviceSpecs {
		p.services[svc] = compile(s)
	}
	// below returns the settings a method's own entries inherit.
	below := func(method string) settings {
		if s, ok := serviceSpecs[serviceOf(method)]; ok {
			return s
		}
		return def
	}
	listed := map[string]settings{}
	for _, m := range d.CollapseMethods {
		s := below(m)
		s.collapse, s.source, s.collapseFrom = Always, d.CollapseMethodsSource, d.CollapseMethodsSource+", which lists it"
		listed[m] = s
		p.exact[m] = compile(s)
	}
	var errs []error
	for i, m := range exact {
		name, _ := normalizeName(m.Name)
		s, ok := listed[name]
		if !ok {
			s = below(name)
		}
		s = s.with(&m.ruleSpec, exactWhere[i])
		// Its own collapse: true parseFile has refused already.
		if s.invalidates != nil && s.collapse == Always {
			errs = append(errs, fmt.Errorf("%s: invalidates: the method would be collapsed by %s; a write passes through: set collapse: false on its entry",
				at(m.Name, exactWhere[i]), s.collapseFrom))
		}
		p.exact[name] = compile(s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", file, err)
	}
	return p, nil
}

// settings checks d and returns the settings a file's default inherits.
func (d Defaults) settings() (settings, error) {
	if d.Timeout <= 0 {
		return settings{}, fmt.Errorf("policy: timeout %v must be positive", d.Timeout)
	}
	if d.TTLJitter < 0 || d.TTLJitter >= 1 {
		return settings{}, fmt.Errorf("policy: TTL jitter %v must be at least 0 and under 1", d.TTLJitter)
	}
	for i, m := range d.CollapseMethods {
		if err := methodkind.ValidateMethod(m); err != nil {
			return settings{}, fmt.Errorf("policy: %s[%d] %q: %w", d.CollapseMethodsSource, i, m, err)
		}
	}
	return settings{
		collapse: d.Collapse, ttl: d.CacheTTL, swr: d.StaleWhileRevalidate, sie: d.StaleIfError,
		tmo: d.Timeout, maxTTL: cmp.Or(d.MaxTTL, DefaultMaxTTL), ignoreCC: d.IgnoreCacheControl,
		jitter: d.TTLJitter, early: d.EarlyRefresh,
		codes: setOf(DefaultStaleIfErrorCodes), source: "default",
		// Read only when collapse is Always, which the variable spells all.
		collapseFrom: "COLLAPSER_DEFAULT_COLLAPSE=all",
	}, nil
}

// serviceOf returns "pkg.Service" of "/pkg.Service/Method".
func serviceOf(method string) string {
	svc, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	return svc
}

// File returns the file the policy was read from, "" for none.
func (p *Policy) File() string { return p.file }

// Methods returns the methods the policy names exactly.
func (p *Policy) Methods() []string {
	names := make([]string, 0, len(p.exact))
	for m := range p.exact {
		names = append(names, m)
	}
	return names
}

// CheckFields checks every request field a method's entry leaves out of
// its key against the method's request descriptor, where kinds knows it
// now; an error names the entry and the field. A descriptor learned later
// (from reflection) is checked when it is (Decider).
func (p *Policy) CheckFields(kinds Kinds) error {
	var errs []error
	for _, method := range slices.Sorted(maps.Keys(p.exact)) {
		l := p.exact[method]
		if len(l.ignoreFields) == 0 {
			continue
		}
		if desc := kinds.Method(method).Request; desc != nil {
			if _, err := requestkey.NewSchema(desc, l.ignoreFields); err != nil {
				errs = append(errs, fmt.Errorf("%s: keyIgnoreFields: %w", l.source, err))
			}
		}
	}
	return errors.Join(errs...)
}

// lookup returns the level that decides method.
func (p *Policy) lookup(method string) *level {
	if l, ok := p.exact[method]; ok {
		return l
	}
	if l, ok := p.services[serviceOf(method)]; ok {
		return l
	}
	return p.def
}

// Rule decides what the proxy does with calls of method, given what is
// known of it. It does not allocate.
func (p *Policy) Rule(method string, m methodkind.Method) Rule {
	r, _ := p.rule(method, m)
	return r
}

// rule is Rule, and whether the method passes through as a write where
// what is known of it would have it collapsed or replayed.
func (p *Policy) rule(method string, m methodkind.Method) (r Rule, overruled bool) {
	l := p.lookup(method)
	r = l.rule(m)
	if l.invalidates == nil {
		if r.Action != Passthrough {
			r.KeyIgnoreFields = l.ignoreFields
		}
		return r, false
	}
	overruled = r.Action != Passthrough
	if overruled || r.Reason == ReasonUnannotated {
		r = Rule{Reason: ReasonPolicy, Kind: m.Kind, Source: l.source}
	}
	r.Invalidates = l.invalidates
	return r, overruled
}

// rule is what l does with calls of a method m, were it not a write.
func (l *level) rule(m methodkind.Method) Rule {
	r := Rule{Kind: m.Kind, Source: l.source}
	switch m.Kind {
	case methodkind.Unknown:
		r.Reason = ReasonUnknownKind
		return r
	case methodkind.Unary:
	case methodkind.ServerStreaming:
		switch {
		case l.stream != StreamReplay:
			r.Reason = ReasonStreaming
		case l.collapse == Never:
			r.Reason = ReasonPolicy
		default:
			r.Action, r.Call = Replay, &l.cached
		}
		return r
	default:
		r.Reason = ReasonStreaming
		return r
	}
	switch {
	case l.collapse == Never:
		r.Reason = ReasonPolicy
	case l.collapse == Always || m.Idempotency == methodkind.NoSideEffects:
		r.Action, r.Call, r.Declared, r.Negative = Collapse, &l.cached, l.declared, l.negative
	case m.Idempotency == methodkind.Idempotent:
		r.Action, r.Call = Collapse, &l.inflight
	default:
		r.Reason = ReasonUnannotated
	}
	return r
}
