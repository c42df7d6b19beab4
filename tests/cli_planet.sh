#!/usr/bin/env bash
# terra render, fly and view --planet: a frame from orbit and one from the ground, the pose options'
# ranges and conflicts refused clearly, the path's frames written, a window under Xvfb when
# Xvfb is there.
set -u
terra=${TERRA_BIN:?TERRA_BIN not set}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
is_png() { head -c 8 "$1" 2>/dev/null | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"; }

"$terra" render --help | grep -q -- "--planet --lat DEG --lon DEG --alt M --heading DEG --pitch DEG" && ok "render help" \
  || bad "render help names the planet's pose"
"$terra" fly --help | grep -q -- "--heading" && ok "fly help" || bad "fly help names --heading"

log=$("$terra" render --planet -o "$out/orbit.png" --alt 2e7 --pitch -90 --size 160x90 --clear 255,0,255 2>&1); rc=$?
[ $rc -eq 0 ] && is_png "$out/orbit.png" && ok "render --planet from 20,000 km" || bad "render --planet from orbit (rc $rc): $log"
echo "$log" | grep -q "1 draw call" && ok "one draw call" || bad "one draw call: $log"
log=$("$terra" render --planet -o "$out/ground.png" --lat -4.3 --lon -12.3 --alt 2 --heading 30 --pitch -5 --size 160x90 2>&1); rc=$?
[ $rc -eq 0 ] && is_png "$out/ground.png" && ok "render --planet 2 m above the ground" || bad "render --planet at 2 m (rc $rc): $log"
echo "$log" | grep -q "2.000 m above the ground" && ok "the height is reported" || bad "the height is reported: $log"
"$terra" render --planet -o "$out/orbit2.png" --alt 2e7 --pitch -90 --size 160x90 --clear 255,0,255 >/dev/null 2>&1
cmp -s "$out/orbit.png" "$out/orbit2.png" && ok "the same frame twice is the same file" || bad "the same frame twice differs"

# ranges and conflicts: exit 2 and a message naming the option
for args in "--lat 91" "--lon 181" "--alt 0" "--heading 400" "--pitch -91"; do
  msg=$("$terra" render --planet -o "$out/x.png" $args 2>&1); rc=$?
  opt=${args%% *}
  [ $rc -eq 2 ] && echo "$msg" | grep -q -- "$opt" && ok "render --planet $args refused" || bad "render --planet $args ($rc: $msg)"
done
msg=$("$terra" render --planet -o "$out/x.png" --eye 0,0,0 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--lat" && ok "--planet with --eye refused" || bad "--planet with --eye ($rc: $msg)"
msg=$("$terra" render --planet -o "$out/x.png" --archive nothing.terra 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$msg" | grep -q "nothing.terra" && ok "--planet with a missing archive names it" || bad "--planet --archive missing ($rc: $msg)"
msg=$("$terra" render -o "$out/x.png" --wgs84 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--planet" && ok "--wgs84 without --planet refused" || bad "--wgs84 alone ($rc: $msg)"
msg=$("$terra" render --planet -o "$out/x.png" --ramp 900,100 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--ramp" && ok "--ramp HI below LO refused" || bad "--ramp 900,100 ($rc: $msg)"
msg=$("$terra" fly --planet --archive nothing.terra -o "$out/f" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--archive" && ok "fly --planet --archive refused" || bad "fly --planet --archive ($rc: $msg)"
msg=$("$terra" fly --planet --map -o "$out/f" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--map" && ok "fly --planet --map refused" || bad "fly --planet --map ($rc: $msg)"
[ ! -e "$out/x.png" ] && ok "nothing written on bad usage" || bad "a picture was written on bad usage"

log=$("$terra" fly --planet -n 4 --size 96x54 --sheet 2 -o "$out/fly" 2>&1); rc=$?
[ $rc -eq 0 ] && is_png "$out/fly/frame_0003.png" && is_png "$out/fly/contact_sheet.png" && ok "fly --planet writes its frames" \
  || bad "fly --planet (rc $rc): $log"
echo "$log" | grep -q "20000000.0" && ok "fly --planet starts 20,000 km up" || bad "fly --planet's first row: $log"
log=$("$terra" fly --planet --realtime -n 12 --size 96x54 --no-frames --sheet 0 -o "$out/rt" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$log" | grep -q "standing in" && ok "fly --planet --realtime" || bad "fly --planet --realtime (rc $rc): $log"

# a geographic archive laid on the WGS84 planet where it lies; a local-frame one refused
log=$("$terra" render --planet --wgs84 -o "$out/wgs84.png" --alt 500 --size 96x54 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$log" | grep -q "above the ellipsoid" && ok "render --planet --wgs84" || bad "render --planet --wgs84 (rc $rc): $log"
if timeout 60 "$terra" bake -q --frame geographic --levels 5 "$out/geo.terra" >/dev/null 2>&1 &&
   timeout 60 "$terra" bake -q --levels 3 "$out/local.terra" >/dev/null 2>&1; then
  log=$("$terra" render --planet --archive "$out/geo.terra" -o "$out/geo.png" --alt 3000 --pitch -30 --size 96x54 \
        --clear 255,0,255 --ramp 0,3000 2>&1); rc=$?
  [ $rc -eq 0 ] && is_png "$out/geo.png" && echo "$log" | grep -q "sampled into" && echo "$log" | grep -q "lat 45.250000 lon 7.250000" \
    && ok "render --planet --archive: a geographic archive over its middle" || bad "render --planet --archive (rc $rc): $log"
  msg=$("$terra" render --planet --archive "$out/local.terra" -o "$out/y.png" 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$msg" | grep -q "geographic" && [ ! -e "$out/y.png" ] && ok "a local-frame archive is refused on a planet" \
    || bad "--planet --archive local ($rc: $msg)"
else
  bad "terra bake for the archive checks"
fi

log=$("$terra" drive --planet -b 20 -v 2 -s 2 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$log" | grep -q "bodies fell through: 0" && ok "drive --planet: nothing falls through" \
  || bad "drive --planet (rc $rc): $log"
msg=$("$terra" drive --planet --edits 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--edits" && ok "drive --planet --edits refused" || bad "drive --planet --edits ($rc: $msg)"

if command -v Xvfb >/dev/null 2>&1; then
  . "$(dirname "$0")/xvfb.sh"
  log=$(xvfb "$terra" view --planet --alt 3000 --size 160x90 --frames 3 --screenshot "$out/v.png" 2>&1); rc=$?
  [ $rc -eq 0 ] && is_png "$out/v.png" && ok "view --planet under Xvfb" || bad "view --planet under Xvfb (rc $rc): $log"
else
  echo "skip view --planet (no Xvfb)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
