#!/usr/bin/env bash
# terra edit and --edits end to end: edits appended to a journal and counted; a bad brush or value
# refused (exit 2), a file that is not a journal refused naming it (exit 1), a torn last edit
# left out with a warning by --list (which never writes the journal); a journal's paint of surface
# 0 and its 257th edit on one place refused naming the edit; bake --edits changes the tiles over
# the edits and no others; render --edits draws the dug ground.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_edit.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
j="$work/ground.edits"

"$T" edit "$j" dig --shape pit --at 100,100 --radius 30 --falloff 8 --amount -20 --seed 1 >/dev/null
"$T" edit "$j" raise --at 60,200 --radius 12 --amount 15 >/dev/null
"$T" edit "$j" paint --at 100,100 --radius 10 --surface 20 >/dev/null
"$T" edit "$j" --list | grep -q ": 3 edits" || fail "three edits: $("$T" edit "$j" --list)"
set +e
"$T" edit "$j" shovel --at 1,1 2>/dev/null; rc1=$?
"$T" edit "$j" raise --at 1,1 --amount -3 2>"$work/e.txt"; rc2=$?
echo "not a journal" >"$work/bad.edits"
"$T" edit "$work/bad.edits" --list 2>"$work/bad.txt"; rc3=$?
set -e
[ "$rc1" = 2 ] || fail "an unknown brush exits $rc1"
[ "$rc2" = 1 ] && grep -q "at least 0" "$work/e.txt" || fail "a negative raise: $rc2 $(cat "$work/e.txt")"
[ "$rc3" = 1 ] && grep -q "bad.edits" "$work/bad.txt" && grep -q "not a terra edit journal" "$work/bad.txt" ||
  fail "not a journal: $rc3 $(cat "$work/bad.txt")"
"$T" edit "$j" --list | grep -q ": 3 edits" || fail "a refused edit was kept"

# a torn last edit: left out with a warning, the rest kept; --list only reads (a writer may be
# appending that edit), so the file stays as it was
size=$(stat -c %s "$j")
head -c $((size - 9)) "$j" >"$work/torn.edits"
"$T" edit "$work/torn.edits" --list >"$work/torn.txt" 2>&1
grep -q ": 2 edits" "$work/torn.txt" && grep -q "torn" "$work/torn.txt" || fail "torn: $(cat "$work/torn.txt")"
[ "$(stat -c %s "$work/torn.edits")" = $((size - 9)) ] || fail "--list cut the journal it read"
if "$T" edit "$work/missing.edits" --list 2>/dev/null || [ -e "$work/missing.edits" ]; then
  fail "--list of a missing journal succeeded or made it"
fi

# journals written by hand (FORMAT.md's records): a paint of surface 0, and 257 edits on one place
if command -v python3 >/dev/null; then
  python3 - "$work" <<'EOF_PY'
import struct, sys
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8): c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    return c ^ 0xffffffff
def record(brush, surface, x, z, radius, amount):
    p = bytes([brush, 0, surface]) + bytes(5) + struct.pack('<7d', x, z, radius, 0, 0, 1, amount)
    return struct.pack('<I', crc32c(p)) + p
open(sys.argv[1] + '/paint0.edits', 'wb').write(b'TERRAEJ1' + record(0, 0, 1, 1, 5, 2) + record(5, 0, 1, 1, 5, 0))
open(sys.argv[1] + '/deep.edits', 'wb').write(b'TERRAEJ1' + record(0, 0, 7, 7, 3, 0.5) * 257)
EOF_PY
  set +e
  "$T" edit "$work/paint0.edits" --list 2>"$work/p0.txt"; rc4=$?
  "$T" edit "$work/deep.edits" --list 2>"$work/deep.txt"; rc5=$?
  set -e
  [ "$rc4" = 1 ] && grep -q "paint0.edits: edit 2, at byte 76: .*surface 0" "$work/p0.txt" ||
    fail "paint of surface 0: $rc4 $(cat "$work/p0.txt")"
  [ "$rc5" = 1 ] && grep -q "deep.edits: edit 257, at byte 17416: .* at x 7.0, z 7.0 would pass .* (256" "$work/deep.txt" ||
    fail "257 edits on one place: $rc5 $(cat "$work/deep.txt")"
else
  echo "skip journals written by hand (no python3)"
fi

# bake: the tiles over the edits change, the others do not
"$T" bake --levels 2 --area 0,0,512,512 --cells 16 --compression none -q "$work/plain.terra"
"$T" bake --edits "$j" --levels 2 --area 0,0,512,512 --cells 16 --compression none -q "$work/edited.terra"
"$T" export "$work/plain.terra" "$work/plain" >/dev/null
"$T" export "$work/edited.terra" "$work/edited" >/dev/null
total=$(cd "$work/plain" && find . -name '*.terrain' | wc -l)
differ=$(cd "$work/plain" && find . -name '*.terrain' | while read -r f; do cmp -s "$f" "$work/edited/$f" || echo "$f"; done | wc -l)
[ "$differ" -gt 0 ] && [ "$differ" -lt $((total / 4)) ] || fail "$differ of $total tiles changed"

# render: the dug ground drawn
"$T" render --size 160x90 --eye 100,0,250 --above 80 --pitch -30 -o "$work/a.png" >/dev/null
"$T" render --edits "$j" --size 160x90 --eye 100,0,250 --above 80 --pitch -30 -o "$work/b.png" >/dev/null
! cmp -s "$work/a.png" "$work/b.png" || fail "render --edits drew the same picture"
# terra view: a left click digs and a right click raises where the crosshair meets the ground, into
# the journal (X events from xdotool under Xvfb, where both are installed)
if command -v Xvfb >/dev/null && command -v xdotool >/dev/null; then
  . "$(dirname "$0")/xvfb.sh"
  cat >"$work/view.sh" <<EOS
"$T" view --size 320x180 --eye 100,0,250 --above 80 --pitch -30 --frames 100000 --edits "$work/view.edits" >"$work/view.log" 2>&1 &
pid=\$!
for i in \$(seq 1 60); do wid=\$(xdotool search --name "terra view" 2>/dev/null | head -1); [ -n "\$wid" ] && break; sleep 0.5; done
sleep 2
xdotool mousemove --window "\$wid" 160 90 click 1; sleep 0.5; xdotool click 3; sleep 0.5
xdotool key --window "\$wid" Escape
wait \$pid
EOS
  xvfb timeout 120 bash "$work/view.sh" || fail "view: $(cat "$work/view.log")"
  "$T" edit "$work/view.edits" --list | grep -q ": 2 edits" || fail "view's clicks: $("$T" edit "$work/view.edits" --list)"
else
  echo "skip view's mouse (no Xvfb or xdotool)"
fi
echo "cli_edit: ok ($differ of $total tiles changed)"
