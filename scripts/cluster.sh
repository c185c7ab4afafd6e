#!/usr/bin/env bash
# Creates (up) or deletes (down) the local kind cluster of `make deploy`,
# `make e2e` with E2E_REUSE_CLUSTER=1 and `make chart-install`.
#   KIND_CLUSTER     cluster name (collapser)
#   KIND_NODE_IMAGE, KIND_CONFIG, KIND_OFFLINE_DIR: see scripts/kind-env.sh
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${root}/bin:${PATH}"
cluster="${KIND_CLUSTER:-collapser}"
"${root}/scripts/tools.sh" kind

case "${1:-}" in
  up)
    if kind get clusters | grep -qx "${cluster}"; then
      echo "cluster: ${cluster} exists"
      exit 0
    fi
    # shellcheck source=kind-env.sh
    source "${root}/scripts/kind-env.sh"
    args=(create cluster --name "${cluster}" --wait 5m)
    [[ -z "${KIND_NODE_IMAGE}" ]] || args+=(--image "${KIND_NODE_IMAGE}")
    [[ -z "${KIND_CONFIG}" ]] || args+=(--config "${KIND_CONFIG}")
    kind "${args[@]}"
    ;;
  down)
    # shellcheck source=kind-env.sh
    source "${root}/scripts/kind-env.sh" docker
    kind delete cluster --name "${cluster}"
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
