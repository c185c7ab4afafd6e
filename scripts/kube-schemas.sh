#!/usr/bin/env bash
# Generates, once per version pair, the JSON schemas kubeconform validates the
# chart's renderings against, without a network: every kind of Kubernetes
# KUBE_SCHEMA_VERSION (api/openapi-spec/swagger.json of the k8s.io/kubernetes
# module) and the ServiceMonitor CRD of prometheus-operator
# PROMETHEUS_OPERATOR_VERSION (both from the Go module proxy), converted by
# test/tools/kubeschema into kubeconform's standalone-strict layout.
# Prints the schema root; pass it to kubeconform as
#   -schema-location "ROOT/{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"
set -o errexit -o nounset -o pipefail

: "${KUBE_SCHEMA_VERSION:?set by the Makefile}" "${PROMETHEUS_OPERATOR_VERSION:?set by the Makefile}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/bin/kube-schemas/${KUBE_SCHEMA_VERSION}+po-${PROMETHEUS_OPERATOR_VERSION}"
dir="${out}/${KUBE_SCHEMA_VERSION}-standalone-strict"

if [[ ! -f "${out}/.done" ]]; then
  # module_dir MODULE@VERSION: the module's directory in the module cache.
  module_dir() { (cd "${root}/test" && go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
  swagger="$(module_dir "k8s.io/kubernetes@${KUBE_SCHEMA_VERSION}")/api/openapi-spec/swagger.json"
  crd="$(module_dir "github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}")/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
  rm -rf "${out}"
  (cd "${root}/test" && go run ./tools/kubeschema -swagger "${swagger}" -crd "${crd}" -out "${dir}") >&2
  touch "${out}/.done"
fi
echo "${out}"
