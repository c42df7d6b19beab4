/* Elevation rasters through GDAL: plain bands, Terrain-RGB and Terrarium PNGs, no-data as holes,
 * spacing from georeferencing, windows of the raster's own grid and of a geographic grid (GDAL's
 * warp transformer). libterra-gdal: the one file of terra that links GDAL (the terra command reads
 * rasters through the terra-raster program instead, see raster_client.c). */
#include "terra/raster.h"
#include "raster_wire.h"

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <math.h>
#include <ogr_srs_api.h>
#include <string.h>

#define TERRA_PI 3.14159265358979323846
/* Rows GDAL is asked for at once while decoding: the working buffer is this many rows wide. */
#define ROW_CHUNK 256
/* Warped reads: points transformed at once, and the largest source window read for them. */
#define WARP_POINTS 65536
#define WARP_SOURCE_SAMPLES ((size_t)4 << 20)
/* Warped reads transform each row's ends and middle through PROJ and interpolate between while that
 * stays within this many source samples (gdalwarp allows 1/8): PROJ for every point costs ~1 us,
 * five times the rest of a projected read. */
#define WARP_APPROX_SAMPLES (1.0 / 64)

/* The last failure GDAL or PROJ reported on this thread while quiet: some calls (GDALOpen) clear
 * CPLGetLastErrorMsg before they return, after the handler has seen the reason. */
static _Thread_local char quiet_last[512];

static void quiet_handler(CPLErr cls, CPLErrorNum num, const char *msg) {
    (void)num;
    if (cls >= CE_Failure && msg) snprintf(quiet_last, sizeof quiet_last, "%s", msg);
}

/* Quiet GDAL (until CPLPopErrorHandler), no failure remembered yet. */
static void quiet(void) {
    CPLPushErrorHandler(quiet_handler);
    CPLErrorReset();
    quiet_last[0] = 0;
}

/* The last GDAL message without its trailing newline, or a fallback. */
static const char *gdal_msg(const char *fallback) {
    const char *m = CPLGetLastErrorMsg();
    return (m && *m) ? m : quiet_last[0] ? quiet_last : fallback;
}

/* An opened dataset and how its samples become heights. */
typedef struct gdal_raster {
    GDALDatasetH ds;
    int w, h;
    GDALRasterBandH bands[4]; /* plain: [0] the band; RGB: R, G, B, alpha or NULL */
    bool has_nd;
    double nd, scale, offset;
    double gt[6];             /* the geotransform, for naming a sample's place */
    bool georef, degrees;     /* gt is one (not the identity); its CRS is in degrees */
    void *xform;              /* EPSG:4326 -> source pixels (GDALGenImgProjTransform); NULL: none */
    void *approx;             /* the same approximated along rows (GDALApproxTransform), for warping */
} gdal_raster;

static void gdal_raster_close(gdal_raster *g) {
    if (g->approx) GDALDestroyApproxTransformer(g->approx);
    if (g->xform) GDALDestroyGenImgProjTransformer(g->xform);
    if (g->ds) GDALClose(g->ds);
    memset(g, 0, sizeof *g);
}

/* Opens d->path and checks what can be checked without reading samples: readable, size, max_side,
 * the bands the encoding needs. Call with the quiet handler pushed. */
static terra_status gdal_raster_open(const terra_raster_desc *d, gdal_raster *g) {
    memset(g, 0, sizeof *g);
    const char *path = d->path;
    GDALAllRegister();
    g->ds = GDALOpen(path, GA_ReadOnly);
    if (!g->ds) return terra_fail(TERRA_E_FORMAT, "%s: cannot read as a raster: %s", path, gdal_msg("unknown format"));
    terra_status st = TERRA_OK;
    int w = GDALGetRasterXSize(g->ds), h = GDALGetRasterYSize(g->ds), nb = GDALGetRasterCount(g->ds);
    int need = d->encoding == TERRA_RASTER_PLAIN ? (d->band > 0 ? d->band : 1) : 3;
    if (w <= 0 || h <= 0) {
        st = terra_fail(TERRA_E_FORMAT, "%s: zero-size raster (%dx%d)", path, w, h);
    } else if (d->max_side > 0 && (w > d->max_side || h > d->max_side)) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "%s: raster %dx%d is past the supported size (%d samples a side)", path,
                        w, h, d->max_side);
    } else if (nb < need) {
        st = terra_fail(TERRA_E_FORMAT, "%s: missing band %d (the file has %d band%s)%s", path, need, nb,
                        nb == 1 ? "" : "s", d->encoding == TERRA_RASTER_PLAIN ? "" : "; RGB encodings need 3");
    }
    if (st) {
        gdal_raster_close(g);
        return st;
    }
    g->w = w;
    g->h = h;
    g->georef = GDALGetGeoTransform(g->ds, g->gt) == CE_None &&
                !(g->gt[0] == 0 && g->gt[1] == 1 && g->gt[2] == 0 && g->gt[3] == 0 && g->gt[4] == 0 && g->gt[5] == 1);
    OGRSpatialReferenceH srs = GDALGetSpatialRef(g->ds);
    g->degrees = srs && OSRIsGeographic(srs);
    if (d->encoding == TERRA_RASTER_PLAIN) {
        GDALRasterBandH b = g->bands[0] = GDALGetRasterBand(g->ds, need);
        int has_nd = 0, has_scale = 0, has_off = 0;
        g->nd = GDALGetRasterNoDataValue(b, &has_nd);
        g->has_nd = has_nd;
        g->scale = GDALGetRasterScale(b, &has_scale);
        g->offset = GDALGetRasterOffset(b, &has_off);
        if (!has_scale) g->scale = 1.0;
        if (!has_off) g->offset = 0.0;
    } else {
        for (int i = 0; i < 3; i++) g->bands[i] = GDALGetRasterBand(g->ds, i + 1);
        if (nb >= 4 && GDALGetRasterColorInterpretation(GDALGetRasterBand(g->ds, 4)) == GCI_AlphaBand)
            g->bands[3] = GDALGetRasterBand(g->ds, 4);
    }
    return TERRA_OK;
}

/* Bytes of working buffer decode_window uses for a window `w` samples wide. */
static size_t decode_working(const terra_raster_desc *d, int w) {
    return (size_t)w * ROW_CHUNK * (d->encoding == TERRA_RASTER_PLAIN ? sizeof(double) : 4);
}

/* The heights of window (x0, y0, w, h) into hs: NaN for no-data; TERRA_E_CORRUPT naming the sample
 * for a NaN that is not no-data, an infinite height or one outside d's bound. */
static terra_status decode_window(const gdal_raster *g, const terra_raster_desc *d, int x0, int y0, int w, int h,
                                  float *hs) {
    const char *path = d->path;
    const size_t W = (size_t)w, H = (size_t)h;
    const size_t chunk = H < ROW_CHUNK ? H : ROW_CHUNK;
    void *tmp = terra_alloc(decode_working(d, w) / ROW_CHUNK * chunk);
    if (!tmp) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    const double zs = d->z_scale != 0 ? d->z_scale : 1.0;
    terra_status st = TERRA_OK;
    for (size_t r0 = 0; r0 < H && !st; r0 += chunk) {
        const size_t n = H - r0 < chunk ? H - r0 : chunk;
        const int ry = y0 + (int)r0;
        float *dst = hs + r0 * W;
        if (d->encoding == TERRA_RASTER_PLAIN) {
            double *row = tmp;
            if (GDALRasterIO(g->bands[0], GF_Read, x0, ry, w, (int)n, row, w, (int)n, GDT_Float64, 0, 0) != CE_None) {
                st = terra_fail(TERRA_E_IO, "%s: cannot read rows %d..%d: %s", path, ry, ry + (int)n - 1,
                                gdal_msg("read error"));
                break;
            }
            for (size_t i = 0; i < n * W; i++) {
                double v = row[i];
                if (isnan(v) ? d->nan_is_nodata || (g->has_nd && isnan(g->nd)) : g->has_nd && v == g->nd) {
                    dst[i] = NAN;
                    continue;
                }
                if (!isfinite(v)) {
                    st = terra_fail(TERRA_E_CORRUPT, "%s: %s height at sample (%zu, %zu)", path,
                                    isnan(v) ? "NaN" : "infinite", (size_t)x0 + i % W, (size_t)ry + i / W);
                    break;
                }
                dst[i] = (float)((v * g->scale + g->offset) * zs);
            }
        } else {
            uint8_t *px = tmp;
            const int nc = g->bands[3] ? 4 : 3;
            for (int c = 0; c < nc && !st; c++) {
                if (GDALRasterIO(g->bands[c], GF_Read, x0, ry, w, (int)n, px + (size_t)c * W * n, w, (int)n, GDT_Byte,
                                 0, 0) != CE_None)
                    st = terra_fail(TERRA_E_IO, "%s: cannot read band %d: %s", path, c + 1, gdal_msg("read error"));
            }
            if (st) break;
            const uint8_t *R = px, *G = px + W * n, *B = px + 2 * W * n, *A = nc == 4 ? px + 3 * W * n : NULL;
            for (size_t i = 0; i < n * W; i++) {
                double v;
                if (A && A[i] == 0) {
                    dst[i] = NAN;
                    continue;
                }
                if (d->encoding == TERRA_RASTER_TERRAIN_RGB)
                    v = -10000.0 + (double)(R[i] * 65536 + G[i] * 256 + B[i]) * 0.1;
                else
                    v = (double)R[i] * 256.0 + (double)G[i] + (double)B[i] / 256.0 - 32768.0;
                dst[i] = (float)(v * zs);
            }
        }
    }
    terra_free(tmp);
    return st ? st : terra_raster_check_window(d, g->georef ? g->gt : NULL, g->degrees, hs, x0, y0, w, h);
}

/* The mean radius (2a + b) / 3 of a CRS's ellipsoid, metres: 6371008.8 on WGS 84. */
static double mean_radius(OGRSpatialReferenceH srs) {
    OGRErr ea = OGRERR_NONE, eb = OGRERR_NONE;
    const double a = OSRGetSemiMajor(srs, &ea), b = OSRGetSemiMinor(srs, &eb);
    return ea == OGRERR_NONE && eb == OGRERR_NONE && a > 0 && b > 0 ? (2 * a + b) / 3 : 6371008.8;
}

/* The geotransform, whether it is one, and metres per sample (d->spacing_m, else from it). */
static void georef(const gdal_raster *g, const terra_raster_desc *d, double geo[6], bool *georeferenced, double *sx,
                   double *sy) {
    double gt[6] = {0, 1, 0, 0, 0, 1};
    *georeferenced = GDALGetGeoTransform(g->ds, gt) == CE_None &&
                     !(gt[0] == 0 && gt[1] == 1 && gt[2] == 0 && gt[3] == 0 && gt[4] == 0 && gt[5] == 1);
    memcpy(geo, gt, sizeof gt);
    *sx = *sy = 1.0;
    if (d->spacing_m > 0) {
        *sx = *sy = d->spacing_m;
    } else if (*georeferenced) {
        *sx = hypot(gt[1], gt[4]);
        *sy = hypot(gt[2], gt[5]);
        OGRSpatialReferenceH srs = GDALGetSpatialRef(g->ds);
        if (srs && OSRIsGeographic(srs)) {
            /* Degrees: metres at the raster's centre latitude, on a sphere of the mean radius of the
             * CRS's ellipsoid (the Earth's, or another body's). */
            double lat = gt[3] + gt[5] * (double)g->h * 0.5;
            double m_per_deg = mean_radius(srs) * TERRA_PI / 180.0;
            *sx *= m_per_deg * cos(lat * TERRA_PI / 180.0);
            *sy *= m_per_deg;
        }
    }
}

terra_status terra_raster_read(const terra_raster_desc *d, terra_raster *out) {
    return terra_raster_read_counted(d, 1, out);
}

terra_status terra_raster_read_counted(const terra_raster_desc *d, int copies, terra_raster *out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    memset(out, 0, sizeof *out);
    quiet();
    gdal_raster g;
    float *hs = NULL;
    terra_status st = gdal_raster_open(d, &g);
    if (st) goto done;
    /* The heights, and a band of rows at a time: doubles for a plain band, bytes for RGB(A). */
    st = terra_raster_check_budget(d->path, g.w, g.h, copies, decode_working(d, g.w), d->max_bytes);
    if (st) goto done;
    hs = terra_alloc((size_t)g.w * (size_t)g.h * sizeof(float));
    if (!hs) {
        st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for %dx%d samples", d->path, g.w, g.h);
        goto done;
    }
    if ((st = decode_window(&g, d, 0, 0, g.w, g.h, hs)) != TERRA_OK) goto done;
    if ((st = terra_raster_scan_heights(d->path, hs, g.w, g.h, out)) != TERRA_OK) goto done;
    georef(&g, d, out->geo, &out->georeferenced, &out->spacing_x, &out->spacing_y);
    st = terra_raster_check_extent(d->path, out);
    if (st) {
        memset(out, 0, sizeof *out);
        goto done;
    }
    out->heights = hs;
    hs = NULL;
done:
    terra_free(hs);
    gdal_raster_close(&g);
    CPLPopErrorHandler();
    return st;
}

/* ---- sources --------------------------------------------------------------------------------- */

/* Fills the CRS facts of s->info (and g->xform: EPSG:4326 -> source pixels) from the dataset. */
static terra_status describe_crs(terra_raster_source *s, gdal_raster *g) {
    terra_raster_info *in = &s->info;
    OGRSpatialReferenceH srs = GDALGetSpatialRef(g->ds);
    if (!srs) return TERRA_OK;
    in->has_crs = true;
    char *wkt = NULL;
    const char *const wkt_opts[] = {"FORMAT=WKT2", NULL};
    /* A CRS PROJ could not make sense of (an unknown +proj=...) exports nothing: say what PROJ said. */
    if (OSRExportToWktEx(srs, &wkt, wkt_opts) != OGRERR_NONE || !wkt) {
        CPLFree(wkt);
        return terra_fail(TERRA_E_FORMAT, "%s: its coordinate system cannot be read: %s", s->path,
                          gdal_msg("PROJ gives no reason"));
    }
    size_t n = strlen(wkt) + 1;
    s->wkt = terra_alloc(n);
    if (s->wkt) memcpy(s->wkt, wkt, n);
    in->crs_wkt = s->wkt;
    CPLFree(wkt);
    if (!in->crs_wkt) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    const char *auth = OSRGetAuthorityName(srs, NULL), *code = OSRGetAuthorityCode(srs, NULL);
    if (auth && code && strcmp(auth, "EPSG") == 0) in->epsg = atoi(code);
    OGRErr ea = OGRERR_NONE, eb = OGRERR_NONE;
    const double a = OSRGetSemiMajor(srs, &ea), semi_minor = OSRGetSemiMinor(srs, &eb);
    if (ea == OGRERR_NONE && eb == OGRERR_NONE) in->semi_major_m = a, in->semi_minor_m = semi_minor;
    const char *ell = OSRGetAttrValue(srs, "ELLIPSOID", 0);
    if (!ell) ell = OSRGetAttrValue(srs, "SPHEROID", 0);
    snprintf(in->ellipsoid, sizeof in->ellipsoid, "%s", ell ? ell : "unnamed");
    /* Every datum of the Earth has an ellipsoid of 6377 to 6379 km (Everest 1830 to Hayford 1909)
     * or a sphere near 6371 km; Mars' is 3396 km, the Moon's 1737 km. */
    in->off_earth = ea == OGRERR_NONE && !(a > 6350e3 && a < 6400e3);
    in->geographic = OSRIsGeographic(srs) && ea == OGRERR_NONE && fabs(a - 6378137.0) < 6378.137; /* 0.1% */
    if (!in->georeferenced || in->off_earth) return TERRA_OK; /* no place on the Earth's globe */
    if (OSRIsGeographic(srs)) {
        /* Degrees whose sample centres lie off the globe: a broken geotransform. */
        const double *t = in->geo;
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int k = 0; k < 4; k++) {
            const double c = (k & 1) ? g->w - 0.5 : 0.5, r = (k & 2) ? g->h - 0.5 : 0.5;
            const double p[2] = {t[0] + c * t[1] + r * t[2], t[3] + c * t[4] + r * t[5]};
            for (int j = 0; j < 2; j++) lo[j] = fmin(lo[j], p[j]), hi[j] = fmax(hi[j], p[j]);
        }
        if (!(lo[0] >= -360 && hi[0] <= 360 && lo[1] >= -90 - 1e-9 && hi[1] <= 90 + 1e-9))
            return terra_fail(TERRA_E_UNSUPPORTED,
                              "%s: its geotransform puts its samples at longitudes %g..%g, latitudes %g..%g: off the "
                              "globe (geotransform %g %g %g %g %g %g)",
                              s->path, lo[0], hi[0], lo[1], hi[1], t[0], t[1], t[2], t[3], t[4], t[5]);
    }
    /* Longitude first: GDAL's transformer sets the traditional GIS axis order on the SRS it is given. */
    const char *const opts[] = {"DST_SRS=EPSG:4326", NULL};
    g->xform = GDALCreateGenImgProjTransformer2(g->ds, NULL, (char **)opts);
    if (!g->xform) return TERRA_OK; /* a CRS PROJ cannot take to EPSG:4326: no place on the globe */
    g->approx = GDALCreateApproxTransformer(GDALGenImgProjTransform, g->xform, WARP_APPROX_SAMPLES);
    if (!g->approx) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    /* Bounds: 65 points along each edge through the sample centres; the step at the centre. */
    enum { EDGE = 65, N = 4 * EDGE + 3 };
    double x[N], y[N], z[N];
    int ok[N];
    const double W = g->w, H = g->h;
    for (int i = 0; i < EDGE; i++) {
        double t = (double)i / (EDGE - 1);
        double px = 0.5 + t * (W - 1), py = 0.5 + t * (H - 1);
        x[4 * i] = px, y[4 * i] = 0.5;
        x[4 * i + 1] = px, y[4 * i + 1] = H - 0.5;
        x[4 * i + 2] = 0.5, y[4 * i + 2] = py;
        x[4 * i + 3] = W - 0.5, y[4 * i + 3] = py;
    }
    const double cx = floor(W / 2) + 0.5, cy = floor(H / 2) + 0.5;
    x[N - 3] = cx, y[N - 3] = cy;
    x[N - 2] = cx + 1, y[N - 2] = cy;
    x[N - 1] = cx, y[N - 1] = cy + 1;
    memset(z, 0, sizeof z);
    if (!GDALGenImgProjTransform(g->xform, FALSE, N, x, y, z, ok)) return TERRA_OK;
    double b[4] = {INFINITY, INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < N - 3; i++) {
        if (!ok[i]) return TERRA_OK; /* an edge off the globe: no bounds to state */
        b[0] = fmin(b[0], x[i]), b[1] = fmin(b[1], y[i]), b[2] = fmax(b[2], x[i]), b[3] = fmax(b[3], y[i]);
    }
    if (!ok[N - 3] || !ok[N - 2] || !ok[N - 1]) return TERRA_OK;
    memcpy(in->lonlat_bounds, b, sizeof b);
    in->lonlat_step[0] = fmax(fabs(x[N - 2] - x[N - 3]), fabs(x[N - 1] - x[N - 3]));
    in->lonlat_step[1] = fmax(fabs(y[N - 2] - y[N - 3]), fabs(y[N - 1] - y[N - 3]));
    in->has_lonlat = true;
    return TERRA_OK;
}

static terra_status gdal_window(terra_raster_source *s, int x0, int y0, int w, int h, float *out) {
    /* The caller's window and GDAL's rows as they are decoded. */
    terra_status st = terra_raster_check_budget(s->path, w, h, 1, decode_working(&s->desc, w), s->desc.max_bytes);
    if (st) return st;
    quiet();
    st = decode_window(s->impl, &s->desc, x0, y0, w, h, out);
    CPLPopErrorHandler();
    return st;
}

/* Snaps a source coordinate to the sample it lies on (within rounding of the transform), so a grid
 * point on a sample centre takes that sample alone: its value, and no neighbour's hole. */
static double snap(double f) {
    double r = nearbyint(f);
    return fabs(f - r) < 1e-6 ? r : f;
}

static terra_status warp_block(terra_raster_source *s, const terra_raster_geo_grid *gr, int x0, int y0, int w, int h,
                               float *out, size_t stride);

/* warp_block over the two halves of the window, split across its longer side. */
static terra_status warp_split(terra_raster_source *s, const terra_raster_geo_grid *gr, int x0, int y0, int w, int h,
                               float *out, size_t stride) {
    if (w >= h) {
        terra_status st = warp_block(s, gr, x0, y0, w / 2, h, out, stride);
        return st ? st : warp_block(s, gr, x0 + w / 2, y0, w - w / 2, h, out + w / 2, stride);
    }
    terra_status st = warp_block(s, gr, x0, y0, w, h / 2, out, stride);
    return st ? st : warp_block(s, gr, x0, y0 + h / 2, w, h - h / 2, out + (size_t)(h / 2) * stride, stride);
}

/* Warps grid window (x0, y0, w, h) into out (row stride `stride`): transform, read the source
 * window the points need, interpolate. Halves itself while it has too many points or needs too
 * large a source window. */
static terra_status warp_block(terra_raster_source *s, const terra_raster_geo_grid *gr, int x0, int y0, int w, int h,
                               float *out, size_t stride) {
    gdal_raster *g = s->impl;
    const size_t n = (size_t)w * (size_t)h;
    if (n > WARP_POINTS) return warp_split(s, gr, x0, y0, w, h, out, stride);
    double *px = terra_alloc(n * 3 * sizeof(double));
    int *ok = terra_alloc(n * sizeof(int));
    if (!px || !ok) {
        terra_free(px);
        terra_free(ok);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    }
    double *py = px + n, *pz = py + n;
    for (size_t k = 0; k < n; k++) {
        /* Absolute grid indices: neighbouring windows compute a shared point the same way. */
        px[k] = gr->west + (double)(x0 + (int)(k % (size_t)w)) * gr->step_x;
        py[k] = gr->north - (double)(y0 + (int)(k / (size_t)w)) * gr->step_y;
        pz[k] = 0;
    }
    CPLErrorReset();
    for (size_t r = 0; r < n; r += (size_t)w) /* row by row: the approximation interpolates along a line */
        if (!GDALApproxTransform(g->approx, TRUE, w, px + r, py + r, pz + r, ok + r))
            memset(ok + r, 0, (size_t)w * sizeof(int));
    /* Sample-centre coordinates, and the source window they need. */
    const double W1 = g->w - 1, H1 = g->h - 1;
    int i0 = INT32_MAX, j0 = INT32_MAX, i1 = -1, j1 = -1;
    for (size_t k = 0; k < n; k++) {
        double fx = snap(px[k] - 0.5), fy = snap(py[k] - 0.5);
        ok[k] = ok[k] && fx >= 0 && fx <= W1 && fy >= 0 && fy <= H1;
        if (!ok[k]) continue;
        px[k] = fx, py[k] = fy;
        i0 = (int)fmin(i0, floor(fx)), i1 = (int)fmax(i1, ceil(fx));
        j0 = (int)fmin(j0, floor(fy)), j1 = (int)fmax(j1, ceil(fy));
    }
    terra_status st = TERRA_OK;
    float *src = NULL;
    if (i1 >= 0) {
        const size_t sw = (size_t)(i1 - i0 + 1), sh = (size_t)(j1 - j0 + 1);
        if (sw * sh > WARP_SOURCE_SAMPLES && n > 1) {
            terra_free(px);
            terra_free(ok);
            return warp_split(s, gr, x0, y0, w, h, out, stride);
        }
        st = terra_raster_check_budget(s->path, (int)sw, (int)sh, 1, n * 28 + decode_working(&s->desc, (int)sw),
                                       s->desc.max_bytes);
        if (!st && !(src = terra_alloc(sw * sh * sizeof(float))))
            st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for a %zux%zu window", s->path, sw, sh);
        if (!st) st = decode_window(g, &s->desc, i0, j0, (int)sw, (int)sh, src);
        for (size_t k = 0; k < n && !st; k++) {
            float *o = out + (k / (size_t)w) * stride + k % (size_t)w;
            if (!ok[k]) {
                *o = NAN;
                continue;
            }
            const double fx = px[k] - i0, fy = py[k] - j0;
            const size_t i = (size_t)fx, j = (size_t)fy;
            const double tx = fx - (double)i, ty = fy - (double)j;
            const float *r0 = src + j * sw + i;
            /* Only samples with a weight take part: a hole beside a grid point on a sample stays out. */
            double v = (1 - tx) * (1 - ty) * r0[0];
            if (tx > 0) v += tx * (1 - ty) * r0[1];
            if (ty > 0) v += (1 - tx) * ty * r0[sw];
            if (tx > 0 && ty > 0) v += tx * ty * r0[sw + 1];
            *o = (float)v;
        }
    } else {
        for (size_t k = 0; k < n; k++) out[(k / (size_t)w) * stride + k % (size_t)w] = NAN;
    }
    terra_free(src);
    terra_free(px);
    terra_free(ok);
    return st;
}

static terra_status gdal_geo(terra_raster_source *s, const terra_raster_geo_grid *gr, int x0, int y0, int w, int h,
                             float *out) {
    gdal_raster *g = s->impl;
    if (!g->approx)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: its coordinate system cannot be taken to longitude and latitude",
                          s->path);
    quiet();
    terra_status st = warp_block(s, gr, x0, y0, w, h, out, (size_t)w);
    CPLPopErrorHandler();
    return st; /* the source's samples were checked as decoded: what they interpolate lies between them */
}

static void gdal_close(terra_raster_source *s) {
    gdal_raster_close(s->impl);
    terra_free(s->impl);
}

static const terra_raster_source_ops gdal_ops = {gdal_window, gdal_geo, gdal_close};

terra_status terra_raster_open_gdal(const terra_raster_desc *d, terra_raster_source **out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    *out = NULL;
    gdal_raster *g = terra_alloc(sizeof *g);
    if (!g) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", d->path);
    quiet();
    terra_status st = gdal_raster_open(d, g);
    if (st) {
        terra_free(g);
        CPLPopErrorHandler();
        return st;
    }
    if ((st = terra_raster_source_new(d, &gdal_ops, g, out)) != TERRA_OK) {
        gdal_raster_close(g);
        terra_free(g);
        CPLPopErrorHandler();
        return st;
    }
    terra_raster_source *s = *out;
    terra_raster_info *in = &s->info;
    in->width = g->w;
    in->height = g->h;
    georef(g, d, in->geo, &in->georeferenced, &in->spacing_x, &in->spacing_y);
    terra_raster probe = {.width = g->w, .height = g->h, .spacing_x = in->spacing_x, .spacing_y = in->spacing_y};
    memcpy(probe.geo, in->geo, sizeof probe.geo);
    if (!(st = terra_raster_check_extent(d->path, &probe))) st = describe_crs(s, g);
    if (d->encoding == TERRA_RASTER_PLAIN) {
        in->has_nodata = g->has_nd;
        in->nodata = g->nd;
        /* Statistics the file states (bForce false: nothing is read to compute them). */
        double mn, mx;
        if (GDALGetRasterStatistics(g->bands[0], TRUE, FALSE, &mn, &mx, NULL, NULL) == CE_None) {
            const double zs = d->z_scale != 0 ? d->z_scale : 1.0;
            double a = (mn * g->scale + g->offset) * zs, b = (mx * g->scale + g->offset) * zs;
            in->range_known = true;
            in->min_z = (float)fmin(a, b);
            in->max_z = (float)fmax(a, b);
        }
    }
    CPLPopErrorHandler();
    if (st) {
        terra_raster_close(s);
        *out = NULL;
    }
    return st;
}
