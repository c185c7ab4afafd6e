package demo

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// WriteText writes r for a person to read.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "requests        %d (errors %d%s)\n", r.Requests, r.Errors, codeList(r.ErrorsByCode))
	fmt.Fprintf(&b, "backend calls   %d (the backend's own %s count)\n", r.BackendCalls, path.Base(r.Method))
	fmt.Fprintf(&b, "collapse ratio  %.4f\n", r.CollapseRatio)
	fmt.Fprintf(&b, "latency         %s\n", latencyText(r.Latency))
	fmt.Fprintf(&b, "duration        %s\n", r.Duration.Round(time.Millisecond))
	for i, burst := range r.Bursts {
		fmt.Fprintf(&b, "burst %d caller %q: requests %d, errors %d, distinct backend calls %d, mismatched replies %d, incomplete streams %d, %s\n",
			i+1, burst.Caller, burst.Requests, burst.Errors, burst.DistinctCalls(), burst.Mismatched, burst.Incomplete, latencyText(burst.Latency))
		// The commonest first.
		entries := slices.SortedFunc(maps.Keys(burst.CacheStatus), func(x, y string) int {
			return cmp.Or(burst.CacheStatus[y]-burst.CacheStatus[x], strings.Compare(x, y))
		})
		for _, e := range entries {
			fmt.Fprintf(&b, "  %6d × cache-status: %s\n", burst.CacheStatus[e], e)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteJSON writes r as one indented JSON object (see MarshalJSON).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// MarshalJSON encodes r with the contract's keys (requests, errors,
// backend_calls, collapse_ratio, latency_p50_ms, latency_p90_ms,
// latency_p99_ms, latency_max_ms) plus errors_by_code, duration_ms and
// "bursts", one object per burst. Durations are milliseconds.
func (r *Report) MarshalJSON() ([]byte, error) {
	type burstJSON struct {
		Caller        string         `json:"caller"`
		Requests      int            `json:"requests"`
		Errors        int            `json:"errors"`
		ErrorsByCode  map[string]int `json:"errors_by_code"`
		DistinctCalls int            `json:"distinct_calls"`
		Mismatched    int            `json:"mismatched_replies"`
		Incomplete    int            `json:"incomplete_streams"`
		CacheStatus   map[string]int `json:"cache_status"`
		latencyJSON
		DurationMS float64 `json:"duration_ms"`
	}
	out := struct {
		Requests      int            `json:"requests"`
		Errors        int            `json:"errors"`
		ErrorsByCode  map[string]int `json:"errors_by_code"`
		BackendCalls  int64          `json:"backend_calls"`
		CollapseRatio float64        `json:"collapse_ratio"`
		latencyJSON
		DurationMS float64     `json:"duration_ms"`
		Bursts     []burstJSON `json:"bursts"`
	}{
		Requests: r.Requests, Errors: r.Errors, ErrorsByCode: r.ErrorsByCode,
		BackendCalls: r.BackendCalls, CollapseRatio: r.CollapseRatio,
		latencyJSON: newLatencyJSON(r.Latency), DurationMS: ms(r.Duration),
		Bursts: make([]burstJSON, 0, len(r.Bursts)),
	}
	for _, b := range r.Bursts {
		out.Bursts = append(out.Bursts, burstJSON{
			Caller: b.Caller, Requests: b.Requests, Errors: b.Errors, ErrorsByCode: b.ErrorsByCode,
			DistinctCalls: b.DistinctCalls(), Mismatched: b.Mismatched, Incomplete: b.Incomplete, CacheStatus: b.CacheStatus,
			latencyJSON: newLatencyJSON(b.Latency), DurationMS: ms(b.Duration),
		})
	}
	return json.Marshal(out)
}

// latencyJSON holds the latency keys shared by a report and its bursts.
type latencyJSON struct {
	P50 float64 `json:"latency_p50_ms"`
	P90 float64 `json:"latency_p90_ms"`
	P99 float64 `json:"latency_p99_ms"`
	Max float64 `json:"latency_max_ms"`
}

func newLatencyJSON(l Latency) latencyJSON {
	return latencyJSON{P50: ms(l.P50), P90: ms(l.P90), P99: ms(l.P99), Max: ms(l.Max)}
}

// ms converts d to milliseconds, keeping microsecond precision.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// latencyText renders l rounded to 0.1ms.
func latencyText(l Latency) string {
	const unit = 100 * time.Microsecond
	return fmt.Sprintf("p50 %s p90 %s p99 %s max %s", l.P50.Round(unit), l.P90.Round(unit), l.P99.Round(unit), l.Max.Round(unit))
}

// codeList renders error counts as ": Unavailable=3, DeadlineExceeded=1", in
// code name order; "" when there are none.
func codeList(byCode map[string]int) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(byCode)) {
		parts = append(parts, fmt.Sprintf("%s=%d", code, byCode[code]))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
