#!/usr/bin/env bash
# Runs every benchmark (build/bench_*), collecting figures in build/bench/results.jsonl.
set -euo pipefail
build=${1:-build}
out="$build/bench"
mkdir -p "$out"
export TERRA_BENCH_OUT="$out/results.jsonl"
: > "$TERRA_BENCH_OUT"
export TERRA_SHARED=${TERRA_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}
echo "machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for b in "$build"/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
# Benchmarks against peers written as scripts (bench/*.sh), if any.
for s in "$(dirname "$0")"/../bench/*.sh; do
  [ -f "$s" ] || continue
  echo "== $(basename "$s")"
  bash "$s" "$build"
done
echo "figures: $TERRA_BENCH_OUT ($(wc -l < "$TERRA_BENCH_OUT") lines)"
