#!/usr/bin/env bash
# terra cook: rasters into TIN tile archives (fuji and St Helens in the local frame, the SRTM cell
# N44W072.hgt in the geographic one) that `terra info --verify` reads back; usage errors exit 2;
# bad inputs (missing, empty, all no-data) exit 1 naming the file, and leave no output behind.
set -u
BIN=${TERRA_BIN:-./terra}
DATA=${TERRA_SHARED:-../shared}/data/dem
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect NAME CODE CMD...: runs CMD (stderr not a terminal), checks its exit code
expect() {
  local name=$1 code=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$code" ]; then ok "$name"; else bad "$name (exit $rc, wanted $code): $(head -c 300 "$T/err")"; fi
}
field() { awk -v k="$1" '$1 == k { print $2; exit }' "$T/out"; }
# failed NAME FILE-IN-MESSAGE CMD...: exit 1, the message names the file, no output left
failed() {
  local name=$1 file=$2
  shift 2
  expect "$name" 1 "$@"
  grep -q -- "$file" "$T/err" && ok "$name: message names $file" || bad "$name: message: $(cat "$T/err")"
  [ -z "$(ls "$T/o" 2>/dev/null)" ] && ok "$name: nothing written" || bad "$name: left $(ls "$T/o")"
}
mkdir -p "$T/o"

expect "help" 0 "$BIN" cook --help
grep -q -- "--max-error" "$T/out" && grep -q -- "--frame" "$T/out" && ok "help text" || bad "help text"

# Bad usage: exit 2, nothing written.
expect "no input" 2 "$BIN" cook -o "$T/o/x.terra"
expect "no output" 2 "$BIN" cook "$T/missing.png"
expect "max-error 0" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --max-error 0
expect "threads 0" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --threads 0
expect "tile size 3" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --tile-size 3
expect "levels 0" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --levels 0
expect "frame" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --frame polar
expect "encoding" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --encoding jpeg
expect "compression" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --compression lzma
expect "levels with geographic" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --frame geographic --levels 3
expect "unknown option" 2 "$BIN" cook "$T/missing.png" -o "$T/o/x.terra" --fast
[ -z "$(ls "$T/o")" ] && ok "usage errors write nothing" || bad "usage errors left $(ls "$T/o")"

# Bad inputs: exit 1, the file named, no output.
failed "missing file" "$T/missing.png" "$BIN" cook "$T/missing.png" -o "$T/o/x.terra"
: >"$T/empty.tif"
failed "0-byte file" "$T/empty.tif" "$BIN" cook "$T/empty.tif" -o "$T/o/x.terra"
{ printf 'ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n'
  for r in 1 2 3; do echo "-9999 -9999 -9999 -9999"; done; } >"$T/void.asc"
failed "all no-data" "$T/void.asc" env GDAL_PAM_ENABLED=NO "$BIN" cook "$T/void.asc" -o "$T/o/x.terra"
# A failed cook leaves an archive already there as it was.
echo "an earlier archive" >"$T/keep.terra"
expect "failure keeps the old output" 1 "$BIN" cook "$T/empty.tif" -o "$T/keep.terra"
[ "$(cat "$T/keep.terra")" = "an earlier archive" ] && ok "old output intact" || bad "old output intact"

# A scenery: a 300 m square of ground and a 10 m wall standing on x = 200, cut into 128 m tiles
# (3 x 3 finest, then 2 x 2, then one); a 0-byte and a NaN scenery fail naming the file.
{ echo "v 0 0 0"; echo "v 300 0 0"; echo "v 300 0 300"; echo "v 0 0 300"
  echo "v 200 0 50"; echo "v 200 0 250"; echo "v 200 10 250"; echo "v 200 10 50"
  echo "f 1 3 2"; echo "f 1 4 3"; echo "f 5 6 7"; echo "f 5 7 8"; } >"$T/ground.obj"
expect "scenery" 0 "$BIN" cook "$T/ground.obj" --tile-size 128 -q -o "$T/ground.terra"
[ "$(field tiles)" = 14 ] && [ "$(field levels)" = 3 ] && [ "$(field walls)" = 2 ] && ok "scenery tiles" \
  || bad "scenery tiles: $(cat "$T/out")"
expect "scenery verify" 0 "$BIN" info --verify "$T/ground.terra"
grep -q '"kind":"scenery"' "$T/out" && ok "scenery in the metadata" || bad "scenery in the metadata"
: >"$T/empty.obj"
failed "0-byte scenery" "$T/empty.obj" "$BIN" cook "$T/empty.obj" -o "$T/o/x.terra"
printf 'v 0 0 0\nv 1 nan 0\nv 0 0 1\nf 1 2 3\n' >"$T/nan.obj"
failed "NaN scenery" "$T/nan.obj" "$BIN" cook "$T/nan.obj" -o "$T/o/x.terra"

# Hostile rasters (issue 37), as ESRI ASCII grids with a .prj (WGS 84) and VRTs over them.
# grid FILE COLS ROWS WEST SOUTH CELL NODATA EXPR: heights EXPR of column c and row r (from the top)
grid() {
  local f=$1 nc=$2 nr=$3 w=$4 s=$5 cell=$6 nd=$7 expr=$8
  { printf 'ncols %s\nnrows %s\nxllcorner %s\nyllcorner %s\ncellsize %s\nNODATA_value %s\n' "$nc" "$nr" "$w" "$s" "$cell" "$nd"
    awk -v nc="$nc" -v nr="$nr" "BEGIN { for (r = 0; r < nr; r++) { l = \"\"; for (c = 0; c < nc; c++) l = l \" \" ($expr); print l } }"
  } >"$f"
  printf 'GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]\n' >"${f%.asc}.prj"
}
# vrt FILE SRS GRID COLS ROWS WEST NORTH CELL: GRID's band under another coordinate system
vrt() {
  printf '<VRTDataset rasterXSize="%s" rasterYSize="%s"><SRS>%s</SRS><GeoTransform>%s, %s, 0, %s, 0, -%s</GeoTransform><VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename>%s</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>\n' \
    "$4" "$5" "$2" "$6" "$8" "$7" "$8" "$3" >"$1"
}
hills='1000 + 80 * sin(c * 0.21) * cos(r * 0.17) + 30 * sin((c + r) * 0.5)'
# Two windows of one ground overlapping by half, the second raised 500 m: the first given is the
# ground where it has data (the metadata says the rule), terra check agrees with every stated error
# against both rasters, and no level states less than a finer one.
grid "$T/ova.asc" 48 36 -71.5 44.2 0.000833333333333333 -9999 "$hills"
grid "$T/ovb.asc" 48 36 -71.48 44.2 0.000833333333333333 -9999 "$hills + 500"
export GDAL_PAM_ENABLED=NO
expect "overlap" 0 "$BIN" cook "$T/ova.asc" "$T/ovb.asc" -q --no-cache -o "$T/ov.terra"
awk '$1 == "level" { s[$2] = $12 } END { for (z in s) if ((z - 1) in s && s[z - 1] < s[z]) exit 1 }' "$T/out" \
  && ok "overlap: no level states less than a finer one" || bad "overlap levels: $(grep '^level' "$T/out")"
expect "overlap check" 0 "$BIN" check "$T/ov.terra" --source "$T/ova.asc" --source "$T/ovb.asc"
grep -q "every promise holds" "$T/out" && ok "overlap: every stated error true" || bad "overlap check: $(cat "$T/out")"
expect "overlap info" 0 "$BIN" info "$T/ov.terra"
grep -q '"overlap":' "$T/out" && ok "overlap rule in the metadata" || bad "overlap metadata"
# NaN no-data (declared "nan") cooks as holes; terra check finds them all uncovered.
grid "$T/nan.asc" 40 30 -71.5 44.2 0.000833333333333333 nan "(c - 20) ^ 2 + (r - 15) ^ 2 < 30 ? \"nan\" : $hills"
expect "NaN no-data" 0 "$BIN" cook "$T/nan.asc" -q --no-cache -o "$T/nan.terra"
expect "NaN no-data check" 0 "$BIN" check "$T/nan.terra" --source "$T/nan.asc"
grep -q "no-data source samples: [1-9][0-9]*, none covered" "$T/out" && ok "NaN samples are holes" || bad "NaN holes: $(cat "$T/out")"
# Heights past the bound (-12000..10000 m): refused naming the file, the sample and its place.
grid "$T/huge.asc" 20 20 -71.5 44.2 0.001 -9999 "(c + r) % 2 ? 1e30 : 0"
failed "1e30 heights" "$T/huge.asc" "$BIN" cook "$T/huge.asc" -o "$T/o/x.terra"
grep -q "column 1, row 0, lon .*outside -12000..10000 m" "$T/err" && ok "1e30: the sample and the bound named" || bad "1e30: $(cat "$T/err")"
grid "$T/flt.asc" 20 20 -71.5 44.2 0.001 -9999 "c == 7 && r == 9 ? 3.4e38 : $hills"
failed "3.4e38 height" "$T/flt.asc" "$BIN" cook "$T/flt.asc" -o "$T/o/x.terra"
grep -q "column 7, row 9" "$T/err" && ok "3.4e38: the sample named" || bad "3.4e38: $(cat "$T/err")"
# Coordinates off the globe, an unknown PROJ string, another body's CRS.
grid "$T/far.asc" 20 20 1e30 44.2 0.001 -9999 "$hills"
failed "longitude 1e30" "$T/far.asc" "$BIN" cook "$T/far.asc" -o "$T/o/x.terra"
vrt "$T/unknown.vrt" "+proj=foobar +datum=WGS84" "$T/ova.asc" 48 36 -71.5 44.23 0.000833333333333333
failed "unknown PROJ string" "$T/unknown.vrt" "$BIN" cook "$T/unknown.vrt" -o "$T/o/x.terra"
grep -q "Unknown projection" "$T/err" && ! grep -q "out of memory" "$T/err" && ok "PROJ's own message" || bad "unknown PROJ: $(cat "$T/err")"
vrt "$T/mars.vrt" "IAU_2015:49900" "$T/ova.asc" 48 36 137.4 -4.5 0.01
failed "a Mars CRS" "$T/mars.vrt" "$BIN" cook "$T/mars.vrt" -o "$T/o/x.terra"
grep -q "not the Earth's" "$T/err" && ok "Mars: refused on the globe" || bad "Mars: $(cat "$T/err")"
expect "a Mars CRS, local frame" 0 "$BIN" cook "$T/mars.vrt" --frame local -q --no-cache -o "$T/mars.terra"
awk '$1 == "unit" { exit !($3 > 592.7 && $3 < 592.8) }' "$T/out" && ok "Mars: metres on Mars (592.7 m a 0.01 degree sample)" \
  || bad "Mars local: $(grep '^unit' "$T/out")"

if [ ! -f "$DATA/fuji.png" ]; then
  echo "SKIP cooking real rasters: $DATA not found (set TERRA_SHARED)"
  echo "$fails failed"
  [ "$fails" -eq 0 ]
  exit
fi

# Fuji (Terrain-RGB, 62 m spacing): local frame, four finest tiles and their parent. Silent in a pipe.
expect "fuji" 0 "$BIN" cook "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 -o "$T/fuji.terra"
[ "$(field frame)" = local ] && [ "$(field levels)" = 2 ] && [ "$(field tiles)" = 5 ] && ok "fuji report" \
  || bad "fuji report: $(cat "$T/out")"
[ ! -s "$T/err" ] && ok "no progress bar in a pipe" || bad "stderr in a pipe: $(head -c 200 "$T/err")"
grep -q "^level 0 tiles 4 " "$T/out" && grep -q "^peak_mb " "$T/out" && grep -q "^samples_per_s " "$T/out" \
  && ok "fuji report lines" || bad "fuji report lines: $(cat "$T/out")"
awk '$1 == "level" && $2 == 0 { e = $NF } END { exit !(e > 0 && e <= 10) }' "$T/out" && ok "fuji finest error measured, within the bound" \
  || bad "fuji finest error: $(grep '^level 0' "$T/out")"
expect "fuji verify" 0 "$BIN" info --verify "$T/fuji.terra"
grep -q 'intact' "$T/out" && ok "fuji archive intact" || bad "fuji archive: $(tail -3 "$T/out")"
expect "fuji check" 0 "$BIN" check "$T/fuji.terra" --source "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -q

# Packed (the default) against gzip: the same ground in far fewer bytes; terra check holds every
# promise on the packed archive and export hands out plain quantized-mesh.
expect "fuji gzip" 0 "$BIN" cook "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 --compression gzip --no-cache -q -o "$T/fuji_gz.terra"
gz=$(field bytes)
expect "fuji packed" 0 "$BIN" cook "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 --no-cache -q -o "$T/fuji_pk.terra"
pk=$(field bytes)
awk -v a="$pk" -v b="$gz" 'BEGIN { exit !(a > 0 && a < 0.75 * b) }' && ok "packed: $pk B against gzip's $gz B" \
  || bad "packed $pk B, gzip $gz B"
expect "packed info" 0 "$BIN" info "$T/fuji_pk.terra"
grep -q "^compression packed" "$T/out" && grep -q "version 2" "$T/out" && ok "packed archive says so" || bad "packed info: $(head -4 "$T/out")"
expect "packed verify" 0 "$BIN" info --verify "$T/fuji_pk.terra"
expect "packed check" 0 "$BIN" check "$T/fuji_pk.terra" --source "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -q
expect "packed export" 0 "$BIN" export "$T/fuji_pk.terra" "$T/fuji_pk_tree"
n=$(find "$T/fuji_pk_tree" -name '*.terrain' | wc -l)
[ "$n" = 5 ] && ok "packed export: 5 tiles" || bad "packed export: $n tiles"
# What export wrote is quantized-mesh: the 88-byte header, then a vertex count whose u, v and
# height arrays (6 bytes a vertex) fit in the file; a packed tile (codec byte, zstd frame) would not.
f=$(find "$T/fuji_pk_tree" -name '*.terrain' | head -1)
vc=$(od -An -tu4 -j 88 -N 4 "$f" | tr -d ' ')
[ "$vc" -gt 0 ] && [ "$(stat -c %s "$f")" -gt $((92 + 6 * vc)) ] && ok "exported tile is plain ($vc vertices)" \
  || bad "exported tile $f: vertex count '$vc'"

# The cache: the same cook again writes nothing; a touched input (content unchanged) still agrees;
# --no-cache neither reads nor writes it.
sum1=$(md5sum <"$T/fuji.terra")
expect "fuji again" 0 "$BIN" cook "$DATA/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 -o "$T/fuji.terra"
grep -q "^cache up to date" "$T/out" && [ "$(md5sum <"$T/fuji.terra")" = "$sum1" ] && ok "unchanged: a no-op" \
  || bad "unchanged: $(cat "$T/out")"
cp "$DATA/fuji.png" "$T/fuji.png"
expect "copy cooked" 0 "$BIN" cook "$T/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 -q -o "$T/fc.terra"
touch -d "2001-01-01" "$T/fuji.png"
expect "touched" 0 "$BIN" cook "$T/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 -q -o "$T/fc.terra"
grep -q "^cache up to date (1 touched" "$T/out" && ok "touched input agrees" || bad "touched: $(cat "$T/out")"
expect "no cache" 0 "$BIN" cook "$T/fuji.png" --encoding terrain-rgb --spacing 62 -e 10 -q --no-cache -o "$T/nc.terra"
[ -f "$T/nc.terra" ] && [ ! -e "$T/nc.terra.cache" ] && ! grep -q "^cache" "$T/out" && ok "--no-cache" || bad "--no-cache"
expect "cache and no-cache" 2 "$BIN" cook "$T/fuji.png" --cache "$T/c" --no-cache -o "$T/nc.terra"

# St Helens 10 m (16-bit, decimetres): 64 finest tiles; quiet.
expect "st helens" 0 "$BIN" cook "$DATA/sthelens_10m.png" --spacing 10 --z-scale 0.1 -e 5 --levels 2 -q -o "$T/sth.terra"
[ "$(field tiles)" = 80 ] && [ "$(field levels)" = 2 ] && ok "st helens tiles" || bad "st helens tiles: $(cat "$T/out")"
awk '$1 == "level" { t[$2] = $8 } END { exit !(t[1] < 0.9 * t[0]) }' "$T/out" && ok "st helens level 1 simplified" \
  || bad "st helens level 1: $(grep '^level' "$T/out")"
expect "st helens verify" 0 "$BIN" info --verify "$T/sth.terra"
expect "st helens check" 0 "$BIN" check "$T/sth.terra" --source "$DATA/sthelens_10m.png" --spacing 10 --z-scale 0.1 -q
# The same raster read a window at a time (as one too large to hold is; TERRA_COOK_WHOLE_MAX lowers
# the size that is read whole): the same tiles, level by level.
expect "st helens whole" 0 "$BIN" cook "$DATA/sthelens_10m.png" --spacing 10 --z-scale 0.1 -e 5 --levels 2 -q --no-cache -o "$T/sthw.terra"
grep '^level' "$T/out" >"$T/sth_whole.levels"
TERRA_COOK_WHOLE_MAX=0 expect "st helens windows" 0 "$BIN" cook "$DATA/sthelens_10m.png" --spacing 10 --z-scale 0.1 -e 5 --levels 2 -q --no-cache -o "$T/sthw.terra"
grep '^level' "$T/out" | cmp -s - "$T/sth_whole.levels" && ok "st helens windows = whole" \
  || bad "st helens windows: $(grep '^level' "$T/out") against $(cat "$T/sth_whole.levels")"
expect "st helens windows check" 0 "$BIN" check "$T/sthw.terra" --source "$DATA/sthelens_10m.png" --spacing 10 --z-scale 0.1 -q

# N44W072.hgt: georeferenced, so geographic: zoom 10 is the first whose 256-sample tiles are finer
# than its 3 arc-seconds; the levels go down to zoom 0.
expect "hgt" 0 "$BIN" cook "$DATA/N44W072.hgt" -e 10 -q -o "$T/hgt.terra"
[ "$(field frame)" = geographic ] && [ "$(field zoom_finest)" = 10 ] && [ "$(field levels)" = 11 ] && ok "hgt geographic" \
  || bad "hgt geographic: $(cat "$T/out")"
grep -q "^level 10 tiles 42 " "$T/out" && grep -q "^level 0 tiles 1 " "$T/out" && ok "hgt tiles" || bad "hgt tiles: $(grep '^level' "$T/out")"
# Each coarser level is really simplified (its bound doubles): fewer than 9/10 of the triangles of the
# level below wherever that level has over 10 000 (a simplifier whose every try was refused kept
# the children whole, and the root tiles held the whole cell).
awk '$1 == "level" { t[$2] = $8 } END { for (z in t) if ((z + 1) in t && t[z + 1] > 10000 && t[z] > 0.9 * t[z + 1]) exit 1 }' \
  "$T/out" && ok "hgt coarser levels simplified" || bad "hgt coarser levels: $(grep '^level' "$T/out")"
# The cell's rim is no tile side above zoom 7: the hemisphere and quarter-world roots keep only the
# rim's corners and what the ground needs (keeping its 1201 samples a side, they held 4671 vertices,
# which their 16-bit steps could no longer tell apart).
awk '$1 == "level" && $2 <= 2 && $6 > 1000 { exit 1 }' "$T/out" && ok "hgt roots small" \
  || bad "hgt roots: $(grep '^level [0-2] ' "$T/out")"
expect "hgt verify" 0 "$BIN" info --verify "$T/hgt.terra"
grep -q "geographic" "$T/out" && ok "hgt archive frame" || bad "hgt archive frame"
# Every promise against the SRTM samples: the cell's north edge lies on the 45-degree line, a side
# of tiles down to zoom 2, whose 16-bit steps (2.0001 plane units) its vertices must clear; its
# other edges are hole rims that coarser levels straighten to their corners.
expect "hgt check" 0 "$BIN" check "$T/hgt.terra" --source "$DATA/N44W072.hgt" -q
# The same raster cooked in the local frame by request.
expect "hgt local" 0 "$BIN" cook "$DATA/N44W072.hgt" -e 10 --frame local --levels 1 -q -o "$T/hgtl.terra"
[ "$(field frame)" = local ] && [ "$(field tiles)" = 25 ] && ok "hgt local tiles" || bad "hgt local tiles: $(cat "$T/out")"

echo "$fails failed"
[ "$fails" -eq 0 ]
