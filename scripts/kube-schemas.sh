#!/usr/bin/env bash
# Generates, once per version pair, the JSON schemas kubeconform validates the
# chart's renderings against, without a network: every kind of Kubernetes
# KUBE_SCHEMA_VERSION (api/openapi-spec/swagger.json of the k8s.io/kubernetes
# module), the ServiceMonitor CRD of prometheus-operator
# PROMETHEUS_OPERATOR_VERSION and the Certificate and Issuer CRDs of
# cert-manager CERT_MANAGER_VERSION (all from the Go module proxy), converted
# by test/tools/kubeschema into kubeconform's standalone-strict layout.
# Prints the schema root; pass it to kubeconform as
#   -schema-location "ROOT/{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"
set -o errexit -o nounset -o pipefail

: "${KUBE_SCHEMA_VERSION:?set by the Makefile}" "${PROMETHEUS_OPERATOR_VERSION:?set by the Makefile}" "${CERT_MANAGER_VERSION:?set by the Makefile}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/bin/kube-schemas/${KUBE_SCHEMA_VERSION}+po-${PROMETHEUS_OPERATOR_VERSION}+cm-${CERT_MANAGER_VERSION}"
dir="${out}/${KUBE_SCHEMA_VERSION}-standalone-strict"

if [[ ! -f "${out}/.done" ]]; then
  # module_dir MODULE@VERSION: the module's directory in the module cache.
  module_dir() { (cd "${root}/test" && go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
  swagger="$(module_dir "k8s.io/kubernetes@${KUBE_SCHEMA_VERSION}")/api/openapi-spec/swagger.json"
  crd="$(module_dir "github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}")/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
  # cert-manager's CRD sources (controller-gen's output, the chart's templates are made from them).
  cert_manager="$(module_dir "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}")/deploy/crds"
  rm -rf "${out}"
  (cd "${root}/test" && go run ./tools/kubeschema -swagger "${swagger}" -crd "${crd}" \
    -crd "${cert_manager}/cert-manager.io_certificates.yaml" -crd "${cert_manager}/cert-manager.io_issuers.yaml" -out "${dir}") >&2
  touch "${out}/.done"
fi
echo "${out}"
