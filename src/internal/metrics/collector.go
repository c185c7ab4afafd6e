package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/replay"
	"github.com/collapser/collapser/src/internal/tracing"
)

// Sources are the state of the sidecar's parts a scrape reads, besides a
// Recorder's counts: each a method of a part built already.
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
	// collapser_trace_spans_dropped_total reports. Nil: tracing is off,
	// and the metric is not exported.
	Traces func() tracing.Stats
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

// collector is what a scrape of the sidecar's metrics reads: the state of
// its parts (Sources) and a Recorder's counts, in that order, so that the
// series a scrape creates at 0 for a method it learns of are in that very
// scrape. (Two collectors would not do: a registry collects them in no
// fixed order, at once.)
type collector struct {
	rec *Recorder
	src Sources

	ruleInfo, inFlight, queued, waiters, entries, bytes  *prometheus.Desc
	liveStreams, heldStreams, streamReaders, streamBytes *prometheus.Desc
	spansDropped                                         *prometheus.Desc
	peerMembers, peerForwarding                          *prometheus.Desc
	peerLeases, peerCoherent, peerLapses                 *prometheus.Desc
}

// Register registers the sidecar's metrics with reg: rec's counts, and the
// state src reads at every scrape. Call it once the parts src reads exist;
// rec may count before.
func Register(reg prometheus.Registerer, rec *Recorder, src Sources) error {
	if reg == nil || rec == nil {
		return errors.New("metrics: nil registerer or Recorder")
	}
	if src.Stats == nil || src.Streams == nil {
		return errors.New("metrics: nil Sources.Stats or Sources.Streams")
	}
	if err := reg.Register(newCollector(rec, src)); err != nil {
		return fmt.Errorf("metrics: register sidecar metrics: %w", err)
	}
	return nil
}

// newCollector returns the collector of rec and src. It is a list of the
// state's metric definitions.
func newCollector(rec *Recorder, src Sources) *collector {
	return &collector{
		rec: rec,
		src: src,
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
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.rec.counters() {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{c.ruleInfo, c.inFlight, c.queued, c.waiters, c.entries, c.bytes, c.liveStreams, c.heldStreams, c.streamReaders, c.streamBytes} {
		ch <- d
	}
	if c.src.Traces != nil {
		ch <- c.spansDropped
	}
	if c.src.Peers != nil {
		for _, d := range []*prometheus.Desc{c.peerMembers, c.peerForwarding, c.peerLeases, c.peerCoherent, c.peerLapses} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector. It first exports every known
// method's series at 0, per outcome its rule can give, so that the first
// burst of calls is a rise a rate() sees, not the birth of a series.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	var rules map[string]policy.Rule
	if c.src.Methods != nil {
		rules = c.src.Methods()
		c.collectRules(ch, rules)
	}
	for _, m := range c.rec.counters() {
		m.Collect(ch)
	}
	st := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(st.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(st.Waiters))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ss := c.src.Streams()
	ch <- prometheus.MustNewConstMetric(c.liveStreams, prometheus.GaugeValue, float64(ss.Live))
	ch <- prometheus.MustNewConstMetric(c.heldStreams, prometheus.GaugeValue, float64(ss.Held))
	ch <- prometheus.MustNewConstMetric(c.streamReaders, prometheus.GaugeValue, float64(ss.Readers))
	ch <- prometheus.MustNewConstMetric(c.streamBytes, prometheus.GaugeValue, float64(ss.Bytes))
	if c.src.Traces != nil {
		ts := c.src.Traces()
		ch <- prometheus.MustNewConstMetric(c.spansDropped, prometheus.CounterValue, float64(ts.QueueFull), "queue_full")
		ch <- prometheus.MustNewConstMetric(c.spansDropped, prometheus.CounterValue, float64(ts.ExportFailed), "export_failed")
	}
	if c.src.Peers != nil {
		c.collectPeers(ch, c.src.Peers(), rules)
	}
}

// collectRules tells the Recorder's label set which methods are known,
// exports each one's rule, and creates its series at 0.
func (c *collector) collectRules(ch chan<- prometheus.Metric, rules map[string]policy.Rule) {
	names := make([]string, 0, len(rules))
	for m := range rules {
		names = append(names, m)
	}
	c.rec.methods.SetKnown(names)
	for m, r := range rules {
		if len(m) > methodlabel.MaxBytes {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.ruleInfo, prometheus.GaugeValue, 1, m, r.Action.String(), r.Reason)
		c.rec.touch(m, r, c.src.Peers != nil)
	}
}

// collectPeers exports the peer connection's state: its members, the
// leases held (with a peer token), and
// whether each collapsed method of rules, and each other method it counted,
// is forwarded (a method starts forwarded), under the label the method's
// other series have.
func (c *collector) collectPeers(ch chan<- prometheus.Metric, ps PeerState, rules map[string]policy.Rule) {
	ch <- prometheus.MustNewConstMetric(c.peerMembers, prometheus.GaugeValue, float64(ps.Members))
	if l := ps.Leases; l != nil {
		coherent := 0.0
		if l.Coherent {
			coherent = 1
		}
		ch <- prometheus.MustNewConstMetric(c.peerLeases, prometheus.GaugeValue, float64(l.Held))
		ch <- prometheus.MustNewConstMetric(c.peerCoherent, prometheus.GaugeValue, coherent)
		ch <- prometheus.MustNewConstMetric(c.peerLapses, prometheus.CounterValue, float64(l.Lapses))
	}
	forwarded := map[string]bool{}
	for m, r := range rules {
		if r.Action == policy.Collapse && len(m) <= methodlabel.MaxBytes {
			forwarded[m] = true
		}
	}
	for m, f := range ps.Forwarded {
		if label := c.rec.methods.Label(m); label == m {
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
		ch <- prometheus.MustNewConstMetric(c.peerForwarding, prometheus.GaugeValue, v, label)
	}
}
