#!/usr/bin/env bash
# Lints the chart with Helm 3 (bin/helm) and Helm 4 (bin/helm4):
#   - helm lint --strict with the defaults and each ci/ values file;
#   - helm template of the defaults, each ci/ file and test/chart/testdata's
#     all-features file, each rendering checked by kubeconform -strict against
#     Kubernetes KUBE_SCHEMA_VERSION, the ServiceMonitor CRD and cert-manager's
#     Certificate and Issuer CRDs (schemas made offline by
#     scripts/kube-schemas.sh; a kind without a schema is an error);
# then chart-testing's ct lint (yamllint from apt) and the README's values
# table (scripts/chart-docs.sh verify).
set -o errexit -o nounset -o pipefail

: "${KUBE_SCHEMA_VERSION:?set by the Makefile}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
chart=charts/collapser
./scripts/tools.sh helm helm4 ct kubeconform
./scripts/apt-install.sh yamllint

schemas="$(./scripts/kube-schemas.sh)"
kubeconform_args=(-strict -summary -kubernetes-version "${KUBE_SCHEMA_VERSION#v}"
  -schema-location "${schemas}/{{.NormalizedKubernetesVersion}}-standalone{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json")

lint_files=("")
for f in "${chart}"/ci/*-values.yaml; do lint_files+=("${f}"); done
render_files=("${lint_files[@]}" test/chart/testdata/all-features-values.yaml)

renderings=0 resources=0
for helm in helm helm4; do
  echo "==> $(${helm} version --short) (${helm})"
  for f in "${lint_files[@]}"; do
    echo "==> ${helm} lint --strict ${chart}${f:+ -f ${f}}"
    "${helm}" lint --strict "${chart}" ${f:+-f "${f}"}
  done
  for f in "${render_files[@]}"; do
    echo "==> ${helm} template ${chart}${f:+ -f ${f}} | kubeconform -strict"
    summary="$("${helm}" template demo "${chart}" --namespace lab ${f:+-f "${f}"} \
      --api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions cert-manager.io/v1/Certificate | kubeconform "${kubeconform_args[@]}" -)"
    echo "${summary}"
    # "Summary: N resources found parsing stdin - Valid: N, Invalid: 0, Errors: 0, Skipped: 0"
    [[ "${summary}" =~ Valid:\ ([0-9]+),\ Invalid:\ 0,\ Errors:\ 0,\ Skipped:\ 0 ]] || { echo "kubeconform: not all valid" >&2; exit 1; }
    renderings=$((renderings + 1)) resources=$((resources + BASH_REMATCH[1]))
  done
done
echo "kubeconform: ${renderings} renderings (Helm 3 and Helm 4), ${resources} resources, all valid against Kubernetes ${KUBE_SCHEMA_VERSION} (strict)"

echo "==> ct lint --config ct.yaml --charts ${chart}"
ct lint --config ct.yaml --charts "${chart}"
./scripts/chart-docs.sh verify
