#!/usr/bin/env bash
# terra mesh: formats, levels, verify, heatmap, check of another mesh, two layers, bad input,
# outputs kept on failure, flags never ignored.
set -u
BIN=${TERRA_BIN:-./terra}
DATA=${TERRA_SHARED:-../shared}/data/dem
# Most cases here mesh the real rasters of ../shared, which a user's clone does not have.
if [ ! -d "$DATA" ]; then
  echo "SKIP cli_mesh: $DATA not found (the real data lives in ../shared; set TERRA_SHARED)"
  exit 77
fi
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


# ---- the check is opt-in, and reports when it runs -------------------------------------------
expect "no check by default" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30 -o "$T/plain.obj" -q
[ -z "$(field max_error)" ] && [ -z "$(field check_ms)" ] && [ -n "$(field read_ms)" ] && [ -n "$(field write_ms)" ] \
  && ok "unchecked report" || bad "unchecked report: $(tr '\n' ' ' < "$T/out")"
cmp -s "$T/plain.obj" "$T/fuji.obj" && ok "same mesh with and without --verify" || bad "same mesh with and without --verify"
expect "verify reports" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20,50 -o "$T/vl.obj" --verify -q
[ -n "$(field check_ms)" ] && [ -n "$(field max_error)" ] && grep -q '^verify ok' "$T/out" && ok "verified report" || bad "verified report"

# ---- --check-mesh fails meshes that do not cover the raster ----------------------------------
: > "$T/empty.obj"
expect "check empty mesh" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/empty.obj"
[ "$(field uncovered)" = 262144 ] && grep -q "not covered" "$T/err" && ok "empty mesh: uncovered named" || bad "empty mesh message: $(cat "$T/err")"
mkdir -p "$T/adir.obj"
expect "check a directory" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/adir.obj"
grep -q "adir.obj" "$T/err" && ok "directory named" || bad "directory named: $(cat "$T/err")"
printf 'v 0 0 1\nv 5 5 1\nv 9 9 1\nv 511 0 1\nf 1 2 3\nf 1 3 2\nf 1 1 4\n' > "$T/degen.obj"
expect "check degenerate faces" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/degen.obj" -q
[ "$(field degenerate)" = 3 ] && grep -q "no area" "$T/err" && ok "degenerate named" || bad "degenerate: $(field degenerate) $(cat "$T/err")"
printf 'v 0 0 1\nv 511 0 1\nv 0 511 1\nf 1 2 3\n' > "$T/half.obj"
expect "check half a raster" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/half.obj" -q
# A mesh reaching a billion samples out (exact arithmetic, no overflow): covers everything.
printf 'v -1000000000 -1000000000 0\nv 1000000000 -1000000000 0\nv 1000000000 1000000000 0\nv -1000000000 1000000000 0\nf 1 2 3\nf 1 3 4\n' > "$T/far.obj"
expect "check far vertices" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/far.obj" -q
[ "$(field uncovered)" = 0 ] && grep -q '^check ok' "$T/out" && ok "far mesh covers" || bad "far mesh covers"
expect "check-mesh heatmap" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/fuji.obj" -e 30 --heatmap "$T/ch.png"
[ -s "$T/ch.png" ] && ok "check-mesh heatmap written" || bad "check-mesh heatmap written"

# ---- flags are used or refused, never ignored ------------------------------------------------
expect "upper verify" 0 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" --thickness 1 -e 0.1 -o "$T/bv.obj" --verify --heatmap "$T/bv.png" -q
grep -q '^verify ok.*both layers' "$T/out" && [ -n "$(field check_ms)" ] && ok "both layers verified" || bad "both layers verified: $(tr '\n' ' ' < "$T/out")"
[ "$(head -c 8 "$T/bv.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && ok "two-layer heatmap" || bad "two-layer heatmap"
cmp -s "$T/bv.obj" "$T/bridge.obj" && ok "verify changes no output" || bad "verify changes no output"
mkdir -p "$T/th"
expect "tiles heatmap" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 40 --tile-size 200 -o "$T/th/t.obj" --heatmap "$T/th.png" -q
[ "$(head -c 8 "$T/th.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ -n "$(field max_error)" ] && ok "tiles heatmap written" || bad "tiles heatmap written"
expect "tiles verify with holes" 0 "$BIN" mesh "$DATA/N44W072.hgt" -e 30 --tile-size 300 -o "$T/th/h.obj" --verify -q
expect "upper with levels" 2 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.1,1 -o "$T/u.obj"
grep -q "not supported" "$T/err" && ok "levels refusal says why" || bad "levels refusal says why: $(cat "$T/err")"
expect "upper with tiles" 2 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.1 --tile-size 4 -o "$T/u.obj"
expect "upper with normals" 2 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.1 --normals -o "$T/u.obj"
expect "upper with max triangles" 2 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.1 -t 10 -o "$T/u.obj"
expect "thickness without upper" 2 "$BIN" mesh "$T/lower.asc" --thickness 1 -e 0.1 -o "$T/u.obj"
expect "threads without tiles" 2 "$BIN" mesh "$T/lower.asc" --threads 2 -e 0.1 -o "$T/u.obj"
expect "tiles with max triangles" 2 "$BIN" mesh "$T/lower.asc" --tile-size 4 -t 100 -e 0.1 -o "$T/u.obj"
expect "check-mesh with -o" 2 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/fuji.obj" -o "$T/u.obj"
expect "check-mesh with normals" 2 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb --check-mesh "$T/fuji.obj" --normals
[ -e "$T/u.obj" ] && bad "a refused run wrote" || ok "refused runs wrote nothing"

# ---- --max-memory ----------------------------------------------------------------------------
expect "max-memory too small" 1 "$BIN" mesh "$DATA/sthelens_10m.png" --z-scale 0.1 -e 50 --max-memory 8M -o "$T/mm.obj"
grep -q "sthelens_10m.png" "$T/err" && ok "budget names the file" || bad "budget names the file: $(cat "$T/err")"
expect "max-memory enough" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 50 --max-memory 512M -o "$T/mm.obj" -q
for v in 0 -1 1k 2X 1e300 abc; do expect "max-memory $v refused" 2 "$BIN" mesh "$DATA/fuji.png" -e 50 --max-memory "$v" -o "$T/mm.obj"; done

# ---- a failed run leaves every earlier output as it was --------------------------------------
# keep DIR: a checksum of every file in DIR (names and contents), and no temporaries beside them.
sums() { (cd "$1" && find . -type f | sort | xargs -r md5sum | md5sum); }
mkdir -p "$T/k"
echo "earlier mesh" > "$T/k/keep.obj"; echo "earlier heatmap" > "$T/k/keep.png"
before=$(sums "$T/k")
kept() { if [ "$(sums "$T/k")" = "$before" ]; then ok "$1: earlier files kept"; else bad "$1: earlier files changed"; fi
         if ls "$T/k" | grep -q tmp; then bad "$1: temporaries left: $(ls "$T/k" | grep tmp)"; else ok "$1: no temporaries"; fi; }
# Heatmap in a directory that does not exist: refused before anything is written.
expect "heatmap nowhere" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20 -o "$T/k/keep.obj" --heatmap /nonexistent/h.png -q
grep -q "/nonexistent" "$T/err" && ok "unwritable heatmap named" || bad "unwritable heatmap named: $(cat "$T/err")"
kept "heatmap nowhere"
# The mesh's directory missing: the heatmap is not written either.
expect "mesh nowhere" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20 -o "$T/k/no/m.obj" --heatmap "$T/k/keep.png" -q
kept "mesh nowhere"
mkdir -p "$T/k/dir.png"; before=$(sums "$T/k")
expect "heatmap is a directory" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20 -o "$T/k/keep.obj" --heatmap "$T/k/dir.png" -q
kept "heatmap is a directory"
# Writing fails halfway (files over 1 MiB refused): the heatmap (700 KB) was complete, the mesh
# (3.3 MB) not; neither replaces what was there.
limited() { ( trap '' XFSZ; ulimit -f "$1"; shift; exec "$@" ) >"$T/out" 2>"$T/err"; }
limited 1024 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 5 -o "$T/k/keep.obj" --heatmap "$T/k/keep.png" -q
[ $? = 1 ] && grep -q "keep.obj" "$T/err" && ! grep -q "\.tmp[0-9]" "$T/err" && ok "write failure names the output" || bad "write failure: $(cat "$T/err")"
kept "mesh write fails"
# Levels: the coarse one (120 KB) is complete, the fine one fails; neither replaces its file.
echo "earlier e50" > "$T/k/lv.e50.obj"; echo "earlier e5" > "$T/k/lv.e5.obj"; before=$(sums "$T/k")
limited 1024 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 50,5 -o "$T/k/lv.obj" -q
[ $? = 1 ] && ok "levels write fails" || bad "levels write fails"
kept "levels write fails"
# Tiles: written earlier, then a run with other bounds fails at a large tile.
expect "tiles first" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 40,2 --tile-size 128 -o "$T/k/t.obj" -q
before=$(sums "$T/k")
limited 300 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30,1 --tile-size 128 -o "$T/k/t.obj" -q
[ $? = 1 ] && ok "tiles write fails" || bad "tiles write fails"
kept "tiles write fails"
expect "tiles heatmap nowhere" 1 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 30 --tile-size 128 -o "$T/k/t.obj" --heatmap /nonexistent/h.png -q
kept "tiles heatmap nowhere"
# Two-layer ground.
cp "$T/bridge.obj" "$T/k/bridge.obj"; before=$(sums "$T/k")
expect "two layers heatmap nowhere" 1 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.01 -o "$T/k/bridge.obj" --heatmap /nonexistent/h.png -q
kept "two layers heatmap nowhere"
mkdir -p "$T/k/bdir.png"; before=$(sums "$T/k")
expect "two layers heatmap a directory" 1 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" -e 0.01 -o "$T/k/bridge.obj" --heatmap "$T/k/bdir.png" --verify -q
kept "two layers heatmap a directory"
# Two-layer ground whose mesh (1.9 KB) fails to write after its heatmap (77 bytes) was complete.
echo "earlier two-layer heatmap" > "$T/k/bheat.png"; before=$(sums "$T/k")
limited 1 "$BIN" mesh "$T/lower.asc" --upper "$T/upper.asc" --thickness 1 -e 0.01 -o "$T/k/bridge.obj" --heatmap "$T/k/bheat.png" -q
[ $? = 1 ] && grep -q "bridge.obj" "$T/err" && ok "two layers write fails" || bad "two layers write fails: $(cat "$T/err")"
kept "two layers write fails"
# And a run that succeeds replaces them all.
expect "replace" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20 -o "$T/k/keep.obj" --heatmap "$T/k/keep.png" -q
[ "$(grep -c '^f ' "$T/k/keep.obj")" = 20354 ] && [ "$(head -c 4 "$T/k/keep.png" | od -An -c | tr -d ' ')" = '211PNG' ] \
  && ok "success replaces" || bad "success replaces"

# What a killed run left (its process gone) goes on the next write to the same name; a running
# process's files stay.
dead=999999; while kill -0 "$dead" 2>/dev/null; do dead=$((dead + 1)); done
touch "$T/k/keep.obj.tmp$dead-s0.obj" "$T/k/keep.obj.tmp$dead-s0.obj.tmp$dead-3" "$T/k/keep.obj.tmp$$-s0.obj" \
      "$T/k/t.l1.2_0.obj.tmp$dead-s7.obj" "$T/k/other.obj.tmp$dead-s0.obj"
expect "stale swept" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 20 -o "$T/k/keep.obj" -q
[ ! -e "$T/k/keep.obj.tmp$dead-s0.obj" ] && [ ! -e "$T/k/keep.obj.tmp$dead-s0.obj.tmp$dead-3" ] && ok "dead run's files removed" || bad "dead run's files removed"
[ -e "$T/k/keep.obj.tmp$$-s0.obj" ] && [ -e "$T/k/other.obj.tmp$dead-s0.obj" ] && ok "live run's and other names' files kept" || bad "live run's and other names' files kept"
expect "stale tiles swept" 0 "$BIN" mesh "$DATA/fuji.png" --encoding terrain-rgb -e 40,2 --tile-size 128 -o "$T/k/t.obj" -q
[ ! -e "$T/k/t.l1.2_0.obj.tmp$dead-s7.obj" ] && ok "dead run's tile files removed" || bad "dead run's tile files removed"

echo "$fails failed"
[ "$fails" -eq 0 ]
