#!/usr/bin/env bash
# Sourced by the scripts that make or use the kind cluster (cluster.sh, e2e.sh,
# chart-install.sh): the one place that reads the cluster settings.
#
#   KIND_NODE_IMAGE   node image; default: kind's own (pulled from its registry)
#   KIND_CONFIG       kind config file
#   KIND_OFFLINE_DIR  the kind-offline kit, for machines without a registry; a
#                     relative path is taken from the repository root, so
#                     KIND_OFFLINE_DIR=../shared/kind-offline means the same from
#                     any directory. With it: dockerd is set up with the kit's
#                     runc-bounded runtime, the node image is built (about 25
#                     minutes the first time, seconds when cached) unless
#                     KIND_NODE_IMAGE is set, its kind-config.yaml is the default
#                     KIND_CONFIG, images are never pulled (PROMETHEUS_IMAGE_PULL=0)
#                     and GRAFANA defaults to false (its image cannot be had).
# Expects ${root} (the repository root) to be set by the sourcing script.
: "${root:?set by the script that sources kind-env.sh}"
# Sourced with the argument "docker" (cluster.sh down), it only makes sure
# dockerd runs, which deleting a cluster needs too, and builds no node image.

KIND_OFFLINE_DIR="${KIND_OFFLINE_DIR:-}"
if [[ -n "${KIND_OFFLINE_DIR}" ]]; then
  if ! KIND_OFFLINE_DIR="$(cd "${root}" && cd "${KIND_OFFLINE_DIR}" 2>/dev/null && pwd)"; then
    echo "KIND_OFFLINE_DIR=${KIND_OFFLINE_DIR} is not a directory (relative paths start at ${root})" >&2
    exit 1
  fi
  if [[ "$(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)" != runc-bounded ]]; then
    "${KIND_OFFLINE_DIR}/docker-setup.sh"
  fi
  if [[ "${1:-}" != docker && -z "${KIND_NODE_IMAGE:-}" ]]; then
    echo "==> kind-offline node image (about 25 minutes the first time, seconds when cached)" >&2
    KIND_NODE_IMAGE="$("${KIND_OFFLINE_DIR}/build.sh" | tail -n 1)"
  fi
  KIND_CONFIG="${KIND_CONFIG:-${KIND_OFFLINE_DIR}/kind-config.yaml}"
  export PROMETHEUS_IMAGE_PULL=0 GRAFANA="${GRAFANA:-false}"
elif ! docker info >/dev/null 2>&1; then
  echo "docker is not running: start dockerd (or set KIND_OFFLINE_DIR to use the kind-offline kit's setup)" >&2
  exit 1
fi
export KIND_OFFLINE_DIR KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-}" KIND_CONFIG="${KIND_CONFIG:-}"
