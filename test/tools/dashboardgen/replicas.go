package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// replicasPanels returns the panels of the Replicas row, collapsing across
// pods: calls forwarded to their key's owner, the share other pods answered,
// fallbacks, calls served for peers, each pod's backend calls, the replicas
// each pod lists, which methods are forwarded, the leases each holds, and
// the keys taken over from their previous owners.
func replicasPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		countStat(31, "Forwarded calls", l.at(0, 0, 6, 4)).
			Description(`Shared calls and replayed streams the sidecars' callers led, with peers, by where they ` +
				`went (collapser_peer_calls_total, summed over the pods, fallbacks included): one per leader, ` +
				`answered by another pod that owns the key (owner="peer"), made by the sidecar itself when it ` +
				`owns the key (self, no hop), made here though another pod owns it because its method is not ` +
				`forwarded (kept: see Forwarded methods), or none when no owner answered. 0 without peers ` +
				`(one pod, or peers.enabled=false). ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_peer_calls_total{method=~"$method"}[$__range] anchored)) or vector(0)`, "forwarded"),
			)),
		countStat(32, "Forwarded share (other pods)", l.at(6, 0, 6, 4)).
			Description(`Forwarded calls that another pod answered as the owner of their key / requests that led a ` +
				`shared call or a replayed stream (collapser_peer_calls_total{owner="peer"} / ` +
				`collapser_requests_total and collapser_stream_requests_total {outcome="leader"}, each ` +
				`summed over the pods and exact over the time range): the share of the shared calls and ` +
				`streams the callers started that crossed to another pod. With N pods and many keys about ` +
				`(N-1)/N while the method is forwarded: a pod owns the rest itself (owner="self"); less once ` +
				`its calls are kept (owner="kept"). ` +
				`0 with one pod or without peers. Background refreshes (staleWhileRevalidate) and leaders ` +
				`served stale after their call failed are forwarded without counting as leaders, so with ` +
				`stale serving it can pass 100%. Calls that reached no owner are not in it: see Fallbacks. ` +
				`Empty without leaders.`).
			Unit(units.PercentUnit).
			Decimals(1).
			Min(0).
			Targets(queries(
				instant(`(sum(increase(collapser_peer_calls_total{method=~"$method", owner="peer"}[$__range] anchored)) or vector(0))
  / (((sum(increase(collapser_requests_total{method=~"$method", outcome="leader"}[$__range] anchored)) or vector(0))
    + (sum(increase(collapser_stream_requests_total{method=~"$method", outcome="leader"}[$__range] anchored)) or vector(0))) > 0)`, "answered by other pods"),
			)),
		countStat(33, "Fallbacks to the local backend", l.at(12, 0, 6, 4)).
			Description(`Forwarded calls that did not reach an owner (the pod was gone, refused the connection or ` +
				`the connection broke) and were made to the forwarding pod's own backend instead ` +
				`(collapser_peer_fallbacks_total). Above 0 while pods come and go; a steady rise means the ` +
				`pods cannot reach each other's peer port. ` +
				exactTotal).
			Thresholds(thresholds("green", from(1, "orange"))).
			Targets(queries(
				instant(`sum(increase(collapser_peer_fallbacks_total{method=~"$method"}[$__range] anchored)) or vector(0)`, "fallbacks"),
			)),
		countStat(34, "Calls served for peers", l.at(18, 0, 6, 4)).
			Description(`Forwarded calls the owners of their keys served (collapser_peer_requests_total, every ` +
				`outcome and code), summed over the pods: one per forwarded call that reached its owner ` +
				`(Forwarded calls minus Fallbacks, unless a caller gave up while its call was on the way). ` +
				`Not in Requests: each is already counted there as its forwarder's caller's request. An ` +
				`owner collapses the calls of every pod for a key into one backend call. ` +
				exactTotal).
			Targets(queries(
				instant(`sum(increase(collapser_peer_requests_total{method=~"$method"}[$__range] anchored)) or vector(0)`, "served for peers"),
			)),
		countStat(35, "Backend calls per pod", l.at(0, 4, 8, 8)).
			Description(`Backend calls each pod made in the time range: counted by its sidecar ` +
				`(collapser_backend_calls_total, its callers' calls and those it made as owner for peers) ` +
				`and by the hello backend itself (hello_requests_total). With peers a key's calls are made ` +
				`by its owner, so a burst of one key costs one call in one pod. A pod is the instance label ` +
				`of the chart's Prometheus (each pod's address from the metrics Service's DNS records; the ` +
				`sidecar's on port 2112, the hello backend's on its metrics port). ` +
				exactTotal).
			TextMode(common.BigValueTextModeValueAndName).
			Targets(queries(
				instant(`sum by (instance) (increase(collapser_backend_calls_total{method=~"$method"}[$__range] anchored))`, "sidecar {{instance}}"),
				instant(`sum by (instance) (increase(hello_requests_total{method=~"$method"}[$__range] anchored))`, "hello backend {{instance}}"),
			)),
		graph(36, "Backend calls/s per pod", l.at(8, 4, 8, 8), units.RequestsPerSecond).
			Description(`Calls to the backend per second in each pod, counted by its sidecar and by the hello ` +
				`backend itself. A pod is the instance label of the chart's Prometheus (each pod's address ` +
				`from the metrics Service's DNS records; the sidecar's on port 2112, the hello backend's on ` +
				`its metrics port).`).
			Targets(queries(
				series(`sum by (instance) (rate(collapser_backend_calls_total{method=~"$method"}[$__rate_interval]))`, "sidecar {{instance}}"),
				series(`sum by (instance) (rate(hello_requests_total{method=~"$method"}[$__rate_interval]))`, "hello backend {{instance}}"),
			)),
		graph(37, "Forwarded and peer-served calls/s", l.at(16, 4, 8, 8), units.RequestsPerSecond).
			Description(`Leaders' calls by who answered (owner: peer, another pod; self, the pod itself, which ` +
				`owns the key; kept, made here though another pod owns the key, its method not forwarded; ` +
				`none, no owner's answer came), those of them that fell back to the local backend, and the ` +
				`calls owners served for peers by outcome, per second, summed over the pods. No data ` +
				`without peers.`).
			Targets(queries(
				series(`sum by (owner) (rate(collapser_peer_calls_total{method=~"$method"}[$__rate_interval]))`, "forwarded, answered by {{owner}}"),
				series(`sum(rate(collapser_peer_fallbacks_total{method=~"$method"}[$__rate_interval]))`, "fell back to the local backend"),
				series(`sum by (outcome) (rate(collapser_peer_requests_total{method=~"$method"}[$__rate_interval]))`, "served for peers: {{outcome}}"),
			)),
		graph(38, "Replicas each pod lists", l.at(0, 12, 12, 8), units.Short).
			Description(`The replicas each pod's peer connection last resolved, itself included ` +
				`(collapser_peer_members). Each pod resolves the peers every 2 s (and when a connection to one ` +
				`is lost), so the lines meet within seconds of a pod joining or leaving; while they differ, ` +
				`the keys that moved have two owners. No data without peers.`).
			Min(0).
			Targets(queries(
				series(`max by (instance) (collapser_peer_members)`, "{{instance}}"),
			)),
		graph(39, "Forwarded methods", l.at(12, 12, 12, 8), units.Short).
			Description(`Per method, the pods that forward its calls of keys another pod owns ` +
				`(collapser_peer_forwarding, summed over the pods). A pod stops forwarding a method when at ` +
				`most 1 in 20 of its forwarded calls shared the owner's backend call over its recent ` +
				`windows of 10 s (distinct keys gain nothing from the hop), and forwards only a sample of 1 ` +
				`in 16 keys, the same on every pod, until they share again. Every method starts forwarded. ` +
				`No data without peers, or before a call was forwarded.`).
			Min(0).
			Targets(queries(
				series(`sum by (method) (collapser_peer_forwarding{method=~"$method"})`, "{{method}}"),
			)),
		graph(54, "Leases each pod holds", l.at(0, 20, 12, 8), units.Short).
			Description(`The replicas each pod holds a lease from (collapser_peer_leases): every second each ` +
				`pod asks every other for the purges it missed, and each answer is a lease of 10 s. A pod ` +
				`whose lease from another ran out (it could not reach it) takes back everything it kept, ` +
				`and shares and keeps nothing until it reaches every pod again: see Lease lapses. With N ` +
				`pods each line sits at N-1, and the pods that serve what they keep (collapser_peer_coherent, ` +
				`summed) at N. No data without peers or without a peer token.`).
			Min(0).
			Targets(queries(
				series(`max by (instance) (collapser_peer_leases)`, "{{instance}}"),
				series(`sum(collapser_peer_coherent)`, "pods that serve what they keep"),
			)),
		countStat(55, "Lease lapses", l.at(12, 20, 12, 8)).
			Description(`Times a pod's lease from another ran out, or it found itself not among the replicas ` +
				`listed, in the time range (collapser_peer_lease_lapses_total, summed over the pods): each time, the pod took back ` +
				`everything it kept, and its callers' calls were calls of their own (collapser_peer_coherent ` +
				`0) until it reached every pod again. A purge waits at most one lease for a pod it cannot ` +
				`reach, and names it (PurgeResponse.missed). 0 while the pods reach each other. ` +
				exactTotal).
			Thresholds(thresholds("green", from(1, "orange"))).
			Targets(queries(
				instant(`sum(increase(collapser_peer_lease_lapses_total[$__range] anchored)) or vector(0)`, "lapses"),
			)),
		graph(57, "Keys taken over/s by result", l.at(0, 28, 24, 6), units.RequestsPerSecond).
			Description(`Keys a pod owns since the pods last changed (one joined or left: a rollout), whose ` +
				`previous owner it asked for the answer it held before making a call, per second, summed ` +
				`over the pods (collapser_handoffs_total): taken, the answer was handed over and no backend ` +
				`call made; none, the previous owner held no fresh answer; failed, it could not be asked or ` +
				`did not answer in time (it left). Asked for 30 s after each change, for a key's first ` +
				`call there (a replayed stream's: its kept record), and not for 10 s after a purge. A rollout that does not empty the cache shows taken here and no ` +
				`rise in Backend calls/s per pod. No data without peers.`).
			Targets(queries(
				series(`sum by (result) (rate(collapser_handoffs_total{method=~"$method"}[$__rate_interval]))`, "{{result}}"),
			)),
	}
}
