// Package dashboard holds the static checks of the collapser Grafana dashboard
// (dashboards/collapser.json). Grafana cannot run where the tests run, so the
// tests prove the dashboard without it: the JSON decodes as a Grafana dashboard
// and passes its validation and our layout rules, every PromQL expression
// parses, every metric it names is exported by the real sidecar or hello
// backend binaries, and the Helm chart's copy equals the source.
package dashboard
