#!/usr/bin/env bash
# Bounded fuzzing run (CI): builds the seed corpora and runs each libFuzzer target for SECONDS.
# Usage: fuzz/run.sh BUILD_DIR [SECONDS]   (BUILD_DIR configured with CC=clang)
# A target is one `fuzz_one` line at the end: its name, the longest input, its seed folders.
set -euo pipefail
build=${1:?build dir}
secs=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${TERRA_SHARED:-$root/../shared}
for t in terra test_hostile test_cook_split test_scenery; do
  [ -x "$build/$t" ] || { echo "fuzz/run.sh: $build/$t not built" >&2; exit 1; }
done
corpus=$(mktemp -d "${TMPDIR:-/tmp}/terra_fuzz.XXXXXX")
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus/qmesh_seed" "$corpus/archive_seed" "$corpus/source_seed"
# Seeds: the real tiles under 20 kB (uncompressed ones), and tiny tiles and archives terra bakes.
if [ -d "$shared/data/qm" ]; then
  i=0; for f in "$shared"/data/qm/*/*.terrain "$shared"/data/qm/*/*/*.terrain; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 20000 ] && cp "$f" "$corpus/qmesh_seed/seed_$i.terrain" && i=$((i+1)); done
fi
"$build/terra" bake -q --levels 2 --cells 2 --area 0,0,128,128 "$corpus/archive_seed/tiny_gzip.terra"
"$build/terra" bake -q --levels 1 --cells 4 --area 0,0,64,64 --compression zstd "$corpus/archive_seed/tiny_zstd.terra"
"$build/terra" bake -q --levels 2 --cells 2 --frame geographic --compression none "$corpus/archive_seed/tiny_geo.terra"
"$build/terra" export "$corpus/archive_seed/tiny_geo.terra" "$corpus/tree" >/dev/null
find "$corpus/tree" -name '*.terrain' | head -20 | while read -r f; do cp "$f" "$corpus/qmesh_seed/baked_$(echo "$f" | md5sum | cut -c1-8).terrain"; done
# The archive source's seeds: archives it draws (grids of 16 cells, the fewest it takes; stored
# uncompressed, so mutations reach the decoder), and tests/test_hostile.c's hostile archives.
"$build/terra" bake -q --levels 2 --cells 16 --area 0,0,128,128 --compression none "$corpus/source_seed/src_none.terra"
"$build/terra" bake -q --levels 1 --cells 16 --area 0,0,64,64 --compression zstd --no-normals "$corpus/source_seed/src_zstd.terra"
"$build/test_hostile" --write "$corpus/source_seed" >/dev/null
art="$build/fuzz-artifacts"
mkdir -p "$art"
echo "fuzz: $(ls "$corpus/qmesh_seed" | wc -l) qmesh seeds, $(ls "$corpus/archive_seed" | wc -l) archive seeds," \
  "$(ls "$corpus/source_seed" | wc -l) archive source seeds, ${secs}s each"
fuzz_one() { # TARGET MAX_LEN SEED_DIR...
  local t=$1 max_len=$2; shift 2
  [ -x "$build/$t" ] || { echo "fuzz/run.sh: $build/$t not built (needs clang)" >&2; exit 1; }
  mkdir -p "$corpus/$t"
  if ! ASAN_OPTIONS=detect_leaks=1 "$build/$t" -max_total_time="$secs" -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$art/$t-" "$corpus/$t" "$@" 2>&1 | tail -15; then
    echo "fuzz/run.sh: $t failed (a crash? artifacts in $art)" >&2
    exit 1
  fi
}
fuzz_one fuzz_qmesh 200000 "$corpus/qmesh_seed"
fuzz_one fuzz_archive 65536 "$corpus/archive_seed"
fuzz_one fuzz_archive_source 65536 "$corpus/source_seed" "$corpus/archive_seed"
# The packed tile decoder: a mode byte (odd: a packed tile; even: a codec body) and the rest
# (fuzz/fuzz_tile_codec.c); seeds are real tiles behind each mode byte.
mkdir -p "$corpus/codec_seed"; i=0
for f in "$corpus"/qmesh_seed/*; do [ -f "$f" ] || continue; [ $i -lt 12 ] || break
  { printf '\x00'; cat "$f"; } >"$corpus/codec_seed/body_$i"; { printf '\x01'; cat "$f"; } >"$corpus/codec_seed/tile_$i"
  i=$((i + 1)); done
fuzz_one fuzz_tile_codec 65536 "$corpus/codec_seed"
# terra serve's requests: a limit byte, METHOD\nTARGET\nREST, the rest both a header value and the
# header fields of a head (fuzz/fuzz_serve_request.c)
mkdir -p "$corpus/serve_seed"; i=0
for req in 'GET\n/layer.json?v=1.0.0\ngzip, deflate, br' 'GET\n/12/2048/1023.terrain?v=1.0.0&extensions=octvertexnormals-watermask\ngzip;q=0' \
  'HEAD\n/0/0/0.terrain%00\n*;q=0.5' 'OPTIONS\n/0/0/0.terrain\x00junk\nx-gzip;Q=1.000' 'POST\n/a?b=%zz&c&d\nidentity, *;q=0' \
  'GET\n/archive.terra\n"1f-7e9c"' 'GET\n/0/0/0.terrain\nHost: a\nContent-Length: 5, 05\nTransfer-Encoding: gzip, chunked' \
  'GET\n/layer.json\nHost\x00 a\x00\x00X-A\x00 b\x00\x00 c\x00\x00'; do
  printf '%b' "\x10$req" >"$corpus/serve_seed/seed_$i"; i=$((i + 1)); done
fuzz_one fuzz_serve_request 4096 "$corpus/serve_seed"
# the renderer's mesh tiles: a recipe byte (even) builds valid tiles from the rest (fuzz/fuzz_tile_mesh.c)
mkdir -p "$corpus/mesh_seed"
for i in 0 1 2 3 4 5; do { printf "\\x$(printf %02x $((2 * i)))"; seq $((7 * i)) $((100 * i + 60)) | tr -d '\n'; } >"$corpus/mesh_seed/recipe_$i"; done
fuzz_one fuzz_tile_mesh 65536 "$corpus/mesh_seed"
# the split cook's part files: a mode byte (even: the checksum fixed up after mutation) before parts
# tests/test_cook_split.c writes
mkdir -p "$corpus/part_seed" "$corpus/parts"
"$build/test_cook_split" --write "$corpus/parts" >/dev/null
for f in "$corpus"/parts/*.part; do { printf '\x00'; cat "$f"; } >"$corpus/part_seed/$(basename "$f")"; done
fuzz_one fuzz_cook_part 65536 "$corpus/part_seed"
# terra's look at a scenery before assimp: a byte picking the name (.ply .off .gltf .glb .obj) before
# the sceneries, bad and hostile files tests/test_scenery.c writes (fuzz/fuzz_scenery.c)
mkdir -p "$corpus/scenery_seed" "$corpus/sceneries"
"$build/test_scenery" --write "$corpus/sceneries" >/dev/null
for f in "$corpus"/sceneries/*; do
  case "$f" in *.ply) b='\x00' ;; *.off) b='\x01' ;; *.gltf) b='\x02' ;; *.glb) b='\x03' ;; *.obj) b='\x04' ;; *) continue ;; esac
  { printf "$b"; cat "$f"; } >"$corpus/scenery_seed/$(basename "$f")"
done
fuzz_one fuzz_scenery 65536 "$corpus/scenery_seed"
# edit journals: a mode byte (bit 0 clear: each record's CRC fixed up; bit 1: read-only) before
# journals terra edit writes (fuzz/fuzz_edit_journal.c)
mkdir -p "$corpus/journal_seed"; j="$corpus/journal.edits"
"$build/terra" edit "$j" dig --shape pit --at 10,10 --radius 6 --amount 90 >/dev/null
"$build/terra" edit "$j" raise --shape box --at 20,5 --radius 8 --half-z 3 --yaw 30 --amount 4 >/dev/null
"$build/terra" edit "$j" smooth --at 12,12 --radius 40 --falloff 10 --amount 0.5 >/dev/null
"$build/terra" edit "$j" paint --at 10,10 --radius 5 --surface 9 >/dev/null
"$build/terra" edit "$j" flatten --at 3000,-2000 --radius 9000 --amount 100 >/dev/null
for m in 0 2; do { printf "\\x0$m"; cat "$j"; } >"$corpus/journal_seed/mode_$m"; done
fuzz_one fuzz_edit_journal 4096 "$corpus/journal_seed"
echo "fuzz: no crashes (artifacts would be in $art)"
