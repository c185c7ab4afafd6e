#!/usr/bin/env bash
# Builds the sidecar's and the injector's images, loads them into the kind
# cluster and installs (or upgrades) the injector alone, as step 1 of the
# README's "Put it in front of a service" does on a cluster that can pull them:
# release "collapser" in namespace "collapser-system", with
# charts/collapser/ci/injector-only-values.yaml (no demo pod of the chart's
# own). Any pod whose template says collapser.io/inject: "true" then gets the
# sidecar.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
cluster="${KIND_CLUSTER:-collapser}"
tag="${IMAGE_TAG:-dev}"
./scripts/tools.sh kind helm

IMAGE_TAG="${tag}" ./scripts/images.sh
kind load docker-image --name "${cluster}" collapser/collapser:"${tag}" collapser/collapser-injector:"${tag}"

helm upgrade --install collapser charts/collapser --kube-context "kind-${cluster}" \
  --namespace collapser-system --create-namespace --wait --timeout 5m \
  -f charts/collapser/ci/injector-only-values.yaml \
  --set collapser.image.tag="${tag}",injector.image.tag="${tag}"
