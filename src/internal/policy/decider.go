package policy

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/collapser/collapser/src/internal/logonce"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// Bounds of what a Decider remembers of the methods it explained: callers
// choose method names.
const (
	maxExplained      = 1000
	maxExplainedBytes = 64 << 10
)

// Kinds tells what is known of each method (implemented by
// *methodkind.Resolver).
type Kinds interface {
	// Method returns what is known of fullMethod; it must not block.
	Method(fullMethod string) methodkind.Method
	// Methods returns the names of every method known now.
	Methods() []string
	// Generation changes after what Method answers does.
	Generation() uint64
}

// Decider answers the proxy's question per call: the rule of a method,
// from the policy in force and what is known of the method. It logs once
// per method why a unary method, or one of unknown kind, passes through,
// with the setting that would collapse it; and a write (its entry names
// what its success invalidates) that its descriptor calls idempotent, or
// that stream: replay would replay, but that passes through all the same.
type Decider struct {
	store     *Store
	kinds     Kinds
	logger    *slog.Logger
	explained *logonce.Set
	// decided holds the rule of each method of a known kind (*decided),
	// for the policy and the kinds' generation it was decided under: a
	// bounded set, the backend's own methods. A method of unknown kind,
	// whose name a caller chooses, is decided at every call.
	decided sync.Map
}

// decided is the rule of a method's calls, and what it was decided under.
type decided struct {
	policy *Policy
	kinds  uint64
	rule   Rule
}

// NewDecider returns a Decider over store and kinds; logger may be nil.
func NewDecider(store *Store, kinds Kinds, logger *slog.Logger) *Decider {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Decider{store: store, kinds: kinds, logger: logger, explained: logonce.New(maxExplained, maxExplainedBytes)}
}

// Rule returns the rule for calls of method. It never blocks.
func (d *Decider) Rule(method string) Rule {
	p, generation := d.store.Policy(), d.kinds.Generation()
	if v, ok := d.decided.Load(method); ok {
		if k := v.(*decided); k.policy == p && k.kinds == generation {
			return k.rule
		}
	}
	m := d.kinds.Method(method)
	r, overruled := p.rule(method, m)
	switch {
	case overruled:
		d.explainWrite(method, m, r)
	case r.Reason == ReasonUnannotated || r.Reason == ReasonUnknownKind:
		d.explain(p, method, r)
	}
	if r.Action != Passthrough && m.Request != nil {
		r.Schema = d.schema(method, m.Request, r.KeyIgnoreFields)
	}
	if m.Kind != methodkind.Unknown {
		d.decided.Store(method, &decided{policy: p, kinds: generation, rule: r})
	}
	return r
}

// schema returns the key schema of method's calls, whose request
// descriptor is desc, leaving ignore out. A field that desc does not have
// (a descriptor reflection taught after the policy was checked) is logged
// once, and the key then leaves no field out: calls that differ in any
// field are never shared. A request type a Schema cannot read (one with
// groups) has none: its calls are keyed by their bytes.
func (d *Decider) schema(method string, desc protoreflect.MessageDescriptor, ignore []string) *requestkey.Schema {
	s, err := requestkey.NewSchema(desc, ignore)
	if err != nil && len(ignore) > 0 {
		if d.first("keyIgnoreFields " + logonce.Short(method)) {
			d.logger.Error("keyIgnoreFields cannot be applied to the method's request: its key leaves out no field",
				"method", logonce.Short(method), "error", err)
		}
		s, _ = requestkey.NewSchema(desc, nil) // nil too for a request it cannot read: keyed by its bytes
	}
	return s
}

// Rules returns the rule of every method known now: those the backend's
// descriptors name and those the policy names.
func (d *Decider) Rules() map[string]Rule {
	p := d.store.Policy()
	names := append(d.kinds.Methods(), p.Methods()...)
	slices.Sort(names)
	rules := make(map[string]Rule, len(names))
	for _, m := range slices.Compact(names) {
		rules[m] = p.Rule(m, d.kinds.Method(m))
	}
	return rules
}

// first reports whether what key explains is logged now: the first time,
// within the bound of what d remembers. Keys hold the shortened method
// name: long names a caller invents cost their first bytes, and those
// that share them are explained once.
func (d *Decider) first(key string) bool {
	first, full := d.explained.First(key)
	if full {
		d.logger.Warn("too many distinct methods pass through: no more are logged", "limit", maxExplained)
	}
	return first
}

// explainWrite logs, once per method, that method passes through as a
// write although what is known of m would have it shared.
func (d *Decider) explainWrite(method string, m methodkind.Method, r Rule) {
	name := logonce.Short(method)
	if !d.first("write " + name) {
		return
	}
	if m.Kind == methodkind.ServerStreaming {
		d.logger.Warn("server-streaming method passes through: its rule says stream: replay, but its policy names what its success invalidates, so it is treated as a write and never replayed",
			"method", name, "rule", r.Source)
		return
	}
	d.logger.Warn("unary method passes through: its descriptor calls it idempotent, but its policy names what its success invalidates, so it is treated as a write, never collapsed nor cached",
		"method", name, "idempotency_level", m.Idempotency.String(), "rule", r.Source)
}

// explain logs, once per method and reason, why method passes through.
func (d *Decider) explain(p *Policy, method string, r Rule) {
	name := logonce.Short(method)
	if !d.first(r.Reason + " " + name) {
		return
	}
	if r.Reason == ReasonUnknownKind {
		d.logger.Warn("method kind unknown: its calls pass through without collapsing", "method", name,
			"hint", "to collapse it, enable server reflection on the backend, or list it in COLLAPSER_COLLAPSE_METHODS, "+
				"or point COLLAPSER_DESCRIPTOR_SET at a FileDescriptorSet")
		return
	}
	hint := fmt.Sprintf("if it has no side effects, annotate it with option idempotency_level = NO_SIDE_EFFECTS, "+
		"or set COLLAPSER_COLLAPSE_METHODS=%s, or COLLAPSER_DEFAULT_COLLAPSE=all to collapse every unary method", name)
	if p.File() != "" {
		hint = fmt.Sprintf("if it has no side effects, add to %s under methods: \"- {name: %s, collapse: true}\", "+
			"or annotate it with option idempotency_level = NO_SIDE_EFFECTS", p.File(), name)
	}
	d.logger.Warn("unary method passes through: collapse is auto and its descriptor declares no idempotency_level, so it may be a write",
		"method", name, "rule", r.Source, "hint", hint)
}
