#!/usr/bin/env bash
# --source WORLD.lua end to end: a script that is the default world bakes to the same archive as
# the default world, byte for byte; a script of its own renders, bakes, cooks (TIN) and passes
# terra check; a broken script exits 1 naming file:line, leaving no archive; --source with
# --archive is refused. The sandbox: a script that runs a command or writes a file is refused
# (exit 1, file:line, what was refused, nothing done, no archive); with --trust-script bake and
# cook run it and say it is trusted; --trust-script without --source is a usage error; a runaway
# height function ends as an error naming its line.
set -euo pipefail
T=${TERRA_BIN:?TERRA_BIN not set}
bin=$(dirname "$T")
work=$(mktemp -d "${TMPDIR:-/tmp}/terra_cli_script.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! "$T" bake --help | grep -q -- "--source"; then echo "SKIP: terra built without scripts"; exit 77; fi

cat >"$work/same.lua" <<'EOF'
return { height = terra.world, layer = terra.world_layer, range = terra.world_range }
EOF
cat >"$work/hills.lua" <<'EOF'
-- rolling hills with a flat road along z = 0
return {
  height = function(x, z)
    local h = 60 * terra.fbm(x / 700, z / 700)
    local d = math.abs(z)
    if d < 30 then h = h * (d / 30) ^ 2 end
    return h
  end,
  layer = function(x, z) if math.abs(z) < 4 then return "asphalt" end end,
  layers = { asphalt = { tint = { 0.08, 0.08, 0.09 } } },
  min_height = -60, max_height = 60,
}
EOF
printf 'return { min_height = 0, max_height = 1,\n  height = function(x, z) return x.y end }\n' >"$work/broken.lua"

# the default world through a script: the same tiles (the manifests differ, naming the ground)
"$T" bake --levels 3 --area 0,0,512,512 --cells 16 --compression none -q "$work/world.terra"
"$T" bake --source "$work/same.lua" --levels 3 --area 0,0,512,512 --cells 16 --compression none -q "$work/same.terra"
"$T" export "$work/world.terra" "$work/world_tree" >/dev/null
"$T" export "$work/same.terra" "$work/same_tree" >/dev/null
diff -r -x layer.json "$work/world_tree" "$work/same_tree" >/dev/null || fail "the script's tiles differ from the world's"
"$T" info "$work/same.terra" | grep -q '"kind":"script"' || fail "the manifest does not name the script"

# a ground of its own: drawn, baked, cooked
"$T" render --source "$work/hills.lua" --size 160x90 --eye 0,0,-300 --above 80 --pitch -15 -o "$work/hills.png" \
  >"$work/render.txt" || fail "render: $(cat "$work/render.txt")"
[ -s "$work/hills.png" ] || fail "no picture"
"$T" bake --source "$work/hills.lua" --levels 2 --area 0,-256,512,256 -q "$work/hills.terra"
if [ -x "$bin/terra-cook" ]; then
  "$T" cook --source "$work/hills.lua" --area 0,-256,512,256 -q -o "$work/hills_tin.terra" >"$work/cook.txt" ||
    fail "cook --source: $(cat "$work/cook.txt")"
  "$T" check "$work/hills_tin.terra" >"$work/check.txt" 2>&1 || fail "check: $(cat "$work/check.txt")"
fi

# a broken script: exit 1, file:line, no archive
set +e
"$T" bake --source "$work/broken.lua" --levels 1 --area 0,0,64,64 "$work/broken.terra" 2>"$work/err.txt"
rc=$?
set -e
[ "$rc" = 1 ] || fail "a broken script exits $rc"
grep -q "broken.lua:2:" "$work/err.txt" || fail "no file:line: $(cat "$work/err.txt")"
[ ! -e "$work/broken.terra" ] || fail "a broken script left an archive"
set +e
"$T" render --source "$work/hills.lua" --archive "$work/hills.terra" -o "$work/x.png" 2>"$work/err2.txt"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "give one" "$work/err2.txt" || fail "--source with --archive: $rc $(cat "$work/err2.txt")"
# the sandbox: an escape is refused where it is written, and nothing happens
cat >"$work/escape.lua" <<EOF
-- a world that runs a command
os.execute("touch '$work/ran'")
local f = io.open("$work/wrote", "w") if f then f:write("x") f:close() end
return { height = function(x, z) return 0 end, min_height = -1, max_height = 1 }
EOF
set +e
"$T" bake --source "$work/escape.lua" --levels 1 --area 0,0,64,64 -q "$work/escape.terra" 2>"$work/err3.txt"
rc=$?
set -e
[ "$rc" = 1 ] || fail "a sandbox escape exits $rc"
grep -q "escape.lua:2: os.execute is refused" "$work/err3.txt" || fail "the refusal: $(cat "$work/err3.txt")"
grep -q -- "--trust-script" "$work/err3.txt" || fail "the refusal does not say what lifts it: $(cat "$work/err3.txt")"
[ ! -e "$work/ran" ] && [ ! -e "$work/wrote" ] || fail "the sandboxed script ran a command or wrote a file"
[ ! -e "$work/escape.terra" ] || fail "a refused script left an archive"
# trusted: it runs, and says so
"$T" bake --source "$work/escape.lua" --trust-script --levels 1 --area 0,0,64,64 -q "$work/escape.terra" \
  2>"$work/trust.txt" || fail "bake --trust-script: $(cat "$work/trust.txt")"
[ -e "$work/ran" ] && [ -e "$work/wrote" ] || fail "the trusted script did not run its command and write its file"
grep -q "escape.lua: trusted" "$work/trust.txt" || fail "bake --trust-script does not say so: $(cat "$work/trust.txt")"
if [ -x "$bin/terra-cook" ]; then
  rm -f "$work/ran" "$work/wrote"
  set +e
  "$T" cook --source "$work/escape.lua" --area 0,0,64,64 -q -o "$work/escape_tin.terra" 2>"$work/err4.txt"
  rc=$?
  set -e
  [ "$rc" = 1 ] && grep -q "os.execute is refused" "$work/err4.txt" && [ ! -e "$work/ran" ] ||
    fail "cook --source, sandboxed: $rc $(cat "$work/err4.txt")"
  "$T" cook --source "$work/escape.lua" --trust-script --area 0,0,64,64 -q -o "$work/escape_tin.terra" \
    2>"$work/trust2.txt" || fail "cook --trust-script: $(cat "$work/trust2.txt")"
  [ -e "$work/ran" ] && grep -q "escape.lua: trusted" "$work/trust2.txt" || fail "cook --trust-script: $(cat "$work/trust2.txt")"
fi
set +e
"$T" bake --trust-script "$work/x.terra" 2>"$work/err5.txt"
rc=$?
"$T" render --trust-script -o "$work/x.png" 2>>"$work/err5.txt"
rc2=$?
set -e
[ "$rc" = 2 ] && [ "$rc2" = 2 ] && [ "$(grep -c "give one" "$work/err5.txt")" = 2 ] ||
  fail "--trust-script without --source: $rc $rc2 $(cat "$work/err5.txt")"
# a runaway: stopped at the time limit, naming the loop's line
printf 'return { min_height = 0, max_height = 1,\n  height = function(x, z)\n    while true do end\n  end }\n' >"$work/spin.lua"
set +e
"$T" bake --source "$work/spin.lua" --levels 1 --area 0,0,64,64 -q "$work/spin.terra" 2>"$work/err6.txt"
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "spin.lua:3: a call ran past its time limit" "$work/err6.txt" ||
  fail "a runaway: $rc $(cat "$work/err6.txt")"
echo "cli_script: ok"
