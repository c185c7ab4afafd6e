// Package collapser collapses identical gRPC calls inside a Go process, with
// no sidecar: grpc-go interceptors in front of a server's own handlers
// (identical calls share one handler run, and its answer is kept and served
// stale as the policy says) and in front of a client's calls (identical
// outgoing calls of one process share one call).
//
// It is the sidecar's engine, not a second one: the same policy file and
// its reload, the same keys (credentials always in them), the same reading
// of cache-control, private answers, tags and purges, the same metrics
// (names and labels, on the prometheus.Registerer given) and the same
// spans, with links from every caller a call answered to that call. The
// sidecar is this engine behind a transparent proxy.
//
// Import it as github.com/collapser/collapser/src/collapser.
//
// Stability: experimental. The API may change in any release until it is
// declared stable; the policy file's format and the metrics follow the
// sidecar's, which are stable.
//
// Every answer a caller gets is its own: a server's callers get messages
// decoded from the one answer's wire bytes, never the message a handler
// returned, so no caller sees another's mutations, and the handler's own
// message is never reused.
package collapser

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/engine"
	"github.com/collapser/collapser/src/internal/fleet"
	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/metrics"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/tracing"
)

// The parts of Options, as the sidecar's settings name them (its README
// lists each field with its flag).
type (
	// Policy holds what the policy file inherits: the default mode, TTL,
	// stale windows, timeout and the bound on declared windows
	// (COLLAPSER_DEFAULT_COLLAPSE, COLLAPSER_CACHE_TTL, ...).
	Policy = policy.Defaults
	// Keys says which request headers are part of a call's key, besides
	// the credentials, which always are (COLLAPSER_KEY_HEADERS, ...).
	Keys = requestkey.RuleOptions
	// Engine bounds what the engine holds and names the headers it reads
	// of answers (COLLAPSER_CACHE_MAX_BYTES, COLLAPSER_PRIVATE_HEADERS,
	// COLLAPSER_TAGS_HEADER, ...).
	Engine = proxy.Settings
)

// Options configures a Collapser. Start from DefaultOptions: the zero
// value of a part is not its default (a zero TTL keeps nothing, a zero
// timeout is refused).
type Options struct {
	// PolicyFile names the policy file, in the sidecar's format; "": no
	// file, Policy alone decides. Run reloads it when it changes.
	PolicyFile string
	// Policy is what the policy file inherits.
	Policy Policy
	// Keys says which request headers are part of a key.
	Keys Keys
	// Engine bounds the engine and names the headers it reads.
	Engine Engine
	// AdminTokenFile names the file of the token every purge must carry
	// (RegisterAdmin), read again when it changes; "": purges are taken
	// from loopback and Unix sockets only.
	AdminTokenFile string
	// Registerer is where the metrics are registered, with the sidecar's
	// names and labels; nil: none are.
	Registerer prometheus.Registerer
	// TracerProvider traces the calls the engine makes for its callers,
	// and links each caller's span to the call that answered it; nil:
	// tracing is off.
	TracerProvider trace.TracerProvider
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Peers makes the Collapser one replica among the release's others;
	// its zero Target: none.
	Peers Peers
}

// DefaultOptions returns the options of a Collapser that does what a
// sidecar does with no settings: methods collapsed by their
// idempotency_level, answers kept 100 ms, credentials in every key, and
// the sidecar's bounds.
func DefaultOptions() Options {
	d := config.Default()
	d.Policy.CollapseMethodsSource = "collapser.Options.Policy.CollapseMethods"
	return Options{Policy: d.Policy, Keys: d.Key, Engine: d.Proxy, Peers: Peers{Listen: d.PeerListen}}
}

// Collapser is the engine and its interceptors. Its methods are safe for
// concurrent use.
type Collapser struct {
	proxy  *proxy.Proxy
	policy *policy.Store
	admin  *admin.Service
	token  *secretfile.Value // nil: none
	types  messageTypes
	conns  connIDs
	// services run the calls peers forward (Registrar).
	services *services
	fleet    *fleet.Fleet // nil: no peers
	peer     *grpc.Server // the peer port's; nil: no peers
}

// New returns a Collapser of o. A policy file that cannot be read or is
// invalid, or a setting that is, is an error naming it.
func New(o Options) (*Collapser, error) {
	return build(o, nil)
}

// build is New with the backend of the engine's own server: nil for the
// library, whose calls peers forward run the application's services; the
// parity test serves the engine as the sidecar does.
func build(o Options, backend grpc.ClientConnInterface) (*Collapser, error) {
	c := &Collapser{services: &services{unary: o.Peers.UnaryInterceptor, stream: o.Peers.StreamInterceptor}}
	if backend == nil {
		backend = c.services
	}
	ring, err := c.joinPeers(o)
	if err != nil {
		return nil, err
	}
	if err := c.assemble(o, backend, ring); err != nil {
		if c.fleet != nil {
			c.fleet.Close()
		}
		return nil, err
	}
	return c, nil
}

// assemble builds c's engine on backend and ring, and what serves it.
func (c *Collapser) assemble(o Options, backend grpc.ClientConnInterface, ring proxy.Peers) error {
	e, err := engine.New(engine.Options{
		Policy:     o.Policy,
		PolicyFile: o.PolicyFile,
		Keys:       o.Keys,
		Proxy:      o.Engine,
		// The process's own descriptors say what each method is: its
		// generated code registered them.
		Kinds:          methodkind.Options{Files: protoregistry.GlobalFiles, UnaryMethods: o.Policy.CollapseMethods},
		Backend:        backend,
		Peers:          ring,
		TracerProvider: o.TracerProvider,
		Logger:         o.Logger,
	})
	if err != nil {
		return fmt.Errorf("collapser: %w", err)
	}
	c.proxy, c.policy = e.Proxy, e.Policy
	var replicas *admin.Replicas
	if c.fleet != nil {
		peerServer := append(config.Default().Server.ServerOptions(), tracing.HandlersOf(o.TracerProvider).ServerOptions()...)
		if c.peer, err = c.fleet.Join(e.Proxy, fleet.JoinOptions{ServerOptions: peerServer}); err != nil {
			return fmt.Errorf("collapser: Peers: %w", err)
		}
		replicas = c.fleet.Replicas()
	}
	if o.AdminTokenFile != "" {
		if c.token, err = secretfile.Load(o.AdminTokenFile, admin.MinTokenBytes, o.Logger); err != nil {
			return fmt.Errorf("collapser: AdminTokenFile: %w", err)
		}
	}
	c.admin = admin.New(admin.Options{Purger: e.Proxy, Observer: e.Recorder, Token: c.token, Replicas: replicas})
	// A write whose rule names what it invalidates purges through it.
	e.Proxy.InvalidateThrough(c.admin)
	if o.Registerer != nil {
		src := e.Sources()
		if c.fleet != nil {
			src.Peers = c.fleet.State
		}
		if err := metrics.Register(o.Registerer, e.Recorder, src); err != nil {
			return fmt.Errorf("collapser: %w", err)
		}
	}
	return nil
}

// Run keeps what the Collapser reads from files up to date until ctx ends:
// it reloads the policy file when it changes (an invalid file is logged
// and counted, and the policy in force stays), and the admin token; with
// peers, the peer token, and it syncs the purges with the other replicas.
// Until it runs, a replica with peers serves nothing it keeps: it must
// learn first that it missed no purge.
func (c *Collapser) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if c.token != nil {
		wg.Go(func() { c.token.Run(ctx, 0) })
	}
	if c.fleet != nil {
		wg.Go(func() { c.fleet.Run(ctx) })
	}
	c.policy.Run(ctx, 0)
	wg.Wait()
}

// RegisterAdmin registers the admin service (collapser.admin.v1.Cache,
// the sidecar's purges) on srv, typically the application's own server.
// Every purge is checked in the call: it must carry the admin token
// (Options.AdminTokenFile) or, without one, come from loopback or a Unix
// socket. In a mesh that forwards inbound calls from loopback, set a token.
func (c *Collapser) RegisterAdmin(srv grpc.ServiceRegistrar) {
	c.admin.Register(srv)
}
