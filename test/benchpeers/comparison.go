package main

import (
	"fmt"
	"strings"
)

// comparisonColumns are the proxies of the comparison, one column each.
var comparisonColumns = []string{targetCollapser, targetNginx, targetPlain}

// comparisonRow is a row of the comparison: its label and how it fills
// each column.
type comparisonRow struct {
	label string
	cell  cellFunc
}

// cellFunc returns a comparison row's cell in the column of a proxy
// (targetCollapser, targetNginx or targetPlain) from r's medians; "—" where
// the runs it needs are missing.
type cellFunc func(r *report, column string) string

// writeComparison prints the proxies side by side in the shape of the
// issues' tables, from the medians of the scenarios that ran. A row none of
// whose runs ran is left out.
func writeComparison(b *strings.Builder, r *report) {
	table := [][]string{{"", "collapser", "nginx grpc_pass", "plain Go proxy (grpc-go)"}}
	for _, row := range comparisonRows(r.Settings) {
		cells, filled := []string{row.label}, false
		for _, col := range comparisonColumns {
			cell := row.cell(r, col)
			filled = filled || cell != "—"
			cells = append(cells, cell)
		}
		if filled {
			table = append(table, cells)
		}
	}
	writeMarkdownTable(b, table, len(table[0]))
}

// comparisonRows are the rows of the comparison for a run with settings s.
func comparisonRows(s settings) []comparisonRow {
	own := func(id string) medianOf { return medianOf{scenario: id} }
	peered := medianOf{scenario: "miss-peers", target: targetPeers}
	lone := medianOf{scenario: "miss-peers", target: targetCollapser}
	mtls := medianOf{scenario: "miss-peers-mtls", target: targetPeers}
	mtlsLone := medianOf{scenario: "miss-peers-mtls", target: targetCollapser}
	burst := func(m summary) string {
		return thousands(float64(m.BackendCalls)) + " / " + thousands(m.WallMs) + " ms"
	}
	return []comparisonRow{
		{"pass-through, distinct payloads: RPS vs direct", own("passthrough").cell(rpsRatio)},
		{"proxy CPU per pass-through call", own("passthrough").cell(proxyCPU)},
		{"pass-through, unpinned: RPS vs direct", own("passthrough-unpinned").cell(rpsRatio)},
		{"proxy CPU per pass-through call, unpinned", own("passthrough-unpinned").cell(proxyCPU)},
		{"miss, distinct payloads: RPS vs direct", own("miss").cell(rpsRatio)},
		{"proxy CPU per miss", own("miss").cell(proxyCPU)},
		{"miss CPU / pass-through CPU, per call", cpuRatio(own("miss"), own("passthrough"))},
		{fmt.Sprintf("miss with %d peers: RPS vs direct", missPeers), collapserOnly(peered.cell(rpsRatio))},
		{"miss without peers, same run: RPS vs direct", collapserOnly(lone.cell(rpsRatio))},
		{fmt.Sprintf("proxy CPU per miss, %d peers (summed)", missPeers), collapserOnly(peered.cell(proxyCPU))},
		{"proxy CPU per miss without peers, same run", collapserOnly(lone.cell(proxyCPU))},
		{fmt.Sprintf("%d peers CPU / one sidecar alone CPU, per call", missPeers), collapserOnly(cpuRatio(peered, lone))},
		{fmt.Sprintf("proxy CPU per miss, %d peers over mutual TLS (summed)", missPeers), collapserOnly(mtls.cell(proxyCPU))},
		{fmt.Sprintf("%d peers over mutual TLS CPU / one sidecar alone CPU, per call", missPeers), collapserOnly(cpuRatio(mtls, mtlsLone))},
		{fmt.Sprintf("%s-call burst, 50 ms backend: backend calls / wall time", thousands(float64(s.BurstRequests))), own("burst").cell(burst)},
		{fmt.Sprintf("hit path, 0 ms backend, c=%d: RPS vs direct", s.Concurrency), own("hit-0ms").cell(rpsRatio)},
		{fmt.Sprintf("hit path, 50 ms backend, c=%d: RPS vs direct", s.Concurrency), own("hit-50ms").cell(rpsRatio)},
	}
}

// medianOf names the medians of one target in one scenario; an empty
// target is the column's own.
type medianOf struct {
	scenario, target string
}

// lookup returns the medians named for column, if they ran.
func (o medianOf) lookup(r *report, column string) (summary, bool) {
	target := o.target
	if target == "" {
		target = column
	}
	res, ok := scenarioByID(r, o.scenario)
	if !ok {
		return summary{}, false
	}
	for _, m := range res.Medians {
		if m.Target == target {
			return m, true
		}
	}
	return summary{}, false
}

// cell returns a comparison cell showing format of o's medians.
func (o medianOf) cell(format func(summary) string) cellFunc {
	return func(r *report, column string) string {
		m, ok := o.lookup(r, column)
		if !ok {
			return "—"
		}
		return format(m)
	}
}

// cpuRatio returns a comparison cell showing the proxy CPU per call of num
// over that of den.
func cpuRatio(num, den medianOf) cellFunc {
	return func(r *report, column string) string {
		n, okN := num.lookup(r, column)
		d, okD := den.lookup(r, column)
		if !okN || !okD || n.ProxyCPUUs == nil || d.ProxyCPUUs == nil || *d.ProxyCPUUs == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", *n.ProxyCPUUs / *d.ProxyCPUUs)
	}
}

// collapserOnly returns cell for the collapser column and "—" for the
// others: for rows of a scenario without nginx and the plain proxy.
func collapserOnly(cell cellFunc) cellFunc {
	return func(r *report, column string) string {
		if column != targetCollapser {
			return "—"
		}
		return cell(r, column)
	}
}

// rpsRatio formats the RPS as a ratio to direct's.
func rpsRatio(m summary) string {
	return fmt.Sprintf("%.2f×", m.RatioToDirect)
}

// proxyCPU formats the proxy CPU per call.
func proxyCPU(m summary) string {
	return formatCPU(m.ProxyCPUUs) + " µs"
}

// scenarioByID returns the result of the scenario id, if it ran.
func scenarioByID(r *report, id string) (scenarioResult, bool) {
	for _, res := range r.Scenarios {
		if res.Scenario.ID == id {
			return res, true
		}
	}
	return scenarioResult{}, false
}
