#!/usr/bin/env bash
# dashboards.sh keeps the Helm chart's copy of the Grafana dashboard equal to
# its one source, dashboards/collapser.json (Helm cannot read files outside the
# chart, so the chart ships a copy).
#
#   scripts/dashboards.sh update   copy the source into the chart
#   scripts/dashboards.sh verify   fail if the chart's copy differs from the source
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source_file="dashboards/collapser.json"
chart_copy="charts/collapser/dashboards/collapser.json"

usage() {
  echo "usage: $0 update|verify" >&2
  exit 2
}

[[ $# -eq 1 ]] || usage
cd "${root}"

case "$1" in
  update)
    mkdir -p "$(dirname "${chart_copy}")"
    cp "${source_file}" "${chart_copy}"
    echo "updated ${chart_copy} from ${source_file}"
    ;;
  verify)
    if [[ ! -f "${chart_copy}" ]]; then
      echo "${chart_copy} is missing: run 'scripts/dashboards.sh update' (make dashboards)" >&2
      exit 1
    fi
    if ! diff -u "${source_file}" "${chart_copy}"; then
      echo "${chart_copy} differs from ${source_file}: run 'scripts/dashboards.sh update' (make dashboards)" >&2
      exit 1
    fi
    echo "${chart_copy} matches ${source_file}"
    ;;
  *)
    usage
    ;;
esac
