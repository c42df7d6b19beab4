#!/usr/bin/env bash
# Numeric options of fly, render, view, bake and drive: a value outside its range (or malformed) is
# refused at once with exit 2, a message naming the option and its range, and nothing written;
# values at the edges of the ranges are taken. (The bad values here once hung for ever, overflowed,
# exited 1, or were silently replaced by defaults.)
set -u
terra=${TERRA_BIN:?TERRA_BIN not set}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out" || exit 1
fail=0; pass=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# refused CMD... : exit 2 within 20 s, the first line names the option (the word after the command's
# name that starts with --) and says its range ("from LO to HI", or the rule), nothing left in $out
refused() {
  local opt=$1 want=$2; shift 2
  rm -rf "$out"/*
  local t0=$SECONDS msg rc
  msg=$(timeout 20 "$terra" "$@" 2>&1 </dev/null); rc=$?
  local first=${msg%%$'\n'*}
  if [ $rc -ne 2 ]; then bad "$* -> exit $rc, not 2: $first"
  elif ! grep -q -- "$opt" <<<"$first"; then bad "$* -> message does not name $opt: $first"
  elif ! grep -qE -- "$want" <<<"$first"; then bad "$* -> message does not give the range ($want): $first"
  elif [ $((SECONDS - t0)) -gt 5 ]; then bad "$* -> took $((SECONDS - t0)) s"
  elif [ -n "$(ls -A "$out")" ]; then bad "$* -> left $(ls -A "$out")"
  else ok "$* refused: $first"; fi
  last=$first
}
range='from -?[0-9.e+]+ to [0-9.e+]+'

# the issue's lines
refused --tile0 "$range" fly --tile0 1e15 -n 1 -o fo
refused --tile0 "$range" fly --tile0 1e300 -n 1 -o fo
refused --cells "power of two from 16 to 256" fly --cells 3 -n 1 -o fo
refused --cells "power of two from 16 to 256" fly --cells 7 -n 1 -o fo
refused --cells "power of two from 16 to 256" fly --cells 512 -n 1 -o fo
refused --area "X0 < X1 and Z0 < Z1" bake --area 0,0,0,0 a.terra
refused --bounds "W < E .* S < N" bake --frame geographic --bounds 0,0,0,0 a.terra
refused --cells "power of two from 2 to 256" bake --cells 0 a.terra
refused --tile-size "$range" bake --tile-size 1e300 a.terra

# fly
refused --tile0 "$range" fly --tile0 0 -n 1 -o fo
refused --tile0 "$range" fly --tile0 nan -n 1 -o fo
refused --tile0 "$range" fly --tile0 -64 -n 1 -o fo
refused --range0 "$range" fly --range0 1e300 -n 1 -o fo
refused "range0" "at most 64 of its tiles" fly --range0 1e6 -n 1 -o fo
refused "range0" "range0 >= [0-9.]+ m" fly --range0 10 -n 1 -o fo
refused "coarsest" "at most 64 of its tiles" fly --tile0 0.01 --range0 1e6 --levels 24 -n 1 -o fo
refused --levels "$range" fly --levels 0 -n 1 -o fo
refused --levels "$range" fly --levels 99999999999999999999 -n 1 -o fo
refused --frames "$range" fly --frames 0 -o fo
refused --frames "$range" fly --frames 1e9 -o fo
refused --maps "$range" fly --maps -1 -o fo
refused --map-size "$range" fly --map-size 1e6 -o fo
refused --sheet "$range" fly --sheet 65 -o fo
refused --size "from 16x16 to 8192x8192" fly --size 100000x10 -o fo
refused --seed "$range" fly --seed -1 -n 1 -o fo
refused --seed "$range" fly --seed 18446744073709551616 -n 1 -o fo
refused --seed "$range" fly --seed 1.5 -n 1 -o fo

# render
refused --eye "$range" render -o r.png --eye 1e300,0,0
refused --eye "$range" render -o r.png --eye 0,inf,0
refused --eye "$range" render -o r.png --eye 0,0,-1e10
refused --yaw "$range" render -o r.png --yaw 1e300
refused --yaw "$range" render -o r.png --yaw nan
refused --pitch "$range" render -o r.png --pitch -91
refused --fov "$range" render -o r.png --fov 0
refused --above "$range" render -o r.png --above 1e300
refused --above "$range" render -o r.png --above 0
refused --clear "$range" render -o r.png --clear 0,0,256
refused --size "from 16x16 to 8192x8192" render -o r.png --size 8x8
refused --cells "power of two from 16 to 256" render -o r.png --cells 3
refused --cells "power of two from 16 to 256" render -o r.png --cells 4096
refused --levels "$range" render -o r.png --levels 25
refused --seed "$range" render -o r.png --seed -5

# view (refused before any window is opened: no display needed)
refused --eye "$range" view --eye 0,0,1e300
refused --above "$range" view --above -1
refused --yaw "$range" view --yaw 1e9
refused --pitch "$range" view --pitch 100
refused --cells "power of two from 16 to 256" view --cells 48
refused --frames "$range" view --frames -1
refused --seed "$range" view --seed x

# bake
refused --area "$range" bake --area 0,0,1e300,1 a.terra
refused --area "X0 < X1 and Z0 < Z1" bake --area 10,0,5,8 a.terra
refused --bounds "$range" bake --frame geographic --bounds -200,0,1,1 a.terra
refused --bounds "S < N from -90 to 90" bake --frame geographic --bounds 0,-95,1,1 a.terra
refused --tile-size "$range" bake --tile-size 0 a.terra
refused --tile-size "$range" bake --tile-size -1 a.terra
refused --cells "power of two from 2 to 256" bake --cells 3 a.terra
refused --cells "power of two from 2 to 256" bake --cells 1024 a.terra
refused --levels "$range" bake --levels 26 a.terra
refused --levels "$range" bake --levels 0 a.terra
refused --metres-per-degree "$range" bake --frame geographic --metres-per-degree 1e300 a.terra
refused --scale "$range" bake --scale 1e-300 a.terra
refused --scale "$range" bake --scale 0 a.terra
refused --seed "$range" bake --seed -1 a.terra
refused --threads "$range" bake --threads 0 a.terra
refused "tile coordinates" "2\^27" bake --tile-size 0.01 --area 0,0,1e9,1 a.terra

# drive
refused --bodies "$range" drive --bodies 0
refused --vehicles "$range" drive --vehicles 17
refused --seconds "$range" drive --seconds 1e300
refused --seconds "$range" drive --seconds nan
refused --seed "$range" drive --seed -1

# ---- the world and camera options fly, render and view share (one parser, cli_scene_parse) ---------
# Each is refused alike by every command that takes it: exit 2, the same message bar the command's
# name, and the range it names is the one that command's --help states for the option. (No display
# for view: it refuses before opening a window, and what it takes fails at the window instead.)
export DISPLAY= WAYLAND_DISPLAY=
# the arguments a command needs to get as far as drawing
args_of() {
  case $1 in
    fly) args=(fly -n 1 -o fo --no-frames --sheet 0) ;;
    render) args=(render -o r.png) ;;
    view) args=(view --frames 1) ;;
  esac
}
declare -A help
for c in fly render view; do help[$c]=$("$terra" $c --help 2>&1); done
# the help line of an option (with the lines it goes on to), joined into one
help_line() {
  awk -v o="      $2 " 'index($0, o) == 1 {p = 1; print; next} p && /^                        [^ ]/ {print; next} {p = 0}' \
    <<<"${help[$1]}" | tr -s ' \n' '  '
}
# shared OPT VALUE WANT CMD...: VALUE for --OPT refused by each CMD alike (OPT without its dashes: a
# rule of the selection's, whose message names it so)
shared() {
  local opt=$1 val=$2 want=$3 c ref="" refc="" msg range line; shift 3
  for c in "$@"; do
    args_of "$c"; last=""
    refused "$opt" "$want" "${args[@]}" "--${opt#--}" "$val"
    msg=${last#terra $c: }
    if [ -z "$ref" ]; then ref=$msg refc=$c
    elif [ "$msg" != "$ref" ]; then bad "$c $opt $val says '$msg', $refc '$ref'"
    else ok "$c $opt $val: the same message as $refc"; fi
    range=$(grep -oE 'from -?[0-9.e+x]+ to -?[0-9.e+x]+' <<<"$msg" | head -1)
    [ -z "$range" ] && continue # a rule of the selection's, not a range
    line=$(help_line "$c" "--${opt#--}")
    grep -qF -- "$range" <<<"$line" && ok "$c --help states $opt $range" \
      || bad "$c --help does not state $opt $range: '$line'"
  done
}
cells='power of two from 16 to 256'
for v in 4096 3 0 512 -16 x; do shared --cells $v "$cells" fly render view; done
for v in -1 1.5 18446744073709551616; do shared --seed $v "$range" fly render view; done
for v in 0 1e15 nan; do shared --tile0 $v "$range" fly render view; done
for v in 0 25 1e9; do shared --levels $v "$range" fly render view; done
for v in 1e300 6400001; do shared --range0 $v "$range" fly render view; done
shared range0 10 "range0 >= [0-9.]+ m" fly render view
shared range0 1e6 "at most 64 of its tiles" fly render view
for v in 0 171 nan -60; do shared --fov $v "$range" fly render view; done
for v in 0 1001 nan -1; do shared --sse $v "$range" fly render view; done
for v in 1,2 256,0,0 0,-1,0; do shared --clear $v "$range" fly render view; done
for v in 0x0 8x8 8193x100 100 16x; do shared --size $v "from 16x16 to 8192x8192" fly render view; done
for v in 1,2 1,2,x 1,2,3,4 1e10,0,0 0,nan,0; do shared --eye $v "$range" render view; done
for v in 0 1e7 -1; do shared --above $v "$range" render view; done
for v in 361 -361 inf; do shared --yaw $v "$range" render view; done
for v in 91 -90.5; do shared --pitch $v "$range" render view; done
# fly flies its path over the default world or an archive's area: no pose
for o in "--eye 0,0,0" "--above 10" "--yaw 0" "--pitch 0"; do
  msg=$(timeout 20 "$terra" fly -n 1 -o fo $o 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -q "unknown option" <<<"$msg" && ok "fly $o refused: unknown option" \
    || bad "fly $o -> exit $rc: $msg"
done
# every shared option's help line is the same in each command's --help
for o in --seed --cells --tile0 --levels --range0 --size --fov --sse --level-tint --no-morph --clear \
         --archive --eye --above --yaw --pitch; do
  case $o in --eye|--above|--yaw|--pitch) cs="render view" ;; *) cs="fly render view" ;; esac
  ref=$(help_line render "$o")
  [ -n "$ref" ] || { bad "render --help has no $o"; continue; }
  for c in $cs; do
    [ "$(help_line $c "$o")" = "$ref" ] && ok "$c --help: $o as the others" \
      || bad "$c --help: $o is '$(help_line $c "$o")', render's '$ref'"
  done
done
for o in --eye --above --yaw --pitch; do
  [ -z "$(help_line fly "$o")" ] && ok "fly --help has no $o" || bad "fly --help lists $o"
done
# taken alike at the edges of the ranges: fly and render draw (exit 0); view gets as far as the
# window (exit 1, no display). taken any ...: a failure to draw (exit 1) still means taken, as for
# --cells 256, whose scene llvmpipe cannot hold (a vertex buffer of 2048 tiles of 2 MB): bad usage
# is exit 2.
taken() {
  local any=$1 c msg rc; shift
  for c in fly render view; do
    args_of "$c"
    local extra=()
    [ $c != fly ] && extra=("${pose[@]}")
    rm -rf "$out"/*
    msg=$(timeout 120 "$terra" "${args[@]}" "$@" "${extra[@]}" 2>&1 </dev/null); rc=$?
    if [ $c = view ]; then
      [ $rc -eq 1 ] && grep -qi display <<<"$msg" && ok "view $* ${extra[*]} taken (no display)" \
        || bad "view $* ${extra[*]} -> exit $rc: $msg"
    elif [ $rc -eq 0 ] || { [ "$any" = any ] && [ $rc -eq 1 ]; }; then
      ok "$c $* ${extra[*]} taken (exit $rc$([ $rc -ne 0 ] && echo ": $(tail -1 <<<"$msg")"))"
    else bad "$c $* ${extra[*]} -> exit $rc: $(tail -3 <<<"$msg")"; fi
  done
}
pose=(--yaw -360 --pitch -90 --above 0.01)
taken exit0 --size 16x16 --cells 16 --levels 1 --tile0 0.01 --range0 0.06 --fov 1 --seed 0 --level-tint --no-morph
pose=(--yaw 360 --pitch 90 --above 1000000 --eye 1000000000,0,-1000000000)
taken exit0 --size 16x16 --levels 24 --tile0 64 --fov 170 --seed 18446744073709551615
pose=(--eye -1000000000,1000000000,0)
taken any --size 16x16 --cells 256 --levels 2
pose=()
taken exit0 --size 16x16 --tile0 100000 --levels 1 --range0 6400000
msg=$(timeout 20 "$terra" view --size 8192x8192 --frames 1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qi display <<<"$msg" && ok "view --size 8192x8192 taken (no display)" || bad "view --size 8192x8192 -> exit $rc: $msg"

# the edges of the ranges are taken
msg=$(timeout 20 "$terra" bake -q --tile-size 100000 --levels 1 --cells 2 --area 0,0,1000,1000 "$out/edge.terra" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -s "$out/edge.terra" ] && ok "bake at the edges of --tile-size, --levels, --cells" \
  || bad "bake at the edges (rc $rc): $msg"
msg=$(timeout 20 "$terra" bake -q --scale 1000 --seed 18446744073709551615 --tile-size 0.01 --levels 1 --cells 2 \
  --area 0,0,0.02,0.02 "$out/edge2.terra" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -s "$out/edge2.terra" ] && ok "bake at the edges of --scale, --seed, --tile-size" \
  || bad "bake at the other edges (rc $rc): $msg"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
