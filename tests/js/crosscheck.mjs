// Decodes tiles terra wrote with @here/quantized-mesh-decoder and @loaders.gl/terrain and compares
// counts and values with what terra's own decoder reports (`terra info --tile`).
// Usage: node crosscheck.mjs MANIFEST.jsonl   (one {"path": FILE, "terra": {...}} per line)
import fs from 'node:fs';
import hereDecoder from '@here/quantized-mesh-decoder';
const decode = typeof hereDecoder === 'function' ? hereDecoder : hereDecoder.default;
import { parse } from '@loaders.gl/core';
import { QuantizedMeshLoader } from '@loaders.gl/terrain';

const fnv = (values) => {
  let h = 0x811c9dc5;
  for (const x of values) {
    h = Math.imul(h ^ (x & 0xffff), 0x01000193) >>> 0;
    h = Math.imul(h ^ (x >>> 16), 0x01000193) >>> 0;
  }
  return h >>> 0;
};

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
let failures = 0, tiles = 0;
const fail = (file, what) => { failures++; console.error(`FAIL ${file}: ${what}`); };
const origWarn = console.warn;
console.warn = (msg, ...rest) => { if (!String(msg).startsWith('Unknown extension')) origWarn(msg, ...rest); };

for (const line of lines) {
  const { path, terra } = JSON.parse(line);
  const buf = fs.readFileSync(path);
  // both decoders decode the index buffer in place: each gets its own copy
  const copy = () => buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  tiles++;
  // ---- @here/quantized-mesh-decoder ----
  const d = decode(copy());
  const n = d.vertexData.length / 3;
  if (n !== terra.vertexCount) fail(path, `here: ${n} vertices, terra ${terra.vertexCount}`);
  if (d.triangleIndices.length !== terra.triangleCount * 3) fail(path, 'here: triangle count');
  if (fnv(d.vertexData.subarray(0, n)) !== terra.u_fnv1a) fail(path, 'here: u differs');
  if (fnv(d.vertexData.subarray(n, 2 * n)) !== terra.v_fnv1a) fail(path, 'here: v differs');
  if (fnv(d.vertexData.subarray(2 * n, 3 * n)) !== terra.h_fnv1a) fail(path, 'here: heights differ');
  if (fnv(d.triangleIndices) !== terra.indices_fnv1a) fail(path, 'here: indices differ');
  const e = terra.edges;
  if (d.westIndices.length !== e.west || d.southIndices.length !== e.south ||
      d.eastIndices.length !== e.east || d.northIndices.length !== e.north) fail(path, 'here: edge lengths');
  if ('normals_fnv1a' in terra) {
    const nv = d.extensions.vertexNormals;
    if (!nv || fnv(nv) !== terra.normals_fnv1a) fail(path, 'here: normals differ');
  }
  const H = d.header;
  if (Math.abs(H.minHeight - terra.header.minHeight) > 1e-3 * Math.max(1, Math.abs(H.minHeight)) ||
      Math.abs(H.maxHeight - terra.header.maxHeight) > 1e-3 * Math.max(1, Math.abs(H.maxHeight)))
    fail(path, `here: heights ${H.minHeight}..${H.maxHeight}`);
  if (H.centerX !== terra.header.centerX || H.centerY !== terra.header.centerY || H.centerZ !== terra.header.centerZ)
    fail(path, 'here: centre differs');
  // ---- @loaders.gl/terrain ----
  const mesh = await parse(copy(), QuantizedMeshLoader, { 'quantized-mesh': { bounds: [0, 0, 1, 1] }, worker: false });
  const pos = mesh.attributes.POSITION.value;
  const m = pos.length / 3;
  if (m !== terra.vertexCount) fail(path, `loaders.gl: ${m} vertices`);
  if (mesh.indices.value.length !== terra.triangleCount * 3) fail(path, 'loaders.gl: triangle count');
  if (fnv(mesh.indices.value) !== terra.indices_fnv1a) fail(path, 'loaders.gl: indices differ');
  const u = new Uint32Array(m), v = new Uint32Array(m), h = new Uint32Array(m);
  const lo = terra.header.minHeight, hi = terra.header.maxHeight;
  for (let i = 0; i < m; i++) {
    u[i] = Math.round(pos[3 * i] * 32767);
    v[i] = Math.round(pos[3 * i + 1] * 32767);
    h[i] = hi > lo ? Math.round((pos[3 * i + 2] - Math.fround(lo)) / (Math.fround(hi) - Math.fround(lo)) * 32767) : 0;
  }
  if (fnv(u) !== terra.u_fnv1a) fail(path, 'loaders.gl: u differs');
  if (fnv(v) !== terra.v_fnv1a) fail(path, 'loaders.gl: v differs');
  if (hi > lo && fnv(h) !== terra.h_fnv1a) fail(path, 'loaders.gl: heights differ');
}
console.log(`crosscheck: ${tiles} tiles, ${failures} failures (@here/quantized-mesh-decoder, @loaders.gl/terrain)`);
process.exit(failures || tiles === 0 ? 1 : 0);
