#!/usr/bin/env bash
# Installs the Debian packages terra's build, tests and benchmarks need, when missing.
# Usage: scripts/deps.sh [build|all]   (default: all)
set -euo pipefail

pkgs=(cmake make gcc clang libclang-rt-14-dev pkg-config
      zlib1g-dev libpng-dev libzstd-dev libcjson-dev libmicrohttpd-dev libgdal-dev libode-dev libassimp-dev libmeshoptimizer-dev
      curl libstb-dev chromium fonts-liberation
      libegl-dev libegl1 libegl-mesa0 libgl1-mesa-dri libgl-dev libopengl-dev libepoxy-dev
      libglfw3-dev xvfb xauth)

missing=()
# node and npm (peer benchmarks, cross-checks with real decoders): any install will do.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: not root; install them yourself: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
