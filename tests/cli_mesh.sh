#!/usr/bin/env bash
# terra mesh: formats, levels, verify, heatmap, check of another mesh, two layers, bad input.
set -u
BIN=${TERRA_BIN:-./terra}
DATA=${TERRA_SHARED:-../shared}/data/dem
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect NAME CODE CMD...: runs CMD, checks its exit code
expect() {
  local name=$1 code=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$code" ]; then ok "$name"; else bad "$name (exit $rc, wanted $code): $(head -c 300 "$T/err")"; fi
}
field() { awk -v k="$1" '$1 == k { print $2; exit }' "$T/out"; }

expect "help" 0 "$BIN" mesh --help
grep -q "max-error" "$T/out" || bad "help text"

# Fuji at 30 m: the published count, verified on every sample.
expect "fuji obj" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30 -o "$T/fuji.obj" --verify -q
[ "$(field vertices)" = 5668 ] && [ "$(field triangles)" = 11140 ] && ok "fuji counts" || bad "fuji counts: $(field vertices) $(field triangles)"
grep -q "^verify ok" "$T/out" && ok "verify line" || bad "verify line"
# GDAL is mapped by the terra-raster reader alone, never by the mesher
ldd "$BIN" | grep -q gdal && bad "terra links GDAL" || ok "terra does not link GDAL"
[ -n "$(field reader_peak_mb)" ] && [ -n "$(field peak_mb)" ] && ok "peak figures reported" || bad "peak figures reported"
[ "$(grep -c '^v ' "$T/fuji.obj")" = 5668 ] && [ "$(grep -c '^f ' "$T/fuji.obj")" = 11140 ] && ok "obj contents" || bad "obj contents"

# The same mesh measured back by the checker, as any tool's output would be.
expect "check-mesh" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/fuji.obj" -e 30
awk '$1 == "max_error" && $2 <= 30 { f = 1 } END { exit !f }' "$T/out" && ok "check-mesh bound" || bad "check-mesh bound"
expect "check-mesh over bound" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/fuji.obj" -e 10 -q

# PLY and STL; sizes follow the counts.
expect "fuji stl" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30 -o "$T/fuji.stl" -q
[ "$(stat -c %s "$T/fuji.stl")" = $((84 + 50 * 11140)) ] && ok "stl size" || bad "stl size"
expect "fuji ply normals" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30 -o "$T/fuji.ply" --normals --xy metres --spacing 62 -q
head -c 400 "$T/fuji.ply" | grep -q "element face 11140" && ok "ply header" || bad "ply header"

# Several levels from one run: coarse vertices are a prefix of the fine ones.
expect "levels" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20,50 -o "$T/lv.obj" -q
if [ -f "$T/lv.e50.obj" ] && [ -f "$T/lv.e20.obj" ]; then
  n=$(grep -c '^v ' "$T/lv.e50.obj")
  if cmp -s <(grep '^v ' "$T/lv.e50.obj") <(grep '^v ' "$T/lv.e20.obj" | head -n "$n"); then ok "prefix"; else bad "prefix"; fi
else
  bad "level files"
fi

# Tiles with levels: 5 x 5 tiles of fuji, three levels each, every one verified.
mkdir -p "$T/tiles"
expect "tiles" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 40,10 --tile-size 128 --threads 2 -o "$T/tiles/f.ply" --verify -q
[ "$(ls "$T/tiles" | wc -l)" = 50 ] && ok "tile files" || bad "tile files: $(ls "$T/tiles" | wc -l)"
grep -q "^verify ok" "$T/out" && ok "tiles verified" || bad "tiles verified"

# Heatmap.
expect "heatmap" 0 "$BIN" mesh "$DATA/st-helens.png" --encoding terrain-rgb -e 2 -o "$T/sh.obj" --heatmap "$T/heat.png" -q
[ "$(head -c 8 "$T/heat.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && ok "heatmap png" || bad "heatmap png"

# SRTM .hgt (georeferenced, voids are holes), georeferenced output, normals.
expect "hgt geo" 0 "$BIN" mesh "$DATA/N44W072.hgt" -e 25 -o "$T/hgt.obj" --xy geo --normals --verify -q
grep -q '^vn ' "$T/hgt.obj" && ok "hgt normals" || bad "hgt normals"
grep -m1 '^v ' "$T/hgt.obj" | awk '{ exit !($2 < -71 && $2 > -72.1 && $3 > 43.9 && $3 < 45.1) }' && ok "hgt degrees" || bad "hgt degrees"

# 16-bit PNG in decimetres.
expect "16-bit png" 0 "$BIN" mesh "$DATA/ps_height_1k.png" --z-scale 0.1 -e 20 -o "$T/ps.ply" --verify -q

# ASCII grid with no-data: no triangle covers it.
cat > "$T/g.asc" <<EOF
ncols 6
nrows 5
xllcorner 0
yllcorner 0
cellsize 10
NODATA_value -9999
1 2 3 4 5 6
2 3 -9999 -9999 6 7
3 4 -9999 6 7 8
4 5 6 7 8 9
5 6 7 8 9 30
EOF
expect "ascii grid holes" 0 "$BIN" mesh "$T/g.asc" -e 0.01 -o "$T/g.obj" --verify
[ "$(field nodata)" = 3 ] && ok "nodata count" || bad "nodata count"

# Two layers: a bridge deck over a channel.
{ printf 'ncols 12\nnrows 8\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n'
  for y in 0 1 2 3 4 5 6 7; do for x in $(seq 0 11); do if [ "$x" -ge 5 ] && [ "$x" -le 7 ]; then printf '2 '; else printf '10 '; fi; done; echo; done; } > "$T/lower.asc"
{ printf 'ncols 12\nnrows 8\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n'
  for y in 0 1 2 3 4 5 6 7; do for x in $(seq 0 11); do if [ "$y" -ge 3 ] && [ "$y" -le 4 ] && [ "$x" -ge 3 ] && [ "$x" -le 9 ]; then printf '12 '; else printf -- '-9999 '; fi; done; echo; done; } > "$T/upper.asc"
expect "two layers" 0 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" --thickness 1 -e 0.1 -o "$T/bridge.obj" -q
[ "$(field walls)" -gt 0 ] 2>/dev/null && ok "walls" || bad "walls: $(field walls)"
walls=$(field walls)
# The same ground as one two-band file (a VRT over both grids).
cat > "$T/two.vrt" <<EOF
<VRTDataset rasterXSize="12" rasterYSize="8">
  <VRTRasterBand dataType="Float32" band="1"><NoDataValue>-9999</NoDataValue><SimpleSource><SourceFilename relativeToVRT="1">lower.asc</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>
  <VRTRasterBand dataType="Float32" band="2"><NoDataValue>-9999</NoDataValue><SimpleSource><SourceFilename relativeToVRT="1">upper.asc</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>
</VRTDataset>
EOF
expect "two-band file" 0 "$BIN" mesh "$T/two.vrt" --upper-band 2 --thickness 1 -e 0.1 -o "$T/bridge2.obj" -q
[ "$(field walls)" = "$walls" ] && cmp -s "$T/bridge.obj" "$T/bridge2.obj" && ok "two-band same ground" || bad "two-band same ground"

# Bad input: a clear error naming the file, a non-zero exit, no output left behind.
nothing_left() { if ls "$T"/out.* >/dev/null 2>&1; then bad "$1 left a file"; else ok "$1 left nothing"; fi; }
expect "missing file" 1 "$BIN" mesh "$T/nope.tif" -e 1 -o "$T/out.obj"
grep -q "nope.tif" "$T/err" && ok "names the file" || bad "names the file"
nothing_left "missing file"
echo "hello" > "$T/junk.tif"
expect "unknown format" 1 "$BIN" mesh "$T/junk.tif" -e 1 -o "$T/out.obj"
grep -q "junk.tif" "$T/err" && ok "names junk" || bad "names junk"
nothing_left "unknown format"
expect "zero bound" 2 "$BIN" mesh "$DATA/fuji.png" -e 0 -o "$T/out.obj"
expect "negative bound" 2 "$BIN" mesh "$DATA/fuji.png" -e -3 -o "$T/out.obj"
expect "missing band" 1 "$BIN" mesh "$DATA/sthelens_10m.png" --band 2 -e 1 -o "$T/out.obj"
grep -q "missing band" "$T/err" && ok "missing band message" || bad "missing band message"
expect "rgb on grey" 1 "$BIN" mesh "$DATA/sthelens_10m.png" --encoding terrarium -e 1 -o "$T/out.obj"
printf 'ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -1\n-1 -1\n-1 -1\n' > "$T/void.asc"
expect "all no-data" 1 "$BIN" mesh "$T/void.asc" -e 1 -o "$T/out.obj"
grep -q "no-data" "$T/err" && ok "no-data message" || bad "no-data message"
# NaN and infinity in raw float32 (ENVI header), no no-data value declared.
envi_hdr='ENVI\nsamples = 2\nlines = 2\nbands = 1\nheader offset = 0\nfile type = ENVI Standard\ndata type = 4\ninterleave = bsq\nbyte order = 0\n'
printf "$envi_hdr" > "$T/nan.hdr"; printf '\x00\x00\x80\x3f\x00\x00\xc0\x7f\x00\x00\x80\x3f\x00\x00\x80\x3f' > "$T/nan.f32"
expect "nan height" 1 "$BIN" mesh "$T/nan.f32" -e 1 -o "$T/out.obj"
grep -q "NaN" "$T/err" && ok "nan message" || bad "nan message: $(cat "$T/err")"
printf "$envi_hdr" > "$T/inf.hdr"; printf '\x00\x00\x80\x3f\x00\x00\x80\x7f\x00\x00\x80\x3f\x00\x00\x80\x3f' > "$T/inf.f32"
expect "infinite height" 1 "$BIN" mesh "$T/inf.f32" -e 1 -o "$T/out.obj"
grep -q "infinite" "$T/err" && ok "inf message" || bad "inf message: $(cat "$T/err")"
printf '<VRTDataset rasterXSize="70000" rasterYSize="4"><VRTRasterBand dataType="Float32" band="1"/></VRTDataset>\n' > "$T/huge.vrt"
expect "past supported size" 1 "$BIN" mesh "$T/huge.vrt" -e 1 -o "$T/out.obj"
grep -q "supported size" "$T/err" && ok "size message" || bad "size message: $(cat "$T/err")"
printf '<VRTDataset rasterXSize="0" rasterYSize="0"><VRTRasterBand dataType="Float32" band="1"/></VRTDataset>\n' > "$T/zero.vrt"
expect "zero size" 1 "$BIN" mesh "$T/zero.vrt" -e 1 -o "$T/out.obj"
printf 'ncols 1\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\n1\n2\n3\n' > "$T/thin.asc"
expect "one column" 1 "$BIN" mesh "$T/thin.asc" -e 1 -o "$T/out.obj"
expect "unknown extension" 2 "$BIN" mesh "$DATA/fuji.png" -e 1 -o "$T/out.xyz"
expect "unwritable" 1 "$BIN" mesh "$DATA/st-helens.png" --encoding terrain-rgb -e 5 -o "$T/no/dir/out.obj"
nothing_left "bad input"
ls "$T"/no 2>/dev/null && bad "created a directory"

echo "$fails failed"
[ "$fails" -eq 0 ]
