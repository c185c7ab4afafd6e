// Package chart holds the rendering tests of the Helm chart in charts/collapser:
// they render it with the Helm Go SDK (no cluster, no helm binary) and decode every
// manifest into the Kubernetes API types with strict field checking.
package chart
