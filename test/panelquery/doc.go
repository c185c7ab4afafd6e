// Package panelquery works out the Prometheus queries Grafana sends for the
// panels of a dashboard, and runs them against a Prometheus HTTP API. Grafana
// cannot run where the tests run; with this package a test evaluates a
// dashboard through a real Prometheus the way Grafana would and asserts on
// what its panels show.
//
// The rules are those of Grafana 12's Prometheus data source, for a
// dashboard opened at Settings.Now:
//
//   - The time range is the dashboard's time.from and time.to (now-15m,
//     now); $__range is its length in whole seconds ("900s"), $__range_s and
//     $__range_ms the same as numbers.
//   - Max data points is the panel's maxDataPoints, else the panel's width in
//     pixels (Settings.ColumnWidth per grid column).
//   - The interval the browser asks for is range / max data points, rounded
//     to one of Grafana's steps (1s, 2s, 5s, 10s, 15s, 20s, 30s, 1m, ...), and
//     at least the panel's min interval, else the data source's scrape
//     interval (Settings.ScrapeInterval).
//   - The step of the query, also $__interval, is that interval, or the
//     target's min step when it sets one (range / max data points rounded,
//     if that is longer), and never below range / 11,000, times the
//     target's interval factor.
//   - $__rate_interval is max(interval + scrape interval, 4 x scrape
//     interval), where the scrape interval is the target's min step if set,
//     else the data source's, else 15s.
//   - A range query runs from the range's start to its end, both rounded
//     down to a multiple of the step; an instant query runs at the rounded end.
//   - A template variable takes its current value; "All" takes the
//     variable's allValue, and several values become (a|b), regex-escaped.
//   - A label_values(selector, label) variable lists the label's values on
//     the series the selector matches within the time range
//     (Client.LabelValues).
package panelquery
