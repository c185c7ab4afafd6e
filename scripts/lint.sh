#!/usr/bin/env bash
# Static checks for every Go module in the repository (the root and, when it
# exists, test/): gofmt, go vet and staticcheck at STATICCHECK_VERSION (Makefile);
# the two modules' versions of the modules they share (make verify-modules); the
# relative links and anchors of the Markdown files (make verify-links); shellcheck
# of the scripts (make verify-scripts).
set -o errexit -o nounset -o pipefail

: "${STATICCHECK_VERSION:?set by the Makefile: run make lint}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

modules=(.)
[[ -f test/go.mod ]] && modules+=(test)
dirs=(src)
[[ -d test ]] && dirs+=(test)

unformatted="$(gofmt -l "${dirs[@]}")"
if [[ -n "$unformatted" ]]; then
  printf 'lint: not gofmt-ed (run: make fmt):\n%s\n' "$unformatted" >&2
  exit 1
fi
for m in "${modules[@]}"; do
  echo "==> go vet + staticcheck@$STATICCHECK_VERSION in $m"
  (cd "$m" && go vet ./... && go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...)
done
if [[ -f test/go.mod ]]; then
  echo "==> shared modules at one version, relative links and anchors in the Markdown files"
  (cd test && go test -count=1 ./tools/gomods/ ./tools/mdlinks/)
fi
echo "==> shellcheck"
./scripts/apt-install.sh shellcheck
shellcheck -x -P SCRIPTDIR scripts/*.sh .ci/run
