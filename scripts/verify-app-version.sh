#!/usr/bin/env bash
# Fails when what the images are built from changed since the commit that last
# changed the chart's appVersion (the images' tag, scripts/images.sh), so that an
# image built today and one built from older code never carry the same tag.
#
# What the images are built from: src/ (but *_test.go and testdata/, which no
# image holds), go.mod, go.sum and the Dockerfile. Changes count from the last
# commit whose diff changes the appVersion line of Chart.yaml to the working tree,
# staged and unstaged edits included; an appVersion edited but not yet committed
# counts as the bump. It reads git history: in a shallow clone it sees no further
# back than the clone goes (git fetch --unshallow).
set -o errexit -o nounset -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly chart_yaml=charts/collapser/Chart.yaml
readonly inputs=(src go.mod go.sum Dockerfile
  ':(exclude,glob)src/**/*_test.go' ':(exclude,glob)src/**/testdata/**')

app_version() { sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'; }
now="$(app_version <"${chart_yaml}")"
if [[ "${now}" != "$(git show "HEAD:${chart_yaml}" | app_version)" ]]; then
  echo "verify-app-version: appVersion ${now} is bumped in the working tree"
  exit 0
fi
base="$(git log -1 --format=%H -G '^appVersion:' -- "${chart_yaml}")"
if [[ -z "${base}" ]]; then
  echo "verify-app-version: no commit sets appVersion in ${chart_yaml} (a shallow clone? git fetch --unshallow)" >&2
  exit 1
fi
changed="$(git diff --name-only "${base}" -- "${inputs[@]}")"
if [[ -n "${changed}" ]]; then
  echo "verify-app-version: the images' code changed since appVersion ${now} was set ($(git rev-parse --short "${base}")):" >&2
  awk 'NR <= 20 { print "  " $0 } END { if (NR > 20) print "  ... and " NR - 20 " more" }' <<<"${changed}" >&2
  echo "verify-app-version: bump appVersion in ${chart_yaml} (and the artifacthub.io/images tags beside it)" >&2
  exit 1
fi
echo "verify-app-version: the images' code is unchanged since appVersion ${now} was set ($(git rev-parse --short "${base}"))"
