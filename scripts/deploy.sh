#!/usr/bin/env bash
# Builds the images, loads them into the kind cluster and installs (or
# upgrades) the chart as release "collapser" in namespace "collapser", with
# Prometheus and Grafana unless PROMETHEUS=false or GRAFANA=false. Without a
# registry, the Prometheus image is built from the Go module proxy
# (PROMETHEUS_IMAGE_PULL=0); Grafana's image cannot be had there: use GRAFANA=false.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
cluster="${KIND_CLUSTER:-collapser}"
tag="${IMAGE_TAG:-dev}"
prometheus="${PROMETHEUS:-true}"
grafana="${GRAFANA:-true}"
./scripts/tools.sh kind helm

IMAGE_TAG="${tag}" ./scripts/images.sh
images=(collapser/collapser:"${tag}" collapser/hello-backend:"${tag}" collapser/democlient:"${tag}")
if [[ "${prometheus}" == true ]]; then
  ./scripts/prometheus-image.sh
  images+=("${PROMETHEUS_IMAGE:-prom/prometheus:v3.16.0}")
fi
kind load docker-image --name "${cluster}" "${images[@]}"

helm upgrade --install collapser charts/collapser --kube-context "kind-${cluster}" \
  --namespace collapser --create-namespace --wait --timeout 5m \
  --set collapser.image.tag="${tag}",backend.image.tag="${tag}",tests.image.tag="${tag}" \
  --set prometheus.enabled="${prometheus}",grafana.enabled="${grafana}"
