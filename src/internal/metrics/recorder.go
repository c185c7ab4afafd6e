// Package metrics holds the collapser sidecar's Prometheus metrics. Every
// metric lives in a Recorder built from an explicit prometheus.Registerer; the
// global registry is never used.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/replay"
	"github.com/collapser/collapser/src/internal/tracing"
)

// durationBuckets span the backend call durations worth telling apart, from
// 1ms to 10s (the default backend timeout), in seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Sources are what a Recorder reads at every scrape.
type Sources struct {
	// Stats returns the collapse engine's state (required).
	Stats func() collapse.Stats
	// Methods returns the rule of every method the sidecar knows, which
	// collapser_method_rule_info labels with its action and reason; their
	// request and backend call series are exported at 0 before their first
	// call. Nil: no method is known.
	Methods func() map[string]policy.Rule
	// Peers, when set, says the sidecar forwards collapsed calls to their
	// owners, and returns its peer connection's state, which
	// collapser_peer_members and collapser_peer_forwarding report; the peer
	// series of collapsed methods are exported at 0 too. Nil: no peers.
	Peers func() PeerState
	// Streams returns the replayed streams' state (required).
	Streams func() replay.Stats
	// Traces returns the counts of spans not exported, which
	// collapser_trace_spans_dropped_total reports. Nil: tracing is off: the
	// metric is not exported, and no call's context is searched for an
	// exemplar.
	Traces func() tracing.Stats
	// Labels bounds the method label values; the sidecar's traces name
	// their spans with the same Set. Nil: a Set of the Recorder's own,
	// keeping methodlabel.MaxUnknown unknown methods.
	Labels *methodlabel.Set
}

// PeerState is what a sidecar with peers knows of them at a scrape.
type PeerState struct {
	// Members is how many replicas its peer connection last resolved,
	// itself included.
	Members int
	// Forwarded says, for every method it has forwarded calls of, whether
	// they are forwarded still (the forwarding package).
	Forwarded map[string]bool
	// Leases are the leases it holds from the other replicas (package
	// coherence); nil when purges stay on this replica (no peer token).
	Leases *coherence.Stats
}

// Recorder records the sidecar's request, backend call and policy metrics.
// It implements proxy.Observer, policy.ReloadObserver and admin.Observer. Its methods are
// safe for concurrent use.
type Recorder struct {
	sources         Sources
	methods         *methodlabel.Set
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
	purges          *prometheus.CounterVec
	purgedEntries   *prometheus.CounterVec

	ruleInfo, inFlight, queued, waiters, entries, bytes  *prometheus.Desc
	liveStreams, heldStreams, streamReaders, streamBytes *prometheus.Desc
	spansDropped                                         *prometheus.Desc
	peerMembers, peerForwarding                          *prometheus.Desc
	peerLeases, peerCoherent, peerLapses                 *prometheus.Desc
}

// counterVec is a counter vector named name, with help and labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// NewRecorder registers the sidecar's metrics with reg.
func NewRecorder(reg prometheus.Registerer, src Sources) (*Recorder, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	if src.Stats == nil || src.Streams == nil {
		return nil, errors.New("metrics: nil Sources.Stats or Sources.Streams")
	}
	s := &Recorder{
		sources: src,
		methods: src.Labels,
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
		purges: counterVec("collapser_purges_total",
			"Purges this sidecar made, asked through the admin service or by a write's success (policy invalidates), by kind (request, method, tag, none), mode (hard, soft) and result (ok; invalid: a bad request, nothing taken back; refused: not from loopback; partial: some replica not reached). With peers each is counted once, on the replica that took it to the others.",
			"kind", "mode", "result"),
		purgedEntries: counterVec("collapser_purged_entries_total",
			"Answers the admin service's purges took back from the cache, by kind (request, method, tag) and mode (hard: gone; soft: stale from now).",
			"kind", "mode"),
		ruleInfo: prometheus.NewDesc("collapser_method_rule_info",
			"1 for each method the sidecar knows, labelled with what its rule does (action) and why it passes through (reason).",
			[]string{"method", "action", "reason"}, nil),
		inFlight:      prometheus.NewDesc("collapser_inflight_keys", "Keys with a backend call in flight, background refreshes included.", nil, nil),
		queued:        prometheus.NewDesc("collapser_backend_calls_queued", "Backend calls waiting for a slot under COLLAPSER_MAX_BACKEND_CALLS.", nil, nil),
		waiters:       prometheus.NewDesc("collapser_waiters", "Callers waiting for a shared backend call, leaders included.", nil, nil),
		entries:       prometheus.NewDesc("collapser_cache_entries", "Results held in the result cache, fresh and stale.", nil, nil),
		bytes:         prometheus.NewDesc("collapser_cache_bytes", "Bytes the result cache holds as the Go heap allocates them: keys, values with their metadata, and each entry's overhead.", nil, nil),
		liveStreams:   prometheus.NewDesc("collapser_streams_live", "Replayed streams reading their backend stream now.", nil, nil),
		heldStreams:   prometheus.NewDesc("collapser_streams_held", "Ended replayed streams kept to be replayed whole.", nil, nil),
		streamReaders: prometheus.NewDesc("collapser_stream_readers", "Callers reading a live replayed stream now.", nil, nil),
		streamBytes:   prometheus.NewDesc("collapser_stream_recorded_bytes", "Bytes the records of replayed streams hold as the Go heap allocates them: kept records whole, live records' messages.", nil, nil),
		spansDropped: prometheus.NewDesc("collapser_trace_spans_dropped_total",
			"Spans the sidecar ended and did not export, by reason: queue_full (OTEL_BSP_MAX_QUEUE_SIZE spans were waiting for export; a call never waits for room), export_failed (their batch's export failed).",
			[]string{"reason"}, nil),
		peerMembers: prometheus.NewDesc("collapser_peer_members",
			"Replicas the peer connection last resolved, this one included (resolved again every 2 s, and when a connection to one is lost).",
			nil, nil),
		peerForwarding: prometheus.NewDesc("collapser_peer_forwarding",
			"1 while a collapsed method's calls of keys another replica owns are forwarded to that owner, 0 while they are made here because at most 1 in 20 of its forwarded calls shared the owner's backend call lately (a sample of keys, and the keys shared here, are forwarded still), by method.",
			[]string{"method"}, nil),
		peerLeases: prometheus.NewDesc("collapser_peer_leases",
			"Replicas this sidecar holds a lease from: it fetches from each, every second, the purges it missed (with a peer token).",
			nil, nil),
		peerCoherent: prometheus.NewDesc("collapser_peer_coherent",
			"1 while every lease this sidecar holds lasts and the replicas listed include it; 0 once a lease ran out (a replica it could not reach for 10 s) or it is not listed: it then serves nothing it kept and shares no call until it is listed and reaches every replica again.",
			nil, nil),
		peerLapses: prometheus.NewDesc("collapser_peer_lease_lapses_total",
			"Times this sidecar took back everything it kept because a purge could have missed it: a lease from another replica ran out, or the replicas listed did not include it.",
			nil, nil),
	}
	if s.methods == nil {
		s.methods = methodlabel.New(methodlabel.MaxUnknown)
	}
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
	if err := reg.Register(s); err != nil {
		return nil, fmt.Errorf("metrics: register sidecar metrics: %w", err)
	}
	return s, nil
}

// ObserveRequest counts one request answered with code, served as outcome,
// in its route's series: collapser_requests_total for a caller's call,
// collapser_stream_requests_total for a caller's replayed stream and
// collapser_peer_requests_total for what a peer forwarded. A sampled span
// in ctx, the call's, is the count's exemplar.
func (s *Recorder) ObserveRequest(ctx context.Context, route proxy.Route, method, outcome string, code codes.Code) {
	s.add(ctx, s.routed(route).WithLabelValues(s.methods.Label(method), outcome, codeName(code)))
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

// Describe implements prometheus.Collector.
func (s *Recorder) Describe(ch chan<- *prometheus.Desc) {
	s.requests.Describe(ch)
	s.backendCalls.Describe(ch)
	s.backendDuration.Describe(ch)
	s.reloads.Describe(ch)
	s.reloadOK.Describe(ch)
	s.peerCalls.Describe(ch)
	s.peerFallbacks.Describe(ch)
	s.peerRequests.Describe(ch)
	s.streamRequests.Describe(ch)
	s.freshness.Describe(ch)
	s.purges.Describe(ch)
	s.purgedEntries.Describe(ch)
	for _, d := range []*prometheus.Desc{s.ruleInfo, s.inFlight, s.queued, s.waiters, s.entries, s.bytes, s.liveStreams, s.heldStreams, s.streamReaders, s.streamBytes} {
		ch <- d
	}
	if s.sources.Traces != nil {
		ch <- s.spansDropped
	}
	if s.sources.Peers != nil {
		for _, d := range []*prometheus.Desc{s.peerMembers, s.peerForwarding, s.peerLeases, s.peerCoherent, s.peerLapses} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector. It first exports every known
// method's series at 0, per outcome its rule can give, so that the first
// burst of calls is a rise a rate() sees, not the birth of a series.
func (s *Recorder) Collect(ch chan<- prometheus.Metric) {
	var rules map[string]policy.Rule
	if s.sources.Methods != nil {
		rules = s.sources.Methods()
		names := make([]string, 0, len(rules))
		for m := range rules {
			names = append(names, m)
		}
		s.methods.SetKnown(names)
		for m, r := range rules {
			if len(m) > methodlabel.MaxBytes {
				continue
			}
			ch <- prometheus.MustNewConstMetric(s.ruleInfo, prometheus.GaugeValue, 1, m, r.Action.String(), r.Reason)
			s.touch(m, r)
		}
	}
	s.requests.Collect(ch)
	s.backendCalls.Collect(ch)
	s.backendDuration.Collect(ch)
	s.reloads.Collect(ch)
	s.reloadOK.Collect(ch)
	s.peerCalls.Collect(ch)
	s.peerFallbacks.Collect(ch)
	s.peerRequests.Collect(ch)
	s.streamRequests.Collect(ch)
	s.freshness.Collect(ch)
	s.purges.Collect(ch)
	s.purgedEntries.Collect(ch)

	st := s.sources.Stats()
	ch <- prometheus.MustNewConstMetric(s.inFlight, prometheus.GaugeValue, float64(st.InFlight))
	ch <- prometheus.MustNewConstMetric(s.queued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(s.waiters, prometheus.GaugeValue, float64(st.Waiters))
	ch <- prometheus.MustNewConstMetric(s.entries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(s.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ss := s.sources.Streams()
	ch <- prometheus.MustNewConstMetric(s.liveStreams, prometheus.GaugeValue, float64(ss.Live))
	ch <- prometheus.MustNewConstMetric(s.heldStreams, prometheus.GaugeValue, float64(ss.Held))
	ch <- prometheus.MustNewConstMetric(s.streamReaders, prometheus.GaugeValue, float64(ss.Readers))
	ch <- prometheus.MustNewConstMetric(s.streamBytes, prometheus.GaugeValue, float64(ss.Bytes))
	if s.sources.Traces != nil {
		ts := s.sources.Traces()
		ch <- prometheus.MustNewConstMetric(s.spansDropped, prometheus.CounterValue, float64(ts.QueueFull), "queue_full")
		ch <- prometheus.MustNewConstMetric(s.spansDropped, prometheus.CounterValue, float64(ts.ExportFailed), "export_failed")
	}
	if s.sources.Peers != nil {
		s.collectPeers(ch, s.sources.Peers(), rules)
	}
}

// collectPeers exports the peer connection's state: its members, the
// leases held (with a peer token), and
// whether each collapsed method of rules, and each other method it counted,
// is forwarded (a method starts forwarded), under the label the method's
// other series have.
func (s *Recorder) collectPeers(ch chan<- prometheus.Metric, ps PeerState, rules map[string]policy.Rule) {
	ch <- prometheus.MustNewConstMetric(s.peerMembers, prometheus.GaugeValue, float64(ps.Members))
	if l := ps.Leases; l != nil {
		coherent := 0.0
		if l.Coherent {
			coherent = 1
		}
		ch <- prometheus.MustNewConstMetric(s.peerLeases, prometheus.GaugeValue, float64(l.Held))
		ch <- prometheus.MustNewConstMetric(s.peerCoherent, prometheus.GaugeValue, coherent)
		ch <- prometheus.MustNewConstMetric(s.peerLapses, prometheus.CounterValue, float64(l.Lapses))
	}
	forwarded := map[string]bool{}
	for m, r := range rules {
		if r.Action == policy.Collapse && len(m) <= methodlabel.MaxBytes {
			forwarded[m] = true
		}
	}
	for m, f := range ps.Forwarded {
		if label := s.methods.Label(m); label == m {
			forwarded[m] = f
		} else {
			forwarded[label] = forwarded[label] || f // methods past the label bound share one series
		}
	}
	for label, f := range forwarded {
		v := 0.0
		if f {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(s.peerForwarding, prometheus.GaugeValue, v, label)
	}
}

// touch creates method's series of the outcomes its rule can give, with
// code OK, and its backend call series, at 0 when they are new.
func (s *Recorder) touch(method string, r policy.Rule) {
	ok := codes.OK.String()
	switch r.Action {
	case policy.Replay:
		for _, o := range replay.Outcomes {
			s.streamRequests.WithLabelValues(method, o.String(), ok)
			if s.sources.Peers != nil {
				s.peerRequests.WithLabelValues(method, o.String(), ok)
			}
		}
	case policy.Collapse:
		for _, o := range collapse.Outcomes {
			s.requests.WithLabelValues(method, o.String(), ok)
			if s.sources.Peers != nil {
				s.peerRequests.WithLabelValues(method, o.String(), ok)
			}
		}
		for _, source := range proxy.FreshnessSources {
			s.freshness.WithLabelValues(method, source)
		}
	default:
		s.requests.WithLabelValues(method, proxy.OutcomePassthrough, ok)
	}
	if s.sources.Peers != nil && r.Action != policy.Passthrough {
		for _, owner := range []string{proxy.OwnerSelf, proxy.OwnerPeer} {
			s.peerCalls.WithLabelValues(method, owner, ok)
		}
		if r.Action == policy.Collapse { // streams are always forwarded
			s.peerCalls.WithLabelValues(method, proxy.OwnerKept, ok)
		}
		s.peerFallbacks.WithLabelValues(method, codes.Unavailable.String())
	}
	s.backendCalls.WithLabelValues(method, ok)
	s.backendDuration.WithLabelValues(method)
}

// codeName is the code label value. Codes outside the gRPC set are reported as
// Unknown, which keeps the label bounded and avoids formatting "Code(n)".
func codeName(c codes.Code) string {
	if c > codes.Unauthenticated {
		return codes.Unknown.String()
	}
	return c.String()
}
