// What cesium_browser.mjs and cesium_compare.mjs share: a page that loads CesiumJS from /cesium/,
// the small static server in this process that serves it (and CesiumJS's Build/Cesium from
// node_modules, plus any extra files a script names), the wait in the page for the globe to finish
// loading, Debian's headless Chromium through puppeteer-core drawing WebGL with SwiftShader, and the
// guard on the page's requests (nothing outside loopback; terra serve's tile requests reported by
// tile).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const cesiumRoot = path.join(here, 'node_modules', 'cesium', 'Build', 'Cesium');

// Runs in the page, as window.settleGlobe: resolves, once scene.globe.tilesLoaded has held for
// settleFrames frames in a row (it is true for a frame before refinement starts, and can flicker)
// or after timeoutMs, to { settled, frames, seconds } (false if it timed out; the frames drawn and
// the seconds taken meanwhile).
async function settleGlobe(scene, settleFrames, timeoutMs) {
  const t0 = performance.now();
  let frames = 0;
  const settled = await new Promise((done) => {
    let run = 0;
    const stop = setTimeout(() => { remove(); done(false); }, timeoutMs);
    const remove = scene.postRender.addEventListener(() => {
      frames++;
      run = scene.globe.tilesLoaded ? run + 1 : 0;
      if (run >= settleFrames) { clearTimeout(stop); remove(); done(true); }
    });
  });
  return { settled, frames, seconds: (performance.now() - t0) / 1000 };
}

// the page: a full-window #globe, CesiumJS and its widgets' stylesheet from /cesium/, settleGlobe
const pageHtml = `<!doctype html><html><head><meta charset="utf-8">
<style>html,body,#globe{margin:0;padding:0;width:100%;height:100%;overflow:hidden}</style>
<script>window.CESIUM_BASE_URL = '/cesium/';
window.settleGlobe = ${settleGlobe};</script>
<link rel="stylesheet" href="/cesium/Widgets/widgets.css">
<script src="/cesium/Cesium.js"></script></head><body><div id="globe"></div></body></html>`;
const MIME = { '.js': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm', '.css': 'text/css',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.xml': 'application/xml', '.glb': 'model/gltf-binary',
  '.ktx2': 'image/ktx2', '.html': 'text/html' };

// Serves the page at /, Build/Cesium under /cesium/ and each of extraFiles ({ '/name': local file })
// at its name, on a free loopback port; 404 for anything else. Resolves to { server, pageUrl }.
export async function serveCesium({ extraFiles = {} } = {}) {
  const server = http.createServer((req, res) => {
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (p === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (p === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(pageHtml);
      return;
    }
    let file;
    if (Object.hasOwn(extraFiles, p)) {
      file = extraFiles[p];
    } else {
      file = path.resolve(cesiumRoot, '.' + p.replace(/^\/cesium\//, '/'));
      if (!p.startsWith('/cesium/') || !file.startsWith(cesiumRoot + path.sep)) {
        res.writeHead(404).end();
        return;
      }
    }
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream' });
      res.end(data);
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, pageUrl: `http://127.0.0.1:${server.address().port}/` };
}

// Debian's Chromium (or $CHROMIUM's), headless, WebGL through ANGLE on SwiftShader, no background
// networking, a width x height window; extraArgs go before --window-size. protocolTimeoutMs bounds
// each DevTools call (a page.evaluate that waits for the globe included).
export function launchChromium({ chromium, width, height, protocolTimeoutMs, extraArgs = [] }) {
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    protocolTimeout: protocolTimeoutMs,
    timeout: 20000,
    args: ['--no-sandbox', '--use-gl=angle', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
      '--disable-background-networking', ...extraArgs, `--window-size=${width},${height}`],
  });
}

// A function of a URL: "z/x/y" when it asks terra serve (terrainUrl's origin) for a tile, else false.
export function tileKeyOf(terrainUrl) {
  const terrainOrigin = new URL(terrainUrl).origin;
  return (url) => {
    const u = new URL(url);
    const m = u.origin === terrainOrigin && u.pathname.match(/^\/(\d+)\/(\d+)\/(\d+)\.terrain$/);
    return m && `${m[1]}/${m[2]}/${m[3]}`;
  };
}

// Intercepts page's requests: data: and blob: go through; one outside loopback is fail()ed and
// aborted; one for a tile (tileKey, from tileKeyOf) is told to onTile("z/x/y") and goes through.
export async function guardRequests(page, { tileKey, onTile, fail }) {
  await page.setRequestInterception(true);
  page.on('request', (q) => {
    const u = new URL(q.url());
    if (u.protocol === 'data:' || u.protocol === 'blob:') return q.continue();
    if (u.hostname !== '127.0.0.1') {
      fail(`a request outside loopback: ${q.url()}`);
      return q.abort();
    }
    const k = tileKey(q.url());
    if (k) onTile(k);
    return q.continue();
  });
}
