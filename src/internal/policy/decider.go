package policy

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/collapser/collapser/src/internal/logonce"
	"github.com/collapser/collapser/src/internal/methodkind"
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
}

// Decider answers the proxy's question per call: the rule of a method,
// from the policy in force and what is known of the method. It logs once
// per method why a unary method, or one of unknown kind, passes through,
// with the setting that would collapse it.
type Decider struct {
	store     *Store
	kinds     Kinds
	logger    *slog.Logger
	explained *logonce.Set
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
	p := d.store.Policy()
	r := p.Rule(method, d.kinds.Method(method))
	if r.Reason == ReasonUnannotated || r.Reason == ReasonUnknownKind {
		d.explain(p, method, r)
	}
	return r
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

// explain logs, once per method and reason, why method passes through.
func (d *Decider) explain(p *Policy, method string, r Rule) {
	name := logonce.Short(method)
	// Keyed by the shortened name: long names a caller invents cost their
	// first bytes, and those that share them are explained once.
	first, full := d.explained.First(r.Reason + " " + name)
	if full {
		d.logger.Warn("too many distinct methods pass through: no more are logged", "limit", maxExplained)
	}
	if !first {
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
