#!/usr/bin/env bash
# Runs the end-to-end tests (test/e2e): a kind cluster, the project's images
# loaded into it, the chart installed with Prometheus, assertions on the hello
# backend's own call count. Needs go, docker and a running dockerd.
#
# Environment (all optional):
#   KIND_NODE_IMAGE, KIND_CONFIG, KIND_OFFLINE_DIR: see scripts/kind-env.sh
#   E2E_REPLACE_CLUSTER=1  delete the cluster KIND_CLUSTER first if it exists
#   KIND_CLUSTER, E2E_REUSE_CLUSTER, E2E_IMAGE_TAG: see test/e2e/doc.go
#   E2E_PROMETHEUS     1 (default): install and check the chart's Prometheus
#   E2E_RUN            the tests to run (go test -run; default: make e2e's two)
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
./scripts/tools.sh kind helm
# shellcheck source=kind-env.sh
source ./scripts/kind-env.sh

if [[ "${E2E_REPLACE_CLUSTER:-0}" == 1 ]]; then
  kind delete cluster --name "${KIND_CLUSTER:-collapser-e2e}"
fi

export E2E_PROMETHEUS="${E2E_PROMETHEUS:-1}"
if [[ "${E2E_PROMETHEUS}" == 1 ]]; then
  ./scripts/prometheus-image.sh
fi

echo "==> go test ./e2e/ (node image: ${KIND_NODE_IMAGE:-kind default})"
cd test
COLLAPSER_E2E=1 KIND="${root}/bin/kind" go test -count=1 -timeout 45m -v -run "${E2E_RUN:-^(TestCollapserOnKind|TestTracesOnKind)\$}" ./e2e/
