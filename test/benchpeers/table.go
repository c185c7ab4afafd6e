package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// writeTable prints the medians of every scenario as one Markdown table,
// then the comparison in the shape of issue #12's table.
func writeTable(w io.Writer, r *report) error {
	var b strings.Builder
	h, s := r.Host, r.Settings
	fmt.Fprintf(&b, "bench-peers %s: %d CPUs (%s), %s; collapser %s, %s, ghz %s%s.\n",
		r.Finished.Format(time.DateOnly), h.CPUs, h.CPUModel, pinning(h), orUnknown(h.Collapser), orUnknown(h.Nginx), orUnknown(h.Ghz), goGC(h))
	fmt.Fprintf(&b, "Steady runs: %gs at concurrency %d on one connection; bursts: %s calls at once over %d connections. "+
		"Medians of %d interleaved rounds; × direct is RPS over direct's in the same round. "+
		"CPU: utime+stime from /proc per call made. Backend calls: the backend's own count per run. "+
		"Load average (1, 5, 15 min): %s at start, %s at end.\n\n",
		s.DurationSeconds, s.Concurrency, thousands(float64(s.BurstRequests)), s.BurstConnections, s.Rounds,
		firstLoad(r), lastLoad(r))

	rows := [][]string{{"scenario", "target", "RPS", "× direct", "p50 ms", "p99 ms", "wall ms",
		"proxy CPU µs/call", "backend CPU µs/call", "calls", "backend calls", "errors"}}
	for _, res := range r.Scenarios {
		for _, m := range res.Medians {
			rows = append(rows, []string{res.Scenario.Short, m.Target, thousands(m.RPS), fmt.Sprintf("%.2f", m.RatioToDirect),
				fmt.Sprintf("%.2f", m.P50Ms), fmt.Sprintf("%.2f", m.P99Ms), thousands(m.WallMs), formatCPU(m.ProxyCPUUs),
				fmt.Sprintf("%.1f", m.BackendCPUUs), thousands(float64(m.Requests)), thousands(float64(m.BackendCalls)), strconv.FormatInt(m.Errors, 10)})
		}
	}
	writeMarkdownTable(&b, rows, 2)
	b.WriteString("\n")
	for _, res := range r.Scenarios {
		fmt.Fprintf(&b, "- %s\n", res.Scenario.Title)
	}
	b.WriteString("\n")
	writeComparison(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// goGC notes a GOGC the run's Go processes inherited; "" for Go's default.
func goGC(h hostInfo) string {
	if h.GOGC == "" {
		return ""
	}
	return "; GOGC=" + h.GOGC + " for every Go process"
}

// writeMarkdownTable writes rows (the first is the header) as a Markdown
// table with padded columns; columns from rightFrom on are right-aligned.
func writeMarkdownTable(b *strings.Builder, rows [][]string, rightFrom int) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell), 3)
		}
	}
	line := func(cells []string, right bool) {
		b.WriteString("|")
		for i, cell := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if right && i >= rightFrom {
				cell = pad + cell
			} else {
				cell += pad
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	line(rows[0], false)
	rule := make([]string, len(widths))
	for i, w := range widths {
		rule[i] = strings.Repeat("-", w)
		if i >= rightFrom {
			rule[i] = strings.Repeat("-", w-1) + ":"
		}
	}
	line(rule, false)
	for _, row := range rows[1:] {
		line(row, true)
	}
}

// pinning says where the processes ran.
func pinning(h hostInfo) string {
	if h.ClientCPUs == "" && h.ServerCPUs == "" {
		return "nothing pinned"
	}
	return fmt.Sprintf("ghz pinned to CPU %s, backend and proxies to CPU %s", orUnknown(h.ClientCPUs), orUnknown(h.ServerCPUs))
}

// firstLoad and lastLoad are the load averages at the start of the first
// scenario and the end of the last.
func firstLoad(r *report) string {
	if len(r.Scenarios) == 0 {
		return "?"
	}
	return r.Scenarios[0].LoadBefore
}

func lastLoad(r *report) string {
	if len(r.Scenarios) == 0 {
		return "?"
	}
	return r.Scenarios[len(r.Scenarios)-1].LoadAfter
}

// formatCPU formats microseconds per call with one decimal, "—" for none.
func formatCPU(us *float64) string {
	if us == nil {
		return "—"
	}
	return strconv.FormatFloat(*us, 'f', 1, 64)
}

// thousands formats v rounded to an integer with comma separators.
func thousands(v float64) string {
	n := int64(math.Round(v))
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	digits := strconv.FormatInt(n, 10)
	var out []byte
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, digits[i])
	}
	return sign + string(out)
}

// orUnknown returns s, or "?" for "".
func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
