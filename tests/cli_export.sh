#!/usr/bin/env bash
# terra export never drops a tile silently: a repeated index entry and a tile outside the z/x/y tree
# (archives with valid checksums written by tests/test_serve_request.c) are named and exit 1, the
# other tiles still exported; a sound archive exports every tile and exits 0.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
helper="$(dirname "$T")/test_serve_request"
[ -x "$helper" ] || { echo "FAIL: $helper not built" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_export.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$helper" --archives "$work" || fail "cannot write the hostile archives"

# export ARCHIVE DIR: sets rc; stderr in $work/err.txt
export_rc() {
  set +e
  "$T" export "$1" "$2" >"$work/out.txt" 2>"$work/err.txt"
  rc=$?
  set -e
}

export_rc "$work/dup.terra" "$work/dup"
[ "$rc" = 1 ] || fail "repeated index entry: exit $rc, expected 1"
grep -q "index entry 1 repeats tile 0/0/0 of entry 0" "$work/err.txt" || fail "repeat not named: $(cat "$work/err.txt")"
grep -q "1 of 3 tiles left out" "$work/err.txt" || fail "summary: $(cat "$work/err.txt")"
[ -f "$work/dup/0/0/0.terrain" ] && [ -f "$work/dup/0/1/1.terrain" ] || fail "the other tiles not exported"

export_rc "$work/outside.terra" "$work/outside"
[ "$rc" = 1 ] || fail "tile outside the tree: exit $rc, expected 1"
grep -q "tile 0/-1/0 .*has no place in the z/x/y tree" "$work/err.txt" || fail "outside tile not named: $(cat "$work/err.txt")"
[ "$(find "$work/outside" -name '*.terrain' | wc -l)" = 3 ] || fail "the three tiles in the tree not exported"

export_rc "$work/bomb.terra" "$work/bomb"
[ "$rc" = 1 ] || fail "a tile inflating past its stated size: exit $rc, expected 1"
grep -q "0/0/1" "$work/err.txt" || fail "the lying tile not named: $(cat "$work/err.txt")"
[ ! -e "$work/bomb/0/0/1.terrain" ] || fail "the lying tile was written"

"$T" bake -q --levels 3 --area 0,0,256,256 --cells 8 "$work/a.terra"
export_rc "$work/a.terra" "$work/sound"
[ "$rc" = 0 ] || fail "sound archive: exit $rc: $(cat "$work/err.txt")"
[ "$(find "$work/sound" -name '*.terrain' | wc -l)" = 21 ] || fail "sound archive: not all 21 tiles exported"
[ ! -s "$work/err.txt" ] || fail "sound archive: messages: $(cat "$work/err.txt")"
echo "cli_export: all checks passed"
