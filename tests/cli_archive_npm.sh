#!/usr/bin/env bash
# Cross-check with real readers: terra bakes and exports tiles, then @here/quantized-mesh-decoder
# and @loaders.gl/terrain decode them, and CesiumJS 1.140 (in Node) loads layer.json and the tiles
# from `terra serve` over loopback; counts and values must agree with terra's decoder. The packages
# are installed from npm into tests/js/node_modules (gitignored). Skips, saying so, without npm or
# network.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
js=$(cd "$(dirname "$0")/js" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "SKIP: node/npm not installed"; exit 77; fi
if [ ! -d "$js/node_modules/@here/quantized-mesh-decoder" ] || [ ! -d "$js/node_modules/@loaders.gl/terrain" ] ||
   [ ! -d "$js/node_modules/cesium" ]; then
  log=$(mktemp)
  if ! (cd "$js" && timeout 300 npm install --no-audit --no-fund --loglevel=error >/dev/null 2>"$log"); then
    echo "SKIP: npm install failed (no network to the npm registry?): $(tail -3 "$log")"
    rm -f "$log"
    exit 77
  fi
  rm -f "$log"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_npm.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$T" bake -q --frame geographic --levels 4 --bounds 7,45,30,60 --cells 16 "$work/geo.terra"
"$T" bake -q --levels 3 --area 0,0,256,256 --cells 32 --compression zstd "$work/local.terra"
"$T" bake -q --levels 2 --area 0,0,128,128 --cells 256 --no-surfaces "$work/big.terra"   # 66049 vertices: 32-bit indices
: >"$work/manifest.jsonl"
for a in geo local big; do
  "$T" export "$work/$a.terra" "$work/$a" >/dev/null
  (cd "$work/$a" && find . -name '*.terrain' | sort) | while read -r f; do
    zxy=${f#./}; zxy=${zxy%.terrain}
    printf '{"path":"%s","terra":%s}\n' "$work/$a/$zxy.terrain" "$("$T" info --tile "$zxy" "$work/$a.terra")" >>"$work/manifest.jsonl"
  done
done
grep -q '"vertexCount":66049' "$work/manifest.jsonl" || { echo "FAIL: no 32-bit index tile in the cross-check"; exit 1; }
cd "$js"
node crosscheck.mjs "$work/manifest.jsonl"
# CesiumJS through terra serve (loopback only)
"$T" serve -p 0 "$work/geo.terra" >"$work/serve.txt" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do grep -q "http://" "$work/serve.txt" 2>/dev/null && break; sleep 0.05; done
url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.txt") || { echo "FAIL: serve did not start"; exit 1; }
node cesium_check.mjs "$url/" "$work/manifest.jsonl" "$work/geo/"
