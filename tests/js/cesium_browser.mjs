// CesiumJS in a real browser (Debian's headless Chromium through puppeteer-core) draws a geographic
// archive that `terra serve` serves: a CesiumTerrainProvider on its layer.json, no imagery, the
// globe coloured by height (an elevation ramp over the range of the tile under the camera; no
// lighting, atmosphere, fog or sky), the camera looking straight down over a point of the archive.
// Passes when (a) the tile of the archive's deepest level under the camera was requested by the
// renderer and answered, (b) the centre of the picture shows ground (not the background colour)
// over most of its pixels, with relief (several ramp colours), (c) no tile request failed, the
// terrain provider reported no error and nothing outside loopback was asked for. It also prints the
// height the drawn globe has under the camera beside the archive's finest height there (Cesium's
// sampleTerrainMostDetailed, asked after the picture): equal up to the sag of the drawn triangles,
// which are flat in ECEF (tens of metres for a 33 x 33 grid over 11 degrees). The page, the small
// static server in this process that serves it and CesiumJS's Build/Cesium, the browser's launch and
// the guard on its requests are cesium_page.mjs's.
// Usage: node cesium_browser.mjs TERRAIN_URL LON LAT HEIGHT_M SCREENSHOT.png LOAD_S
//   TERRAIN_URL: terra serve's root (http://127.0.0.1:PORT/); LON, LAT: degrees; HEIGHT_M: the
//   camera's height above the ellipsoid; LOAD_S: seconds the globe may take to load.
import path from 'node:path';
import { guardRequests, launchChromium, serveCesium, tileKeyOf } from './cesium_page.mjs';

const [terrainUrl, lonArg, latArg, heightArg, shotPath, loadArg] = process.argv.slice(2);
if (!loadArg) {
  console.error('usage: node cesium_browser.mjs TERRAIN_URL LON LAT HEIGHT_M SCREENSHOT.png LOAD_S');
  process.exit(2);
}
const lon = Number(lonArg), lat = Number(latArg), height = Number(heightArg);
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const BACKGROUND = [255, 0, 255]; // magenta: the height ramp never comes near it
const RAMP = ['#1d5e2a', '#4f9a3a', '#c8c25a', '#9a6a3a', '#f4f4f4']; // low .. high
const WIDTH = 640, HEIGHT = 480;
const SETTLE_FRAMES = 30;  // globe.tilesLoaded must hold this many frames in a row (it can flicker)
const LOAD_TIMEOUT_MS = 1000 * Number(loadArg);

let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL cesium_browser: ${what}`); };

async function fetchBytes(url) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10000);
  try {
    const r = await fetch(url, { signal: ctl.signal });
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return Buffer.from(await r.arrayBuffer());
  } finally {
    clearTimeout(timer);
  }
}

// ---- the layer's deepest level, the tile of it under the camera and that tile's height range --
const layer = JSON.parse(await fetchBytes(new URL('layer.json', terrainUrl).href));
const deepest = layer.available.length - 1;
const size = 180 / 2 ** deepest; // EPSG:4326 TMS: two 180-degree roots at level 0, rows from the south
const dx = Math.floor((lon + 180) / size), dy = Math.floor((lat + 90) / size);
const deepKey = `${deepest}/${dx}/${dy}`;
if (!layer.available[deepest].some((r) => dx >= r.startX && dx <= r.endX && dy >= r.startY && dy <= r.endY)) {
  console.error(`FAIL cesium_browser: the archive has no tile ${deepKey} under the camera`);
  process.exit(1);
}
// quantized-mesh header: centre (3 doubles), then minimum and maximum height (floats)
const deepTile = await fetchBytes(new URL(`${deepKey}.terrain`, terrainUrl).href);
const rampRange = [deepTile.readFloatLE(24), deepTile.readFloatLE(28)];

// ---- the page, CesiumJS and the browser (cesium_page.mjs) ------------------------------------
const { server, pageUrl } = await serveCesium();
const browser = await launchChromium({
  chromium, width: WIDTH, height: HEIGHT, protocolTimeoutMs: LOAD_TIMEOUT_MS + 10000,
});
const tileOf = tileKeyOf(terrainUrl);
const requested = new Map(); // "z/x/y" -> times requested
const answered = new Map();  // "z/x/y" -> HTTP status
let drawn, sampled;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: WIDTH, height: HEIGHT });
  page.on('console', (m) => { if (m.type() === 'error') console.error(`  browser: ${m.text()}`); });
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) console.error(`  browser: HTTP ${r.status()} for ${r.url()}`); });
  await guardRequests(page, { tileKey: tileOf, onTile: (k) => requested.set(k, (requested.get(k) || 0) + 1), fail });
  page.on('requestfinished', (r) => { const k = tileOf(r.url()); if (k) answered.set(k, r.response().status()); });
  page.on('requestfailed', (r) => { const k = tileOf(r.url()); if (k) fail(`tile ${k}: ${r.failure()?.errorText}`); });
  await page.goto(pageUrl, { waitUntil: 'load', timeout: 20000 });

  drawn = await page.evaluate(async (a) => {
    const C = window.Cesium;
    const errors = [];
    const terrainProvider = await C.CesiumTerrainProvider.fromUrl(a.terrainUrl, { requestVertexNormals: true });
    terrainProvider.errorEvent.addEventListener((e) => errors.push(String(e.message || e)));
    const w = new C.CesiumWidget('globe', {
      terrainProvider, baseLayer: false, skyBox: false, skyAtmosphere: false, showRenderLoopErrors: false,
      contextOptions: { webgl: { preserveDrawingBuffer: true } },
    });
    window.terraWidget = w;
    const s = w.scene;
    s.backgroundColor = new C.Color(a.bg[0] / 255, a.bg[1] / 255, a.bg[2] / 255, 1);
    s.globe.baseColor = C.Color.GRAY;
    s.globe.enableLighting = false;
    s.globe.showGroundAtmosphere = false;
    s.fog.enabled = false;
    if (s.sun) s.sun.show = false;
    if (s.moon) s.moon.show = false;
    const ramp = document.createElement('canvas');
    ramp.width = 256;
    ramp.height = 1;
    const rg = ramp.getContext('2d'), grad = rg.createLinearGradient(0, 0, 256, 0);
    a.ramp.forEach((c, i) => grad.addColorStop(i / (a.ramp.length - 1), c));
    rg.fillStyle = grad;
    rg.fillRect(0, 0, 256, 1);
    s.globe.material = C.Material.fromType('ElevationRamp', {
      image: ramp, minimumHeight: a.range[0], maximumHeight: a.range[1] > a.range[0] ? a.range[1] : a.range[0] + 1,
    });
    w.camera.setView({
      destination: C.Cartesian3.fromDegrees(a.lon, a.lat, a.height),
      orientation: { heading: 0, pitch: -C.Math.PI_OVER_TWO, roll: 0 },
    });
    // loaded = tilesLoaded held for SETTLE_FRAMES frames in a row (cesium_page.mjs's settleGlobe)
    const { settled, frames, seconds } = await window.settleGlobe(s, a.settle, a.timeout);
    s.render();
    const c = document.createElement('canvas');
    c.width = s.canvas.width;
    c.height = s.canvas.height;
    const g = c.getContext('2d');
    g.drawImage(s.canvas, 0, 0);
    // the centre half of the picture (a quarter of its area)
    const px = g.getImageData(c.width >> 2, c.height >> 2, c.width >> 1, c.height >> 1).data;
    let ground = 0;
    const colours = new Map(); // 32 levels a channel
    for (let i = 0; i < px.length; i += 4) {
      const d = Math.abs(px[i] - a.bg[0]) + Math.abs(px[i + 1] - a.bg[1]) + Math.abs(px[i + 2] - a.bg[2]);
      if (d <= 48) continue;
      ground++;
      const key = (px[i] >> 3) << 10 | (px[i + 1] >> 3) << 5 | px[i + 2] >> 3;
      colours.set(key, (colours.get(key) || 0) + 1);
    }
    // relief: colours that each cover at least 1% of the centre
    const n = px.length / 4;
    const common = [...colours.values()].filter((k) => k >= 0.01 * n).length;
    return {
      settled, frames, seconds, errors, version: C.VERSION, groundFraction: ground / n, colours: common,
      rootSelection: (s.globe._surface._levelZeroTiles || []).map((t) => t._lastSelectionResult),
      heightDrawn: s.globe.getHeight(C.Cartographic.fromDegrees(a.lon, a.lat)),
    };
  }, { terrainUrl, lon, lat, height, bg: BACKGROUND, ramp: RAMP, range: rampRange, settle: SETTLE_FRAMES,
    timeout: LOAD_TIMEOUT_MS });
  await page.screenshot({ path: shotPath });
  // the renderer's requests end here: sampling asks for the deepest tiles itself
  const renderRequested = new Map(requested);
  requested.clear();
  requested.set('render', renderRequested);
  sampled = await page.evaluate(async (a) => {
    const C = window.Cesium;
    const [p] = await C.sampleTerrainMostDetailed(window.terraWidget.terrainProvider,
      [C.Cartographic.fromDegrees(a.lon, a.lat)]);
    return p.height;
  }, { lon, lat });
} finally {
  await browser.close();
  server.close();
}

const render = requested.get('render');
const perLevel = new Map();
for (const [k, n] of render) perLevel.set(Number(k.split('/')[0]), (perLevel.get(Number(k.split('/')[0])) || 0) + n);
const levels = [...perLevel.keys()].sort((x, y) => x - y).map((z) => `${z}:${perLevel.get(z)}`).join(' ');
const fmt = (h) => (h === undefined || h === null ? 'none' : `${h.toFixed(2)} m`);
console.log(`cesium ${drawn.version} in ${path.basename(chromium)}: tiles requested per level ${levels || 'none'} ` +
  `(deepest ${deepest}); ground over ${(100 * drawn.groundFraction).toFixed(1)}% of the centre in ${drawn.colours} ` +
  `colours (ramp ${rampRange[0].toFixed(0)}..${rampRange[1].toFixed(0)} m); height under the camera drawn ` +
  `${fmt(drawn.heightDrawn)}, finest ${fmt(sampled)}; root tiles' selection results ` +
  `${JSON.stringify(drawn.rootSelection)} (3 = refined, 9 = culled but needed); ${drawn.frames} frames in ` +
  `${drawn.seconds.toFixed(1)} s`);
if (!drawn.settled) fail(`the globe did not finish loading within ${LOAD_TIMEOUT_MS / 1000} s`);
if (!render.has(deepKey)) fail(`tile ${deepKey} (the deepest level, under the camera) was never requested`);
for (const [k, status] of answered) if (status !== 200) fail(`tile ${k}: HTTP ${status}`);
for (const e of drawn.errors) fail(`terrain provider error: ${e}`);
if (!(drawn.groundFraction > 0.9)) fail(`the centre of the picture is background (ground over ${(100 * drawn.groundFraction).toFixed(1)}%)`);
if (!(drawn.colours >= 4)) fail(`the ground shows no relief (${drawn.colours} colours over 1% each)`);
process.exit(failures ? 1 : 0);
