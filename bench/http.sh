#!/usr/bin/env bash
# Archives over HTTP range requests (run by scripts/bench.sh; alone: bash bench/http.sh build):
# the default world baked over 4 km (6 levels, 32-cell tiles) and served on loopback by the test
# range server (tests/http_range_server.py); one settled `terra render --archive URL` frame against
# the same render of the file, RUNS times alternated. Figures archive.http.*: requests before the
# first tile payload (goal <= 3), requests and bytes to the first frame, the bytes read over the
# distinct payloads read, and the HTTP render's time over the file's (medians).
set -euo pipefail
build=${1:-build}
T="$build/terra"
here=$(cd "$(dirname "$0")" && pwd)
runs=${TERRA_BENCH_HTTP_RUNS:-5}
out=${TERRA_BENCH_OUT:-$build/bench/results.jsonl}
[ -x "$build/terra-gl" ] && [ -x "$build/terra-http" ] && command -v python3 >/dev/null ||
  { echo "  (no terra-gl, terra-http or python3: the HTTP figures are not recorded)"; exit 0; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_bench_http.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
record() { # NAME VALUE UNIT RUNS STAT
  printf '  %-48s %14.3f %-6s (%s of %d)\n' "$1" "$2" "$3" "$5" "$4"
  printf '{"name": "%s", "value": %s, "unit": "%s", "runs": %d, "stat": "%s"}\n' "$1" "$2" "$3" "$4" "$5" >>"$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

mkdir "$work/files"
"$T" bake -q --levels 6 --area 0,0,4096,4096 --cells 32 "$work/files/world.terra"
python3 "$here/../tests/http_range_server.py" "$work/files" "$work/port" "$work/log" &
pid=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")/world.terra"
data_offset=$(python3 -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(40), 32)[0])" \
  "$work/files/world.terra")
now() { date +%s.%N; }
for r in $(seq 1 "$runs"); do
  t0=$(now)
  "$T" render --archive "$work/files/world.terra" --size 640x360 -o "$work/file.png" >/dev/null
  t1=$(now)
  : >"$work/log"
  "$T" render --archive "$url" --size 640x360 -o "$work/url.png" >"$work/render.txt"
  t2=$(now)
  cmp -s "$work/file.png" "$work/url.png" || { echo "bench http: the pictures differ" >&2; exit 1; }
  echo "$t0 $t1 $t2" | awk '{ print ($3 - $2) / ($2 - $1) }' >>"$work/ratio"
  awk -v d="$data_offset" '{ split($3, r, "-"); if (r[1] + 0 >= d) exit; n++ } END { print n + 0 }' "$work/log" >>"$work/before"
  wc -l <"$work/log" >>"$work/requests"
  awk '{ s += $5 } END { print s / 1e6 }' "$work/log" >>"$work/mb"
  awk -v d="$data_offset" '{ split($3, r, "-"); if (r[1] + 0 >= d && !seen[$3]++) p += $5; s += $5 } END { print s / p }' \
    "$work/log" >>"$work/overhead"
done
echo "  $(tail -1 "$work/render.txt")"
record archive.http.requests_before_first_tile "$(median <"$work/before")" requests "$runs" median
record archive.http.requests_to_first_frame "$(median <"$work/requests")" requests "$runs" median
record archive.http.mb_to_first_frame "$(median <"$work/mb")" MB "$runs" median
record archive.http.bytes_read_vs_payloads "$(median <"$work/overhead")" x "$runs" median
record archive.http.render_time_vs_file "$(median <"$work/ratio")" x "$runs" median
