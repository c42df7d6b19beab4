#!/usr/bin/env bash
# terra export checks the archive as terra info --verify does before it writes anything: a repeated
# index entry, a tile outside the z/x/y tree, a tile inflating past its stated size (archives with
# valid checksums written by tests/test_serve_request.c) are named, exit 1, and nothing is written;
# a sound archive exports every tile and exits 0; one that fails part way leaves no layer.json.
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
grep -q "index entry 1, tile (level 0, x 0, y 0): repeats the tile of index entry 0" "$work/err.txt" || fail "repeat not named: $(cat "$work/err.txt")"
grep -q "of 3 tiles bad" "$work/err.txt" || fail "summary: $(cat "$work/err.txt")"
[ ! -e "$work/dup" ] || fail "a refused archive was exported in part"

export_rc "$work/outside.terra" "$work/outside"
[ "$rc" = 1 ] || fail "tile outside the tree: exit $rc, expected 1"
# named as terra info --tile looks tiles up (z/x/y) where they have a place in the tree, by key where not
grep -q "index entry 0, tile (level 0, x -1, y 0): its parent, tile (level 1, x -1, y 0), is not in the archive" "$work/err.txt" || fail "outside tile not named: $(cat "$work/err.txt")"
[ ! -e "$work/outside" ] || fail "a refused archive was exported in part"

export_rc "$work/bomb.terra" "$work/bomb"
[ "$rc" = 1 ] || fail "a tile inflating past its stated size: exit $rc, expected 1"
grep -q "tile 0/0/1 (level 0, x 0, y 1): decompresses to more than" "$work/err.txt" || fail "the lying tile not named: $(cat "$work/err.txt")"
[ ! -e "$work/bomb" ] || fail "a refused archive was exported in part"

"$T" bake -q --levels 3 --area 0,0,256,256 --cells 8 "$work/a.terra"
export_rc "$work/a.terra" "$work/sound"
[ "$rc" = 0 ] || fail "sound archive: exit $rc: $(cat "$work/err.txt")"
[ "$(find "$work/sound" -name '*.terrain' | wc -l)" = 21 ] || fail "sound archive: not all 21 tiles exported"
[ ! -s "$work/err.txt" ] || fail "sound archive: messages: $(cat "$work/err.txt")"
# the name a problem gives is the one terra info --tile takes
"$T" info --tile 0/0/1 "$work/bomb.terra" >/dev/null 2>"$work/err.txt" && fail "info --tile 0/0/1 took the lying tile"
grep -q "tile 0/0/1 (level 0, x 0, y 1): decompresses to more than" "$work/err.txt" || fail "info --tile: $(cat "$work/err.txt")"

# an export that fails part way leaves no layer.json, not even an earlier export's: a tree that has
# one is whole (here zoom 2's folder is a file, so the export into the earlier tree fails there)
rm -rf "$work/sound/2" && touch "$work/sound/2"
export_rc "$work/a.terra" "$work/sound"
[ "$rc" = 1 ] || fail "export over a blocked folder: exit $rc"
[ ! -e "$work/sound/layer.json" ] || fail "a failed export left the earlier export's layer.json"
rm "$work/sound/2"
export_rc "$work/a.terra" "$work/sound"
[ "$rc" = 0 ] && [ -s "$work/sound/layer.json" ] || fail "export again: exit $rc, $(cat "$work/err.txt")"
echo "cli_export: all checks passed"
