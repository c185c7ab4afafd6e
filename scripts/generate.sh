#!/usr/bin/env bash
# Generates Go code for every .proto under src/api with pinned tool versions.
# Usage: scripts/generate.sh [OUT_DIR]   (default: the repository root)
# Versions come from the Makefile (PROTOC_VERSION, PROTOC_GEN_GO_VERSION,
# PROTOC_GEN_GO_GRPC_VERSION). The protoc version is written into every
# generated file's header, so a different protoc is an error, not a silent diff.
set -o errexit -o nounset -o pipefail

: "${PROTOC_VERSION:?set by the Makefile: run make generate}"
: "${PROTOC_GEN_GO_VERSION:?set by the Makefile: run make generate}"
: "${PROTOC_GEN_GO_GRPC_VERSION:?set by the Makefile: run make generate}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root}"
mkdir -p "$out"
out="$(realpath "$out")"
module="github.com/collapser/collapser"

# protoc comes from Debian's protobuf-compiler (3.21.12 on bookworm).
"$root/scripts/apt-install.sh" protobuf-compiler
have="$(protoc --version)"
if [[ "$have" != "libprotoc $PROTOC_VERSION" ]]; then
  echo "generate: need libprotoc $PROTOC_VERSION (Debian bookworm protobuf-compiler), found: $have" >&2
  exit 1
fi

# The plugins go into ./bin so they never shadow or depend on a global install.
export GOBIN="$root/bin"
go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

cd "$root/src/api"
mapfile -t protos < <(find . -name '*.proto' -printf '%P\n' | sort)
protoc --proto_path=. \
  --plugin=protoc-gen-go="$GOBIN/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$GOBIN/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt=module="$module" \
  --go-grpc_out="$out" --go-grpc_opt=module="$module" \
  "${protos[@]}"
