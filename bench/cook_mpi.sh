#!/usr/bin/env bash
# terra cook on MPI ranks (run by scripts/bench.sh; alone: bash bench/cook_mpi.sh build): a 2 x 2
# mosaic of 3" SRTM cells (N44W072.hgt and its mirror images as N44..45 W071..072), cooked by one
# process with one thread and by `mpirun -n 2` with one thread a rank, RUNS times alternated, the archives compared byte for byte. Figures cook.mpi.*:
# the speed-up on 2 ranks (goal >= 1.8), the merge (reading the parts, writing the archive) and
# the levels over the subtrees as shares of the 2-rank cook (goal for the merge <= 5%). Needs
# terra-cook-mpi and ../shared/data/dem/N44W072.hgt; skipped otherwise.
set -euo pipefail
build=${1:-build}
T="$build/terra"
runs=${TERRA_BENCH_MPI_RUNS:-3}
out=${TERRA_BENCH_OUT:-$build/bench/results.jsonl}
hgt=${TERRA_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}/data/dem/N44W072.hgt
[ -x "$build/terra-cook-mpi" ] && command -v mpirun >/dev/null && command -v python3 >/dev/null && [ -f "$hgt" ] ||
  { echo "  (no terra-cook-mpi, mpirun or N44W072.hgt: the MPI figures are not recorded)"; exit 0; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_bench_mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
record() { # NAME VALUE UNIT RUNS STAT
  printf '  %-48s %14.3f %-6s (%s of %d)\n' "$1" "$2" "$3" "$5" "$4"
  printf '{"name": "%s", "value": %s, "unit": "%s", "runs": %d, "stat": "%s"}\n' "$1" "$2" "$3" "$4" "$5" >>"$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }

# the cell and its mirror images, so neighbours meet on equal samples as real SRTM cells do: W071
# is the cell mirrored east-west, N45 north-south (the .hgt driver places a cell by its name)
python3 - "$hgt" "$work" <<'EOF'
import array, sys
src, n = open(sys.argv[1], 'rb').read(), 1201
rows = [src[2 * n * j:2 * n * (j + 1)] for j in range(n)]
def flip(r):
    a = array.array('H', r); a.reverse(); return a.tobytes()
for name, rs, f in (('N44W072', rows, False), ('N44W071', rows, True), ('N45W072', rows[::-1], False), ('N45W071', rows[::-1], True)):
    open(sys.argv[2] + '/' + name + '.hgt', 'wb').write(b''.join(flip(r) if f else r for r in rs))
EOF
ins=("$work"/N44W072.hgt "$work"/N44W071.hgt "$work"/N45W072.hgt "$work"/N45W071.hgt)
for r in $(seq 1 "$runs"); do
  t0=$(now)
  "$T" cook "${ins[@]}" --threads 1 --no-cache -q -o "$work/one.terra" >"$work/one.out"
  t1=$(now)
  mpirun --oversubscribe -n 2 "$T" cook "${ins[@]}" --threads 1 --no-cache -q -o "$work/two.terra" >"$work/two.out"
  t2=$(now)
  cmp -s "$work/one.terra" "$work/two.terra" || { echo "bench/cook_mpi.sh: 2 ranks wrote other bytes" >&2; exit 1; }
  total=$(awk '$1=="cook_s"{print $2}' "$work/two.out")
  echo "$t0 $t1 $t2" | awk '{ printf "%.6f\n", ($2 - $1) / ($3 - $2) }' >>"$work/speedup"
  awk -v t="$total" '$1=="merge_s"{ printf "%.6f\n", $2 / t }' "$work/two.out" >>"$work/merge"
  awk -v t="$total" '$1=="top_s"{ printf "%.6f\n", $2 / t }' "$work/two.out" >>"$work/top"
  echo "  run $r: one process $(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}') s, 2 ranks $(echo "$t1 $t2" | awk '{printf "%.1f", $2 - $1}') s" \
       "($(awk '$1=="subtrees"{s=$2} $1=="subtree_depth"{d=$2} END{print s " subtrees of depth " d}' "$work/two.out"))"
done
record cook.mpi.speedup_2_ranks "$(median <"$work/speedup")" ratio "$runs" median
record cook.mpi.merge_share "$(median <"$work/merge")" ratio "$runs" median
record cook.mpi.top_share "$(median <"$work/top")" ratio "$runs" median
