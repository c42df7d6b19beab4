#!/usr/bin/env bash
# terra bake / info / export / serve end to end: bake small archives in both frames, read them
# back, export a z/x/y tree with layer.json, serve over loopback (127.0.0.1 only) and fetch.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_archive.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- bake, both frames ----
"$T" bake --levels 3 --area 0,0,256,256 --cells 16 "$work/local.terra" >"$work/bake.txt"
grep -q "21 tiles" "$work/bake.txt" || fail "local bake: $(cat "$work/bake.txt")"
"$T" bake --frame geographic --levels 4 --bounds 7,45,30,60 --cells 16 --compression zstd -q "$work/geo.terra"
[ -s "$work/geo.terra" ] || fail "geographic archive missing"
"$T" bake --levels 1 --area 0,0,64,64 -q "$work/one.terra"

# ---- bake --tin: the same ground as TIN tiles (terra-cook runs it), far smaller, every promise
# `terra check` holds, drawn by the archive path ----
if [ -x "$(dirname "$T")/terra-cook" ]; then
  "$T" bake --levels 3 --area 0,0,1024,1024 -q "$work/grid3.terra"
  "$T" bake --tin --levels 3 --area 0,0,1024,1024 -e 1 "$work/tin.terra" >"$work/tin.txt" 2>&1 ||
    fail "bake --tin: $(cat "$work/tin.txt")"
  grep -q "^levels 3" "$work/tin.txt" && awk '$1 == "level" && $2 == 0 { e = $NF } END { exit !(e > 0 && e <= 1) }' "$work/tin.txt" ||
    fail "bake --tin report (3 levels, the finest within 1 m): $(cat "$work/tin.txt")"
  tin=$(stat -c %s "$work/tin.terra") grid=$(stat -c %s "$work/grid3.terra")
  [ $((tin * 20)) -lt "$grid" ] || fail "bake --tin: $tin bytes, not a twentieth of the grids' $grid"
  "$T" check "$work/tin.terra" >"$work/tin_check.txt" || fail "check of bake --tin: $(tail -5 "$work/tin_check.txt")"
  "$T" info "$work/tin.terra" | grep -q "tiles       6" || fail "info of bake --tin"
  "$T" bake --tin --frame geographic "$work/x.terra" 2>/dev/null && fail "bake --tin --frame geographic accepted"
  [ ! -e "$work/x.terra" ] || fail "a refused bake --tin left an archive"
  if [ -x "$(dirname "$T")/terra-gl" ]; then
    "$T" render --archive "$work/tin.terra" -o "$work/tin.png" --size 160x90 --clear 255,0,255 >"$work/tin_r.txt" 2>&1 ||
      fail "render of bake --tin: $(cat "$work/tin_r.txt")"
  fi
  echo "bake --tin: $tin bytes against $grid for the grids of the same area and levels"
fi

# ---- info ----
"$T" info --verify "$work/local.terra" >"$work/info.txt"
grep -q "frame       local" "$work/info.txt" || fail "info frame"
grep -q "all 21 tiles intact" "$work/info.txt" || fail "info verify"
"$T" info "$work/geo.terra" | grep -q "geographic" || fail "info geographic"
"$T" info --json "$work/one.terra" | grep -q '"tile_count":1' || fail "info --json"
"$T" info --help | grep -q "Usage: terra info" || fail "info --help"

# ---- leftovers of a writer killed mid-write: reported by info, removed by the next write ----
dead=$(sh -c 'echo $$') # a process that has ended
head -c 1000 /dev/zero >"$work/one.terra.tmp$dead-0"
"$T" info "$work/one.terra" >"$work/info.txt"
grep -q "leftovers   1 temporary file (1000 B)" "$work/info.txt" || fail "info leftovers: $(cat "$work/info.txt")"
"$T" bake --levels 1 --area 0,0,64,64 -q "$work/one.terra"
[ ! -e "$work/one.terra.tmp$dead-0" ] || fail "leftover not removed by the next bake"
"$T" info "$work/one.terra" | grep -q leftovers && fail "leftovers reported after the cleanup"

# ---- refusals: another version, damage, garbage ----
cp "$work/local.terra" "$work/v3.terra"
printf '\x03' | dd of="$work/v3.terra" bs=1 seek=8 conv=notrunc status=none
if "$T" info "$work/v3.terra" 2>"$work/err.txt"; then fail "version 3 accepted"; fi
grep -q "version 3" "$work/err.txt" && grep -q "version 1" "$work/err.txt" && grep -q "again" "$work/err.txt" \
  || fail "version message: $(cat "$work/err.txt")"
cp "$work/local.terra" "$work/bad.terra"
size=$(stat -c %s "$work/bad.terra")
printf '\xff' | dd of="$work/bad.terra" bs=1 seek=$((size - 100)) conv=notrunc status=none
if "$T" info --verify "$work/bad.terra" >/dev/null 2>"$work/err.txt"; then fail "damaged tile not reported"; fi
grep -q "checksum" "$work/err.txt" || fail "damage message: $(cat "$work/err.txt")"
# the damaged tile is named once, then the count
[ "$(grep -c "checksum" "$work/err.txt")" = 1 ] && grep -q "1 of 21 tiles bad" "$work/err.txt" \
  || fail "damage reported more than once or without a count: $(cat "$work/err.txt")"
grep -q 'tile [0-9]*/[0-9-]*/[0-9-]*' "$work/err.txt" || fail "no tile named: $(cat "$work/err.txt")"
head -c 1000 "$work/local.terra" >"$work/trunc.terra"
if "$T" info "$work/trunc.terra" 2>/dev/null; then fail "truncated archive accepted"; fi
echo "not an archive at all" >"$work/junk.terra"
if "$T" info "$work/junk.terra" 2>/dev/null; then fail "junk accepted"; fi

# ---- export ----
"$T" export "$work/geo.terra" "$work/tree" >/dev/null
[ -f "$work/tree/layer.json" ] || fail "no layer.json"
for key in '"format":"quantized-mesh-1.0"' '"scheme":"tms"' '"projection":"EPSG:4326"' '"available":' '"octvertexnormals"'; do
  grep -q "$key" "$work/tree/layer.json" || fail "layer.json lacks $key: $(cat "$work/tree/layer.json")"
done
if grep -q '"metadata"' "$work/tree/layer.json"; then fail "layer.json lists metadata without metadataAvailability"; fi
[ -f "$work/tree/0/0/0.terrain" ] && [ -f "$work/tree/0/1/0.terrain" ] || fail "both root tiles must be exported"
n_tiles=$(find "$work/tree" -name '*.terrain' | wc -l)
[ "$n_tiles" -gt 4 ] || fail "only $n_tiles tiles exported"
# exported tiles are plain quantized-mesh (not gzip): first two bytes are not 1f 8b
[ "$(head -c 2 "$work/tree/0/0/0.terrain" | od -An -tx1 | tr -d ' ')" != "1f8b" ] || fail "export wrote gzip by default"
"$T" export --gzip "$work/local.terra" "$work/tree2" >/dev/null
[ "$(head -c 2 "$work/tree2/0/0/0.terrain" | od -An -tx1 | tr -d ' ')" = "1f8b" ] || fail "--gzip tiles not gzip"
grep -q '"terra_frame":"local"' "$work/tree2/layer.json" || fail "local layer.json"

# ---- serve over loopback ----
if ! command -v curl >/dev/null; then echo "SKIP serve: curl not installed"; exit 0; fi
"$T" serve --port 0 --threads 2 "$work/local.terra" >"$work/serve.txt" 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do grep -q "http://" "$work/serve.txt" 2>/dev/null && break; sleep 0.05; done
url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.txt") || fail "serve did not start: $(cat "$work/serve.err")"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
curl -sf "$url/layer.json" -o "$work/served_layer.json" || fail "GET layer.json"
cmp -s "$work/served_layer.json" "$work/tree2/layer.json" || fail "served layer.json differs from exported one"
curl -s -D "$work/h.txt" -H 'Accept-Encoding: gzip' "$url/2/0/0.terrain?v=1.0.0" -o "$work/t.gz"
grep -qi '^content-encoding: gzip' "$work/h.txt" || fail "no Content-Encoding: gzip: $(cat "$work/h.txt")"
grep -qi '^content-type: application/vnd.quantized-mesh' "$work/h.txt" || fail "content type"
grep -qi '^access-control-allow-origin: \*' "$work/h.txt" || fail "CORS"
curl -s "$url/2/0/0.terrain" -o "$work/t.raw"  # no Accept-Encoding: decompressed
gunzip -c "$work/t.gz" | cmp -s - "$work/t.raw" || fail "identity and gzip bodies differ"
[ "$(code "$url/0/0/0.terrain")" = 200 ] || fail "root tile"
[ "$(code "$url/9/0/0.terrain")" = 404 ] || fail "absent level not 404"
[ "$(code "$url/2/99/99.terrain")" = 404 ] || fail "absent tile not 404"
[ "$(code "$url/x/0/0.terrain")" = 400 ] || fail "malformed path not 400"
[ "$(code "$url/2/0/0/0.terrain")" = 400 ] || fail "extra segment not 400"
[ "$(code "$url/2/99999999999/0.terrain")" = 400 ] || fail "huge number not 400"
[ "$(code "$url/../../etc/passwd")" = 404 ] || fail "traversal not 404"
[ "$(code "$url/")" = 404 ] || fail "root not 404"
[ "$(code -X POST "$url/layer.json")" = 405 ] || fail "POST not 405"
[ "$(code -X OPTIONS "$url/layer.json")" = 204 ] || fail "OPTIONS not 204"
kill -0 "$server_pid" || fail "server died"
kill "$server_pid"; wait "$server_pid" || true; server_pid=
# a zstd archive: tiles are decompressed for the client, never sent as zstd
"$T" serve -p 0 "$work/geo.terra" >"$work/serve2.txt" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do grep -q "http://" "$work/serve2.txt" 2>/dev/null && break; sleep 0.05; done
url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve2.txt") || fail "serve (zstd) did not start"
curl -s -D "$work/h2.txt" -H 'Accept-Encoding: gzip, zstd' "$url/0/1/0.terrain" -o "$work/t2.raw"
grep -qi '^content-encoding' "$work/h2.txt" && fail "zstd tile sent with a Content-Encoding"
cmp -s "$work/t2.raw" "$work/tree/0/1/0.terrain" || fail "served zstd tile differs from the exported one"
kill "$server_pid"; wait "$server_pid" || true; server_pid=
echo "cli_archive: all checks passed"
