// Package metrics holds the collapser sidecar's Prometheus metrics. A
// Recorder counts what the proxy, the policy store and the admin service
// tell it; Register exports its counts, with the state of those parts read
// at every scrape (Sources), on an explicit prometheus.Registerer. The
// global registry is never used.
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/replay"
)

// durationBuckets span the backend call durations worth telling apart, from
// 1ms to 10s (the default backend timeout), in seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Options configures a Recorder.
type Options struct {
	// Labels bounds the method label values; the sidecar's traces name
	// their spans with the same Set. Nil: a Set of the Recorder's own,
	// keeping methodlabel.MaxUnknown unknown methods.
	Labels *methodlabel.Set
	// Exemplars: tracing is on, and a sampled span in a call's context is
	// the exemplar of its counts. False: no call's context is searched for
	// one.
	Exemplars bool
}

// Recorder counts the sidecar's requests, backend calls, policy reloads
// and purges. It implements proxy.Observer, policy.ReloadObserver and
// admin.Observer, and needs nothing of what it observes: it is built
// before them, and Register exports its counts. Its methods are safe for
// concurrent use.
type Recorder struct {
	methods         *methodlabel.Set
	exemplars       bool
	requests        *prometheus.CounterVec
	backendCalls    *prometheus.CounterVec
	backendDuration *prometheus.HistogramVec
	reloads         *prometheus.CounterVec
	reloadOK        prometheus.Gauge
	peerCalls       *prometheus.CounterVec
	peerFallbacks   *prometheus.CounterVec
	peerRequests    *prometheus.CounterVec
	streamRequests  *prometheus.CounterVec
	freshness       *prometheus.CounterVec
	refreshes       *prometheus.CounterVec
	handoffs        *prometheus.CounterVec
	purges          *prometheus.CounterVec
	purgedEntries   *prometheus.CounterVec
	// served holds the requests series counted so far (servedSeries →
	// prometheus.Counter), every call's count: a lookup of its own costs
	// less than the vector's hash of three label values and its lock. No
	// series is ever deleted, and every label is of a bounded set (methods,
	// outcomes, codes), so it holds no more than the vectors do.
	served sync.Map
}

// servedSeries names one series of the requests counters (Recorder.served).
type servedSeries struct {
	route           proxy.Route
	method, outcome string
	code            codes.Code
}

// counterVec is a counter vector named name, with help and labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// NewRecorder returns a Recorder whose counts start at 0; Register exports
// them. It is a list of the counters' definitions.
func NewRecorder(o Options) *Recorder {
	s := &Recorder{
		methods:   o.Labels,
		exemplars: o.Exemplars,
		requests: counterVec("collapser_requests_total",
			"Requests the sidecar answered, by method, how they were served (outcome) and the gRPC code the caller got.",
			"method", "outcome", "code"),
		backendCalls: counterVec("collapser_backend_calls_total",
			"Calls the sidecar made to the backend, shared unary calls and passed-through streams alike, by method and gRPC code.",
			"method", "code"),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collapser_backend_call_duration_seconds",
			Help:    "Duration of the sidecar's calls to the backend of unary methods (and of methods of unknown kind), shared or passed through, by method; streams are only counted, in collapser_backend_calls_total.",
			Buckets: durationBuckets,
		}, []string{"method"}),
		reloads: counterVec("collapser_policy_reloads_total",
			"Reloads of a changed policy file, by result: success (applied) or failure (invalid; the policy in force stays).",
			"result"),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "collapser_policy_last_reload_successful",
			Help: "1 if the policy file in force is the file's latest content, 0 if its latest change was invalid.",
		}),
		peerCalls: counterVec("collapser_peer_calls_total",
			"Leaders' calls and replayed streams of sidecars with peers, by method, who answered (owner: self when this sidecar owns the key and made the call, peer when another replica owns it and answered, none when no owner's answer came (for a stream, its end), kept when another replica owns the key but the call was made here, its method not forwarded: collapser_peer_forwarding) and the code of the answer (a stream's when it ends; for one this sidecar owns, its opening's) or of the failure to reach the owner.",
			"method", "owner", "code"),
		peerFallbacks: counterVec("collapser_peer_fallbacks_total",
			"Forwarded calls and streams that did not reach an owner and were made to the local backend instead, by method and the code of the failure.",
			"method", "code"),
		peerRequests: counterVec("collapser_peer_requests_total",
			"Calls and replayed streams served for peers as the owner of their key, by method, how they were served (outcome: a collapse outcome, or a replay one for streams) and the gRPC code the peer got.",
			"method", "outcome", "code"),
		streamRequests: counterVec("collapser_stream_requests_total",
			"Calls of replayed server-streaming methods, by method, how they were served (outcome: leader, joined, replayed from a kept stream, own stream, error) and the gRPC code the caller got.",
			"method", "outcome", "code"),
		freshness: counterVec("collapser_answer_freshness_total",
			"Shared answers of collapsed unary calls (successes, and the errors a rule keeps: cacheCodes), by method and what set how long each is served (source: policy, the rule's own windows; backend, the answer's cache-control; backend_capped, its cache-control cut to the rule's maxTTL).",
			"method", "source"),
		refreshes: counterVec("collapser_refreshes_total",
			"Background calls that refreshed a kept answer of a collapsed unary method, or a replayed stream's kept record (early only), by method and why (reason: early, an answer or record still read refreshed before its TTL ended, at a time drawn from its key; stale, an answer past its TTL served stale meanwhile; purge, an answer a soft purge of a method or tag took back, in its turn at COLLAPSER_SOFT_PURGE_RATE). Nobody waits for them. With peers only a key's owner refreshes it.",
			"method", "reason"),
		handoffs: counterVec("collapser_handoffs_total",
			"Keys this replica took over when it joined the ring, whose previous owner it asked for the answer it held before making a call, by method and result (taken: the answer was handed over, no backend call made; none: the previous owner held no fresh answer; failed: it could not be asked, or did not answer in time). Asked for the first call of a unary method's key, or the first stream of a replayed method's key (for its kept record), for a short while after the replicas changed.",
			"method", "result"),
		purges: counterVec("collapser_purges_total",
			"Purges this sidecar made, asked through the admin service or by a write's success (policy invalidates), by kind (request, method, tag, none), mode (hard, soft) and result (ok; invalid: a bad request, nothing taken back; refused: not from loopback; partial: some replica not reached). With peers each is counted once, on the replica that took it to the others.",
			"kind", "mode", "result"),
		purgedEntries: counterVec("collapser_purged_entries_total",
			"Answers the admin service's purges took back from the cache, by kind (request, method, tag) and mode (hard: gone; soft: stale from now).",
			"kind", "mode"),
	}
	if s.methods == nil {
		s.methods = methodlabel.New(methodlabel.MaxUnknown)
	}
	s.startAtZero()
	return s
}

// startAtZero creates the series of the reloads and purges, which name no
// method, at 0, and says the policy in force is the file's content.
func (s *Recorder) startAtZero() {
	for _, result := range []string{"success", "failure"} {
		s.reloads.WithLabelValues(result)
	}
	// Purges start at 0, so that the first one is a rise a rate() sees.
	for _, kind := range []string{admin.KindRequest, admin.KindMethod, admin.KindTag} {
		for _, mode := range []string{admin.ModeHard, admin.ModeSoft} {
			s.purges.WithLabelValues(kind, mode, admin.ResultOK)
			s.purgedEntries.WithLabelValues(kind, mode)
		}
	}
	s.reloadOK.Set(1) // the sidecar started on the file's content
}

// counters returns the Recorder's counters (and its reload gauge), in the
// order a scrape collects them.
func (s *Recorder) counters() []prometheus.Collector {
	return []prometheus.Collector{
		s.requests, s.backendCalls, s.backendDuration, s.reloads, s.reloadOK, s.peerCalls,
		s.peerFallbacks, s.peerRequests, s.streamRequests, s.freshness, s.refreshes, s.handoffs, s.purges, s.purgedEntries,
	}
}

// ObserveRequest counts one request answered with code, served as outcome,
// in its route's series: collapser_requests_total for a caller's call,
// collapser_stream_requests_total for a caller's replayed stream and
// collapser_peer_requests_total for what a peer forwarded. A sampled span
// in ctx, the call's, is the count's exemplar.
func (s *Recorder) ObserveRequest(ctx context.Context, route proxy.Route, method, outcome string, code codes.Code) {
	k := servedSeries{route: route, method: s.methods.Label(method), outcome: outcome, code: knownCode(code)}
	c, ok := s.served.Load(k)
	if !ok {
		c, _ = s.served.LoadOrStore(k, s.routed(route).WithLabelValues(k.method, outcome, codeName(code)))
	}
	s.add(ctx, c.(prometheus.Counter))
}

// routed returns the requests series of route.
func (s *Recorder) routed(route proxy.Route) *prometheus.CounterVec {
	switch route {
	case proxy.RouteStream:
		return s.streamRequests
	case proxy.RoutePeer:
		return s.peerRequests
	}
	return s.requests
}

// ObserveBackendCall counts one backend call that ended with code after d.
// A sampled span in ctx, the call's, is the exemplar of its count and
// duration.
func (s *Recorder) ObserveBackendCall(ctx context.Context, method string, code codes.Code, d time.Duration) {
	m := s.methods.Label(method)
	s.add(ctx, s.backendCalls.WithLabelValues(m, codeName(code)))
	s.observe(ctx, s.backendDuration.WithLabelValues(m), d.Seconds())
}

// ObserveBackendStream counts one backend stream that ended with code; a
// stream's length is not a latency, so the duration histogram leaves it out.
func (s *Recorder) ObserveBackendStream(method string, code codes.Code) {
	s.backendCalls.WithLabelValues(s.methods.Label(method), codeName(code)).Inc()
}

// ObservePeerCall counts one leader's call of a sidecar with peers, answered
// by owner (proxy.OwnerSelf, OwnerPeer, OwnerNone or OwnerKept); fellBack:
// it did not reach one and went to the local backend.
func (s *Recorder) ObservePeerCall(method, owner string, code codes.Code, fellBack bool) {
	m := s.methods.Label(method)
	s.peerCalls.WithLabelValues(m, owner, codeName(code)).Inc()
	if fellBack {
		s.peerFallbacks.WithLabelValues(m, codeName(code)).Inc()
	}
}

// ObserveFreshness counts one shared answer whose windows came from source
// (proxy.FreshnessPolicy, FreshnessBackend or FreshnessCapped).
func (s *Recorder) ObserveFreshness(method, source string) {
	s.freshness.WithLabelValues(s.methods.Label(method), source).Inc()
}

// ObserveHandoff counts one previous owner asked for a key's answer, by
// result (proxy.HandoffTaken, HandoffNone or HandoffFailed).
func (s *Recorder) ObserveHandoff(method, result string) {
	s.handoffs.WithLabelValues(s.methods.Label(method), result).Inc()
}

// ObserveRefresh counts one background refresh, for reason
// (proxy.RefreshEarly, RefreshStale or RefreshPurge).
func (s *Recorder) ObserveRefresh(method, reason string) {
	s.refreshes.WithLabelValues(s.methods.Label(method), reason).Inc()
}

// ObservePurge counts one purge request of kind (admin.KindRequest, ...)
// and mode (admin.ModeHard or ModeSoft) with its result, and the answers it
// took back.
func (s *Recorder) ObservePurge(kind, mode, result string, entries int) {
	s.purges.WithLabelValues(kind, mode, result).Inc()
	if entries > 0 {
		s.purgedEntries.WithLabelValues(kind, mode).Add(float64(entries))
	}
}

// ObservePolicyReload counts one reload of a changed policy file.
func (s *Recorder) ObservePolicyReload(ok bool) {
	if ok {
		s.reloads.WithLabelValues("success").Inc()
		s.reloadOK.Set(1)
		return
	}
	s.reloads.WithLabelValues("failure").Inc()
	s.reloadOK.Set(0)
}

// touch creates method's series of the outcomes its rule can give, with
// code OK, and its backend call series, at 0 when they are new; with
// peers, its peer series too.
func (s *Recorder) touch(method string, r policy.Rule, peers bool) {
	ok := codes.OK.String()
	switch r.Action {
	case policy.Replay:
		for _, o := range replay.Outcomes {
			s.streamRequests.WithLabelValues(method, o.String(), ok)
			if peers {
				s.peerRequests.WithLabelValues(method, o.String(), ok)
			}
		}
	case policy.Collapse:
		for _, o := range collapse.Outcomes {
			s.requests.WithLabelValues(method, o.String(), ok)
			if peers {
				s.peerRequests.WithLabelValues(method, o.String(), ok)
			}
		}
		for _, source := range proxy.FreshnessSources {
			s.freshness.WithLabelValues(method, source)
		}
		for _, reason := range proxy.RefreshReasons {
			s.refreshes.WithLabelValues(method, reason)
		}
	default:
		s.requests.WithLabelValues(method, proxy.OutcomePassthrough, ok)
	}
	if peers && r.Action != policy.Passthrough {
		for _, owner := range []string{proxy.OwnerSelf, proxy.OwnerPeer} {
			s.peerCalls.WithLabelValues(method, owner, ok)
		}
		if r.Action == policy.Collapse { // streams are always forwarded, and handed over by none
			s.peerCalls.WithLabelValues(method, proxy.OwnerKept, ok)
			for _, result := range proxy.HandoffResults {
				s.handoffs.WithLabelValues(method, result)
			}
		}
		s.peerFallbacks.WithLabelValues(method, codes.Unavailable.String())
	}
	s.backendCalls.WithLabelValues(method, ok)
	s.backendDuration.WithLabelValues(method)
}

// codeName is the code label value. Codes outside the gRPC set are reported as
// Unknown, which keeps the label bounded and avoids formatting "Code(n)".
func codeName(c codes.Code) string { return knownCode(c).String() }

// knownCode is c, or codes.Unknown for a code gRPC does not define.
func knownCode(c codes.Code) codes.Code {
	if c > codes.Unauthenticated {
		return codes.Unknown
	}
	return c
}
