#!/usr/bin/env bash
# Runs the end-to-end tests (test/e2e): a kind cluster, the project's images
# loaded into it, the chart installed with Prometheus, assertions on the hello
# backend's own call count. Needs go, docker and a running dockerd.
#
# Environment (all optional):
#   KIND_NODE_IMAGE    node image; default: kind's own (pulled from its registry)
#   KIND_CONFIG        kind config file for the new cluster
#   KIND_OFFLINE_DIR   a kind-offline checkout (build.sh, docker-setup.sh,
#                      kind-config.yaml) for machines without a registry: starts
#                      dockerd if needed, builds the node image when
#                      KIND_NODE_IMAGE is unset, and never pulls
#   E2E_REPLACE_CLUSTER=1  delete the cluster KIND_CLUSTER first if it exists
#   KIND_CLUSTER, E2E_REUSE_CLUSTER, E2E_IMAGE_TAG: see test/e2e/doc.go
#   E2E_PROMETHEUS     1 (default): install and check the chart's Prometheus
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
offline="${KIND_OFFLINE_DIR:-}"

./scripts/tools.sh kind helm

if ! docker info >/dev/null 2>&1; then
  [[ -n "${offline}" ]] || { echo "e2e: docker is not running (start dockerd)" >&2; exit 1; }
  "${offline}/docker-setup.sh"
fi

if [[ -n "${offline}" ]]; then
  if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
    echo "==> kind-offline node image (about 25 minutes the first time, seconds when cached)"
    KIND_NODE_IMAGE="$("${offline}/build.sh" | tail -n 1)"
  fi
  export KIND_CONFIG="${KIND_CONFIG:-${offline}/kind-config.yaml}"
  export PROMETHEUS_IMAGE_PULL=0
fi
export KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-}"

if [[ "${E2E_REPLACE_CLUSTER:-0}" == 1 ]]; then
  kind delete cluster --name "${KIND_CLUSTER:-collapser-e2e}"
fi

export E2E_PROMETHEUS="${E2E_PROMETHEUS:-1}"
if [[ "${E2E_PROMETHEUS}" == 1 ]]; then
  ./scripts/prometheus-image.sh
fi

echo "==> go test ./e2e/ (node image: ${KIND_NODE_IMAGE:-kind default})"
cd test
COLLAPSER_E2E=1 KIND="${root}/bin/kind" go test -count=1 -timeout 45m -v -run '^TestCollapserOnKind$' ./e2e/
