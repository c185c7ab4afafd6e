#!/usr/bin/env bash
# Fails when the committed generated code under src/api differs from what
# scripts/generate.sh produces now (edited .proto, hand edits, other versions).
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$root/scripts/generate.sh" "$tmp/got"
# Compare only generated files, so a stale or missing .pb.go is caught too.
mkdir -p "$tmp/want" "$tmp/got/src/api"
(cd "$root/src/api" && find . -name '*.pb.go' -exec cp --parents {} "$tmp/want/" \;)
if ! diff -ru "$tmp/want" "$tmp/got/src/api"; then
  echo "verify-generated: generated code is out of date; run: make generate" >&2
  exit 1
fi
echo "verify-generated: src/api is up to date"
