#!/usr/bin/env bash
# Forwards Grafana of release "collapser" (make deploy) to http://localhost:3000.
#   KIND_CLUSTER  the kind cluster (collapser)
#   KUBECTL       kubectl to use; default: bin/kubectl (the kind-offline kit's,
#                 linked by scripts/tools.sh) or one on PATH
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${root}/bin:${PATH}"
context="kind-${KIND_CLUSTER:-collapser}"
kubectl="${KUBECTL:-}"
if [[ -z "${kubectl}" ]]; then
  "${root}/scripts/tools.sh" kubectl
  kubectl=kubectl
fi
command -v "${kubectl}" >/dev/null || { echo "grafana: ${kubectl} not found; set KUBECTL=/path/to/kubectl" >&2; exit 1; }

if ! "${kubectl}" --context "${context}" get namespace collapser >/dev/null 2>&1; then
  echo "grafana: no namespace collapser in ${context} (${kubectl}): make cluster && make deploy first" >&2
  exit 1
fi
if ! "${kubectl}" --context "${context}" --namespace collapser get service collapser-grafana >/dev/null 2>&1; then
  cat >&2 <<MSG
grafana: release collapser in ${context} has no Grafana (service collapser-grafana).
Install it with Grafana: make deploy (GRAFANA=true is the default; GRAFANA=false
leaves it out), which needs Grafana's image pullable or loaded into kind. Without a
container registry (the kind-offline kit) it cannot be had: use Prometheus
(kubectl -n collapser port-forward service/collapser-prometheus 9090:9090) and the
dashboard's static checks instead.
MSG
  exit 1
fi
echo "grafana: http://localhost:3000 (Ctrl-C to stop)"
exec "${kubectl}" --context "${context}" --namespace collapser port-forward service/collapser-grafana 3000:3000
