#!/usr/bin/env bash
# terra cook on hostile sceneries: the 189-byte ASCII PLY declaring 2,000,000,000 vertices, its
# binary twin, an OFF file declaring as many and a glTF chain 20,000 nodes deep end at once with
# exit 1, a message naming the file and no archive; a buffer URI out of the scene's folder, a
# symlink out of it, a FIFO as the scenery or as its buffer are refused without reading them or
# waiting; assimp crashing (a COLLADA tree 200,000 deep) is reported as the reader's crash and the
# cook goes on to fail cleanly; --max-memory holds the reader; a glTF triangle with an index past
# the vertices is counted in the report and the archive's metadata. Every command runs under
# `timeout 120`: a hang fails (124) instead of stalling.
set -u
BIN=${TERRA_BIN:-./terra}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect NAME CODE CMD...: runs CMD, checks its exit code
expect() {
  local name=$1 code=$2
  shift 2
  timeout 120 "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$code" ]; then ok "$name"; else bad "$name (exit $rc, wanted $code): $(head -c 300 "$T/err")"; fi
}
# failed NAME FILE SAYS: terra cook FILE exits 1, the message names FILE and says SAYS, nothing written
failed() {
  local name=$1 file=$2 says=$3
  expect "$name" 1 "$BIN" cook "$file" -q -o "$T/o/x.terra"
  grep -qF -- "$file" "$T/err" && grep -qF -- "$says" "$T/err" && ok "$name: $(head -c 160 "$T/err")" ||
    bad "$name: message: $(head -c 300 "$T/err")"
  [ -z "$(ls -A "$T/o")" ] && ok "$name: nothing written" || bad "$name: left $(ls -A "$T/o")"
}
mkdir -p "$T/o" "$T/s"
"$(dirname "$BIN")/test_scenery" --write "$T/s" >/dev/null || bad "test_scenery --write"

expect "help" 0 "$BIN" cook --help
grep -q -- "--max-memory" "$T/out" && grep -q "dropped_out_of_range" "$T/out" && ok "help text" || bad "help text"
expect "max-memory not a size" 2 "$BIN" cook "$T/s/quad.ply" -o "$T/o/x.terra" --max-memory lots
expect "max-memory below 1M" 2 "$BIN" cook "$T/s/quad.ply" -o "$T/o/x.terra" --max-memory 1000

# counts no file holds, and a node chain no stack holds
failed "ASCII PLY bomb" "$T/s/bomb-ascii.ply" "element 'vertex' declares 2000000000 items"
[ "$(wc -c <"$T/s/bomb-ascii.ply")" -eq 189 ] && ok "the issue's 189 bytes" || bad "PLY bomb size"
failed "binary PLY bomb" "$T/s/bomb-binary.ply" "element 'vertex' declares 2000000000 items"
failed "OFF bomb" "$T/s/bomb.off" "declares 2000000000 vertices"
failed "20,000-deep chain" "$T/s/chain-20000.gltf" "is 1001 levels below its root"
failed "node cycle" "$T/s/cycle.gltf" "cycle through node"

# files the scenery names: absolute, out of the folder through a symlink, a FIFO; the scenery a FIFO
uri() { sed "s#\"uri\":\"data:[^\"]*\"#\"uri\":\"$1\"#" "$T/s/out-of-range.gltf" >"$2"; }
uri /etc/passwd "$T/s/absolute.gltf"
failed "absolute buffer URI" "$T/s/absolute.gltf" "buffers[0].uri '/etc/passwd' is an absolute path"
uri ../../etc/passwd "$T/s/climb.gltf"
failed "buffer URI climbing out" "$T/s/climb.gltf" "climbs out"
ln -s /etc/passwd "$T/s/passwd.bin"
uri passwd.bin "$T/s/link.gltf"
failed "buffer through a symlink out" "$T/s/link.gltf" "which resolves to /etc/passwd, outside the scene's folder"
mkfifo "$T/s/fifo.bin"
uri fifo.bin "$T/s/fifo-buffer.gltf"
failed "FIFO buffer" "$T/s/fifo-buffer.gltf" "which is a FIFO, not a regular file"
mkfifo "$T/s/fifo.gltf"
failed "FIFO scenery" "$T/s/fifo.gltf" "not a regular file"

# assimp crashing: its recursion over a COLLADA tree 200,000 deep runs out of stack in the reader
{ printf '<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">'
  printf '<library_visual_scenes><visual_scene id="s">'
  printf '<node>%.0s' $(seq 200000); printf '</node>%.0s' $(seq 200000)
  printf '</visual_scene></library_visual_scenes><scene><instance_visual_scene url="#s"/></scene></COLLADA>\n'; } \
  >"$T/s/deep.dae"
if [ -n "${TERRA_SANITIZE:-}" ]; then # the sanitizer reports the overflow and exits instead
  failed "assimp crashing" "$T/s/deep.dae" "the scenery reader"
else
  failed "assimp crashing" "$T/s/deep.dae" "the scenery reader crashed on $T/s/deep.dae (signal 11"
fi

# the memory budget: a 120 x 120 grid takes ~10 MiB to read
awk 'BEGIN { n = 120; for (j = 0; j < n; j++) for (i = 0; i < n; i++) print "v", i, (i * j) % 7, j
             for (j = 0; j < n - 1; j++) for (i = 0; i < n - 1; i++) { a = j * n + i + 1
               print "f", a, a + n, a + 1; print "f", a + 1, a + n, a + n + 1 } }' >"$T/s/grid.obj"
if [ -n "${TERRA_SANITIZE:-}" ]; then
  echo "skip: the reader's address-space limit (TERRA_SANITIZE=$TERRA_SANITIZE runs it unlimited)"
else
  expect "past --max-memory" 1 "$BIN" cook "$T/s/grid.obj" -q --no-cache -o "$T/o/x.terra" --max-memory 4M
  grep -qF "$T/s/grid.obj: reading it takes more than the memory budget of 4.0 MiB" "$T/err" &&
    [ -z "$(ls -A "$T/o")" ] && ok "past --max-memory: named, nothing written" || bad "past --max-memory: $(cat "$T/err")"
fi
expect "within the default budget" 0 "$BIN" cook "$T/s/grid.obj" -q --no-cache -o "$T/grid.terra" --levels 1

# a triangle assimp drops (an index past the 4 vertices) is counted, in the report and the metadata
expect "out-of-range index" 0 "$BIN" cook "$T/s/out-of-range.gltf" -q --no-cache -o "$T/range.terra"
grep -qx "dropped_out_of_range 1" "$T/out" && grep -qx "triangles 1" "$T/out" && ok "report counts it" ||
  bad "report: $(grep -E 'dropped|^triangles' "$T/out" | tr '\n' ' ')"
expect "out-of-range archive" 0 "$BIN" info --verify "$T/range.terra"
grep -q '"out_of_range":1' "$T/out" && grep -q '"not_triangles":0' "$T/out" && ok "metadata counts it" ||
  bad "metadata: $(grep -o '"source".*' "$T/out" | head -c 400)"

echo "$fails failed"
[ "$fails" -eq 0 ]
