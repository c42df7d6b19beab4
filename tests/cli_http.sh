#!/usr/bin/env bash
# Archives read over HTTP range requests, on loopback only: a static range server started here
# (tests/http_range_server.py) and `terra serve`'s /archive.terra. info, export, render, fly and
# serve of a URL give what they give of the file; requests before the first tile are at most 3;
# a server that drops connections or answers 500 is recovered from; one that stalls, ignores
# ranges, corrupts bytes, is gone or has no such file gives a clear error and a non-zero exit in
# bounded time, never wrong ground. Every wait is bounded; the servers are stopped by the trap.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
bin=$(dirname "$T")
here=$(cd "$(dirname "$0")" && pwd)
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "SKIP cli_http: $tool not installed"; exit 77; }
done
[ -x "$bin/terra-http" ] || { echo "SKIP cli_http: terra built without TERRA_BUILD_HTTP"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_http.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# bounded tries for the failure cases: a stall is abandoned after 1 s, two retries
export TERRA_HTTP_STALL_S=1 TERRA_HTTP_RETRIES=2 TERRA_HTTP_TIMEOUT_MS=10000

# start_files NAME [FAULT]: a range server over $work/files; sets base (http://127.0.0.1:PORT)
start_files() {
  local name=$1 fault=${2:-}
  rm -f "$work/$name.port"
  : >"$work/$name.log"
  python3 "$here/http_range_server.py" "$work/files" "$work/$name.port" "$work/$name.log" $fault &
  pids+=($!)
  for _ in $(seq 1 100); do [ -s "$work/$name.port" ] && break; sleep 0.05; done
  [ -s "$work/$name.port" ] || fail "the range server $name did not start"
  base="http://127.0.0.1:$(cat "$work/$name.port")"
}
# start_serve NAME ARCHIVE: terra serve; sets surl
start_serve() {
  "$T" serve --port 0 --threads 2 "$2" >"$work/$1.out" 2>"$work/$1.err" &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q "http://" "$work/$1.out" 2>/dev/null && break; sleep 0.05; done
  surl=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/$1.out") || fail "terra serve $1 did not start: $(cat "$work/$1.err")"
}

mkdir -p "$work/files"
"$T" bake -q --levels 4 --area 0,0,1024,1024 --cells 32 "$work/files/grid.terra" # 1.4 MB, 340 tiles
start_files ok
url="$base/grid.terra"

# ---- info and export: the same as of the file ----
"$T" info "$work/files/grid.terra" | tail -n +2 >"$work/info_file.txt"
"$T" info "$url" >"$work/info_url.txt" || fail "info of the URL: $(cat "$work/info_url.txt")"
head -1 "$work/info_url.txt" | grep -qF "$url" || fail "info names not the URL: $(head -1 "$work/info_url.txt")"
tail -n +2 "$work/info_url.txt" | diff - "$work/info_file.txt" >/dev/null || fail "info of the URL differs from the file's"
"$T" info --verify "$url" | grep -q "all 340 tiles intact" || fail "info --verify of the URL"
"$T" export "$work/files/grid.terra" "$work/tree_file" >/dev/null
"$T" export "$url" "$work/tree_url" >/dev/null || fail "export of the URL"
diff -r "$work/tree_file" "$work/tree_url" >/dev/null || fail "export of the URL differs from the file's"

# ---- render and fly: the same picture; requests before the first tile ----
if [ -x "$bin/terra-gl" ]; then
  "$T" render --archive "$work/files/grid.terra" --size 160x90 -o "$work/file.png" >/dev/null
  : >"$work/ok.log"
  "$T" render --archive "$url" --size 160x90 -o "$work/url.png" >"$work/render.txt" 2>&1 ||
    fail "render of the URL: $(cat "$work/render.txt")"
  cmp -s "$work/file.png" "$work/url.png" || fail "render of the URL differs from the file's"
  # requests before the first payload (the payloads begin at the header's data offset, bytes 32..39)
  data_offset=$(python3 -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(40), 32)[0])" \
    "$work/files/grid.terra")
  before=$(awk -v d="$data_offset" '{ split($3, r, "-"); if (r[1] + 0 >= d) exit; n++ } END { print n + 0 }' "$work/ok.log")
  total=$(wc -l <"$work/ok.log")
  [ "$before" -le 3 ] || fail "$before requests before the first tile (goal <= 3): $(head -5 "$work/ok.log")"
  echo "render over HTTP: $before requests before the first tile, $total in all"
  "$T" fly --archive "$url" -n 3 --size 160x90 -o "$work/fly" --no-frames --sheet 0 >"$work/fly.txt" 2>&1 ||
    fail "fly over the URL: $(tail -3 "$work/fly.txt")"
fi

# ---- terra serve: of a URL, the same tiles; the archive itself by ranges ----
start_serve from_file "$work/files/grid.terra"
file_srv=$surl
start_serve from_url "$url"
url_srv=$surl
for t in layer.json 0/0/0.terrain 3/1/1.terrain; do
  curl -sf -m 10 "$file_srv/$t" -o "$work/a" || fail "GET $t from the file's server"
  curl -sf -m 10 "$url_srv/$t" -o "$work/b" || fail "GET $t from the URL's server"
  cmp -s "$work/a" "$work/b" || fail "$t differs between serving the file and serving its URL"
done
f="$work/files/grid.terra"
curl -sf -m 10 "$file_srv/archive.terra" -o "$work/whole" && cmp -s "$work/whole" "$f" || fail "GET /archive.terra whole"
curl -sf -m 10 -r 100-199 "$file_srv/archive.terra" -o "$work/part" || fail "GET a range of /archive.terra"
cmp -s "$work/part" <(head -c 200 "$f" | tail -c 100) || fail "bytes 100-199 of /archive.terra"
curl -sf -m 10 -r 1400000- "$file_srv/archive.terra" -o "$work/part" && cmp -s "$work/part" <(tail -c +1400001 "$f") ||
  fail "bytes 1400000- of /archive.terra"
curl -sf -m 10 -r -64 "$file_srv/archive.terra" -o "$work/part" && cmp -s "$work/part" <(tail -c 64 "$f") ||
  fail "the last 64 bytes of /archive.terra"
curl -s -m 10 -D "$work/h" -o /dev/null -r 100-199 "$file_srv/archive.terra"
grep -qi "^content-range: bytes 100-199/$(stat -c %s "$f")" "$work/h" || fail "Content-Range: $(cat "$work/h")"
[ "$(curl -s -m 10 -o /dev/null -w '%{http_code}' -r 99999999- "$file_srv/archive.terra")" = 416 ] || fail "a range past the end not 416"
# terra reading the archive through terra serve (the origin a CDN would front), and through a
# terra serve that itself reads the URL
"$T" info "$file_srv/archive.terra" | tail -n +2 | diff - "$work/info_file.txt" >/dev/null || fail "info through terra serve"
"$T" info --verify "$url_srv/archive.terra" | grep -q "all 340 tiles intact" || fail "info --verify through serve of a URL"

# ---- faults ----
for fault in drop:2 500:2; do # recovered from: the same answer
  start_files "f_${fault%%:*}" "$fault"
  "$T" info --verify "$base/grid.terra" >"$work/fault.txt" 2>&1 || fail "$fault not recovered from: $(tail -2 "$work/fault.txt")"
  grep -q "all 340 tiles intact" "$work/fault.txt" || fail "$fault: $(tail -2 "$work/fault.txt")"
done
# refused with a message, in bounded time
expect_error() { # NAME PATTERN COMMAND...
  local name=$1 pattern=$2 t0=$SECONDS
  shift 2
  if timeout 60 "$@" >"$work/err.txt" 2>&1; then fail "$name: exit 0: $(tail -2 "$work/err.txt")"; fi
  grep -q -- "$pattern" "$work/err.txt" || fail "$name: no '$pattern' in: $(head -3 "$work/err.txt")"
  [ $((SECONDS - t0)) -lt 30 ] || fail "$name took $((SECONDS - t0)) s"
}
start_files stall stall
expect_error stall "Operation too slow" "$T" info --verify "$base/grid.terra"
start_files corrupt corrupt
expect_error "corrupt (info)" "checksum mismatch" "$T" info --verify "$base/grid.terra"
if [ -x "$bin/terra-gl" ]; then
  expect_error "corrupt (render)" "checksum mismatch" "$T" render --archive "$base/grid.terra" --size 160x90 -o "$work/bad.png"
  [ ! -e "$work/bad.png" ] || fail "a render from corrupt answers wrote a picture"
fi
start_files norange norange
expect_error norange "ignores range requests" "$T" info "$base/grid.terra"
expect_error "no such file" "HTTP 404" "$T" info "$url.missing"
expect_error "server gone" "Couldn't connect" "$T" info "http://127.0.0.1:9/grid.terra"
expect_error "serve of a gone URL" "Couldn't connect" "$T" serve --port 0 "http://127.0.0.1:9/grid.terra"
echo "cli_http: ok"
