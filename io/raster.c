/* Elevation rasters through GDAL: plain bands, Terrain-RGB and Terrarium PNGs, no-data as holes,
 * spacing from georeferencing. libterra-gdal: the one file of terra that links GDAL (the terra
 * command reads rasters through the terra-raster program instead, see raster_client.c). */
#include "terra/raster.h"
#include "raster_wire.h"

#include <cpl_conv.h>
#include <cpl_error.h>
#include <gdal.h>
#include <math.h>
#include <ogr_srs_api.h>
#include <string.h>

#define TERRA_PI 3.14159265358979323846

static void quiet_handler(CPLErr cls, CPLErrorNum num, const char *msg) {
    (void)cls;
    (void)num;
    (void)msg;
}

/* The last GDAL message without its trailing newline, or a fallback. */
static const char *gdal_msg(const char *fallback) {
    const char *m = CPLGetLastErrorMsg();
    return (m && *m) ? m : fallback;
}

terra_status terra_raster_read(const terra_raster_desc *d, terra_raster *out) {
    return terra_raster_read_counted(d, 1, out);
}

terra_status terra_raster_read_counted(const terra_raster_desc *d, int copies, terra_raster *out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    memset(out, 0, sizeof *out);
    const char *path = d->path;
    GDALAllRegister();
    CPLPushErrorHandler(quiet_handler);
    CPLErrorReset();
    terra_status st = TERRA_OK;
    float *hs = NULL;
    void *tmp = NULL;
    GDALDatasetH ds = GDALOpen(path, GA_ReadOnly);
    if (!ds) {
        st = terra_fail(TERRA_E_FORMAT, "%s: cannot read as a raster: %s", path, gdal_msg("unknown format"));
        goto done;
    }
    int w = GDALGetRasterXSize(ds), h = GDALGetRasterYSize(ds), nb = GDALGetRasterCount(ds);
    if (w <= 0 || h <= 0) {
        st = terra_fail(TERRA_E_FORMAT, "%s: zero-size raster (%dx%d)", path, w, h);
        goto done;
    }
    if (d->max_side > 0 && (w > d->max_side || h > d->max_side)) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "%s: raster %dx%d is past the supported size (%d samples a side)", path,
                        w, h, d->max_side);
        goto done;
    }
    int need = d->encoding == TERRA_RASTER_PLAIN ? (d->band > 0 ? d->band : 1) : 3;
    if (nb < need) {
        st = terra_fail(TERRA_E_FORMAT, "%s: missing band %d (the file has %d band%s)%s", path, need, nb,
                        nb == 1 ? "" : "s", d->encoding == TERRA_RASTER_PLAIN ? "" : "; RGB encodings need 3");
        goto done;
    }
    const size_t W = (size_t)w, H = (size_t)h;
    const size_t chunk = 256;
    /* The heights, and a band of rows at a time: doubles for a plain band, bytes for RGB(A). */
    size_t working = (size_t)w * chunk * (d->encoding == TERRA_RASTER_PLAIN ? sizeof(double) : 4);
    st = terra_raster_check_budget(path, w, h, copies, working, d->max_bytes);
    if (st) goto done;
    hs = terra_alloc(W * H * sizeof(float));
    if (!hs) {
        st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for %dx%d samples", path, w, h);
        goto done;
    }
    double zs = d->z_scale != 0 ? d->z_scale : 1.0;
    if (d->encoding == TERRA_RASTER_PLAIN) {
        GDALRasterBandH b = GDALGetRasterBand(ds, need);
        int has_nd = 0;
        double nd = GDALGetRasterNoDataValue(b, &has_nd);
        int has_scale = 0, has_off = 0;
        double sc = GDALGetRasterScale(b, &has_scale), off = GDALGetRasterOffset(b, &has_off);
        if (!has_scale) sc = 1.0;
        if (!has_off) off = 0.0;
        tmp = terra_alloc(W * chunk * sizeof(double));
        if (!tmp) {
            st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
            goto done;
        }
        double *row = tmp;
        for (size_t y0 = 0; y0 < H; y0 += chunk) {
            size_t n = H - y0 < chunk ? H - y0 : chunk;
            if (GDALRasterIO(b, GF_Read, 0, (int)y0, w, (int)n, row, w, (int)n, GDT_Float64, 0, 0) != CE_None) {
                st = terra_fail(TERRA_E_IO, "%s: cannot read rows %zu..%zu: %s", path, y0, y0 + n - 1,
                                gdal_msg("read error"));
                goto done;
            }
            for (size_t i = 0; i < n * W; i++) {
                double v = row[i];
                size_t k = y0 * W + i;
                if (has_nd && (v == nd || (isnan(nd) && isnan(v)))) {
                    hs[k] = NAN;
                    continue;
                }
                if (!isfinite(v)) {
                    st = terra_fail(TERRA_E_CORRUPT, "%s: %s height at sample (%zu, %zu)", path,
                                    isnan(v) ? "NaN" : "infinite", k % W, k / W);
                    goto done;
                }
                hs[k] = (float)((v * sc + off) * zs);
            }
        }
    } else {
        GDALRasterBandH bands[4];
        for (int i = 0; i < 3; i++) bands[i] = GDALGetRasterBand(ds, i + 1);
        bool alpha = nb >= 4 && GDALGetRasterColorInterpretation(GDALGetRasterBand(ds, 4)) == GCI_AlphaBand;
        bands[3] = alpha ? GDALGetRasterBand(ds, 4) : NULL;
        tmp = terra_alloc(W * chunk * 4);
        if (!tmp) {
            st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
            goto done;
        }
        uint8_t *px = tmp;
        for (size_t y0 = 0; y0 < H; y0 += chunk) {
            size_t n = H - y0 < chunk ? H - y0 : chunk;
            for (int c = 0; c < (alpha ? 4 : 3); c++) {
                if (GDALRasterIO(bands[c], GF_Read, 0, (int)y0, w, (int)n, px + (size_t)c * W * n, w, (int)n,
                                 GDT_Byte, 0, 0) != CE_None) {
                    st = terra_fail(TERRA_E_IO, "%s: cannot read band %d: %s", path, c + 1, gdal_msg("read error"));
                    goto done;
                }
            }
            const uint8_t *R = px, *G = px + W * n, *B = px + 2 * W * n, *A = alpha ? px + 3 * W * n : NULL;
            for (size_t i = 0; i < n * W; i++) {
                double v;
                if (A && A[i] == 0) {
                    hs[y0 * W + i] = NAN;
                    continue;
                }
                if (d->encoding == TERRA_RASTER_TERRAIN_RGB)
                    v = -10000.0 + (double)(R[i] * 65536 + G[i] * 256 + B[i]) * 0.1;
                else
                    v = (double)R[i] * 256.0 + (double)G[i] + (double)B[i] / 256.0 - 32768.0;
                hs[y0 * W + i] = (float)(v * zs);
            }
        }
    }
    st = terra_raster_scan_heights(path, hs, w, h, out);
    if (st) goto done;
    out->heights = hs;
    double gt[6] = {0, 1, 0, 0, 0, 1};
    out->georeferenced = GDALGetGeoTransform(ds, gt) == CE_None &&
                         !(gt[0] == 0 && gt[1] == 1 && gt[2] == 0 && gt[3] == 0 && gt[4] == 0 && gt[5] == 1);
    memcpy(out->geo, gt, sizeof gt);
    out->spacing_x = out->spacing_y = 1.0;
    if (d->spacing_m > 0) {
        out->spacing_x = out->spacing_y = d->spacing_m;
    } else if (out->georeferenced) {
        out->spacing_x = hypot(gt[1], gt[4]);
        out->spacing_y = hypot(gt[2], gt[5]);
        OGRSpatialReferenceH srs = GDALGetSpatialRef(ds);
        if (srs && OSRIsGeographic(srs)) {
            /* Degrees: metres at the raster's centre latitude (a sphere of the WGS84 mean radius). */
            double lat = gt[3] + gt[5] * (double)h * 0.5;
            double m_per_deg = 6371008.8 * TERRA_PI / 180.0;
            out->spacing_x *= m_per_deg * cos(lat * TERRA_PI / 180.0);
            out->spacing_y *= m_per_deg;
        }
    }
    st = terra_raster_check_extent(path, out);
    if (st) {
        memset(out, 0, sizeof *out);
        goto done;
    }
    hs = NULL;
done:
    terra_free(hs);
    terra_free(tmp);
    if (ds) GDALClose(ds);
    CPLPopErrorHandler();
    return st;
}
