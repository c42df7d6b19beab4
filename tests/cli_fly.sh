#!/usr/bin/env bash
# terra fly: runs, prints per-frame rows and a summary, writes maps; refuses bad usage clearly.
set -u
terra=${TERRA_BIN:?TERRA_BIN not set}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

"$terra" fly --help | grep -q "Usage: terra fly" && ok "help" || bad "help"

log=$("$terra" fly --frames 12 --maps 2 --map-size 96 --out "$out/maps" 2>&1); rc=$?
[ $rc -eq 0 ] && ok "fly exits 0" || bad "fly exits 0 (rc $rc): $log"
[ "$(echo "$log" | grep -cE '^ +[0-9]+ ')" -eq 12 ] && ok "one row per frame" || bad "one row per frame"
echo "$log" | grep -q "^summary: 12 frames; tiles drawn mean" && ok "summary" || bad "summary"
echo "$log" | grep -qE "^summary: frame CPU ms .*11 frames after the first\): median [0-9.]+, p99 [0-9.]+ \(whole frames, each waiting for every tile it wants: --realtime for a game's frame\)$" \
  && ok "summary: frame CPU median and p99 (whole frames say so)" || bad "summary: frame CPU median and p99: $log"
log=$("$terra" fly --realtime --frames 6 --size 160x90 --no-frames --sheet 0 --out "$out/rt" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$log" | grep -qE "^summary: frame CPU ms .*5 frames after the first\): median [0-9.]+, p99 [0-9.]+$" \
  && ok "--realtime: frame CPU median and p99" || bad "--realtime: frame CPU median and p99 (rc $rc): $log"
[ -s "$out/maps/map_0000.png" ] && [ -s "$out/maps/map_0011.png" ] && ok "maps written" || bad "maps written"
# a PNG signature, not a leftover temporary file
head -c 8 "$out/maps/map_0000.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" && ok "maps are PNG" || bad "maps are PNG"
ls "$out/maps" | grep -q tmp && bad "temporary files left" || ok "no temporary files left"

msg=$("$terra" fly --frames 0 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q -- "--frames" && ok "bad --frames refused" || bad "bad --frames refused ($rc: $msg)"
msg=$("$terra" fly --cells 48 --frames 2 --maps 0 2>&1); rc=$?
# bad usage (exit 2, as every option out of its range; it once failed later with 1)
[ $rc -eq 2 ] && echo "$msg" | grep -q "power of two from 16 to 256" && ok "bad --cells refused" || bad "bad --cells refused ($rc: $msg)"
msg=$("$terra" fly --range0 10 --frames 2 --maps 0 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q "crack" && ok "short --range0 refused" || bad "short --range0 refused ($rc: $msg)"
msg=$("$terra" fly --bogus 2>&1); rc=$?
[ $rc -eq 2 ] && ok "unknown option refused" || bad "unknown option refused ($rc)"
msg=$("$terra" nosuchcommand 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q "unknown command" && ok "unknown command refused" || bad "unknown command refused"
msg=$("$terra" fly --frames 2 --out /proc/nonexistent/dir 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$msg" | grep -q "/proc/nonexistent/dir" && ok "unwritable --out named" || bad "unwritable --out named ($rc: $msg)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
