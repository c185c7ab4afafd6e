#!/usr/bin/env bash
# Builds the images, loads them into the kind cluster and installs (or
# upgrades) the chart as release "collapser":
#
#   scripts/deploy.sh            # the demo, in namespace "collapser", with
#                                # Prometheus and Grafana unless PROMETHEUS=false
#                                # or GRAFANA=false
#   scripts/deploy.sh injector   # the injector alone, in namespace
#                                # "collapser-system", as step 1 of the README's
#                                # "Put it in front of a service" does on a cluster
#                                # that can pull the images
#                                # (charts/collapser/ci/injector-only-values.yaml),
#                                # with a Prometheus that scrapes it if PROMETHEUS=true
#
# Without a registry, the Prometheus image is built from the Go module proxy
# (PROMETHEUS_IMAGE_PULL=0); Grafana's image cannot be had there: use GRAFANA=false.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
cluster="${KIND_CLUSTER:-collapser}"
tag="${IMAGE_TAG:-dev}"
what="${1:-demo}"
./scripts/tools.sh kind helm

IMAGE_TAG="${tag}" ./scripts/images.sh
case "${what}" in
  demo)
    prometheus="${PROMETHEUS:-true}"
    grafana="${GRAFANA:-true}"
    namespace=collapser
    images=(collapser/collapser:"${tag}" collapser/hello-backend:"${tag}" collapser/democlient:"${tag}")
    values=(--set "collapser.image.tag=${tag},backend.image.tag=${tag},tests.image.tag=${tag}"
      --set "prometheus.enabled=${prometheus},grafana.enabled=${grafana}")
    ;;
  injector)
    prometheus="${PROMETHEUS:-false}"
    namespace=collapser-system
    images=(collapser/collapser:"${tag}" collapser/collapser-injector:"${tag}")
    values=(-f charts/collapser/ci/injector-only-values.yaml
      --set "collapser.image.tag=${tag},injector.image.tag=${tag},prometheus.enabled=${prometheus}")
    ;;
  *)
    echo "deploy.sh: unknown target ${what} (demo or injector)" >&2
    exit 2
    ;;
esac
if [[ "${prometheus}" == true ]]; then
  ./scripts/prometheus-image.sh
  images+=("${PROMETHEUS_IMAGE:-prom/prometheus:v3.16.0}")
fi
kind load docker-image --name "${cluster}" "${images[@]}"

helm upgrade --install collapser charts/collapser --kube-context "kind-${cluster}" \
  --namespace "${namespace}" --create-namespace --wait --timeout 5m "${values[@]}"
