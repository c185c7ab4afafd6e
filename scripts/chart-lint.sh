#!/usr/bin/env bash
# Lints the chart: helm lint --strict with the defaults and each ci/ values
# file, then chart-testing's ct lint with ct.yaml (yamllint from apt).
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH="${root}/bin:${PATH}"
./scripts/tools.sh helm ct
./scripts/apt-install.sh yamllint

for values in charts/collapser/ci/*-values.yaml; do
  echo "==> helm lint --strict charts/collapser -f ${values}"
  helm lint --strict charts/collapser -f "${values}"
done
echo "==> ct lint --config ct.yaml --all"
ct lint --config ct.yaml --all
