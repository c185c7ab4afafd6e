package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// policyPanels returns the panels of the Policy row: what the policy decided
// for each method, whether its file loaded, who set how long answers are
// served, the purges that took answers back and the refreshes that kept
// them fresh.
func policyPanels(l *layout) []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		methodRules(l.at(0, 0, 16, 8)),
		countStat(28, "Policy file", l.at(16, 0, 8, 4)).
			Description(`Whether every sidecar runs its policy file's latest content ` +
				`(collapser_policy_last_reload_successful, the lowest over the sidecars): a rejected change ` +
				`(invalid YAML or rule) leaves the policy in force and is logged with the file, line and ` +
				`field. Without a policy file this stays at latest.`).
			Unit(units.NoUnit).
			Thresholds(thresholds("red", from(1, "green"))).
			Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
				Type: dashboard.MappingTypeValueToText,
				Options: map[string]dashboard.ValueMappingResult{
					"0": {Index: cog.ToPtr[int32](0), Text: cog.ToPtr("latest change rejected"), Color: cog.ToPtr("red")},
					"1": {Index: cog.ToPtr[int32](1), Text: cog.ToPtr("latest applied"), Color: cog.ToPtr("green")},
				},
			}}}).
			Targets(queries(
				instant(`min(collapser_policy_last_reload_successful)`, "policy file"),
			)),
		countStat(29, "Policy reloads", l.at(16, 4, 8, 4)).
			Description(`Reloads of a changed policy file in the time range, by result: success (applied) or ` +
				`failure (rejected, the policy in force stays). ` +
				exactTotal).
			TextMode(common.BigValueTextModeValueAndName).
			Targets(queries(
				instant(`sum by (result) (increase(collapser_policy_reloads_total[$__range] anchored))`, "{{result}}"),
			)),
		graph(49, "Purges/s and answers purged/s", l.at(12, 8, 12, 6), units.RequestsPerSecond).
			Description(`Purges asked through the admin service (collapser.admin.v1, on loopback: the pod's ` +
				`backend calls it after a write) or made by a write's success (policy invalidates), by kind ` +
				`(request, method, tag), mode (hard: gone; soft: stale from now) and result (ok; invalid: a bad ` +
				`request that changed nothing; refused: not from loopback; partial: some replica not reached), ` +
				`and the answers they took back on every replica. With peers a purge is counted once, on the ` +
				`replica that took it to the others.`).
			Targets(queries(
				series(`sum by (kind, mode, result) (rate(collapser_purges_total[$__rate_interval]))`, "purges: {{kind}} {{mode}} {{result}}"),
				series(`sum by (kind, mode) (rate(collapser_purged_entries_total[$__rate_interval]))`, "answers purged: {{kind}} {{mode}}"),
			)),
		graph(48, "Answers/s by freshness source", l.at(0, 8, 12, 6), units.RequestsPerSecond).
			Description(`Shared answers of collapsed unary calls by what set how long each is served: policy (the ` +
				`rule's cacheTTL and stale windows: the answer declared nothing, or the rule ignores cache-control), ` +
				`backend (the answer's own cache-control: max-age, s-maxage, stale-while-revalidate, ` +
				`stale-if-error) and backend_capped (its cache-control cut to the rule's maxTTL: a backend asking ` +
				`for longer than the policy allows).`).
			Targets(queries(
				series(`sum by (source) (rate(collapser_answer_freshness_total{method=~"$method"}[$__rate_interval]))`, "{{source}}"),
			)),
		graph(56, "Background refreshes/s by reason", l.at(0, 14, 24, 6), units.RequestsPerSecond).
			Description(`Backend calls that refreshed a kept answer while its callers were served it, by reason: ` +
				`early (an answer still read, refreshed before its TTL ends at a time drawn from its key, so ` +
				`that keys loaded together are refreshed spread over their TTL rather than all missing at once: ` +
				`earlyRefresh in the policy), stale (an answer past its TTL served stale meanwhile: ` +
				`staleWhileRevalidate), purge (an answer a soft purge of a method or tag took back, refreshed ` +
				`in its turn: such a purge refreshes at most COLLAPSER_SOFT_PURGE_RATE answers a second). With ` +
				`peers only a key's owner refreshes it early. A flat line here, where ` +
				`backend calls would otherwise come in waves one TTL apart, is the herd that did not happen.`).
			Targets(queries(
				series(`sum by (reason) (rate(collapser_refreshes_total{method=~"$method"}[$__rate_interval]))`, "{{reason}}"),
			)),
	}
}

// methodRules is the table of each method's rule: one row per method, action
// and reason, with the number of sidecars reporting it.
func methodRules(pos dashboard.GridPos) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Id(27).
		Title("Method rules").
		Description(`What each sidecar does with each method it knows (from reflection, a descriptor set or the ` +
			`policy), from collapser_method_rule_info: action collapse, replay (server streams shared ` +
			`and replayed) or passthrough, and why a method passes through (reason: policy, ` +
			`unannotated, unknown_kind, streaming). Sidecars counts the sidecars reporting that rule: ` +
			`during a policy rollout a method can have two rows.`).
		Datasource(prometheusSource()).
		GridPos(pos).
		Align(common.FieldTextAlignmentAuto).
		CellOptions(common.TableCellOptions{TableAutoCellOptions: &common.TableAutoCellOptions{Type: common.TableCellDisplayModeAuto}}).
		ShowHeader(true).
		CellHeight(common.TableCellHeightSm).
		SortBy([]cog.Builder[common.TableSortByFieldState]{
			common.NewTableSortByFieldStateBuilder().DisplayName("method").Desc(false),
		}).
		// Columns method, action, reason, then the count as "sidecars"; no time.
		WithTransformation(dashboard.DataTransformerConfig{
			Id: "organize",
			Options: map[string]any{
				"excludeByName": map[string]any{"Time": true},
				"indexByName":   map[string]any{"method": 0, "action": 1, "reason": 2, "Value": 3},
				"renameByName":  map[string]any{"Value": "sidecars"},
			},
		}).
		Targets(queries(
			instant(`count by (method, action, reason) (collapser_method_rule_info{method=~"$method"})`, "").
				Format(prometheus.PromQueryFormatTable),
		))
}
