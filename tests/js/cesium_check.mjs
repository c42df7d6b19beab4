// CesiumJS (the npm package, run in Node) reads what `terra serve` sends: it must accept the
// layer.json, report every tile terra holds as available (and a deeper one as not), and decode
// every tile to the same counts and heights terra's decoder finds.
// Usage: node cesium_check.mjs URL MANIFEST.jsonl PREFIX   (manifest entries under PREFIX are checked)
import fs from 'node:fs';
import * as Cesium from 'cesium';

const [url, manifest, prefix] = process.argv.slice(2);
const entries = fs.readFileSync(manifest, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
  .filter((e) => e.path.startsWith(prefix));
let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL cesium: ${what}`); };

const provider = await Cesium.CesiumTerrainProvider.fromUrl(url, { requestVertexNormals: true });
if (!provider.hasVertexNormals) fail('layer.json normals not recognised');
if (!provider.availability) fail('no availability from layer.json');
let maxZ = 0;
for (const { terra } of entries) {
  const { z, x, y } = terra;
  maxZ = Math.max(maxZ, z);
  const cy = (1 << z) - 1 - y; // Cesium counts rows from the north, TMS from the south
  if (provider.getTileDataAvailable(x, cy, z) !== true) fail(`${z}/${x}/${y} not available`);
  const d = await provider.requestTileGeometry(x, cy, z);
  if (!d) { fail(`${z}/${x}/${y}: no geometry`); continue; }
  const n = d._quantizedVertices.length / 3;
  if (n !== terra.vertexCount) fail(`${z}/${x}/${y}: ${n} vertices, terra ${terra.vertexCount}`);
  if (d._indices.length !== terra.triangleCount * 3) fail(`${z}/${x}/${y}: triangle count`);
  if (Math.abs(d._minimumHeight - terra.header.minHeight) > 1e-3 || Math.abs(d._maximumHeight - terra.header.maxHeight) > 1e-3)
    fail(`${z}/${x}/${y}: heights ${d._minimumHeight}..${d._maximumHeight}`);
  if (!d._encodedNormals || d._encodedNormals.length !== 2 * n) fail(`${z}/${x}/${y}: normals`);
  if (d._westIndices.length !== terra.edges.west || d._northIndices.length !== terra.edges.north) fail(`${z}/${x}/${y}: edges`);
}
if (provider.getTileDataAvailable(0, 0, maxZ + 1)) fail(`a tile at level ${maxZ + 1} is claimed available`);
console.log(`cesium ${Cesium.VERSION}: ${entries.length} tiles served by terra, ${failures} failures`);
process.exit(failures || entries.length === 0 ? 1 : 0);
