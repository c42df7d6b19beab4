#!/usr/bin/env bash
# terra cook on MPI ranks (terra-cook-mpi, OpenMPI's mpirun on this machine, --oversubscribe): the
# archive of 2 and 3 ranks equals the one-process cook's byte for byte; two parts swapped in the
# parts' folder are built again with a warning naming each file, the rerun the same bytes; a rank
# that dies after its first part fails the job with a message naming it and leaves no archive; the
# rerun reuses every finished part and builds only the rest; --stage sends node-local parts to
# rank 0; a failure on every rank is reported rank by rank.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
bin=$(dirname "$T")
command -v mpirun >/dev/null || { echo "SKIP cli_cook_mpi: mpirun not installed (openmpi-bin)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP cli_cook_mpi: python3 not installed"; exit 77; }
[ -x "$bin/terra-cook-mpi" ] || { echo "SKIP cli_cook_mpi: terra built without TERRA_BUILD_MPI"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_cook_mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# root may run mpirun here (CI runs as root); MPI's own allocations are not ours to leak-check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi() { timeout 300 mpirun --oversubscribe -n "$@"; }

# a 16-bit grey PNG of 257 x 257 samples (rolling hills, a crater of no-data would need alpha: none)
python3 - "$work/hills.png" <<'EOF'
import math, struct, sys, zlib
w = h = 257
rows = b''.join(b'\0' + b''.join(struct.pack('>H', int(20000 + 3000 * math.sin(x * 0.05) * math.cos(y * 0.043)
                                                    + 800 * math.sin(x * 0.31 + y * 0.17) + 150 * math.sin(x * 1.3) * math.sin(y * 0.9)))
                                    for x in range(w)) for y in range(h))
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 16, 0, 0, 0, 0))
                              + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
EOF
args=("$work/hills.png" --tile-size 16 -e 0.5 --z-scale 0.01 -q --threads 1)

"$T" cook "${args[@]}" --no-cache -o "$work/one.terra" >"$work/one.out" || fail "one-process cook: $(cat "$work/one.out")"

# 2 and 3 ranks: the same bytes
for n in 2 3; do
  mpi "$n" "$T" cook "${args[@]}" -o "$work/r$n.terra" >"$work/r$n.out" 2>"$work/r$n.err" ||
    fail "$n ranks: $(cat "$work/r$n.err")"
  cmp "$work/one.terra" "$work/r$n.terra" || fail "$n ranks wrote other bytes than one process"
  grep -q "^ranks $n$" "$work/r$n.out" || fail "$n ranks: the report does not say so"
  built=$(awk '$1=="parts_built"{print $2}' "$work/r$n.out")
  [ "$built" -ge "$n" ] || fail "$n ranks built $built parts"
  for r in $(seq 0 $((n - 1))); do
    grep -q "^rank $r host .* parts_built [1-9]" "$work/r$n.out" || fail "$n ranks: rank $r built nothing"
  done
  [ -z "$(ls "$work/r$n.terra.cache/r$n.terra.parts/"*.tmp* 2>/dev/null)" ] || fail "temporaries left"
done
parts=$(awk '$1=="parts_built"{print $2}' "$work/r2.out")

# two valid parts of the same cook swapped in the parts' folder: each names the other's root, so
# both are built again (a warning naming each file) and the rerun writes the same bytes
pd="$work/r2.terra.cache/r2.terra.parts"
mapfile -t two < <(ls "$pd" | grep '\.part$' | head -2)
[ "${#two[@]}" = 2 ] || fail "two parts to swap: $(ls "$pd")"
mv "$pd/${two[0]}" "$pd/swap.tmp" && mv "$pd/${two[1]}" "$pd/${two[0]}" && mv "$pd/swap.tmp" "$pd/${two[1]}"
mpi 2 "$T" cook "${args[@]}" -o "$work/r2.terra" >"$work/swap.out" 2>"$work/swap.err" || fail "swapped parts: $(cat "$work/swap.err")"
cmp "$work/one.terra" "$work/r2.terra" || fail "swapped parts: other bytes than one process"
for f in "${two[@]}"; do
  grep -q "$pd/$f holds the part of root .*, not the one its name gives .*: built again" "$work/swap.err" ||
    fail "swapped $f: $(cat "$work/swap.err")"
done
[ "$(awk '$1=="parts_built"{print $2}' "$work/swap.out")" = 2 ] &&
  [ "$(awk '$1=="parts_reused"{print $2}' "$work/swap.out")" = $((parts - 2)) ] || fail "swapped parts: $(cat "$work/swap.out")"

# rank 1 dies after its first part: the job fails naming it, writes no archive
if TERRA_COOK_MPI_DIE=1:1 mpi 2 "$T" cook "${args[@]}" -o "$work/die.terra" >"$work/die.out" 2>"$work/die.err"; then
  fail "a job whose rank died succeeded"
fi
grep -qi "rank 1" "$work/die.err" || fail "the failure does not name rank 1: $(cat "$work/die.err")"
[ ! -e "$work/die.terra" ] || fail "an archive was written by a job that failed"
left=$(ls "$work/die.terra.cache/die.terra.parts/" | grep -c '\.part$' || true)
[ "$left" -ge 1 ] || fail "no finished part left for the rerun"
# the rerun: every finished part reused, the rest built, the same bytes
mpi 2 "$T" cook "${args[@]}" -o "$work/die.terra" >"$work/rerun.out" 2>"$work/rerun.err" || fail "rerun: $(cat "$work/rerun.err")"
cmp "$work/one.terra" "$work/die.terra" || fail "the rerun wrote other bytes than one process"
reused=$(awk '$1=="parts_reused"{print $2}' "$work/rerun.out")
built=$(awk '$1=="parts_built"{print $2}' "$work/rerun.out")
[ "$reused" = "$left" ] && [ $((reused + built)) = "$parts" ] ||
  fail "rerun: $reused reused, $built built; $left parts were left of $parts"

# --no-cache: the parts go once the archive is in place
mpi 2 "$T" cook "${args[@]}" --no-cache -o "$work/nc.terra" >/dev/null 2>"$work/nc.err" || fail "--no-cache: $(cat "$work/nc.err")"
cmp "$work/one.terra" "$work/nc.terra" || fail "--no-cache: other bytes"
[ ! -e "$work/nc.terra.parts" ] || fail "--no-cache left its parts"

# --stage: parts kept per rank and sent to rank 0 over MPI (here both ranks' machine is this one)
mpi 2 "$T" cook "${args[@]}" --stage "$work/stage" -o "$work/st.terra" >"$work/st.out" 2>"$work/st.err" ||
  fail "--stage: $(cat "$work/st.err")"
cmp "$work/one.terra" "$work/st.terra" || fail "--stage: other bytes"
[ "$(ls "$work/stage/st.terra.parts" | grep -c '\.part$')" = "$parts" ] || fail "--stage: the parts are not in the stage"
if "$T" cook "${args[@]}" --stage "$work/stage" -o "$work/x.terra" 2>"$work/x.err"; then fail "--stage on one process"; fi
grep -q "MPI ranks" "$work/x.err" || fail "--stage on one process: $(cat "$work/x.err")"

# every rank fails (the parts cannot be written): each named, non-zero exit, no archive
: >"$work/not-a-dir"
if mpi 2 "$T" cook "${args[@]}" --cache "$work/not-a-dir" -o "$work/bad.terra" >"$work/bad.out" 2>"$work/bad.err"; then
  fail "a cook that cannot write its parts succeeded"
fi
grep -q "rank 0 of 2 .* failed: .*parts' directory" "$work/bad.err" && grep -q "rank 1 of 2 .* failed" "$work/bad.err" ||
  fail "the failures are not named rank by rank: $(cat "$work/bad.err")"
[ ! -e "$work/bad.terra" ] || fail "an archive was written by a job that failed"
echo "cli_cook_mpi: ok (2 and 3 ranks equal one process; $parts parts; a dead rank named, $left parts reused)"
