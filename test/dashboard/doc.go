// Package dashboard holds the static checks of the collapser Grafana dashboard
// (dashboards/collapser.json). Grafana cannot run where the tests run, so the
// tests prove the dashboard without it: the JSON decodes as a Grafana dashboard
// and passes its validation and our layout rules (rows, a grid without
// overlaps), every PromQL expression parses, stat and table panels are instant
// queries whose totals are exact over the time range (increase(...[$__range]
// anchored)), Grafana's $__rate_interval at the default range covers four
// scrapes of the chart's Prometheus, every metric it names is exported by the
// real sidecar (its own peer, with a policy that replays a stream), hello
// backend or injector binaries, every sidecar and injector metric has a
// panel, and the Helm chart's copy equals the source. The e2e test evaluates the same panels through a
// real Prometheus (package panelquery).
package dashboard
