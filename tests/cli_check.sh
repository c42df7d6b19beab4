#!/usr/bin/env bash
# terra check end to end: the report and exit 0 on an archive whose promises hold, exit 1 naming
# the tile on a broken one (a damaged payload; a grid pyramid's levels, which share no border
# vertices), exit 2 on bad usage; and, once terra cook is built, a cooked raster (St Helens) and a
# cooked scenery with a hole checked against their sources (the geographic frame: cli_cook checks
# its cook of N44W072, tests/test_cook_check.c archives made by hand).
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
S=${TERRA_SHARED:-../shared}
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- one level: neighbours share every border vertex ----
"$T" bake --levels 1 --area 0,0,128,128 --tile-size 32 --cells 16 -q "$work/one.terra"
"$T" check "$work/one.terra" >"$work/out.txt" || fail "check of a one-level bake: $(cat "$work/out.txt")"
grep -q "local frame, level-0 tile 32 m, 16 tiles checked" "$work/out.txt" || fail "report header: $(cat "$work/out.txt")"
grep -Eq "^ +0 +16 " "$work/out.txt" || fail "report level 0: $(cat "$work/out.txt")"
# 4 x 4 tiles: 24 same-level neighbour pairs
awk '$1 == 0 { if ($9 != 24) exit 1 }' "$work/out.txt" || fail "pairs: $(cat "$work/out.txt")"
grep -q "every promise holds" "$work/out.txt" || fail "verdict"
[ -z "$("$T" check -q "$work/one.terra")" ] || fail "-q printed something"

# ---- a damaged payload: the tile is named, exit 1 ----
cp "$work/one.terra" "$work/bad.terra"
size=$(stat -c %s "$work/bad.terra")
printf '\xff' | dd of="$work/bad.terra" bs=1 seek=$((size - 20)) conv=notrunc status=none
rc=0; "$T" check -q "$work/bad.terra" 2>"$work/err.txt" || rc=$?
[ "$rc" = 1 ] || fail "damaged archive: exit $rc"
grep -q "broken promise: .*tile 0/[0-9]*/[0-9]* does not decode" "$work/err.txt" || fail "damaged: $(cat "$work/err.txt")"

# ---- a pyramid of grid tiles (terra bake's, while it bakes grids): a coarse tile has every other
# border vertex of its finer neighbours, so the check stops at a T-junction ----
"$T" bake --levels 2 --area 0,0,128,128 --tile-size 32 --cells 16 -q "$work/grid.terra"
if "$T" info --tile 0/0/0 "$work/grid.terra" | grep -q '"vertexCount":289,'; then
  rc=0; "$T" check "$work/grid.terra" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  [ "$rc" = 1 ] || fail "grid pyramid: exit $rc"
  grep -q "T-junction between tiles 0/[0-9]*/[0-9]* and 1/[0-9]*/[0-9]*" "$work/err.txt" || fail "grid: $(cat "$work/err.txt")"
fi

# ---- usage and unreadable inputs ----
rc=0; "$T" check 2>/dev/null || rc=$?; [ "$rc" = 2 ] || fail "no archive: exit $rc"
rc=0; "$T" check --encoding png "$work/one.terra" 2>/dev/null || rc=$?; [ "$rc" = 2 ] || fail "bad encoding: exit $rc"
rc=0; "$T" check --spacing -1 "$work/one.terra" 2>/dev/null || rc=$?; [ "$rc" = 2 ] || fail "bad spacing: exit $rc"
rc=0; "$T" check "$work/absent.terra" 2>"$work/err.txt" || rc=$?
[ "$rc" = 1 ] && grep -q "absent.terra" "$work/err.txt" || fail "absent archive: exit $rc $(cat "$work/err.txt")"
rc=0; "$T" check --source "$work/absent.png" "$work/one.terra" 2>"$work/err.txt" || rc=$?
[ "$rc" = 1 ] && grep -q "absent.png" "$work/err.txt" || fail "absent source: exit $rc $(cat "$work/err.txt")"
"$T" check --help | grep -q "Usage: terra check" || fail "--help"

# ---- cooked archives against their sources (once terra cook is there) ----
if ! "$T" cook --help >/dev/null 2>&1; then
  echo "SKIP: terra cook is not built; cooked archives not checked"
  exit 0
fi
if [ ! -f "$S/data/dem/st-helens.png" ]; then
  echo "SKIP: $S/data absent; cooked archives not checked"
  exit 0
fi
"$T" cook "$S/data/dem/st-helens.png" --encoding terrain-rgb --spacing 6.6 --max-error 1 -o "$work/sth.terra" \
  --no-cache >/dev/null
src=(--source "$S/data/dem/st-helens.png" --encoding terrain-rgb --spacing 6.6)
"$T" check "$work/sth.terra" "${src[@]}" >"$work/out.txt" 2>"$work/err.txt" || fail "cooked St Helens: $(cat "$work/err.txt")"
grep -q "every promise holds" "$work/out.txt" || fail "cooked St Helens verdict"
grep -Eq "^ +0 +[0-9]+ .* 65536 " "$work/out.txt" || fail "cooked St Helens: every sample checked: $(cat "$work/out.txt")"
# a scenery with a hole (an OBJ grid, 11 x 11 vertices cut out), cooked and checked vertex for vertex
awk 'BEGIN {
  n = 60; k = 0
  for (z = 0; z <= n; z++) for (x = 0; x <= n; x++) {
    if (x >= 20 && x <= 30 && z >= 20 && z <= 30) continue
    id[x "," z] = ++k
    printf "v %g %.6f %g\n", x * 5, 100 + 20 * sin(x * 0.07) + 15 * cos(z * 0.05), z * 5
  }
  for (z = 0; z < n; z++) for (x = 0; x < n; x++) {
    a = id[x "," z]; b = id[(x + 1) "," z]; c = id[(x + 1) "," (z + 1)]; d = id[x "," (z + 1)]
    if (a && b && c && d) printf "f %d %d %d\nf %d %d %d\n", a, b, c, a, c, d
  }
}' >"$work/scn.obj"
"$T" cook "$work/scn.obj" -o "$work/scn.terra" --no-cache >/dev/null
"$T" check "$work/scn.terra" --source "$work/scn.obj" >"$work/out.txt" 2>"$work/err.txt" ||
  fail "cooked scenery: $(cat "$work/err.txt")"
# 61^2 - 11^2 ground vertices, each measured at the finest level
grep -Eq "^ +0 +[0-9]+ .* 3600 " "$work/out.txt" || fail "cooked scenery samples: $(cat "$work/out.txt")"
echo "ok"
