#!/usr/bin/env bash
# A real client draws geographic archives: `terra serve` serves each over loopback and CesiumJS
# (npm cesium) in Debian's headless Chromium (npm puppeteer-core; never a downloaded browser) loads
# it with the camera looking down over the archive's area (tests/js/cesium_browser.mjs): the tile of
# the deepest level under the camera must be requested, the picture must show ground with relief,
# no tile may fail. Two archives: the default world baked for Cesium (levels 0..4), and, with
# $TERRA_SHARED, the SRTM cell N44W072 cooked by `terra cook` (the camera over Mount Washington).
# Last, on the cooked cell, `terra render --planet --archive` draws a view and CesiumJS draws the
# same view, both with a gray height ramp, and tests/js/cesium_compare.mjs compares the two pictures
# pixel by pixel (the same pixels ground, the heights their grays stand for close; 60 + 80 s).
# Skips, saying so, without chromium, node/npm or the npm packages. Every step is bounded (15 + 60
# + 400 + 75 + 60 + 80 s at worst; about a minute when things work); TERRA_KEEP=1 keeps the
# screenshots and archives.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
js=$(cd "$(dirname "$0")/js" && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "SKIP cli_cesium_browser: $chromium not installed"; exit 77; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "SKIP cli_cesium_browser: node/npm not installed"; exit 77; fi
if [ ! -d "$js/node_modules/cesium/Build/Cesium" ] || [ ! -d "$js/node_modules/puppeteer-core" ]; then
  log=$(mktemp)
  if ! (cd "$js" && PUPPETEER_SKIP_DOWNLOAD=1 timeout 300 npm install --no-audit --no-fund --loglevel=error >/dev/null 2>"$log"); then
    echo "SKIP cli_cesium_browser: npm install failed (no network to the npm registry?): $(tail -3 "$log")"
    rm -f "$log"
    exit 77
  fi
  rm -f "$log"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cesium.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  [ -n "${TERRA_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# client NAME LON LAT HEIGHT_M LOAD_S: serves NAME.terra and has CesiumJS draw it (screenshot
# NAME.png), the globe loaded within LOAD_S seconds, the whole client within LOAD_S + 20
client() {
  local name=$1 url
  "$T" serve --port 0 --threads 2 "$work/$name.terra" >"$work/$name.serve.out" 2>"$work/$name.serve.err" &
  server_pid=$!
  for _ in $(seq 1 100); do grep -q "http://" "$work/$name.serve.out" 2>/dev/null && break; sleep 0.05; done
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/$name.serve.out") || fail "serve did not start: $(cat "$work/$name.serve.err")"
  echo "$name: screenshot $work/$name.png${TERRA_KEEP:+ (kept)}"
  (cd "$js" && timeout $(($5 + 20)) node cesium_browser.mjs "$url/" "$2" "$3" "$4" "$work/$name.png" "$5") || fail "$name: CesiumJS did not draw it"
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# the default world over 7,45..7.5,45.5, levels 0..4; the camera 60 km above its middle
timeout 15 "$T" bake -q --frame geographic --levels 5 "$work/bake.terra" || fail "terra bake"
client bake 7.25 45.25 60000 40

# a real DEM cooked for Cesium; the camera 14 km above Mount Washington
hgt=${TERRA_SHARED:+$TERRA_SHARED/data/dem/N44W072.hgt}
if [ -z "$hgt" ] || [ ! -f "$hgt" ]; then
  echo "SKIP cli_cesium_browser (cook): \$TERRA_SHARED/data/dem/N44W072.hgt not available"
  exit 0
fi
# At the default 1 m (about 35 s here; a few times that under the sanitizers)
timeout 400 "$T" cook "$hgt" -o "$work/cook.terra" --no-cache >"$work/cook.out" 2>&1 ||
  fail "terra cook $hgt (rc $?, 400 s at most): $(tail -3 "$work/cook.out")"
# every promise holds against the SRTM samples, the hemisphere roots included (their 16-bit steps
# are 150 m wide and more)
"$T" check "$work/cook.terra" --source "$hgt" -q || fail "terra check $work/cook.terra --source $hgt"
client cook -71.3033 44.2706 14000 55

# terra and CesiumJS draw the same view of the cooked cell, both with a gray height ramp over
# 300..1900 m, unlit, on magenta, and the pictures are compared pixel by pixel
# (tests/js/cesium_compare.mjs: the same pixels ground, the heights their grays stand for close).
# The eye 6000 m above the ground of Mount Washington, looking 30 degrees east of north and 50
# down with a 45-degree vertical field of view at 480x270: the top of the picture looks 27.5
# degrees down (22.4 at its corners), so no sky shows and the farthest ground, at the top right
# corner, is about 44.33N 71.10W (18 km away, 8 km inside the cell's east edge; the top left
# corner is about 44.43N 71.33W): only ground of the cell, none past its edges. Bounded by 60 +
# 80 s (about 10 s when things work).
view_lat=44.2706 view_lon=-71.3033 view_heading=30 view_pitch=-50 view_fov=45 view_w=480 view_h=270
timeout 60 "$T" render --planet --archive "$work/cook.terra" --lat $view_lat --lon $view_lon --alt 6000 \
  --heading $view_heading --pitch $view_pitch --fov $view_fov --size ${view_w}x$view_h --clear 255,0,255 \
  --ramp 300,1900 -o "$work/terra_view.png" >"$work/terra_view.out" 2>&1 ||
  fail "terra render --planet --archive $work/cook.terra (rc $?): $(tail -3 "$work/terra_view.out")"
# the eye's height over WGS84, as terra placed it
eye_h=$(grep -o -- '-\?[0-9][0-9.]* m above the ellipsoid' "$work/terra_view.out" | head -1 | cut -d' ' -f1)
[ -n "$eye_h" ] || fail "terra render printed no '... m above the ellipsoid': $(cat "$work/terra_view.out")"

# serve_archive NAME: terra serve on NAME.terra in the background (server_pid), its root in url
serve_archive() {
  "$T" serve --port 0 --threads 2 "$work/$1.terra" >"$work/$1.serve.out" 2>"$work/$1.serve.err" &
  server_pid=$!
  for _ in $(seq 1 100); do grep -q "http://" "$work/$1.serve.out" 2>/dev/null && break; sleep 0.05; done
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/$1.serve.out") || fail "serve did not start: $(cat "$work/$1.serve.err")"
}
serve_archive cook
echo "compare: terra $work/terra_view.png, cesium $work/cesium_view.png${TERRA_KEEP:+ (kept)}, eye $eye_h m above the ellipsoid"
(cd "$js" && timeout 80 node cesium_compare.mjs "$url/" $view_lon $view_lat "$eye_h" $view_heading $view_pitch \
  $view_fov $view_w $view_h 300 1900 "$work/terra_view.png" "$work/cesium_view.png" 55) ||
  fail "compare: CesiumJS's picture of the cooked cell is not terra's"
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=
