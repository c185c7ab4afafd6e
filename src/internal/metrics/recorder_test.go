package metrics

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/coherence"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/methodlabel"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/replay"
)

const sayHello = "/hello.v1.Greeter/SayHello"

// The proxy reports through this package.
var _ proxy.Observer = (*Recorder)(nil)

// The policy store reports through this package.
var _ policy.ReloadObserver = (*Recorder)(nil)

func noStats() collapse.Stats { return collapse.Stats{} }

func noStreams() replay.Stats { return replay.Stats{} }

func newTestRecorder(t *testing.T, stats func() collapse.Stats) (*Recorder, *prometheus.Registry) {
	t.Helper()
	return newTestRecorderWith(t, Sources{Stats: stats})
}

// newTestRecorderWith builds a Recorder, with exemplars when src reads
// traces, and registers it with src on a registry of its own, reading
// empty stats where src has no Stats or Streams.
func newTestRecorderWith(t testing.TB, src Sources) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if src.Stats == nil {
		src.Stats = noStats
	}
	if src.Streams == nil {
		src.Streams = noStreams
	}
	s := NewRecorder(Options{Exemplars: src.Traces != nil})
	if err := Register(reg, s, src); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return s, reg
}

func TestRegister_RejectsMissingInputsAndDuplicateRegistration(t *testing.T) {
	src := Sources{Stats: noStats, Streams: noStreams}
	rec := NewRecorder(Options{})
	if err := Register(nil, rec, src); err == nil {
		t.Error("Register(nil registerer) succeeded, want error")
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, nil, src); err == nil {
		t.Error("Register(nil Recorder) succeeded, want error")
	}
	if err := Register(reg, rec, Sources{}); err == nil {
		t.Error("Register(nil stats) succeeded, want error")
	}
	if err := Register(reg, rec, src); err != nil {
		t.Fatalf("first Register: %v", err)
	}
	if err := Register(reg, NewRecorder(Options{}), src); err == nil {
		t.Error("second Register on one registry succeeded, want duplicate registration error")
	}
}

func TestRecorder_MetricNamesMatchContractAndPassLint(t *testing.T) {
	s, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule {
		return map[string]policy.Rule{"/a.B/C": {Action: policy.Passthrough, Reason: policy.ReasonUnannotated}}
	}})
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "leader", codes.OK)
	s.ObserveBackendCall(context.Background(), sayHello, codes.OK, time.Millisecond)

	for _, name := range []string{
		"collapser_inflight_keys", "collapser_backend_calls_queued", "collapser_policy_last_reload_successful",
		"collapser_waiters", "collapser_cache_entries", "collapser_cache_bytes", "collapser_method_rule_info",
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("GatherAndCount(%s) = %d, %v; want 1 series", name, n, err)
		}
	}
	for name, want := range map[string]int{"collapser_requests_total": 2, "collapser_backend_calls_total": 2, "collapser_policy_reloads_total": 2} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("GatherAndCount(%s) = %d, %v; want %d series", name, n, err, want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestRecorder_ObserveRequestCountsByMethodOutcomeAndCode(t *testing.T) {
	s, _ := newTestRecorder(t, nil)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "leader", codes.OK)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "joined", codes.OK)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "joined", codes.OK)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "passthrough", codes.Unavailable)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "error", codes.Code(99))

	want := `
# HELP collapser_requests_total Requests the sidecar answered, by method, how they were served (outcome) and the gRPC code the caller got.
# TYPE collapser_requests_total counter
collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="joined"} 2
collapser_requests_total{code="OK",method="/hello.v1.Greeter/SayHello",outcome="leader"} 1
collapser_requests_total{code="Unavailable",method="/hello.v1.Greeter/SayHello",outcome="passthrough"} 1
collapser_requests_total{code="Unknown",method="/hello.v1.Greeter/SayHello",outcome="error"} 1
`
	if err := testutil.CollectAndCompare(s.requests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestRecorder_ObserveRequestHoldsOneSeriesPerLabels(t *testing.T) {
	s, _ := newTestRecorder(t, nil)
	for c := range 1000 {
		s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "error", codes.Code(17+c))
	}
	var held int
	s.served.Range(func(any, any) bool { held++; return true })
	if held != 1 {
		t.Errorf("series held for 1,000 codes gRPC does not define = %d, want 1 (Unknown's)", held)
	}
}

func TestRecorder_ObserveBackendCallRecordsCountAndDuration(t *testing.T) {
	s, _ := newTestRecorder(t, nil)
	s.ObserveBackendCall(context.Background(), sayHello, codes.OK, 20*time.Millisecond)
	s.ObserveBackendCall(context.Background(), sayHello, codes.DeadlineExceeded, 3*time.Second)

	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues(sayHello, "OK")); got != 1 {
		t.Errorf("backend calls {OK} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues(sayHello, "DeadlineExceeded")); got != 1 {
		t.Errorf("backend calls {DeadlineExceeded} = %v, want 1", got)
	}
	h := readHistogram(t, s.backendDuration.WithLabelValues(sayHello))
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-3.02) > 1e-9 {
		t.Errorf("duration histogram count=%d sum=%v, want count=2 sum=3.02", h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestRecorder_ObserveBackendStreamIsCountedWithoutADuration(t *testing.T) {
	s, _ := newTestRecorder(t, nil)
	s.ObserveBackendStream(sayHello, codes.OK)
	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues(sayHello, "OK")); got != 1 {
		t.Errorf("backend calls {OK} = %v, want 1", got)
	}
	if h := readHistogram(t, s.backendDuration.WithLabelValues(sayHello)); h.GetSampleCount() != 0 {
		t.Errorf("duration histogram count = %d, want 0: a stream's length is no latency", h.GetSampleCount())
	}
}

// readHistogram returns the current state of one histogram series.
func readHistogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	m, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a prometheus.Metric", o)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatalf("write metric: %v", err)
	}
	return out.GetHistogram()
}

func TestRecorder_GaugesReadStatsOncePerScrape(t *testing.T) {
	var calls atomic.Int64
	_, reg := newTestRecorder(t, func() collapse.Stats {
		calls.Add(1)
		return collapse.Stats{InFlight: 3, Queued: 2, Waiters: 40, Entries: 7, Bytes: 1234}
	})
	want := `
# HELP collapser_backend_calls_queued Backend calls waiting for a slot under COLLAPSER_MAX_BACKEND_CALLS.
# TYPE collapser_backend_calls_queued gauge
collapser_backend_calls_queued 2
# HELP collapser_cache_bytes Bytes the result cache holds as the Go heap allocates them: keys, values with their metadata, and each entry's overhead.
# TYPE collapser_cache_bytes gauge
collapser_cache_bytes 1234
# HELP collapser_cache_entries Results held in the result cache, fresh and stale.
# TYPE collapser_cache_entries gauge
collapser_cache_entries 7
# HELP collapser_inflight_keys Keys with a backend call in flight, background refreshes included.
# TYPE collapser_inflight_keys gauge
collapser_inflight_keys 3
# HELP collapser_waiters Callers waiting for a shared backend call, leaders included.
# TYPE collapser_waiters gauge
collapser_waiters 40
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"collapser_backend_calls_queued", "collapser_cache_bytes", "collapser_cache_entries", "collapser_inflight_keys", "collapser_waiters"); err != nil {
		t.Error(err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("stats func called %d times for one scrape, want 1", got)
	}
}

func TestRecorder_UnknownMethodLabelsBoundedByCountAndLength(t *testing.T) {
	s, _ := newTestRecorder(t, nil)
	const extra = 25
	for i := range methodlabel.MaxUnknown + extra {
		m := fmt.Sprintf("/svc.S/M%d", i)
		s.ObserveRequest(context.Background(), proxy.RouteCaller, m, "passthrough", codes.OK)
		s.ObserveBackendCall(context.Background(), m, codes.OK, time.Millisecond)
	}
	long := "/svc.S/" + strings.Repeat("L", methodlabel.MaxBytes)
	s.ObserveRequest(context.Background(), proxy.RouteCaller, long, "passthrough", codes.OK)
	for name, c := range map[string]prometheus.Collector{"requests": s.requests, "backend calls": s.backendCalls, "duration": s.backendDuration} {
		if n := testutil.CollectAndCount(c); n != methodlabel.MaxUnknown+1 {
			t.Errorf("%s series = %d, want %d (methodlabel.MaxUnknown + other)", name, n, methodlabel.MaxUnknown+1)
		}
	}
	if got := testutil.ToFloat64(s.requests.WithLabelValues(methodlabel.Other, "passthrough", "OK")); got != extra+1 {
		t.Errorf("requests{method=other} = %v, want %d", got, extra+1)
	}
}

func TestRecorder_KnownMethodsKeepTheirLabelsAndStartAtZero(t *testing.T) {
	rules := map[string]policy.Rule{
		sayHello:                    {Action: policy.Collapse},
		"/hello.v1.Stats/GetCounts": {Action: policy.Passthrough, Reason: policy.ReasonUnannotated},
	}
	s, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule { return rules }})
	for i := range methodlabel.MaxUnknown { // unknown methods fill their allowance first
		s.ObserveRequest(context.Background(), proxy.RouteCaller, fmt.Sprintf("/junk.S/M%d", i), "passthrough", codes.Unimplemented)
	}
	if _, err := reg.Gather(); err != nil { // a scrape learns the known methods
		t.Fatal(err)
	}
	s.ObserveRequest(context.Background(), proxy.RouteCaller, sayHello, "leader", codes.OK)
	want := `
# HELP collapser_method_rule_info 1 for each method the sidecar knows, labelled with what its rule does (action) and why it passes through (reason).
# TYPE collapser_method_rule_info gauge
collapser_method_rule_info{action="collapse",method="/hello.v1.Greeter/SayHello",reason=""} 1
collapser_method_rule_info{action="passthrough",method="/hello.v1.Stats/GetCounts",reason="unannotated"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "collapser_method_rule_info"); err != nil {
		t.Error(err)
	}
	for _, o := range collapse.Outcomes {
		want := 0.0
		if o == collapse.Lead {
			want = 1
		}
		if got := testutil.ToFloat64(s.requests.WithLabelValues(sayHello, o.String(), "OK")); got != want {
			t.Errorf("requests{%s} = %v, want %v", o, got, want)
		}
	}
	if n := testutil.CollectAndCount(s.requests); n != methodlabel.MaxUnknown+len(collapse.Outcomes)+1 {
		t.Errorf("request series = %d, want the unknown ones, SayHello's per outcome and GetCounts' passthrough", n)
	}
	if got := testutil.ToFloat64(s.backendCalls.WithLabelValues("/hello.v1.Stats/GetCounts", "OK")); got != 0 {
		t.Errorf("GetCounts backend calls = %v, want a series at 0", got)
	}
}

func TestRecorder_AKnownMethodsSeriesAreInTheScrapeThatLearnsIt(t *testing.T) {
	rules := map[string]policy.Rule{sayHello: {Action: policy.Collapse}}
	_, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule { return rules }})
	// The first scrape learns the method: its series are in it, at 0.
	if n, err := testutil.GatherAndCount(reg, "collapser_requests_total"); err != nil || n != len(collapse.Outcomes) {
		t.Errorf("first scrape: %d request series, %v; want SayHello's per outcome, %d", n, err, len(collapse.Outcomes))
	}
}

func TestRecorder_PolicyReloads(t *testing.T) {
	s, reg := newTestRecorder(t, nil)
	s.ObservePolicyReload(true)
	s.ObservePolicyReload(false)
	want := `
# HELP collapser_policy_last_reload_successful 1 if the policy file in force is the file's latest content, 0 if its latest change was invalid.
# TYPE collapser_policy_last_reload_successful gauge
collapser_policy_last_reload_successful 0
# HELP collapser_policy_reloads_total Reloads of a changed policy file, by result: success (applied) or failure (invalid; the policy in force stays).
# TYPE collapser_policy_reloads_total counter
collapser_policy_reloads_total{result="failure"} 1
collapser_policy_reloads_total{result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "collapser_policy_last_reload_successful", "collapser_policy_reloads_total"); err != nil {
		t.Error(err)
	}
}

func TestRecorder_PeerCallsFallbacksAndRequests(t *testing.T) {
	rules := map[string]policy.Rule{sayHello: {Action: policy.Collapse}}
	s, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule { return rules }, Peers: func() PeerState { return PeerState{} }})
	if _, err := reg.Gather(); err != nil { // the series of a known method start at 0
		t.Fatal(err)
	}
	s.ObservePeerCall(sayHello, proxy.OwnerPeer, codes.OK, false)
	s.ObservePeerCall(sayHello, proxy.OwnerNone, codes.Unavailable, true)
	s.ObserveRequest(context.Background(), proxy.RoutePeer, sayHello, "joined", codes.OK)
	for _, c := range []struct {
		vec    *prometheus.CounterVec
		labels []string
		want   float64
	}{
		{s.peerCalls, []string{sayHello, "peer", "OK"}, 1},
		{s.peerCalls, []string{sayHello, "self", "OK"}, 0},
		{s.peerCalls, []string{sayHello, "none", "Unavailable"}, 1},
		{s.peerFallbacks, []string{sayHello, "Unavailable"}, 1},
		{s.peerRequests, []string{sayHello, "joined", "OK"}, 1},
		{s.peerRequests, []string{sayHello, "leader", "OK"}, 0},
	} {
		if got := testutil.ToFloat64(c.vec.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("%v = %v, want %v", c.labels, got, c.want)
		}
	}
}

func TestRecorder_PeerSeriesStartAtZeroForCollapsedAndReplayedMethods(t *testing.T) {
	const feed = "/hello.v1.Greeter/StreamHellos"
	rules := map[string]policy.Rule{
		sayHello:                 {Action: policy.Collapse},
		feed:                     {Action: policy.Replay},
		"/hello.v1.Greeter/Chat": {Action: policy.Passthrough}, // never forwarded
	}
	s, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule { return rules }, Peers: func() PeerState { return PeerState{} }})
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		vec  *prometheus.CounterVec
		want int
	}{
		{"peer calls", s.peerCalls, 5}, // owner self and peer, for each, and kept for the collapsed one
		{"peer fallbacks", s.peerFallbacks, 2},
		{"peer requests", s.peerRequests, len(collapse.Outcomes) + len(replay.Outcomes)},
	} {
		if got := testutil.CollectAndCount(c.vec); got != c.want {
			t.Errorf("%s: %d series, want %d", c.name, got, c.want)
		}
	}
}

func TestRecorder_StreamRequestsAndGauges(t *testing.T) {
	const feed = "/hello.v1.Greeter/StreamHellos"
	rules := map[string]policy.Rule{feed: {Action: policy.Replay}}
	s, reg := newTestRecorderWith(t, Sources{
		Methods: func() map[string]policy.Rule { return rules },
		Streams: func() replay.Stats { return replay.Stats{Live: 1, Held: 2, Readers: 30, Bytes: 4096} },
	})
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	s.ObserveRequest(context.Background(), proxy.RouteStream, feed, "joined", codes.OK)
	for _, o := range replay.Outcomes {
		want := 0.0
		if o == replay.Join {
			want = 1
		}
		if got := testutil.ToFloat64(s.streamRequests.WithLabelValues(feed, o.String(), "OK")); got != want {
			t.Errorf("stream requests{%s} = %v, want %v", o, got, want)
		}
	}
	want := `
# HELP collapser_stream_readers Callers reading a live replayed stream now.
# TYPE collapser_stream_readers gauge
collapser_stream_readers 30
# HELP collapser_stream_recorded_bytes Bytes the records of replayed streams hold as the Go heap allocates them: kept records whole, live records' messages.
# TYPE collapser_stream_recorded_bytes gauge
collapser_stream_recorded_bytes 4096
# HELP collapser_streams_held Ended replayed streams kept to be replayed whole.
# TYPE collapser_streams_held gauge
collapser_streams_held 2
# HELP collapser_streams_live Replayed streams reading their backend stream now.
# TYPE collapser_streams_live gauge
collapser_streams_live 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "collapser_stream_readers", "collapser_stream_recorded_bytes", "collapser_streams_held", "collapser_streams_live"); err != nil {
		t.Error(err)
	}
}

func TestRecorder_FreshnessBySourceStartsAtZeroForCollapsedMethods(t *testing.T) {
	rules := map[string]policy.Rule{sayHello: {Action: policy.Collapse}, "/a.B/Put": {Action: policy.Passthrough}}
	s, reg := newTestRecorderWith(t, Sources{Methods: func() map[string]policy.Rule { return rules }})
	if _, err := reg.Gather(); err != nil { // the series of a known method start at 0
		t.Fatal(err)
	}
	s.ObserveFreshness(sayHello, proxy.FreshnessBackend)
	s.ObserveFreshness(sayHello, proxy.FreshnessBackend)
	s.ObserveFreshness(sayHello, proxy.FreshnessCapped)
	want := `
# HELP collapser_answer_freshness_total Shared answers of collapsed unary calls (successes, and the errors a rule keeps: cacheCodes), by method and what set how long each is served (source: policy, the rule's own windows; backend, the answer's cache-control; backend_capped, its cache-control cut to the rule's maxTTL).
# TYPE collapser_answer_freshness_total counter
collapser_answer_freshness_total{method="/hello.v1.Greeter/SayHello",source="backend"} 2
collapser_answer_freshness_total{method="/hello.v1.Greeter/SayHello",source="backend_capped"} 1
collapser_answer_freshness_total{method="/hello.v1.Greeter/SayHello",source="policy"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "collapser_answer_freshness_total"); err != nil {
		t.Error(err)
	}
}

func TestRecorder_PeerMembersAndForwarding(t *testing.T) {
	state := PeerState{Members: 3, Forwarded: map[string]bool{sayHello: false}}
	rules := map[string]policy.Rule{sayHello: {Action: policy.Collapse}, "/hello.v1.Greeter/GetGreeting": {Action: policy.Collapse}}
	_, reg := newTestRecorderWith(t, Sources{Peers: func() PeerState { return state }, Methods: func() map[string]policy.Rule { return rules }})
	want := `
# HELP collapser_peer_members Replicas the peer connection last resolved, this one included (resolved again every 2 s, and when a connection to one is lost).
# TYPE collapser_peer_members gauge
collapser_peer_members 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "collapser_peer_members"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "collapser_peer_forwarding" {
			for _, m := range f.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	if len(got) != 2 || got[sayHello] != 0 || got["/hello.v1.Greeter/GetGreeting"] != 1 {
		t.Errorf("collapser_peer_forwarding = %v, want SayHello 0 (counted) and GetGreeting 1 (not counted yet: forwarded)", got)
	}
}

func TestRecorder_PeerLeases(t *testing.T) {
	for _, tt := range []struct {
		name   string
		leases *coherence.Stats
		want   string
	}{
		{"no peer token: no leases", nil, ""},
		{"every lease lasts", &coherence.Stats{Held: 2, Coherent: true, Lapses: 1}, "collapser_peer_coherent 1\ncollapser_peer_lease_lapses_total 1\ncollapser_peer_leases 2\n"},
		{"a lease ran out", &coherence.Stats{Held: 2, Lapses: 2}, "collapser_peer_coherent 0\ncollapser_peer_lease_lapses_total 2\ncollapser_peer_leases 2\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, reg := newTestRecorderWith(t, Sources{Peers: func() PeerState { return PeerState{Members: 3, Leases: tt.leases} }})
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, f := range families {
				switch name := f.GetName(); name {
				case "collapser_peer_coherent", "collapser_peer_leases":
					fmt.Fprintf(&got, "%s %v\n", name, f.GetMetric()[0].GetGauge().GetValue())
				case "collapser_peer_lease_lapses_total":
					fmt.Fprintf(&got, "%s %v\n", name, f.GetMetric()[0].GetCounter().GetValue())
				}
			}
			if got.String() != tt.want {
				t.Errorf("leases:\n%s\nwant:\n%s", got.String(), tt.want)
			}
		})
	}
}
