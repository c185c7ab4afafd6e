#!/usr/bin/env bash
# Creates (up) or deletes (down) the local kind cluster of `make deploy`.
#   KIND_CLUSTER     cluster name (collapser)
#   KIND_NODE_IMAGE  node image; default: kind's own. Without a registry, build
#                    one with kind-offline (KIND_OFFLINE_DIR=... uses its
#                    build.sh and kind-config.yaml)
#   KIND_CONFIG      kind config file
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
    image="${KIND_NODE_IMAGE:-}"
    config="${KIND_CONFIG:-}"
    if [[ -n "${KIND_OFFLINE_DIR:-}" ]]; then
      [[ -n "${image}" ]] || image="$("${KIND_OFFLINE_DIR}/build.sh" | tail -n 1)"
      [[ -n "${config}" ]] || config="${KIND_OFFLINE_DIR}/kind-config.yaml"
    fi
    args=(create cluster --name "${cluster}" --wait 5m)
    [[ -z "${image}" ]] || args+=(--image "${image}")
    [[ -z "${config}" ]] || args+=(--config "${config}")
    kind "${args[@]}"
    ;;
  down)
    kind delete cluster --name "${cluster}"
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
