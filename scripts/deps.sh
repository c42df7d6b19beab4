#!/usr/bin/env bash
# Installs the Debian packages terra needs, when missing.
# Usage: scripts/deps.sh [build|demo|all]   (default: all)
#   build  what `make` needs: a C compiler, CMake, pkg-config and the optional parts' -dev packages
#   demo   build, and Mesa's EGL and GL drivers, which `make demo` draws with
#   all    demo, and what the tests and benchmarks use: clang (fuzzing), node and npm (peer
#          decoders), Chromium (CesiumJS), Xvfb and xdotool (the windowed viewer, its mouse), stb
#          (a peer benchmark), OpenMPI (terra-cook-mpi, the cook on MPI ranks)
# Not root: prints the apt-get line to run and exits 0 (configure then names what is missing).
set -euo pipefail
what=${1:-all}

build=(cmake make gcc pkg-config
       zlib1g-dev libpng-dev libzstd-dev libcjson-dev libmeshoptimizer-dev libgdal-dev libassimp-dev libode-dev
       libmicrohttpd-dev libcurl4-openssl-dev libluajit-5.1-dev libepoxy-dev libegl-dev libgl-dev libopengl-dev libglfw3-dev)
demo=(libegl1 libegl-mesa0 libgl1-mesa-dri)
tests=(clang libclang-rt-14-dev curl python3 libstb-dev chromium fonts-liberation xvfb xauth xdotool
       libopenmpi-dev openmpi-bin)

case "$what" in
  build) pkgs=("${build[@]}") ;;
  demo) pkgs=("${build[@]}" "${demo[@]}") ;;
  all) pkgs=("${build[@]}" "${demo[@]}" "${tests[@]}") ;;
  *) echo "usage: scripts/deps.sh [build|demo|all]" >&2; exit 2 ;;
esac

missing=()
if [ "$what" = all ]; then # node and npm: any install will do
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: terra needs these Debian packages, which are missing; as root, run:" >&2
  echo "  apt-get install ${missing[*]}" >&2
  exit 0
fi
echo "deps.sh: installing missing packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
