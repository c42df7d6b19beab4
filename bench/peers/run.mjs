// Runs one peer mesher on a raw float32 raster and writes its mesh as OBJ (x = column, y = row,
// z = height) for terra's checker. Prints one JSON line: {"ms", "vertices", "triangles", "peak_mb"}.
//   node run.mjs delatin|martini RAW.f32 WIDTH HEIGHT MAX_ERROR OUT.obj
// Timing covers the meshing only (delatin: constructor + run; martini: createTile + getMesh, the
// per-size Martini constructor excluded), as the libraries' own benchmarks do.
import fs from 'node:fs';
import Delatin from 'delatin';
import Martini from '@mapbox/martini';

const [tool, rawPath, ws, hs, es, outPath] = process.argv.slice(2);
const width = +ws, height = +hs, maxError = +es;
const buf = fs.readFileSync(rawPath);
const data = new Float32Array(buf.buffer, buf.byteOffset, width * height);

let coords, triangles, ms;
if (tool === 'delatin') {
    const t0 = performance.now();
    const tin = new Delatin(data, width, height);
    tin.run(maxError);
    ms = performance.now() - t0;
    coords = tin.coords;
    triangles = tin.triangles;
} else if (tool === 'martini') {
    // martini needs a square (2^k+1)^2 grid: extend the raster by repeating its last row and column.
    let n = 1;
    while (n + 1 < Math.max(width, height)) n *= 2;
    const size = n + 1;
    const grid = new Float32Array(size * size);
    for (let y = 0; y < size; y++)
        for (let x = 0; x < size; x++)
            grid[y * size + x] = data[Math.min(y, height - 1) * width + Math.min(x, width - 1)];
    const martini = new Martini(size);
    const t0 = performance.now();
    const tile = martini.createTile(grid);
    const mesh = tile.getMesh(maxError);
    ms = performance.now() - t0;
    // Keep only what lies on the raster: the repeated row/column is martini's own padding.
    coords = mesh.vertices;
    triangles = mesh.triangles;
    const z = new Float32Array(coords.length / 2);
    for (let i = 0; i < z.length; i++) z[i] = grid[coords[2 * i + 1] * size + coords[2 * i]];
    coords.z = z;
} else {
    console.error(`unknown tool ${tool}`);
    process.exit(2);
}

const nv = coords.length / 2, nt = triangles.length / 3;
const lines = [];
for (let i = 0; i < nv; i++) {
    const x = coords[2 * i], y = coords[2 * i + 1];
    const z = coords.z ? coords.z[i] : data[Math.min(y, height - 1) * width + Math.min(x, width - 1)];
    lines.push(`v ${x} ${y} ${z}`);
}
for (let t = 0; t < nt; t++) lines.push(`f ${triangles[3 * t] + 1} ${triangles[3 * t + 1] + 1} ${triangles[3 * t + 2] + 1}`);
fs.writeFileSync(outPath, lines.join('\n') + '\n');
const peak = process.resourceUsage().maxRSS / 1024;
console.log(JSON.stringify({ ms, vertices: nv, triangles: nt, peak_mb: peak }));
