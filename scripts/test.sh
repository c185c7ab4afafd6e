#!/usr/bin/env bash
# Runs the unit tests with the race detector: the root module, then the test/
# module (when it exists) with its cluster tests left out as that module decides.
set -o errexit -o nounset -o pipefail

# A package's binary gets 30 minutes, not go test's 10: the sidecar's takes
# 5 to 7 under -race on two cores, longer on a busy machine, and a test
# must not fail by chance.
timeout=30m

cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "==> go test -race -count=1 -timeout $timeout ./... (root module)"
go test -race -count=1 -timeout "$timeout" ./...
if [[ -f test/go.mod ]]; then
  echo "==> go test -race -count=1 -timeout $timeout ./... (test/ module)"
  (cd test && go test -race -count=1 -timeout "$timeout" ./...)
fi
