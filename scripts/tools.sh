#!/usr/bin/env bash
# Installs the pinned cluster tools into ./bin when missing or of another
# version: kind, helm (Helm 3) and ct (chart-testing). Versions come from the
# Makefile. Usage: scripts/tools.sh [kind] [helm] [ct]   (default: all three)
set -o errexit -o nounset -o pipefail

: "${KIND_VERSION:?set by the Makefile}" "${HELM_VERSION:?set by the Makefile}" "${CT_VERSION:?set by the Makefile}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"

# stamp: a tool is current when bin/.NAME-VERSION exists beside it.
current() { [[ -x "${bin}/$1" && -f "${bin}/.$1-$2" ]]; }
stamp() { rm -f "${bin}/.$1-"*; touch "${bin}/.$1-$2"; }

install_kind() {
  current kind "${KIND_VERSION}" && return
  echo "tools: kind ${KIND_VERSION}"
  GOBIN="${bin}" CGO_ENABLED=0 go install "sigs.k8s.io/kind@${KIND_VERSION}"
  stamp kind "${KIND_VERSION}"
}

install_helm() {
  current helm "${HELM_VERSION}" && return
  echo "tools: helm ${HELM_VERSION} (a few minutes the first time)"
  GOBIN="${bin}" CGO_ENABLED=0 go install -ldflags "-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  stamp helm "${HELM_VERSION}"
}

# ct: `go install ...@version` asks the proxy for its version list, which it
# refuses for this module; downloading the exact version and building inside
# the module cache works.
install_ct() {
  current ct "${CT_VERSION}" && return
  echo "tools: ct ${CT_VERSION}"
  local dir
  dir="$(go mod download -json "github.com/helm/chart-testing/v3@${CT_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/ct" ./ct)
  stamp ct "${CT_VERSION}"
}

for tool in "${@:-kind helm ct}"; do
  for t in ${tool}; do "install_${t}"; done
done
