#!/usr/bin/env bash
# Installs the chart on the kind cluster KIND_CLUSTER (make cluster) the way
# users will: chart-testing's `ct install` with Helm 3 (every ci/ values file
# installed into a namespace of its own, `helm test`ed, uninstalled), then one
# install and `helm test` of the defaults with Helm 4. ci/backend-off-values.yaml
# and ci/injector-only-values.yaml render no test pod: their `helm test` passes
# with none to run, so fewer test pods succeed than files are installed. The
# project's images (tag: the chart's appVersion, the chart's default) and
# Prometheus's are built and loaded into the cluster first.
#
#   CT_SET  extra --set flags for every ct install, passed with ct's own
#           --helm-extra-set-args. Default: none; with KIND_OFFLINE_DIR (no
#           registry) "--set=grafana.enabled=false": Grafana's image cannot be had
#           there, so ci/observability-values.yaml is installed with its
#           Prometheus but without its Grafana. Nothing else is skipped.
#   KIND_CLUSTER (collapser), KIND_OFFLINE_DIR: see scripts/kind-env.sh
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
cluster="${KIND_CLUSTER:-collapser}"
chart=charts/collapser
./scripts/tools.sh kind helm helm4 ct kubectl
./scripts/apt-install.sh yamllint
# shellcheck source=kind-env.sh
source ./scripts/kind-env.sh
kind get clusters | grep -qx "${cluster}" || { echo "chart-install: no kind cluster ${cluster}: run make cluster" >&2; exit 1; }

KUBECONFIG="$(mktemp)"
export KUBECONFIG
trap 'rm -f "${KUBECONFIG}"' EXIT
kind export kubeconfig --name "${cluster}" --kubeconfig "${KUBECONFIG}"

images=()
while read -r image; do images+=("${image}"); done < <(./scripts/images.sh)
./scripts/prometheus-image.sh
images+=("${PROMETHEUS_IMAGE:-prom/prometheus:v3.16.0}")
kind load docker-image --name "${cluster}" "${images[@]}"

set_args="${CT_SET-}"
if [[ -z "${CT_SET+set}" && -n "${KIND_OFFLINE_DIR}" ]]; then
  set_args="--set=grafana.enabled=false"
fi
ci_files=("${chart}"/ci/*-values.yaml)
log="$(mktemp)"
echo "==> ct install --config ct.yaml --charts ${chart}${set_args:+ --helm-extra-set-args ${set_args}} ($(helm version --short))"
ct install --config ct.yaml --charts "${chart}" ${set_args:+--helm-extra-set-args "${set_args}"} 2>&1 | tee "${log}"
installed="$(grep -c '^Installing chart with values file' "${log}" || true)"
tested="$(grep -c '^Phase:[[:space:]]*Succeeded' "${log}" || true)"
rm -f "${log}"
echo "chart-install: ct install with $(helm version --short): ${installed}/${#ci_files[@]} ci/ values files installed, ${tested} helm test pods succeeded"
[[ "${installed}" -eq "${#ci_files[@]}" ]] || { echo "chart-install: ct installed ${installed} of ${#ci_files[@]} values files" >&2; exit 1; }

namespace="collapser-helm4-${RANDOM}"
echo "==> helm4 install collapser ${chart} --namespace ${namespace} --wait ($(helm4 version --short))"
helm4 install collapser "${chart}" --namespace "${namespace}" --create-namespace --wait --timeout 5m
helm4 test collapser --namespace "${namespace}" --timeout 5m
helm4 uninstall collapser --namespace "${namespace}" --wait --timeout 5m
kubectl delete namespace "${namespace}" --wait=false
echo "chart-install: $(helm4 version --short): install and helm test of the defaults passed"
