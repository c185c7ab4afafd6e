#!/usr/bin/env bash
# Makes the chart's Prometheus image (prom/prometheus:v3.16.0 by default)
# available in the local docker, for `kind load docker-image`: pulled where a
# registry is reachable, else built FROM scratch from the Prometheus module on
# the Go proxy (v0.316.0 is Prometheus v3.16.0). The built image serves the
# HTTP API and scrapes; its web UI has no assets (the API is all the chart
# and the e2e tests use). Service discovery is limited to DNS, file and HTTP,
# which is what the chart's scrape config uses.
set -o errexit -o nounset -o pipefail

: "${PROMETHEUS_MODULE_VERSION:?set by the Makefile}"
image="${PROMETHEUS_IMAGE:-prom/prometheus:v3.16.0}"

if docker image inspect "${image}" >/dev/null 2>&1; then
  echo "prometheus-image: ${image} is present"
  exit 0
fi
# PROMETHEUS_IMAGE_PULL=0 skips the pull, for machines without a registry.
if [[ "${PROMETHEUS_IMAGE_PULL:-1}" == 1 ]] && timeout 60 docker pull "${image}" >/dev/null 2>&1; then
  echo "prometheus-image: pulled ${image}"
  exit 0
fi

echo "prometheus-image: building ${image} from github.com/prometheus/prometheus@${PROMETHEUS_MODULE_VERSION}"
context="$(mktemp -d)"
trap 'rm -rf "${context}"' EXIT
GOBIN="${context}" CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' -tags remove_all_sd,enable_dns_sd \
  "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}"
cat >"${context}/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY prometheus /bin/prometheus
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
DOCKERFILE
docker build --quiet --label "io.collapser.prometheus-module=${PROMETHEUS_MODULE_VERSION}" -t "${image}" "${context}"
echo "prometheus-image: built ${image}"
