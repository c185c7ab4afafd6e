#!/usr/bin/env bash
# Runs the unit tests with the race detector: the root module, then the test/
# module (when it exists) with its cluster tests left out as that module decides.
set -o errexit -o nounset -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "==> go test -race -count=1 ./... (root module)"
go test -race -count=1 ./...
if [[ -f test/go.mod ]]; then
  echo "==> go test -race -count=1 ./... (test/ module)"
  (cd test && go test -race -count=1 ./...)
fi
