package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/demo"
)

const (
	// streamHellos is the streaming method the policy replays.
	streamHellos = hellov1.Greeter_StreamHellos_FullMethodName
	// streamHeld is the TTL of StreamHellos's rule: how long an ended
	// stream is kept and replayed whole. Longer than a scrape interval, so
	// that Prometheus sees it held.
	streamHeld = time.Minute
	// streamBurst identical StreamHellos calls of streamMessages replies
	// streamInterval apart share one backend stream. It lasts the backend's
	// latency and 19 intervals, about 12.5 s: two scrapes or more see it
	// live, with every caller reading it.
	streamBurst    = 100
	streamMessages = 20
	streamInterval = 500 * time.Millisecond
	// streamReplays identical calls after its end are replayed from the kept
	// stream, with no backend stream.
	streamReplays = 10
)

// streamRun is what the stream bursts did, from the demo's reports.
type streamRun struct {
	shared, replayed *demo.Report
}

// runStreams sends the stream burst, then the replays, and checks what the
// callers got: every reply of one backend stream.
func runStreams(t *testing.T, target, backendMetrics string) streamRun {
	t.Helper()
	call := func(name string, requests int) *demo.Report {
		r := runDemo(t, demo.Config{Target: target, BackendMetrics: backendMetrics, Requests: requests, Concurrency: requests, Name: "streams",
			Stream: true, StreamMessages: streamMessages, StreamIntervalMs: int(streamInterval.Milliseconds()), Timeout: time.Minute})
		incomplete := 0
		for _, b := range r.Bursts {
			incomplete += b.Incomplete
		}
		t.Logf("%s: %d StreamHellos calls of %d replies in %v, %d errors %v, %d incomplete; the backend's own count of streams: %d",
			name, r.Requests, streamMessages, r.Duration.Round(time.Millisecond), r.Errors, r.ErrorsByCode, incomplete, r.BackendCalls)
		if r.Errors != 0 || incomplete != 0 {
			t.Errorf("%s: %d errors, %d callers without every reply", name, r.Errors, incomplete)
		}
		return r
	}
	run := streamRun{shared: call("shared stream", streamBurst)}
	run.replayed = call("replays of the kept stream", streamReplays)
	if run.shared.BackendCalls != 1 || run.replayed.BackendCalls != 0 {
		t.Errorf("backend streams: %d for the burst, %d for the replays; want 1 and 0", run.shared.BackendCalls, run.replayed.BackendCalls)
	}
	return run
}

// requests is how many stream calls the run made.
func (r streamRun) requests() int { return r.shared.Requests + r.replayed.Requests }

// backendStreams is the backend's own count of the run's streams.
func (r streamRun) backendStreams() int64 { return r.shared.BackendCalls + r.replayed.BackendCalls }

// idleStreamExpectations are what the Streams row shows before any stream
// call: StreamHellos's series at 0, exported since the sidecar started.
func idleStreamExpectations() []expectation {
	none := source{"no stream call yet", 0}
	return []expectation{
		expect("Stream requests by outcome", outcomes(map[string]float64{"leader": 0, "joined": 0, "replayed": 0, "own": 0})),
		expect("Backend streams: sidecar", total(none)),
		expect("Backend streams: backend's own count", total(none)),
		expect("Stream requests/s by outcome", peakIs("A", 0)),
		expect("Live and held streams", peakIs("A", 0), peakIs("B", 0)),
		expect("Stream readers", peakIs("A", 0)),
		expect("Recorded stream bytes", peakIs("A", 0)),
	}
}

// streamExpectations are what the dashboard shows after the unary bursts
// and the stream run: the Streams row and the totals that count streams.
func streamExpectations(burst, failing *demo.Report, run streamRun, truth int64) []expectation {
	requests := float64(burst.Requests + failing.Requests + run.requests())
	backend := float64(burst.BackendCalls + failing.BackendCalls + run.backendStreams())
	streams := source{"the demo's stream reports (the backend's own count)", float64(run.backendStreams())}
	return []expectation{
		expect("Requests", total(source{"the demo sent, streams included", requests})),
		expect("Backend calls: sidecar", total(source{"the demo's reports, streams included", backend})),
		expect("Backend calls: backend's own count", total(source{"the backend's own counts of SayHello and StreamHellos", float64(truth + run.backendStreams())})),
		expect("Backend-load reduction", func(v view, panel string) error {
			// No request failed before a path was chosen: every one counts.
			got, err := v.total(panel)
			if want := 1 - backend/requests; err == nil && math.Abs(got-want) > 1e-9 {
				err = fmt.Errorf("shows %v, want 1 - %v backend calls / %v requests = %v", got, backend, requests, want)
			}
			return err
		}),
		expect("Stream requests by outcome", outcomes(map[string]float64{
			"leader": 1, "joined": float64(run.shared.Requests - 1), "replayed": float64(run.replayed.Requests), "own": 0})),
		expect("Backend streams: sidecar", total(streams)),
		expect("Backend streams: backend's own count", total(streams)),
		expect("Stream requests/s by outcome", sawRate("A", float64(run.requests()))),
		// Scraped during the shared stream, and after it while it is kept.
		expect("Live and held streams", peakIs("A", 1), peakIs("B", 1)),
		expect("Stream readers", peakIs("A", float64(run.shared.Requests))),
		expect("Recorded stream bytes", func(v view, panel string) error {
			peak, err := v.peak(panel, "A")
			if err == nil && peak <= 0 {
				err = fmt.Errorf("peaks at %v bytes, want more than 0: %d replies were recorded", peak, streamMessages)
			}
			return err
		}),
	}
}
