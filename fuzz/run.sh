#!/usr/bin/env bash
# Bounded fuzzing run (CI): builds the seed corpora and runs each libFuzzer target for SECONDS.
# Usage: fuzz/run.sh BUILD_DIR [SECONDS]   (BUILD_DIR configured with CC=clang)
set -euo pipefail
build=${1:?build dir}
secs=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${TERRA_SHARED:-$root/../shared}
for t in fuzz_qmesh fuzz_archive; do
  [ -x "$build/$t" ] || { echo "fuzz/run.sh: $build/$t not built (needs clang)" >&2; exit 1; }
done
corpus=$(mktemp -d "${TMPDIR:-/tmp}/terra_fuzz.XXXXXX")
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus/qmesh" "$corpus/archive" "$corpus/qmesh_seed" "$corpus/archive_seed"
# Seeds: the real tiles under 20 kB (uncompressed ones), and tiny tiles and archives terra bakes.
if [ -d "$shared/data/qm" ]; then
  i=0; for f in "$shared"/data/qm/*/*.terrain "$shared"/data/qm/*/*/*.terrain; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 20000 ] && cp "$f" "$corpus/qmesh_seed/seed_$i.terrain" && i=$((i+1)); done
fi
"$build/terra" bake -q --levels 1 --cells 2 --area 0,0,128,128 "$corpus/archive_seed/tiny_gzip.terra"
"$build/terra" bake -q --levels 0 --cells 4 --area 0,0,64,64 --compression zstd "$corpus/archive_seed/tiny_zstd.terra"
"$build/terra" bake -q --levels 1 --cells 2 --frame geographic --compression none "$corpus/archive_seed/tiny_geo.terra"
"$build/terra" export "$corpus/archive_seed/tiny_geo.terra" "$corpus/tree" >/dev/null
find "$corpus/tree" -name '*.terrain' | head -20 | while read -r f; do cp "$f" "$corpus/qmesh_seed/baked_$(echo "$f" | md5sum | cut -c1-8).terrain"; done
art="$build/fuzz-artifacts"
mkdir -p "$art"
echo "fuzz: $(ls "$corpus/qmesh_seed" | wc -l) qmesh seeds, $(ls "$corpus/archive_seed" | wc -l) archive seeds, ${secs}s each"
ASAN_OPTIONS=detect_leaks=1 "$build/fuzz_qmesh" -max_total_time="$secs" -max_len=200000 -print_final_stats=1 -artifact_prefix="$art/qmesh-" \
  "$corpus/qmesh" "$corpus/qmesh_seed" 2>&1 | tail -15
ASAN_OPTIONS=detect_leaks=1 "$build/fuzz_archive" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/archive-" \
  "$corpus/archive" "$corpus/archive_seed" 2>&1 | tail -15
echo "fuzz: no crashes (artifacts would be in $art)"
