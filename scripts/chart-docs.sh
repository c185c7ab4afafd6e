#!/usr/bin/env bash
# chart-docs.sh keeps the chart README's values table equal to what helm-docs
# (HELM_DOCS_VERSION) generates from values.yaml and README.md.gotmpl.
#
#   scripts/chart-docs.sh update   rewrite charts/collapser/README.md
#   scripts/chart-docs.sh verify   fail if it differs from a fresh generation
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chart="charts/collapser"
cd "${root}"
"${root}/scripts/tools.sh" helm-docs
args=(--chart-search-root "${chart}" --sort-values-order file --log-level warning)

case "${1:-}" in
  update)
    bin/helm-docs "${args[@]}"
    echo "updated ${chart}/README.md from values.yaml and README.md.gotmpl"
    ;;
  verify)
    if ! bin/helm-docs "${args[@]}" --dry-run | diff -u "${chart}/README.md" -; then
      echo "${chart}/README.md is out of date: run 'make chart-docs'" >&2
      exit 1
    fi
    echo "${chart}/README.md matches values.yaml"
    ;;
  *)
    echo "usage: $0 update|verify" >&2
    exit 2
    ;;
esac
