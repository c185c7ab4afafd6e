package main

import (
	"fmt"
	"strings"
	"time"
)

// scenario is one comparison: the backend's latency, how collapser is set
// up, and the load every target gets.
type scenario struct {
	ID      string        `json:"id"`    // for --scenarios
	Short   string        `json:"short"` // the table's
	Title   string        `json:"title"`
	Latency time.Duration `json:"backend_latency_ns"`
	// DefaultCollapse is collapser's COLLAPSER_DEFAULT_COLLAPSE; "" keeps
	// its default (auto: SayHello, NO_SIDE_EFFECTS, is collapsed).
	DefaultCollapse string `json:"collapser_default_collapse,omitempty"`
	// Distinct gives every request of a run its own payload.
	Distinct bool `json:"distinct_payloads"`
	// Burst sends each run's calls all at once over several connections
	// instead of a steady load on one connection.
	Burst bool `json:"burst"`
	// Unpinned runs every process on every CPU whatever the pinning: Go
	// servers then run with GOMAXPROCS = all CPUs, which changes their CPU
	// cost per call.
	Unpinned bool `json:"unpinned,omitempty"`
	// Peers adds a target of that many collapsers peered with each other by
	// a static list, called through the first; 0: none.
	Peers int `json:"collapser_peers,omitempty"`
	// PeerTLS peers them over mutual TLS, each with its own certificate of
	// one identity from one CA, as the chart's replicas are.
	PeerTLS bool `json:"collapser_peer_tls,omitempty"`
	// CollapserOnly leaves nginx and the plain proxy out: the scenario
	// compares collapser set up in different ways.
	CollapserOnly bool `json:"collapser_only,omitempty"`
}

// missPeers is how many collapsers the miss-peers scenario peers.
const missPeers = 3

// allScenarios are the scenarios in the order they run.
var allScenarios = []scenario{
	{ID: "passthrough", Short: "pass-through", Title: "pass-through: distinct payloads, 0 ms backend, collapser with COLLAPSER_DEFAULT_COLLAPSE=none", DefaultCollapse: "none", Distinct: true},
	{ID: "passthrough-unpinned", Short: "pass-through, unpinned", Title: "pass-through, unpinned: as pass-through, every process free to run on every CPU", DefaultCollapse: "none", Distinct: true, Unpinned: true},
	{ID: "miss", Short: "miss", Title: "miss: distinct payloads, 0 ms backend, collapser's defaults (SayHello collapsed, led and cached 100 ms; every call a new key)", Distinct: true},
	{ID: "miss-peers", Short: fmt.Sprintf("miss, %d peers", missPeers), Title: fmt.Sprintf("miss with %d peers: as miss, against a lone collapser and %d collapsers peered by a static list, called through the first (proxy CPU summed over the %d); nginx and plain left out (the miss scenario has them)", missPeers, missPeers, missPeers), Distinct: true, Peers: missPeers, CollapserOnly: true},
	{ID: "miss-peers-mtls", Short: fmt.Sprintf("miss, %d peers, mTLS", missPeers), Title: fmt.Sprintf("miss with %d peers over mutual TLS: as miss with %d peers, the peers' calls over mutual TLS (the chart's default)", missPeers, missPeers), Distinct: true, Peers: missPeers, PeerTLS: true, CollapserOnly: true},
	{ID: "hit-0ms", Short: "hit, 0 ms", Title: "hit path: identical payloads, 0 ms backend, collapser's defaults (SayHello collapsed, 100 ms TTL)"},
	{ID: "hit-50ms", Short: "hit, 50 ms", Title: "hit path: identical payloads, 50 ms backend, collapser's defaults", Latency: 50 * time.Millisecond},
	{ID: "burst", Short: "burst", Title: "burst: identical calls all at once, 50 ms backend, collapser's defaults", Latency: 50 * time.Millisecond, Burst: true},
}

// collapserAction is the action collapser's metrics must give SayHello
// before the scenario may start.
func (s scenario) collapserAction() string {
	if s.DefaultCollapse == "none" {
		return "passthrough"
	}
	return "collapse"
}

// expectsCollapse says whether collapser must make fewer backend calls
// than calls: it collapses SayHello and the payloads repeat. With distinct
// payloads every call is a key of its own and makes one backend call.
func (s scenario) expectsCollapse() bool {
	return s.collapserAction() == "collapse" && !s.Distinct
}

// cpus returns the taskset lists of ghz and of the servers in s.
func (c config) cpus(s scenario) (client, server string) {
	if s.Unpinned {
		return "", ""
	}
	return c.clientCPUs, c.serverCPUs
}

// scenarioIDs returns the ids of allScenarios.
func scenarioIDs() []string {
	ids := make([]string, len(allScenarios))
	for i, s := range allScenarios {
		ids[i] = s.ID
	}
	return ids
}

// selectScenarios returns the scenarios named in a comma-separated list of
// ids, in their running order; for "", all of them but the unpinned ones
// when nothing is pinned (they would repeat their pinned twin).
func selectScenarios(list string, pinned bool) ([]scenario, error) {
	if list == "" {
		var out []scenario
		for _, s := range allScenarios {
			if pinned || !s.Unpinned {
				out = append(out, s)
			}
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		want[strings.TrimSpace(id)] = true
	}
	var out []scenario
	for _, s := range allScenarios {
		if want[s.ID] {
			out = append(out, s)
			delete(want, s.ID)
		}
	}
	for id := range want {
		return nil, fmt.Errorf("--scenarios: no scenario %q (have %s)", id, strings.Join(scenarioIDs(), ", "))
	}
	return out, nil
}

// load is what one ghz run sends.
type load struct {
	concurrency int
	connections int
	duration    time.Duration // a steady run's length; 0 for a burst
	requests    int           // a burst's calls
	distinct    bool
}

// loadOf returns the load of a recorded run of s, or of its warm-up run.
func (c config) loadOf(s scenario, warmup bool) load {
	if s.Burst {
		return load{concurrency: c.burst.requests, connections: c.burst.connections, requests: c.burst.requests, distinct: s.Distinct}
	}
	d := c.duration
	if warmup {
		d = c.warmup
	}
	return load{concurrency: c.concurrency, connections: 1, duration: d, distinct: s.Distinct}
}
