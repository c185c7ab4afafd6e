package demo

import (
	"slices"
	"time"

	"google.golang.org/grpc/codes"
)

// Latency summarises the latencies of successful requests.
type Latency struct {
	P50, P90, P99, Max time.Duration
}

// Burst is what one burst of identical requests produced.
type Burst struct {
	// Caller is who the backend should name in every reply: hello.Caller of
	// the burst's authorization.
	Caller string
	// Requests is how many requests were sent; Errors how many failed.
	Requests, Errors int
	// ErrorsByCode counts failed requests by gRPC code name.
	ErrorsByCode map[string]int
	// Latency summarises the successful requests.
	Latency Latency
	// Duration is the burst's wall time, first send to last answer.
	Duration time.Duration
	// Replies maps each caller named in a successful reply to the set of call
	// numbers it came with; requests sharing a call number were served by one
	// backend call.
	Replies map[string]map[int64]struct{}
	// Mismatched counts successful replies naming a caller other than Caller:
	// a reply computed for another credential. It must be 0.
	Mismatched int
	// Incomplete counts successful streams whose replies were not all the
	// messages asked for, identical and of one backend call. It must be 0.
	Incomplete int
	// CacheStatus counts the requests by how the answers said they were
	// served: their cache-status entries (RFC 9211), ttl left out; none
	// when the target adds none.
	CacheStatus map[string]int
}

// DistinctCalls is how many distinct backend calls served the burst's
// successful requests, judged by the replies' call numbers.
func (b *Burst) DistinctCalls() int {
	n := 0
	for _, calls := range b.Replies {
		n += len(calls)
	}
	return n
}

// Report is the outcome of a demo run: every burst, and the backend's own
// count of calls of the method the bursts called over the run.
type Report struct {
	// Requests and Errors add up all bursts.
	Requests, Errors int
	// ErrorsByCode adds up all bursts' ErrorsByCode.
	ErrorsByCode map[string]int
	// Method is the full name of the method the bursts called and the
	// backend counted: Greeter's SayHello, or StreamHellos with Config.Stream.
	Method string
	// BackendCalls is the backend's count of Method after the run minus
	// before it: the truth about how many requests reached the backend
	// (including any other client's calls of Method made meanwhile).
	BackendCalls int64
	// CollapseRatio is the share of successful requests that cost no backend
	// call: 1 - BackendCalls/successful requests, clamped to [0, 1], 0 when no
	// request succeeded. Without collapsing it is 0; one backend call for 10000
	// successful requests gives 0.9999.
	CollapseRatio float64
	// Latency summarises the successful requests of all bursts.
	Latency Latency
	// Duration is the run's wall time, first send to last answer.
	Duration time.Duration
	// Bursts holds each burst, the first one first.
	Bursts []Burst
}

// summarise builds a Burst from its requests' results.
// stream says the results are of StreamHellos calls.
func summarise(caller string, stream bool, results []result, d time.Duration) Burst {
	b := Burst{
		Caller:       caller,
		Requests:     len(results),
		ErrorsByCode: map[string]int{},
		Duration:     d,
		Replies:      map[string]map[int64]struct{}{},
		CacheStatus:  map[string]int{},
	}
	for _, r := range results {
		if r.status != "" {
			b.CacheStatus[r.status]++
		}
		if r.code != codes.OK {
			b.Errors++
			b.ErrorsByCode[r.code.String()]++
			continue
		}
		if r.caller != caller {
			b.Mismatched++
		}
		if stream && !r.complete {
			b.Incomplete++
		}
		if b.Replies[r.caller] == nil {
			b.Replies[r.caller] = map[int64]struct{}{}
		}
		b.Replies[r.caller][r.call] = struct{}{}
	}
	b.Latency = latencyOf(okLatencies(results))
	return b
}

// okLatencies returns the latencies of the successful results.
func okLatencies(results []result) []time.Duration {
	var out []time.Duration
	for _, r := range results {
		if r.code == codes.OK {
			out = append(out, r.latency)
		}
	}
	return out
}

// newReport adds up bursts of calls of method and derives the collapse ratio
// from backendCalls; latencies are those of every successful request.
func newReport(method string, bursts []Burst, backendCalls int64, d time.Duration, latencies []time.Duration) *Report {
	r := &Report{ErrorsByCode: map[string]int{}, Method: method, BackendCalls: backendCalls, Duration: d, Bursts: bursts}
	for _, b := range bursts {
		r.Requests += b.Requests
		r.Errors += b.Errors
		for code, n := range b.ErrorsByCode {
			r.ErrorsByCode[code] += n
		}
	}
	r.CollapseRatio = collapseRatio(backendCalls, r.Requests-r.Errors)
	r.Latency = latencyOf(latencies)
	return r
}

// collapseRatio is 1 - backendCalls/succeeded clamped to [0, 1]; 0 when
// nothing succeeded.
func collapseRatio(backendCalls int64, succeeded int) float64 {
	if succeeded <= 0 {
		return 0
	}
	return min(max(1-float64(backendCalls)/float64(succeeded), 0), 1)
}

// latencyOf summarises latencies (in any order).
func latencyOf(latencies []time.Duration) Latency {
	sorted := slices.Sorted(slices.Values(latencies))
	return Latency{
		P50: Percentile(sorted, 50),
		P90: Percentile(sorted, 90),
		P99: Percentile(sorted, 99),
		Max: Percentile(sorted, 100),
	}
}
