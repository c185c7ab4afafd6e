#!/usr/bin/env bash
# Fails when README.md grows past MAX_LINES. The README is a map: what collapser
# does, the commands that set it up, its settings, and links to where each topic
# is explained (the chart README, docs/, test/README.md, dashboards/README.md,
# CONTRIBUTING.md). Detail that pushes it past the bound belongs in one of those.
set -o errexit -o nounset -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly MAX_LINES=250
lines="$(wc -l <README.md)"
if ((lines > MAX_LINES)); then
  echo "verify-readme: README.md has ${lines} lines, more than ${MAX_LINES}: move detail into the doc it belongs to and link it" >&2
  exit 1
fi
echo "verify-readme: README.md has ${lines} lines (at most ${MAX_LINES})"
