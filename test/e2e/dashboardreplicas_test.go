package e2e

import (
	"errors"
	"fmt"
	"net"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/test/panelquery"
)

// onePodExpectations are what the Replicas row shows in a release of one
// pod without peers, after the demo's burst: that pod's backend calls,
// nothing forwarded.
func onePodExpectations(burst *demo.Report, truth int64) []expectation {
	backend := float64(burst.BackendCalls)
	none := source{"one pod, no peers", 0}
	return []expectation{
		{[]string{"Backend calls per pod"}, perPodCalls(1, source{"the demo's report", backend}, source{"the backend's own count", float64(truth)})},
		{[]string{"Backend calls/s per pod"}, func(v view) error {
			const panel = "Backend calls/s per pod"
			return errors.Join(sawRate(panel, "A", backend)(v), sawRate(panel, "B", backend)(v))
		}},
		{[]string{"Forwarded calls"}, total("Forwarded calls", none)},
		{[]string{"Forwarded share"}, total("Forwarded share", none)},
		{[]string{"Fallbacks to the local backend"}, total("Fallbacks to the local backend", none)},
		{[]string{"Calls served for peers"}, total("Calls served for peers", none)},
		{[]string{"Forwarded and peer-served calls/s"}, noSeries("Forwarded and peer-served calls/s", "A", "B", "C")},
	}
}

// perPodCalls expects Backend calls per pod to show pods pods, each with the
// same count from its sidecar (A) and its hello backend (B), and these sums.
func perPodCalls(pods int, sidecar, backend source) func(view) error {
	const panel = "Backend calls per pod"
	return func(v view) error {
		a, errA := byPod(v.results[viewKey(panel, "A")])
		b, errB := byPod(v.results[viewKey(panel, "B")])
		if err := errors.Join(errA, errB); err != nil {
			return err
		}
		if len(a) != pods || len(b) != pods {
			return fmt.Errorf("sidecars %v, backends %v: want %d pods each", a, b, pods)
		}
		var sumA, sumB float64
		for pod, n := range a {
			if m, ok := b[pod]; !ok || m != n {
				return fmt.Errorf("pod %s: its sidecar shows %v, its backend %v (sidecars %v, backends %v)", pod, n, m, a, b)
			}
			sumA, sumB = sumA+n, sumB+b[pod]
		}
		if sumA != sidecar.value || sumB != backend.value {
			return fmt.Errorf("sidecars %v in all, backends %v; %s %v, %s %v", sumA, sumB, sidecar.name, sidecar.value, backend.name, backend.value)
		}
		return nil
	}
}

// byPod maps a per-instance result to its pods: the host of the instance
// (the chart's Prometheus names a pod's sidecar and backend by one host
// and their two ports).
func byPod(series []panelquery.Series) (map[string]float64, error) {
	out := map[string]float64{}
	for _, s := range series {
		host, _, err := net.SplitHostPort(s.Labels["instance"])
		if err != nil {
			return nil, fmt.Errorf("instance %q: %v", s.Labels["instance"], err)
		}
		out[host] += lastValue(s)
	}
	return out, nil
}
