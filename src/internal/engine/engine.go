// Package engine assembles what every front of collapser shares: the
// policy and its reload, what is known of each method, the key rule, the
// proxy (the collapse group, the records of streams, freshness, tags and
// purges) and the metrics recorder they report to. The sidecar puts an
// Engine behind servers of its own (package sidecar), the library behind
// grpc-go interceptors (package collapser): one engine, assembled in one
// place, each part given its own settings whole.
package engine

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/forwarding"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// Options configures an Engine: each part's settings, and the connections
// it works with.
type Options struct {
	// Policy is what the policy file inherits; PolicyFile names the file
	// ("": none).
	Policy     policy.Defaults
	PolicyFile string
	// Keys says which request headers are part of a key.
	Keys requestkey.RuleOptions
	// Proxy bounds the proxy and names the headers it reads.
	Proxy proxy.Settings
	// Kinds says where what is known of each method comes from.
	Kinds methodkind.Options
	// Backend is the proxy's backend; nil for the library's engine.
	Backend grpc.ClientConnInterface
	// Peers, when set, is the connection to the other replicas; Forwarding
	// then decides which methods' calls go to their keys' owners.
	Peers      proxy.Peers
	Forwarding *forwarding.Decider
	// Labels bounds the method names of the metrics (and of the spans,
	// which share it); nil: a set of its own.
	Labels *methodlabel.Set
	// TracerProvider traces the calls the proxy makes for its callers, and
	// makes the recorder keep exemplars; nil: tracing is off.
	TracerProvider trace.TracerProvider
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the answers' windows (default time.Now).
	Now func() time.Time
}

// Engine is an assembled engine: its parts, for the front that serves it.
type Engine struct {
	// Recorder counts what the parts tell it; metrics.Register exports it
	// with Sources.
	Recorder *metrics.Recorder
	// Kinds knows what each method is; Policy holds the policy in force,
	// and its Run reloads the file; Rules decides each call's rule.
	Kinds  *methodkind.Resolver
	Policy *policy.Store
	Rules  *policy.Decider
	// Proxy serves the calls.
	Proxy *proxy.Proxy
}

// New assembles an Engine of o. A setting that is invalid, or a policy
// file that cannot be read or is, is an error naming it.
func New(o Options) (*Engine, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rule, err := requestkey.NewRule(o.Keys)
	if err != nil {
		return nil, fmt.Errorf("key headers: %w", err)
	}
	if o.Keys.ShareAcrossCredentials {
		logger.Warn("UNSAFE: credentials are left out of the request key; callers with different credentials share responses")
	}
	e := &Engine{Recorder: metrics.NewRecorder(metrics.Options{Labels: o.Labels, Exemplars: o.TracerProvider != nil})}
	kinds := o.Kinds
	kinds.Logger = logger
	if e.Kinds, err = methodkind.NewResolver(kinds); err != nil {
		return nil, fmt.Errorf("method kinds: %w", err)
	}
	if e.Policy, err = policy.NewStore(o.Policy, o.PolicyFile, e.Kinds, logger, e.Recorder); err != nil {
		return nil, err
	}
	e.Rules = policy.NewDecider(e.Policy, e.Kinds, logger)
	e.Proxy, err = proxy.New(proxy.Options{
		Settings:       o.Proxy,
		Backend:        o.Backend,
		Peers:          o.Peers,
		Forwarding:     o.Forwarding,
		Rules:          e.Rules,
		KeyRule:        rule,
		Observer:       e.Recorder,
		TracerProvider: o.TracerProvider,
		Logger:         logger,
		Now:            o.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return e, nil
}

// Sources returns what a scrape reads of the engine's state: the
// collapse group's, the records', and every method's rule.
func (e *Engine) Sources() metrics.Sources {
	return metrics.Sources{Stats: e.Proxy.Stats, Streams: e.Proxy.StreamStats, Methods: e.Rules.Rules}
}
