#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet.
# Usage: scripts/apt-install.sh PACKAGE...
# Runs `apt-get update` only when something is missing, and never asks questions,
# so it is safe in CI (root, no stdin) and a no-op on a machine that has them.
set -o errexit -o nounset -o pipefail

missing=()
for pkg in "$@"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" -ne 0 ]]; then
  echo "apt-install: missing ${missing[*]}; run as root or install them: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "apt-install: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq </dev/null
apt-get install -y -qq "${missing[@]}" </dev/null
