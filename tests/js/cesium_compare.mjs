// CesiumJS in a real browser (Debian's headless Chromium through puppeteer-core) draws a geographic
// archive that `terra serve` serves from a given camera (position, heading, pitch, vertical field of
// view, picture size), the globe coloured by a GRAYSCALE height ramp (black at RAMP_LO, white at
// RAMP_HI, clamped; no imagery, lighting, atmosphere, fog or sky; a magenta background), and the
// picture is compared pixel by pixel with terra's own PNG of the same view (`terra render --planet
// --archive ... --ramp LO,HI --clear 255,0,255`, which draws gray = round(255 * clamp((h - LO) /
// (HI - LO), 0, 1)), R = G = B, unlit, and magenta where there is no ground).
// Each picture's pixels are classified as ground (gray) or background (anything else). Passes when
// (a) the globe settled (tilesLoaded held SETTLE_FRAMES frames in a row) within LOAD_S seconds, (b)
// every tile request was answered 200 and nothing outside loopback was asked for, (c) Cesium's
// ground really is gray and its gray follows the ramp (its pixels beside the ellipsoid height of the
// drawn surface that Cesium itself picks there: no gamma, no lighting), (d) the two classifications
// agree over nearly all pixels and both show ground over most of them, and (e) where both show
// ground, the heights the grays stand for differ little (median and 90th percentile, bounds below
// as fractions of the ramp's span). It prints one line of figures: the mask agreement, the share
// of ground in both, |dh| median and p90, the mean signed dh (terra minus Cesium). Since the two
// renderers choose their levels of detail differently (Cesium from estimated geometric errors per
// level, terra from the archive's own), the bounds allow for that, not only for rounding.
// Cesium's picture is read from its drawing buffer (no credits overlay) and written to
// OUT_CESIUM_PNG, with a difference picture beside it (OUT_CESIUM_PNG less .png, plus -diff.png):
// red where terra is higher, blue where Cesium is, the faint green terra's gray; yellow where only
// terra shows ground, cyan where only Cesium does, dark purple where neither. The page, the static
// server in this process that serves it, CesiumJS's Build/Cesium and terra's picture (/terra.png),
// the browser's launch and the guard on its requests are cesium_page.mjs's.
// Usage: node cesium_compare.mjs TERRAIN_URL LON LAT ELLIPSOID_HEIGHT_M HEADING_DEG PITCH_DEG
//          FOVY_DEG WIDTH HEIGHT RAMP_LO RAMP_HI TERRA_PNG OUT_CESIUM_PNG LOAD_S
//   TERRAIN_URL: terra serve's root (http://127.0.0.1:PORT/); LON, LAT: the eye, degrees;
//   ELLIPSOID_HEIGHT_M: the eye's height above WGS84; HEADING_DEG: from north toward east;
//   PITCH_DEG: up from the horizon (negative looks down); FOVY_DEG: the vertical field of view;
//   WIDTH, HEIGHT: both pictures' size in pixels; RAMP_LO, RAMP_HI: metres; TERRA_PNG: terra's
//   picture, the same size; LOAD_S: seconds the globe may take to load.
import fs from 'node:fs';
import { guardRequests, launchChromium, serveCesium, tileKeyOf } from './cesium_page.mjs';

// ---- what passes ------------------------------------------------------------------------------
// (terra against Cesium over Mount Washington: median 0 m, p90 one gray level; the eye turned 1
// degree or moved 100 m fails the two |dh| bounds)
const MASK_AGREEMENT_MIN = 0.98; // share of pixels both pictures classify alike (ground/background)
const GROUND_BOTH_MIN = 0.5;     // share of pixels that are ground in both (else little is compared)
const MEDIAN_DH_MAX = 0.01;      // median |dh| over ground in both, as a share of RAMP_HI - RAMP_LO
const P90_DH_MAX = 0.03;         // 90th percentile of |dh|, likewise (LOD differences show here)
const GRAY_SPREAD = 3;           // a ground pixel: max - min of its R, G, B at most this ...
const MAGENTA_DIST = 48;         // ... and, sum of |channel - magenta|, farther than this from it
const CESIUM_NOT_GRAY_MAX = 0.005; // Cesium's non-background pixels that are not gray, at most
const RAMP_ERROR_MAX = 3;        // median |Cesium's gray - the gray of its picked height|, levels
const RAMP_SAMPLES = [24, 14];   // the grid of pixels the ramp is checked at (columns, rows)
const SETTLE_FRAMES = 30;        // globe.tilesLoaded must hold this many frames in a row
const BACKGROUND = [255, 0, 255];
const RAMP_TEXELS = 2048;        // the ramp texture's width (finer than 256 gray steps, see below)

const args = process.argv.slice(2);
if (args.length !== 14) {
  console.error('usage: node cesium_compare.mjs TERRAIN_URL LON LAT ELLIPSOID_HEIGHT_M HEADING_DEG PITCH_DEG ' +
    'FOVY_DEG WIDTH HEIGHT RAMP_LO RAMP_HI TERRA_PNG OUT_CESIUM_PNG LOAD_S');
  process.exit(2);
}
const [terrainUrl, , , , , , , , , , , terraPng, outPng] = args;
const [lon, lat, height, heading, pitch, fovy, width, heightPx, rampLo, rampHi] = args.slice(1, 11).map(Number);
const loadS = Number(args[13]);
if (![lon, lat, height, heading, pitch, fovy, width, heightPx, rampLo, rampHi, loadS].every(Number.isFinite) ||
    !(rampHi > rampLo) || !(width >= 16 && heightPx >= 16) || !(fovy > 0 && fovy < 180)) {
  console.error('cesium_compare: bad arguments (numbers expected, RAMP_HI > RAMP_LO, WIDTH, HEIGHT >= 16)');
  process.exit(2);
}
if (!fs.existsSync(terraPng)) {
  console.error(`FAIL cesium_compare: ${terraPng} does not exist`);
  process.exit(1);
}
const diffPng = outPng.replace(/\.png$/i, '') + '-diff.png';
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const LOAD_TIMEOUT_MS = 1000 * loadS;

let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL cesium_compare: ${what}`); };

// ---- the page, CesiumJS, terra's picture and the browser (cesium_page.mjs) ----------------------
const { server, pageUrl } = await serveCesium({ extraFiles: { '/terra.png': terraPng } });
const browser = await launchChromium({
  chromium, width, height: heightPx, protocolTimeoutMs: LOAD_TIMEOUT_MS + 60000,
  extraArgs: ['--force-color-profile=srgb'], // the display's colour profile forced to sRGB
});
const terrainOrigin = new URL(terrainUrl).origin;
const perLevel = new Map(); // level -> tiles requested
let r;
try {
  const page = await browser.newPage();
  await page.setViewport({ width, height: heightPx, deviceScaleFactor: 1 });
  page.on('console', (m) => { if (m.type() === 'error') console.error(`  browser: ${m.text()}`); });
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await guardRequests(page, {
    tileKey: tileKeyOf(terrainUrl), fail,
    onTile: (k) => perLevel.set(Number(k.split('/')[0]), (perLevel.get(Number(k.split('/')[0])) || 0) + 1),
  });
  // everything terra serve answers (layer.json and the tiles) must be 200
  page.on('requestfinished', (q) => {
    if (new URL(q.url()).origin === terrainOrigin && q.response().status() !== 200) {
      fail(`${q.url()}: HTTP ${q.response().status()}`);
    }
  });
  page.on('requestfailed', (q) => {
    if (new URL(q.url()).origin === terrainOrigin) fail(`${q.url()}: ${q.failure()?.errorText}`);
  });
  await page.goto(pageUrl, { waitUntil: 'load', timeout: 20000 });

  r = await page.evaluate(async (a) => {
    const C = window.Cesium;
    const errors = [];
    const terrainProvider = await C.CesiumTerrainProvider.fromUrl(a.terrainUrl);
    terrainProvider.errorEvent.addEventListener((e) => errors.push(String(e.message || e)));
    const w = new C.CesiumWidget('globe', {
      terrainProvider, baseLayer: false, skyBox: false, skyAtmosphere: false, showRenderLoopErrors: false,
      useBrowserRecommendedResolution: false, msaaSamples: 1,
      contextOptions: { webgl: { preserveDrawingBuffer: true, alpha: false } },
    });
    w.resolutionScale = 1;
    const s = w.scene;
    s.highDynamicRange = false; // no czm_gammaCorrect in the ramp material
    s.postProcessStages.fxaa.enabled = false;
    s.backgroundColor = new C.Color(a.bg[0] / 255, a.bg[1] / 255, a.bg[2] / 255, 1);
    s.globe.baseColor = new C.Color(a.bg[0] / 255, a.bg[1] / 255, a.bg[2] / 255, 1);
    s.globe.enableLighting = false;
    s.globe.showGroundAtmosphere = false;
    s.globe.dynamicAtmosphereLighting = false;
    s.fog.enabled = false;
    s.screenSpaceCameraController.enableCollisionDetection = false; // the camera stays where it is put
    if (s.sun) s.sun.show = false;
    if (s.moon) s.moon.show = false;
    // The ramp: ElevationRamp samples it at t = clamp((h - lo) / (hi - lo)) with linear filtering;
    // texel i holds the gray of its centre's t, so what comes back is 255 t up to a rounding of
    // the texel (a 256-wide ramp with texel i = i would give 256 t - 0.5, half a level off at the
    // ends)
    const ramp = document.createElement('canvas');
    ramp.width = a.texels;
    ramp.height = 1;
    const rg = ramp.getContext('2d');
    const texels = rg.createImageData(a.texels, 1);
    for (let i = 0; i < a.texels; i++) {
      const g = Math.round((255 * (i + 0.5)) / a.texels);
      texels.data.set([g, g, g, 255], 4 * i);
    }
    rg.putImageData(texels, 0, 0);
    s.globe.material = C.Material.fromType('ElevationRamp', {
      image: ramp, minimumHeight: a.lo, maximumHeight: a.hi,
    });
    // fov is the horizontal field of view when the picture is wider than high
    const aspect = a.width / a.height;
    const fovy = C.Math.toRadians(a.fovy);
    w.camera.frustum.fov = aspect > 1 ? 2 * Math.atan(Math.tan(fovy / 2) * aspect) : fovy;
    w.camera.setView({
      destination: C.Cartesian3.fromDegrees(a.lon, a.lat, a.eyeHeight),
      orientation: { heading: C.Math.toRadians(a.heading), pitch: C.Math.toRadians(a.pitch), roll: 0 },
    });
    // loaded = tilesLoaded held for SETTLE_FRAMES frames in a row (cesium_page.mjs's settleGlobe)
    const { settled, frames, seconds } = await window.settleGlobe(s, a.settle, a.timeout);
    w.useDefaultRenderLoop = false; // nothing draws over the frame read below
    s.render();
    const W = s.drawingBufferWidth, H = s.drawingBufferHeight;
    const size = { canvas: [s.canvas.width, s.canvas.height], buffer: [W, H],
      fovyDrawn: C.Math.toDegrees(w.camera.frustum.fovy), aspectDrawn: w.camera.frustum.aspectRatio };
    const cc = document.createElement('canvas');
    cc.width = W;
    cc.height = H;
    const cg = cc.getContext('2d', { willReadFrequently: true });
    cg.drawImage(s.canvas, 0, 0);
    const cp = cg.getImageData(0, 0, W, H).data;

    // terra's picture, its bytes as they are (no colour conversion)
    const blob = await (await fetch('/terra.png')).blob();
    const bitmap = await createImageBitmap(blob, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
    const terraSize = [bitmap.width, bitmap.height];
    if (bitmap.width !== W || bitmap.height !== H) {
      return { settled, frames, seconds, errors, version: C.VERSION, size, terraSize,
        cesiumPng: cc.toDataURL('image/png').replace(/^data:image\/png;base64,/, '') };
    }
    const tc = document.createElement('canvas');
    tc.width = W;
    tc.height = H;
    const tg = tc.getContext('2d', { willReadFrequently: true });
    tg.drawImage(bitmap, 0, 0);
    const tp = tg.getImageData(0, 0, W, H).data;

    // ground: gray and far from magenta; the gray of a ground pixel, else -1
    const spread = (p, i) => Math.max(p[i], p[i + 1], p[i + 2]) - Math.min(p[i], p[i + 1], p[i + 2]);
    const farFromBg = (p, i) =>
      Math.abs(p[i] - a.bg[0]) + Math.abs(p[i + 1] - a.bg[1]) + Math.abs(p[i + 2] - a.bg[2]) > a.magentaDist;
    const grayOf = (p, i) => (farFromBg(p, i) && spread(p, i) <= a.graySpread
      ? Math.round((p[i] + p[i + 1] + p[i + 2]) / 3) : -1);
    const n = W * H;
    let agree = 0, both = 0, cesiumNonBg = 0, cesiumNotGray = 0, maxSpread = 0, clamped = 0, sum = 0;
    const hist = new Float64Array(256); // |g_terra - g_cesium| over ground in both
    const diff = cg.createImageData(W, H), dp = diff.data;
    for (let k = 0, i = 0; k < n; k++, i += 4) {
      if (farFromBg(cp, i)) {
        cesiumNonBg++;
        const sp = spread(cp, i);
        if (sp > maxSpread) maxSpread = sp;
        if (sp > a.graySpread) cesiumNotGray++;
      }
      const gt = grayOf(tp, i), gc = grayOf(cp, i);
      if ((gt >= 0) === (gc >= 0)) agree++;
      let px;
      if (gt >= 0 && gc >= 0) {
        both++;
        const d = gt - gc;
        hist[Math.abs(d)]++;
        sum += d;
        if (gt === 0 || gt === 255 || gc === 0 || gc === 255) clamped++;
        px = [Math.min(255, 8 * Math.max(0, d)), gt >> 2, Math.min(255, 8 * Math.max(0, -d))];
      } else if (gt >= 0) {
        px = [255, 255, 0];
      } else if (gc >= 0) {
        px = [0, 255, 255];
      } else {
        px = [64, 0, 64];
      }
      dp.set([px[0], px[1], px[2], 255], i);
    }
    const quantile = (q) => {
      let acc = 0;
      for (let d = 0; d < 256; d++) {
        acc += hist[d];
        if (acc >= q * both) return d;
      }
      return 255;
    };

    // Cesium's own ramp: at a grid of its ground pixels, its gray beside the gray of the ellipsoid
    // height that the drawn surface has there (scene.pickPosition, from the depth buffer)
    const rampErr = [];
    let rampSigned = 0;
    if (s.pickPositionSupported) {
      for (let row = 0; row < a.samples[1]; row++) {
        for (let col = 0; col < a.samples[0]; col++) {
          const x = Math.floor(((col + 0.5) * W) / a.samples[0]), y = Math.floor(((row + 0.5) * H) / a.samples[1]);
          const gc = grayOf(cp, 4 * (y * W + x));
          if (gc < 0) continue;
          const p = s.pickPosition(new C.Cartesian2(x + 0.5, y + 0.5));
          if (!p) continue;
          const h = C.Cartographic.fromCartesian(p).height;
          const want = 255 * Math.min(1, Math.max(0, (h - a.lo) / (a.hi - a.lo)));
          rampErr.push(Math.abs(gc - want));
          rampSigned += gc - want;
        }
      }
    }
    rampErr.sort((x, y) => x - y);

    const png = (canvas) => canvas.toDataURL('image/png').replace(/^data:image\/png;base64,/, '');
    tg.putImageData(diff, 0, 0);
    return {
      settled, frames, seconds, errors, version: C.VERSION, size, terraSize,
      n, agree, both, clamped, median: quantile(0.5), p90: quantile(0.9), mean: both ? sum / both : 0,
      cesiumNonBg, cesiumNotGray, maxSpread,
      rampPicked: rampErr.length, rampMedian: rampErr.length ? rampErr[rampErr.length >> 1] : null,
      rampMean: rampErr.length ? rampSigned / rampErr.length : null,
      cesiumPng: png(cc), diffPng: png(tc),
    };
  }, { terrainUrl, lon, lat, eyeHeight: height, heading, pitch, fovy, width, height: heightPx, lo: rampLo, hi: rampHi,
    bg: BACKGROUND, texels: RAMP_TEXELS, settle: SETTLE_FRAMES, timeout: LOAD_TIMEOUT_MS,
    graySpread: GRAY_SPREAD, magentaDist: MAGENTA_DIST, samples: RAMP_SAMPLES });
} finally {
  await browser.close();
  server.close();
}

if (r.cesiumPng) fs.writeFileSync(outPng, Buffer.from(r.cesiumPng, 'base64'));
if (r.diffPng) fs.writeFileSync(diffPng, Buffer.from(r.diffPng, 'base64'));
const span = rampHi - rampLo, m = (levels) => (levels * span) / 255;
const pct = (x) => `${(100 * x).toFixed(1)}%`;
const levels = [...perLevel.keys()].sort((x, y) => x - y).map((z) => `${z}:${perLevel.get(z)}`).join(' ');
const sizeOk = r.size.canvas[0] === width && r.size.canvas[1] === heightPx &&
  r.size.buffer[0] === width && r.size.buffer[1] === heightPx;
if (!sizeOk) fail(`Cesium drew ${r.size.buffer.join('x')} (canvas ${r.size.canvas.join('x')}), not ${width}x${heightPx}`);
if (r.terraSize[0] !== r.size.buffer[0] || r.terraSize[1] !== r.size.buffer[1]) {
  fail(`${terraPng} is ${r.terraSize.join('x')}, Cesium's picture ${r.size.buffer.join('x')}`);
}
if (!r.n) console.log(`cesium_compare: cesium ${r.version}, ${r.size.buffer.join('x')}, tiles per level ${levels || 'none'}; ${r.frames} frames in ${r.seconds.toFixed(1)} s`);
if (!r.settled) fail(`the globe did not finish loading within ${loadS} s (${r.frames} frames)`);
for (const e of r.errors) fail(`terrain provider error: ${e}`);
if (r.n) {
  const agreement = r.agree / r.n, inBoth = r.both / r.n, notGray = r.cesiumNonBg ? r.cesiumNotGray / r.cesiumNonBg : 1;
  const sign = r.mean >= 0 ? '+' : '-';
  console.log(`cesium_compare: mask agreement ${pct(agreement)}, ground in both ${pct(inBoth)} of pixels ` +
    `(${pct(r.both ? r.clamped / r.both : 0)} of them at a ramp end), |dh| median ${m(r.median).toFixed(1)} m ` +
    `p90 ${m(r.p90).toFixed(1)} m, mean dh ${sign}${Math.abs(m(r.mean)).toFixed(1)} m (ramp ${rampLo}..${rampHi} m, ` +
    `a gray level ${m(1).toFixed(2)} m); Cesium's ground gray: ${pct(1 - notGray)} of its non-background pixels ` +
    `(largest R,G,B spread ${r.maxSpread}), its gray against its picked heights at ${r.rampPicked} pixels: median ` +
    `|error| ${r.rampMedian === null ? 'none' : r.rampMedian.toFixed(2)} levels, mean ${r.rampMean === null ? 'none'
      : r.rampMean.toFixed(2)}; cesium ${r.version}, ${r.size.buffer.join('x')} fovy ${r.size.fovyDrawn.toFixed(3)} deg, ` +
    `tiles per level ${levels || 'none'}; ${r.frames} frames in ${r.seconds.toFixed(1)} s`);
  if (!(r.cesiumNonBg > 0)) fail('Cesium drew no ground');
  else if (notGray > CESIUM_NOT_GRAY_MAX) {
    fail(`Cesium's ground is not gray: ${pct(notGray)} of its non-background pixels have R, G, B more than ` +
      `${GRAY_SPREAD} apart (lighting, atmosphere or the ramp material changed?)`);
  }
  if (r.rampMedian === null) fail('no pixel of Cesium\'s ground could be picked to check its ramp');
  else if (r.rampMedian > RAMP_ERROR_MAX) {
    fail(`Cesium's gray does not follow the ramp: median |error| ${r.rampMedian.toFixed(2)} levels against its ` +
      `picked heights (gamma or lighting?)`);
  }
  if (agreement < MASK_AGREEMENT_MIN) fail(`mask agreement ${pct(agreement)} < ${pct(MASK_AGREEMENT_MIN)}`);
  if (inBoth < GROUND_BOTH_MIN) fail(`ground in both over ${pct(inBoth)} of pixels < ${pct(GROUND_BOTH_MIN)}`);
  if (r.both && m(r.median) > MEDIAN_DH_MAX * span) {
    fail(`median |dh| ${m(r.median).toFixed(1)} m > ${(MEDIAN_DH_MAX * span).toFixed(1)} m`);
  }
  if (r.both && m(r.p90) > P90_DH_MAX * span) fail(`p90 |dh| ${m(r.p90).toFixed(1)} m > ${(P90_DH_MAX * span).toFixed(1)} m`);
}
process.exit(failures ? 1 : 0);
