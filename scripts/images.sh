#!/usr/bin/env bash
# Builds the four images (collapser, hello-backend, democlient, collapser-injector) from the Dockerfile.
#
#   scripts/images.sh                 # host path: go build on this machine, pack with docker
#   IMAGE_BIN_SOURCE=gobuild scripts/images.sh   # public path: compile inside GO_IMAGE
#
# Environment:
#   IMAGE_REPO_PREFIX  image name prefix              (default: collapser)
#   IMAGE_TAG          tag of every image             (default: the chart's appVersion)
#   IMAGE_BIN_SOURCE   prebuilt | gobuild             (default: prebuilt)
#   GO_IMAGE           build image of the gobuild path (default: the Dockerfile's)
#
# Host path: the binaries are built here with the same command as the Dockerfile's
# gobuild stage into bin/image/, and docker packs them into the same final stages
# (BIN_SOURCE=prebuilt). Docker's legacy builder (the one here: no buildx) runs every
# stage before the target, used or not, and the gobuild stage's base image cannot be
# pulled without a registry; so the script hands docker the Dockerfile without the
# stage BIN_SOURCE does not select. The final stages are the same text on both paths,
# so the images hold the same files, labels and user. With BuildKit the unused stage is
# skipped anyway.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/collapser/Chart.yaml)"
prefix="${IMAGE_REPO_PREFIX:-collapser}"
tag="${IMAGE_TAG:-${app_version}}"
bin_source="${IMAGE_BIN_SOURCE:-prebuilt}"
revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
targets=(collapser hello-backend democlient collapser-injector)

if [[ -z "${tag}" || "${tag}" == "latest" ]]; then
  echo "images.sh: IMAGE_TAG must be a fixed version, got '${tag}'" >&2
  exit 1
fi

build_args=(--build-arg "VERSION=${tag}" --build-arg "REVISION=${revision}" --build-arg "BIN_SOURCE=${bin_source}")
case "${bin_source}" in
  prebuilt)
    unused_stage=gobuild
    rm -rf bin/image
    mkdir -p bin/image
    # The same command as the gobuild stage, for the daemon's platform.
    CGO_ENABLED=0 GOOS=linux GOARCH="$(docker version --format '{{.Server.Arch}}')" \
      go build -trimpath -buildvcs=false -ldflags "-s -w" -o bin/image/ \
      ./src/cmd/collapser ./src/cmd/hello-backend ./src/cmd/democlient ./src/cmd/collapser-injector
    chmod 0755 bin/image/*
    ;;
  gobuild)
    unused_stage=prebuilt
    if [[ -n "${GO_IMAGE:-}" ]]; then
      build_args+=(--build-arg "GO_IMAGE=${GO_IMAGE}")
    fi
    ;;
  *)
    echo "images.sh: IMAGE_BIN_SOURCE must be prebuilt or gobuild, got '${bin_source}'" >&2
    exit 1
    ;;
esac

dockerfile="$(mktemp)"
trap 'rm -f "${dockerfile}"' EXIT
# Drop the unused stage: from its FROM line up to (not including) the next FROM.
awk -v stage="${unused_stage}" '/^FROM / { skip = ($NF == stage) } !skip' Dockerfile >"${dockerfile}"

for t in "${targets[@]}"; do
  docker build --quiet --file "${dockerfile}" --target "${t}" "${build_args[@]}" \
    --tag "${prefix}/${t}:${tag}" . >/dev/null
  echo "${prefix}/${t}:${tag}"
done
