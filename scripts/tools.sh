#!/usr/bin/env bash
# Installs the pinned chart and cluster tools into ./bin when missing or of
# another version. Versions come from the Makefile.
#
#   scripts/tools.sh [TOOL...]   (default: kind helm helm4 ct kubeconform helm-docs)
#
#   kind         sigs.k8s.io/kind                       KIND_VERSION
#   helm         Helm 3, helm.sh/helm/v3                HELM_VERSION
#   helm4        Helm 4, helm.sh/helm/v4, as bin/helm4  HELM4_VERSION
#   ct           chart-testing                          CT_VERSION
#   kubeconform  github.com/yannh/kubeconform           KUBECONFORM_VERSION
#   helm-docs    github.com/norwoodj/helm-docs          HELM_DOCS_VERSION
#   ghz          github.com/bojand/ghz (make bench-peers) GHZ_VERSION
#   kubectl      not go-installable: the kind-offline kit's
#                ($KIND_OFFLINE_WORK/bin/kubectl) linked into bin/, else one on PATH
#
# Every tool is built from the Go module proxy with `go install` (or `go build`
# in the module cache), so no prebuilt binary is downloaded.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"

# need fails unless the Makefile exported the named version variables.
need() {
  local v
  for v in "$@"; do
    [[ -n "${!v:-}" ]] || { echo "tools: ${v} is not set: run through make (make tools)" >&2; exit 1; }
  done
}

# A tool is current when bin/.NAME-VERSION exists beside it.
current() { [[ -x "${bin}/$1" && -f "${bin}/.$1-$2" ]]; }
stamp() { rm -f "${bin}/.$1-"*; touch "${bin}/.$1-$2"; }

# goinstall NAME VERSION PACKAGE@VERSION [go install flags...]: installs into a
# temporary GOBIN and moves the binary to bin/NAME, timing the build.
goinstall() {
  local name=$1 version=$2 pkg=$3 tmp start
  shift 3
  current "${name}" "${version}" && return
  echo "tools: ${name} ${version}"
  tmp="$(mktemp -d)"
  start=${SECONDS}
  GOBIN="${tmp}" CGO_ENABLED=0 go install -trimpath "$@" "${pkg}"
  mv "${tmp}"/* "${bin}/${name}"
  rmdir "${tmp}"
  stamp "${name}" "${version}"
  echo "tools: ${name} ${version} built in $((SECONDS - start))s"
}

install_kind() {
  need KIND_VERSION
  goinstall kind "${KIND_VERSION}" "sigs.k8s.io/kind@${KIND_VERSION}"
}

# Helm 3 takes its version and the Kubernetes version it assumes without a
# cluster (helm template, helm lint: v1.20 unless set) from variables set at link
# time; its own release build sets them from its k8s.io/client-go version (v0.N
# is Kubernetes 1.N), and so does this.
install_helm() {
  need HELM_VERSION
  current helm "${HELM_VERSION}" && return
  local dir minor x=""
  dir="$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "${dir}/go.mod")"
  for pkg in pkg/chartutil pkg/lint/rules; do
    x+=" -X helm.sh/helm/v3/${pkg}.k8sVersionMajor=1 -X helm.sh/helm/v3/${pkg}.k8sVersionMinor=${minor}"
  done
  goinstall helm "${HELM_VERSION}" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}${x}"
}

install_helm4() {
  need HELM4_VERSION
  goinstall helm4 "${HELM4_VERSION}" "helm.sh/helm/v4/cmd/helm@${HELM4_VERSION}" \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM4_VERSION}"
}

install_kubeconform() {
  need KUBECONFORM_VERSION
  goinstall kubeconform "${KUBECONFORM_VERSION}" "github.com/yannh/kubeconform/cmd/kubeconform@${KUBECONFORM_VERSION}" -ldflags "-s -w"
}

install_helm-docs() {
  need HELM_DOCS_VERSION
  goinstall helm-docs "${HELM_DOCS_VERSION}" "github.com/norwoodj/helm-docs/cmd/helm-docs@${HELM_DOCS_VERSION}" -ldflags "-s -w"
}

install_ghz() {
  need GHZ_VERSION
  goinstall ghz "${GHZ_VERSION}" "github.com/bojand/ghz/cmd/ghz@${GHZ_VERSION}" -ldflags "-s -w"
}

# ct: `go install ...@version` asks the proxy for its version list, which it
# refuses for this module; downloading the exact version and building inside
# the module cache works.
install_ct() {
  need CT_VERSION
  current ct "${CT_VERSION}" && return
  echo "tools: ct ${CT_VERSION}"
  local dir
  dir="$(go mod download -json "github.com/helm/chart-testing/v3@${CT_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/ct" ./ct)
  stamp ct "${CT_VERSION}"
}

# kubectl: the kind-offline kit's (the cluster's own version) when it was built,
# else one on PATH.
install_kubectl() {
  local kit="${KIND_OFFLINE_WORK:-/var/cache/kind-offline}/bin/kubectl"
  if [[ -x "${kit}" ]]; then
    [[ "$(readlink "${bin}/kubectl" 2>/dev/null)" == "${kit}" ]] || ln -sf "${kit}" "${bin}/kubectl"
    return
  fi
  [[ ! -L "${bin}/kubectl" ]] || rm -f "${bin}/kubectl"
  command -v kubectl >/dev/null && return
  echo "tools: no kubectl: install one (your distribution's package or a Kubernetes release), or build the kind-offline kit, whose build.sh leaves one in ${kit}" >&2
  exit 1
}

for tool in "${@:-kind helm helm4 ct kubeconform helm-docs}"; do
  for t in ${tool}; do "install_${t}"; done
done
