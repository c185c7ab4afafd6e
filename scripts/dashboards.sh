#!/usr/bin/env bash
# dashboards.sh writes the collapser Grafana dashboard from its Go source,
# test/tools/dashboardgen (built with the Grafana Foundation SDK), into its two
# copies: dashboards/collapser.json and the Helm chart's (Helm cannot read files
# outside the chart). Neither is edited by hand.
#
#   scripts/dashboards.sh update   regenerate both copies (make dashboards)
#   scripts/dashboards.sh verify   fail if either copy differs from a fresh
#                                  generation (make verify-dashboards)
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
copies=(dashboards/collapser.json charts/collapser/dashboards/collapser.json)

usage() {
  echo "usage: $0 update|verify" >&2
  exit 2
}

# generate writes the dashboard to each absolute path given.
generate() {
  local args=() path
  for path in "$@"; do
    args+=(-out "${path}")
  done
  (cd "${root}/test" && go run ./tools/dashboardgen "${args[@]}")
}

[[ $# -eq 1 ]] || usage
cd "${root}"

case "$1" in
  update)
    paths=()
    for copy in "${copies[@]}"; do
      mkdir -p "$(dirname "${copy}")"
      paths+=("${root}/${copy}")
    done
    generate "${paths[@]}"
    echo "generated ${copies[*]} from test/tools/dashboardgen"
    ;;
  verify)
    tmp="$(mktemp -d)"
    trap 'rm -rf "${tmp}"' EXIT
    generate "${tmp}/collapser.json"
    drift=0
    for copy in "${copies[@]}"; do
      if [[ ! -f "${copy}" ]]; then
        echo "${copy} is missing: run 'make dashboards'" >&2
        drift=1
      elif ! diff -u "${copy}" "${tmp}/collapser.json"; then
        echo "${copy} differs from test/tools/dashboardgen's output: edit the Go, then run 'make dashboards'" >&2
        drift=1
      fi
    done
    if [[ "${drift}" -ne 0 ]]; then
      exit 1
    fi
    echo "${copies[*]} match test/tools/dashboardgen's output"
    ;;
  *)
    usage
    ;;
esac
