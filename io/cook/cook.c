/* terra cook, the whole job (terra/cook_io.h): rasters in, the plane chosen, the finest tiles made
 * from sample windows, the pyramid built (terra_cook_pyramid), every tile encoded and written. */
#include "terra/cook_io.h"
#include "../json.h"
#include "../raster_wire.h"
#include "terra/io.h"
#include "terra/tile_codec.h"
#include "../../src/cook/scan.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_TILE 256
#define MAX_ZOOM 24

/* ---- samples of a raster in memory ------------------------------------------------------------ */

/* Where plane coordinate k falls between a raster's sample centres (0 .. n - 1): the index of the
 * first and the weight of the second; false outside. Points a rounding error past the last centre
 * count as on it. */
static bool between(double p, int n, int *i0, double *t) {
    const double eps = 1e-9;
    if (!(p >= -eps && p <= n - 1 + eps)) return false;
    if (p < 0) p = 0;
    if (p > n - 1) p = n - 1;
    *i0 = (int)floor(p);
    if (*i0 >= n - 1) *i0 = n > 1 ? n - 2 : 0;
    *t = p - *i0;
    return true;
}

terra_status terra_cook_raster_window_read(void *user, const terra_cook_grid *g, int64_t x0, int64_t y0, int w, int h,
                                           float *out) {
    const terra_raster *r = ((const terra_cook_raster_window *)user)->raster;
    const size_t W = (size_t)r->width;
    if (g->frame == TERRA_FRAME_LOCAL) {
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++) {
                int64_t x = x0 + i, y = y0 + j;
                out[(size_t)j * w + i] = x >= 0 && y >= 0 && x < r->width && y < r->height
                                             ? r->heights[(size_t)y * W + (size_t)x] : NAN;
            }
        return TERRA_OK;
    }
    /* geographic: the plane's points through the geotransform (pixel corners: centres at +0.5) */
    int *ci = terra_alloc((size_t)w * sizeof *ci + 1);
    double *ct = terra_alloc((size_t)w * sizeof *ct + 1);
    if (!ci || !ct) {
        terra_free(ci), terra_free(ct);
        return terra_fail(TERRA_E_NOMEM, "cook: out of memory for a window of %dx%d samples", w, h);
    }
    for (int i = 0; i < w; i++) {
        double lon = g->origin[0] + (double)(x0 + i) * g->unit[0];
        if (!between((lon - r->geo[0]) / r->geo[1] - 0.5, r->width, &ci[i], &ct[i])) ci[i] = -1;
    }
    for (int j = 0; j < h; j++) {
        double lat = g->origin[1] + (double)(y0 + j) * g->unit[1], b;
        int rj;
        bool in = between((lat - r->geo[3]) / r->geo[5] - 0.5, r->height, &rj, &b);
        for (int i = 0; i < w; i++) {
            float *o = out + (size_t)j * w + i;
            *o = NAN;
            if (!in || ci[i] < 0) continue;
            const float *s = r->heights + (size_t)rj * W + (size_t)ci[i];
            const double a = ct[i];
            /* a sample with no weight is not read (the raster's last row or column, exact hits) */
            double h00 = s[0], h10 = a > 0 ? s[1] : 0, h01 = b > 0 ? s[W] : 0, h11 = a > 0 && b > 0 ? s[W + 1] : 0;
            double v = (1 - a) * (1 - b) * h00 + a * (1 - b) * h10 + (1 - a) * b * h01 + a * b * h11;
            if (v == v) *o = (float)v;
        }
    }
    terra_free(ci), terra_free(ct);
    return TERRA_OK;
}

/* ---- several inputs as one ground ------------------------------------------------------------- */

/* One input as the cook reads it: what it is (from its source, or made from the raster read whole)
 * and, for an opened raster, which of its sources are in use. */
typedef struct layer {
    const terra_cook_input *in;
    uint32_t index;                /* in the desc's order: the manifest's file number */
    terra_raster_info info;
    terra_cook_raster_window mem;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    bool *busy;                    /* source_count flags */
} layer;

typedef struct ground {
    layer *L;                      /* finest first */
    size_t n;
    /* geographic, opened rasters: the plane's samples around the finest tiles (a ring of one) as the
     * warper's pixel-is-point grid; grid point (0, 0) is plane sample (gx, gy), rows going south */
    terra_raster_geo_grid geo;
    int64_t gx, gy;
} ground;

/* What the geotransform of a raster read whole says, as terra_raster_open's info would: lon/lat
 * only for a north-up EPSG:4326 grid (nothing else can be told without its CRS). */
static void info_of(const terra_raster *r, terra_raster_info *I) {
    memset(I, 0, sizeof *I);
    I->width = r->width, I->height = r->height;
    memcpy(I->geo, r->geo, sizeof I->geo);
    I->georeferenced = r->georeferenced;
    I->spacing_x = r->spacing_x, I->spacing_y = r->spacing_y;
    const double *g = r->geo;
    double west = g[0] + 0.5 * g[1], east = g[0] + (r->width - 0.5) * g[1];
    double north = g[3] + 0.5 * g[5], south = g[3] + (r->height - 0.5) * g[5];
    I->has_lonlat = r->georeferenced && g[2] == 0 && g[4] == 0 && g[1] > 0 && g[1] < 10 && g[5] < 0 &&
                    west >= -180.5 && east <= 180.5 && south >= -90.5 && north <= 90.5;
    I->lonlat_bounds[0] = west, I->lonlat_bounds[1] = south, I->lonlat_bounds[2] = east, I->lonlat_bounds[3] = north;
    I->lonlat_step[0] = g[1], I->lonlat_step[1] = -g[5];
}

static int acquire(layer *l) {
    pthread_mutex_lock(&l->lock);
    for (;;) {
        for (int i = 0; i < l->in->source_count; i++)
            if (!l->busy[i]) {
                l->busy[i] = true;
                pthread_mutex_unlock(&l->lock);
                return i;
            }
        pthread_cond_wait(&l->freed, &l->lock);
    }
}

static void release(layer *l, int i) {
    pthread_mutex_lock(&l->lock);
    l->busy[i] = false;
    pthread_cond_signal(&l->freed);
    pthread_mutex_unlock(&l->lock);
}

/* Plane samples from an opened raster: the part of the window inside what the source can give
 * (its own samples in the local frame, the warper's grid in the geographic one) is read, the rest
 * is no-data. */
static terra_status layer_read_source(layer *l, const ground *G, const terra_cook_grid *g, int64_t x0, int64_t y0,
                                      int w, int h, float *out) {
    const bool geo = g->frame == TERRA_FRAME_GEOGRAPHIC;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) out[i] = NAN;
    /* the window in the source's columns and rows (rows go down the image in both frames' grids) */
    int64_t c0 = geo ? x0 - G->gx : x0, r0 = geo ? G->gy - (y0 + h - 1) : y0;
    const int64_t cw = geo ? G->geo.width : l->info.width, ch = geo ? G->geo.height : l->info.height;
    int64_t a0 = c0 < 0 ? 0 : c0, a1 = c0 + w > cw ? cw : c0 + w, b0 = r0 < 0 ? 0 : r0, b1 = r0 + h > ch ? ch : r0 + h;
    if (a0 >= a1 || b0 >= b1) return TERRA_OK;
    const int rw = (int)(a1 - a0), rh = (int)(b1 - b0);
    float *buf = terra_alloc((size_t)rw * (size_t)rh * sizeof *buf);
    if (!buf) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for a window of %dx%d samples", rw, rh);
    const int k = acquire(l);
    terra_raster_source *src = l->in->sources[k];
    terra_status st = geo ? terra_raster_read_geo(src, &G->geo, (int)a0, (int)b0, rw, rh, buf)
                          : terra_raster_read_window(src, (int)a0, (int)b0, rw, rh, buf);
    release(l, k);
    for (int j = 0; st == TERRA_OK && j < rh; j++) {
        /* source row b0 + j is plane row y0 + (b0 + j - r0) locally, y0 + h - 1 - (b0 + j - r0) geographically */
        int64_t pj = geo ? h - 1 - (b0 + j - r0) : b0 + j - r0;
        memcpy(out + (size_t)pj * (size_t)w + (size_t)(a0 - c0), buf + (size_t)j * rw, (size_t)rw * sizeof *buf);
    }
    terra_free(buf);
    return st;
}

/* The ground by the overlap rule (terra_cook_input): the first input in rank order (cmp_rank) with
 * data at each sample; the warper's and terra_cook_raster_window_read's bilinear give NaN where a
 * weighed sample is no-data. */
static terra_status ground_window(void *user, const terra_cook_grid *g, int64_t x0, int64_t y0, int w, int h,
                                  float *out) {
    ground *G = user;
    const size_t n = (size_t)w * (size_t)h;
    float *more = G->n > 1 ? terra_alloc(n * sizeof *more) : NULL;
    if (G->n > 1 && !more) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for a window of %dx%d samples", w, h);
    terra_status st = TERRA_OK;
    for (size_t k = 0; k < G->n && st == TERRA_OK; k++) {
        layer *l = &G->L[k];
        float *to = k ? more : out;
        st = l->in->raster ? terra_cook_raster_window_read(&l->mem, g, x0, y0, w, h, to)
                           : layer_read_source(l, G, g, x0, y0, w, h, to);
        for (size_t i = 0; k && st == TERRA_OK && i < n; i++)
            if (out[i] != out[i]) out[i] = more[i];
    }
    terra_free(more);
    return st;
}

/* ---- stated errors against the sources' own samples -------------------------------------------- */

/* In the geographic frame the plane's samples are the warper's resampling; the promise (terra
 * check) is over the sources' own samples. The pyramid builds each level within its bound on the
 * plane's samples, but the error a tile states (as decoded) is measured on the sources' own when
 * every input lies on a degree grid: each finest tile's rectangle, widened by two of the finest
 * input's samples (and the rim's slack), is the box whose samples are measured; each input's window
 * is its samples over the box and the next one out on every side (so the samples any point of the
 * box weighs are there), and every triangle reaching the tile is scanned over each input's samples
 * inside the box, except those where a higher-ranked input has data (the overlap rule,
 * layer_has_data: those are not the ground). A sample outside the box is another finest tile's to
 * measure; widening by the coarsest input's samples instead made a 1-degree background beside
 * SRTM inputs read two degrees of them around every finest tile. Anything else (the local frame,
 * where plane samples are the source's, or projected inputs) is measured on the plane's samples.
 * Between the sources' samples the plane's bilinear samples bend, so a stated error may pass the
 * level's bound (N44W072 at -e 10: 27.7 m at the finest). */
typedef struct source_measure {
    const ground *G;
    const terra_cook_grid *grid;
    const terra_cook_raster_tiles *plane;
    bool own;                      /* measure on the inputs' own samples */
    double margin;                 /* degrees a finest tile's rectangle is widened by */
} source_measure;

/* Input l's column and row (sample centres) of longitude, latitude: c = (lon - t0) / t1 - 0.5. */
static double layer_col(const layer *l, double lon) { return (lon - l->info.geo[0]) / l->info.geo[1] - 0.5; }
static double layer_row(const layer *l, double lat) { return (lat - l->info.geo[3]) / l->info.geo[5] - 0.5; }

static void source_measure_init(source_measure *M, const ground *G, const terra_cook_grid *g,
                                const terra_cook_raster_tiles *plane) {
    memset(M, 0, sizeof *M);
    M->G = G, M->grid = g, M->plane = plane;
    if (g->frame != TERRA_FRAME_GEOGRAPHIC) return;
    M->margin = INFINITY;
    for (size_t k = 0; k < G->n; k++) {
        const layer *l = &G->L[k];
        const double *t = l->info.geo;
        if (!l->info.has_lonlat || !(l->in->raster || l->info.geographic) || t[2] != 0 || t[4] != 0 || !(t[1] > 0) ||
            !(t[5] < 0))
            return;
        M->margin = fmin(M->margin, 2 * fmax(t[1], -t[5]));
    }
    M->own = true;
}

/* One input's samples around a finest tile: columns c0.., rows r0.., ww x wh. */
typedef struct layer_window {
    int64_t c0, r0;
    int ww, wh;
    float *h;
    size_t cap;
} layer_window;

/* Whether input l is the ground at longitude, latitude as the plane reads it (the warper's bilinear
 * rule, raster.c): inside its sample centres and every sample with a weight there holds data. Its
 * window must hold those samples. */
static bool layer_has_data(const layer *l, const layer_window *w, double lon, double lat) {
    double fx = layer_col(l, lon), fy = layer_row(l, lat);
    const double rx = nearbyint(fx), ry = nearbyint(fy);
    if (fabs(fx - rx) < 1e-6) fx = rx; /* on a sample centre within rounding: that sample alone */
    if (fabs(fy - ry) < 1e-6) fy = ry;
    if (!(fx >= 0 && fx <= l->info.width - 1 && fy >= 0 && fy <= l->info.height - 1)) return false;
    const int64_t i = (int64_t)fx, j = (int64_t)fy;
    const bool tx = fx > (double)i, ty = fy > (double)j;
    for (int64_t b = 0; b <= ty; b++)
        for (int64_t a = 0; a <= tx; a++) {
            const int64_t c = i + a - w->c0, r = j + b - w->r0;
            if (c < 0 || r < 0 || c >= w->ww || r >= w->wh) return false; /* not read: not the ground here */
            const float v = w->h[(size_t)r * (size_t)w->ww + (size_t)c];
            if (v != v) return false;
        }
    return true;
}

/* Reads input l's samples over the degree box (west, south, east, north) into w; an empty window
 * (ww 0) where none lie there. */
static terra_status layer_window_read(layer *l, const double box[4], layer_window *w) {
    const double ca = layer_col(l, box[0]), cb = layer_col(l, box[2]);
    const double ra = layer_row(l, box[3]), rb = layer_row(l, box[1]);
    const int64_t c0 = (int64_t)fmax(0, floor(ca)), c1 = (int64_t)fmin(l->info.width - 1, ceil(cb));
    const int64_t r0 = (int64_t)fmax(0, floor(ra)), r1 = (int64_t)fmin(l->info.height - 1, ceil(rb));
    w->ww = w->wh = 0;
    if (c0 > c1 || r0 > r1) return TERRA_OK;
    const size_t n = (size_t)(c1 - c0 + 1) * (size_t)(r1 - r0 + 1);
    if (n > w->cap) {
        terra_free(w->h);
        w->cap = 0;
        if (!(w->h = terra_alloc(n * sizeof *w->h)))
            return terra_fail(TERRA_E_NOMEM, "cook: out of memory for a window of %zu samples of %s", n, l->in->path);
        w->cap = n;
    }
    w->c0 = c0, w->r0 = r0, w->ww = (int)(c1 - c0 + 1), w->wh = (int)(r1 - r0 + 1);
    if (l->in->raster) {
        const terra_raster *r = l->in->raster;
        for (int j = 0; j < w->wh; j++)
            memcpy(w->h + (size_t)j * w->ww, r->heights + (size_t)(r0 + j) * (size_t)r->width + (size_t)c0,
                   (size_t)w->ww * sizeof *w->h);
        return TERRA_OK;
    }
    const int k = acquire(l);
    terra_status st = terra_raster_read_window(l->in->sources[k], (int)c0, (int)r0, w->ww, w->wh, w->h);
    release(l, k);
    return st;
}

/* terra_cook_decoded_distance (what a decoded tile states) over the sources' own samples where
 * M->own says so, else over the plane's. */
static terra_status source_distance(const source_measure *M, const terra_cook_mesh *mesh, const int32_t *finest,
                                    size_t n, double slack, double *out) {
    if (!M->own) return terra_cook_decoded_distance(M->plane, mesh, finest, n, slack, out);
    const terra_cook_grid *g = M->grid;
    const ground *G = M->G;
    const double S = g->tile_units;
    const size_t nv = mesh->vertex_count;
    double *cr = terra_alloc(2 * nv * G->n * sizeof *cr + 1); /* each input's: the mesh in its columns and rows */
    layer_window *win = terra_calloc(G->n, sizeof *win);
    size_t *start = NULL;
    uint32_t *list = NULL;
    terra_status st = cr && win ? terra_cook_leaf_triangles(mesh, S, finest, n, slack, &start, &list)
                                : terra_fail(TERRA_E_NOMEM, "cook: out of memory measuring a tile");
    for (size_t k = 0; st == TERRA_OK && k < G->n; k++) {
        const layer *l = &G->L[k];
        const double kc = g->unit[0] / l->info.geo[1], kr = g->unit[1] / l->info.geo[5];
        const double oc = layer_col(l, g->origin[0]), orr = layer_row(l, g->origin[1]);
        for (size_t v = 0; v < nv; v++) {
            cr[2 * (k * nv + v)] = oc + kc * mesh->xy[2 * v];
            cr[2 * (k * nv + v) + 1] = orr + kr * mesh->xy[2 * v + 1];
        }
    }
    uint8_t *mark = NULL;
    size_t mark_cap = 0;
    double worst = 0;
    for (size_t i = 0; st == TERRA_OK && i < n; i++) {
        if (start[i] == start[i + 1]) continue;
        /* the finest tile's rectangle in degrees, widened: the box measured here */
        const double x0 = finest[2 * i] * S, y0 = finest[2 * i + 1] * S;
        const double pad = M->margin + slack * fmax(g->unit[0], g->unit[1]);
        const double box[4] = {g->origin[0] + x0 * g->unit[0] - pad, g->origin[1] + y0 * g->unit[1] - pad,
                               g->origin[0] + (x0 + S) * g->unit[0] + pad, g->origin[1] + (y0 + S) * g->unit[1] + pad};
        for (size_t k = 0; st == TERRA_OK && k < G->n; k++) st = layer_window_read(&G->L[k], box, &win[k]);
        /* the lowest-ranked first: the windows of those above are still as read */
        for (size_t k = G->n; st == TERRA_OK && k-- > 0;) {
            const layer *l = &G->L[k];
            layer_window *w = &win[k];
            if (!w->ww) continue;
            const size_t cells = (size_t)w->ww * (size_t)w->wh;
            if (cells > mark_cap) {
                terra_free(mark);
                mark_cap = 0;
                if (!(mark = terra_alloc(cells))) {
                    st = terra_fail(TERRA_E_NOMEM, "cook: out of memory measuring a tile");
                    break;
                }
                mark_cap = cells;
            }
            memset(mark, 0, cells);
            /* the samples outside the box are another finest tile's; those where a higher-ranked input
             * is the ground are not this one's to answer for */
            for (int r = 0; r < w->wh; r++)
                for (int c = 0; c < w->ww; c++) {
                    float *v = &w->h[(size_t)r * w->ww + c];
                    if (*v != *v) continue;
                    const double lon = l->info.geo[0] + (w->c0 + c + 0.5) * l->info.geo[1];
                    const double lat = l->info.geo[3] + (w->r0 + r + 0.5) * l->info.geo[5];
                    if (!(lon >= box[0] && lon <= box[2] && lat >= box[1] && lat <= box[3])) *v = NAN;
                    for (size_t j = 0; j < k && *v == *v; j++)
                        if (layer_has_data(&G->L[j], &win[j], lon, lat)) *v = NAN;
                }
            const double sslack = slack * fmax(fabs(g->unit[0] / l->info.geo[1]), fabs(g->unit[1] / l->info.geo[5]));
            const double *ck = cr + 2 * k * nv;
            for (int pass = 0; pass < 2; pass++) /* under the triangles, then the rim's */
                for (size_t t = start[i]; t < start[i + 1]; t++) {
                    const uint32_t *c = mesh->tri + 3 * (size_t)list[t];
                    const float z[3] = {mesh->z[c[0]], mesh->z[c[1]], mesh->z[c[2]]};
                    const double *a = ck + 2 * (size_t)c[0], *b = ck + 2 * (size_t)c[1], *d = ck + 2 * (size_t)c[2];
                    worst = pass ? cook_scan_rim(a, b, d, z, w->h, mark, w->c0, w->r0, w->ww, w->wh, sslack, worst)
                                 : cook_scan_triangle(a, b, d, z, w->h, w->c0, w->r0, w->ww, w->wh, 0, worst, INFINITY,
                                                      mark);
                }
        }
    }
    *out = worst;
    terra_free(mark);
    for (size_t k = 0; win && k < G->n; k++) terra_free(win[k].h);
    terra_free(win);
    terra_free(cr);
    terra_free(start);
    terra_free(list);
    return st;
}

/* ---- the plane --------------------------------------------------------------------------------- */

/* The finer sample step of a geographic input, degrees. */
static double layer_step(const layer *l) { return fmin(l->info.lonlat_step[0], l->info.lonlat_step[1]); }

/* An input the geographic frame can place: georeferenced on the Earth, with a way to EPSG:4326. */
static terra_status check_geographic(const layer *l) {
    if (l->info.off_earth)
        return terra_fail(TERRA_E_UNSUPPORTED,
                          "cook: %s: its coordinate system is on ellipsoid '%s' (semi-major axis %.0f m), not the Earth's: "
                          "geographic tiles are EPSG:4326 on WGS 84; --frame local cooks it in metres on that body",
                          l->in->path, l->info.ellipsoid, l->info.semi_major_m);
    if (!l->info.georeferenced)
        return terra_fail(TERRA_E_INVALID, "cook: %s has no georeference: it cooks in the local frame only", l->in->path);
    if (!l->info.has_lonlat)
        return terra_fail(TERRA_E_UNSUPPORTED,
                          l->in->raster ? "cook: %s: read whole, only a north-up EPSG:4326 raster is placed on the globe "
                                          "(its geotransform says otherwise: corner %g, %g); open it for windowed reads"
                                        : "cook: %s: its coordinate system does not go to EPSG:4326 (corner %g, %g)",
                          l->in->path, l->info.geo[0], l->info.geo[3]);
    return TERRA_OK;
}

static int cmp_pair(const void *a, const void *b) {
    const int32_t *p = a, *q = b;
    return p[1] != q[1] ? (p[1] > q[1]) - (p[1] < q[1]) : (p[0] > q[0]) - (p[0] < q[0]);
}

typedef struct plan {
    terra_cook_grid grid;
    double bounds[4];
    int32_t *finest; /* tx, ty pairs */
    size_t finest_count;
} plan;

/* Chooses the plane and the finest tiles that may hold ground. */
static terra_status make_plan(const terra_cook_desc *d, const ground *G, bool geo, plan *P) {
    const int S = d->tile_size ? d->tile_size : DEFAULT_TILE;
    terra_cook_grid *g = &P->grid;
    g->frame = geo ? TERRA_FRAME_GEOGRAPHIC : TERRA_FRAME_LOCAL;
    g->tile_units = S;
    int64_t box[4]; /* tile range tx0, ty0, tx1, ty1 of each input, accumulated into the list */
    size_t cap = 0;
    if (!geo) {
        const terra_raster_info *r = &G->L[0].info;
        g->unit[0] = r->spacing_x, g->unit[1] = r->spacing_y;
        const int64_t nx = (r->width - 2) / S + 1, ny = (r->height - 2) / S + 1;
        int depth = 0;
        while (((int64_t)1 << depth) < (nx > ny ? nx : ny)) depth++;
        if (d->levels) depth = d->levels - 1;
        g->depth = depth;
        P->bounds[0] = 0, P->bounds[1] = 0;
        P->bounds[2] = (r->width - 1) * r->spacing_x, P->bounds[3] = (r->height - 1) * r->spacing_y;
        cap = (size_t)(nx * ny);
        P->finest = terra_alloc(2 * cap * sizeof *P->finest + 1);
        if (!P->finest) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for %zu tiles", cap);
        for (int32_t ty = 0; ty < ny; ty++)
            for (int32_t tx = 0; tx < nx; tx++)
                P->finest[2 * P->finest_count] = tx, P->finest[2 * P->finest_count++ + 1] = ty;
        return TERRA_OK;
    }
    if (S & (S - 1))
        return terra_fail(TERRA_E_INVALID, "cook: geographic tiles need a power-of-two tile size, not %d", S);
    /* the finest zoom whose samples are at least as fine as the finest input's */
    double step = INFINITY;
    for (size_t k = 0; k < G->n; k++) step = fmin(step, layer_step(&G->L[k]));
    int z = 0;
    while (z < MAX_ZOOM && 180.0 / ldexp(S, z) > step) z++;
    g->depth = z;
    g->origin[0] = -180, g->origin[1] = -90;
    g->unit[0] = g->unit[1] = 180.0 / ldexp(S, z);
    P->bounds[0] = P->bounds[1] = INFINITY, P->bounds[2] = P->bounds[3] = -INFINITY;
    for (size_t k = 0; k < G->n; k++) {
        const double *lb = G->L[k].info.lonlat_bounds, west = lb[0], south = lb[1], east = lb[2], north = lb[3];
        P->bounds[0] = fmin(P->bounds[0], west), P->bounds[1] = fmin(P->bounds[1], south);
        P->bounds[2] = fmax(P->bounds[2], east), P->bounds[3] = fmax(P->bounds[3], north);
        const double side = S * g->unit[0];
        box[0] = (int64_t)floor((west + 180) / side), box[2] = (int64_t)ceil((east + 180) / side) - 1;
        box[1] = (int64_t)floor((south + 90) / side), box[3] = (int64_t)ceil((north + 90) / side) - 1;
        if (box[2] < box[0]) box[2] = box[0];
        if (box[3] < box[1]) box[3] = box[1];
        size_t more = (size_t)((box[2] - box[0] + 1) * (box[3] - box[1] + 1));
        int32_t *f = terra_realloc(P->finest, 2 * (cap + more) * sizeof *f + 1);
        if (!f) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for %zu tiles", cap + more);
        P->finest = f;
        cap += more;
        for (int64_t ty = box[1]; ty <= box[3]; ty++)
            for (int64_t tx = box[0]; tx <= box[2]; tx++)
                f[2 * P->finest_count] = (int32_t)tx, f[2 * P->finest_count++ + 1] = (int32_t)ty;
    }
    /* overlapping inputs name a tile twice: once is enough */
    qsort(P->finest, P->finest_count, 2 * sizeof *P->finest, cmp_pair);
    size_t u = 0;
    for (size_t i = 0; i < P->finest_count; i++)
        if (!u || cmp_pair(P->finest + 2 * i, P->finest + 2 * (u - 1))) {
            P->finest[2 * u] = P->finest[2 * i], P->finest[2 * u + 1] = P->finest[2 * i + 1];
            u++;
        }
    P->finest_count = u;
    return TERRA_OK;
}

/* A scenery's plane: metres from the scenery's origin (plane x = scenery x, y = scenery z), tiles of
 * S metres, the levels up to the first that holds everything in one tile (or as asked). */
static terra_status plan_scenery(const terra_cook_desc *d, const terra_scenery *sc, plan *P, terra_scenery_cut **cut) {
    terra_cook_grid *g = &P->grid;
    g->frame = TERRA_FRAME_LOCAL;
    g->unit[0] = g->unit[1] = 1;
    g->tile_units = d->tile_size ? d->tile_size : DEFAULT_TILE;
    terra_scenery_cut_desc cd = {.grid = g};
    terra_status st = terra_scenery_cut_build(sc, &cd, cut);
    if (st != TERRA_OK) return st;
    size_t n;
    const int32_t *t = terra_scenery_cut_tiles(*cut, &n);
    P->finest = terra_alloc(2 * n * sizeof *P->finest + 1);
    if (!P->finest) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for %zu tiles", n);
    memcpy(P->finest, t, 2 * n * sizeof *P->finest);
    P->finest_count = n;
    int64_t x0 = INT64_MAX, y0 = INT64_MAX, x1 = INT64_MIN, y1 = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        x0 = t[2 * i] < x0 ? t[2 * i] : x0, x1 = t[2 * i] > x1 ? t[2 * i] : x1;
        y0 = t[2 * i + 1] < y0 ? t[2 * i + 1] : y0, y1 = t[2 * i + 1] > y1 ? t[2 * i + 1] : y1;
    }
    int depth = 0;
    while (depth < 30 && n && (x0 >> depth != x1 >> depth || y0 >> depth != y1 >> depth)) depth++;
    g->depth = d->levels ? d->levels - 1 : depth;
    P->bounds[0] = P->bounds[1] = INFINITY, P->bounds[2] = P->bounds[3] = -INFINITY;
    for (size_t i = 0; i < sc->vertex_count; i++) {
        const double *p = sc->position + 3 * i;
        P->bounds[0] = fmin(P->bounds[0], p[0]), P->bounds[2] = fmax(P->bounds[2], p[0]);
        P->bounds[1] = fmin(P->bounds[1], p[2]), P->bounds[3] = fmax(P->bounds[3], p[2]);
    }
    return TERRA_OK;
}

/* ---- writing tiles ------------------------------------------------------------------------------ */

/* The decoded tile q put in the order the packed codec packs smallest (terra_tile_codec_order: the
 * same surface), and its bytes again in that order. */
static terra_status codec_order(terra_qmesh *q, uint8_t **raw, size_t *n) {
    terra_status st = terra_tile_codec_order(q);
    size_t cap = st == TERRA_OK ? terra_qmesh_encoded_size(q) : 0, got = 0;
    uint8_t *buf = cap ? terra_alloc(cap) : NULL;
    if (st == TERRA_OK && !buf) st = terra_fail(TERRA_E_NOMEM, "cook: out of memory ordering a tile");
    if (st == TERRA_OK) st = terra_qmesh_encode(q, buf, cap, &got);
    if (st == TERRA_OK) {
        terra_free(*raw);
        *raw = buf, *n = got;
    } else {
        terra_free(buf);
    }
    return st;
}

typedef struct emitter {
    const terra_cook_grid *grid;
    terra_archive_writer *w;
    terra_cook_report *rep;
    terra_cook_cache *cache;
    bool packed;                   /* tiles go into the archive packed: put them in the codec's order */
    terra_cook_finest_fn make;     /* the sources' finest tiles: a raster's, or a scenery's cut */
    void *make_user;
    source_measure *samples;       /* rasters: what stated errors are measured on */
    pthread_mutex_t lock;
    /* a round of a split cook: tiles go to their root's part (sinks, under lock), not to w */
    terra_cook_split *split;
    const terra_cook_split_round *round;
    terra_compression compression;
    int compression_level;
    struct sink *sinks;
    size_t sink_count, sink_cap;
} emitter;

/* The tiles of one root's subtree built so far in a round. */
typedef struct sink {
    int32_t tx, ty;
    terra_cook_part_tile *tiles;   /* data owned */
    size_t count, cap;
} sink;

/* A finest tile: the mesh the cache kept when it may be reused, else made from the samples; kept
 * for the next cook either way (a failure to keep only means the next cook meshes it again). */
static terra_status finest_tile(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error) {
    emitter *E = user;
    terra_status st = E->cache ? terra_cook_cache_load_finest(E->cache, tx, ty, out, error) : TERRA_E_NOT_FOUND;
    if (st == TERRA_OK) {
        pthread_mutex_lock(&E->lock);
        E->rep->finest_reused++;
        pthread_mutex_unlock(&E->lock);
    } else if ((st = E->make(E->make_user, tx, ty, out, error)) != TERRA_OK) {
        return st;
    }
    if (E->cache) {
        st = terra_cook_cache_keep_finest(E->cache, tx, ty, out, *error);
        if (st != TERRA_OK && st != TERRA_E_IO && st != TERRA_E_NOMEM) return st;
    }
    return TERRA_OK;
}

/* The stated error of the tile as a client decodes it (u, v and heights on 16-bit steps). Rasters:
 * its distance to the samples its decoded triangles cover (inside or on one: the height a client
 * draws there) and to those on its rim (terra_cook_decoded_distance; never a triangle's plane beyond
 * it, where a sliver's tilts without bound). Meshes: the
 * mesh's error plus the largest vertical distance between the decoded and the unquantized surfaces,
 * both ways round (their difference peaks at a vertex of either or a crossing of their edges). */
static terra_status decoded_error(const emitter *E, const terra_cook_tile *t, const terra_qmesh *q, double *out) {
    double r[4];
    terra_cook_tile_rect(E->grid, t->depth, t->tx, t->ty, r);
    terra_cook_mesh m = {0};
    terra_status st = terra_cook_mesh_reserve(&m, q->vertex_count, q->triangle_count, false, false);
    if (st == TERRA_OK) {
        const double lo = q->header.min_height, step = ((double)q->header.max_height - lo) / 32767.0;
        for (uint32_t i = 0; i < q->vertex_count; i++) {
            m.xy[2 * i] = r[0] + (r[2] - r[0]) * q->u[i] / 32767.0;
            m.xy[2 * i + 1] = r[1] + (r[3] - r[1]) * q->v[i] / 32767.0;
            m.z[i] = (float)(lo + step * q->h[i]);
        }
        memcpy(m.tri, q->indices, 3 * (size_t)q->triangle_count * sizeof *m.tri);
        m.vertex_count = q->vertex_count, m.triangle_count = q->triangle_count;
        const terra_cook_mesh *dec = &m, *mine = t->mesh;
        /* the rim: samples quantization may have moved it off, up to half a step along each axis */
        if (E->samples)
            st = source_distance(E->samples, &m, t->finest, t->finest_count,
                                 sqrt(0.5) * fmax(r[2] - r[0], r[3] - r[1]) / 32767.0, out);
        else
            *out = t->geometric_error + fmax(terra_cook_vertical_distance(&m, &mine, 1, NULL),
                                             terra_cook_vertical_distance(t->mesh, &dec, 1, NULL));
    }
    terra_cook_mesh_free(&m);
    return st;
}

/* The most samples a side of a coarser tile's ground the simplifier holds: 16 M floats, 64 MiB a
 * worker; wider ground is weighed on every 2nd, 4th... sample and measured window by window. */
#define COARSE_WINDOW_MAX 4097

/* ---- a split cook's parts ------------------------------------------------------------------------ */

static int32_t floor_shift(int32_t v, int d) { return (int32_t)floor(ldexp((double)v, -d)); }

/* The part of a round's root: the cook's fingerprint, the round's depths, the root. */
static terra_cook_part_key part_key(const emitter *E, int bottom, int top, int32_t tx, int32_t ty) {
    return (terra_cook_part_key){.fingerprint = E->split->fingerprint, .bottom = bottom, .depth = top, .tx = tx, .ty = ty};
}

/* Its file: "BOTTOM-DEPTH-TX-TY.part" in the parts' folder. */
static char *part_path(const emitter *E, const terra_cook_part_key *k) {
    const size_t n = strlen(E->split->parts) + 64;
    char *p = terra_alloc(n);
    if (p) snprintf(p, n, "%s/%d-%d-%d-%d.part", E->split->parts, k->bottom, k->depth, (int)k->tx, (int)k->ty);
    return p;
}

/* The part `want` from its file, read whole and decoded (*bytes keeps the tiles' data: terra_free
 * it). TERRA_E_NOT_FOUND when it is not there, when another cook made it (another fingerprint) and
 * when it holds another root's part than its name gives (renamed, copied or swapped by hand: taken,
 * it would come back as the wrong root; `rebuild`: a warning says it is built again). */
static terra_status part_read(const char *path, const terra_cook_part_key *want, bool rebuild, uint8_t **bytes,
                              terra_cook_part *out) {
    *bytes = NULL;
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: %s", path, strerror(errno));
    terra_status st = TERRA_OK;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *b = n >= 0 ? terra_alloc((size_t)n + 1) : NULL;
    if (n < 0) st = terra_fail(TERRA_E_IO, "%s: cannot tell its size: %s", path, strerror(errno));
    else if (!b) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for %ld bytes", path, n);
    else if (fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, (size_t)n, f) != (size_t)n)
        st = terra_fail(TERRA_E_IO, "%s: read failed", path);
    fclose(f);
    if (st == TERRA_OK && (st = terra_cook_part_decode(b, (size_t)n, out)) != TERRA_OK)
        st = terra_fail(st, "%s: %s", path, terra_last_error());
    if (st == TERRA_OK && out->fingerprint != want->fingerprint) {
        terra_cook_part_free(out);
        st = terra_fail(TERRA_E_NOT_FOUND, "%s: made by another cook (other inputs or options)", path);
    } else if (st == TERRA_OK && (out->bottom != want->bottom || out->depth != want->depth || out->root.tx != want->tx ||
                                  out->root.ty != want->ty)) {
        st = terra_fail(TERRA_E_NOT_FOUND,
                        "%s holds the part of root %d/%d,%d built from depth %d, not the one its name gives (root "
                        "%d/%d,%d from depth %d): renamed, copied or swapped from another part's file",
                        path, out->depth, (int)out->root.tx, (int)out->root.ty, out->bottom, want->depth, (int)want->tx,
                        (int)want->ty, want->bottom);
        terra_cook_part_free(out);
        if (rebuild) terra_log(TERRA_LOG_WARN, "cook: %s: built again", terra_last_error());
    }
    if (st != TERRA_OK) terra_free(b), b = NULL;
    *bytes = b;
    return st;
}

static terra_status sink_add(emitter *E, const terra_cook_tile *t, terra_tile_key key, const uint8_t *raw, size_t n,
                             const terra_archive_tile_info *info, double quant) {
    uint8_t *stored;
    size_t size;
    terra_compression c;
    terra_status st = terra_archive_store_tile(E->compression, E->compression_level, raw, n, &stored, &size, &c);
    if (st != TERRA_OK) return st;
    const int up = E->round->top - t->depth;
    const int32_t rx = floor_shift(t->tx, up), ry = floor_shift(t->ty, up);
    terra_cook_part_tile pt = {.entry = {.key = key, .size = (uint32_t)size, .raw_size = (uint32_t)n, .compression = (uint8_t)c,
                                         .geometric_error = info->geometric_error, .longest_edge = info->longest_edge,
                                         .min_height = info->min_height, .max_height = info->max_height},
                               .data = stored, .vertices = t->mesh->vertex_count, .triangles = t->mesh->triangle_count,
                               .quantization = (float)quant};
    pthread_mutex_lock(&E->lock);
    sink *k = NULL;
    for (size_t i = 0; i < E->sink_count && !k; i++)
        if (E->sinks[i].tx == rx && E->sinks[i].ty == ry) k = &E->sinks[i];
    if (!k && E->sink_count == E->sink_cap) {
        size_t cap = E->sink_cap ? 2 * E->sink_cap : 16;
        sink *ns = terra_realloc(E->sinks, cap * sizeof *ns);
        if (ns) E->sinks = ns, E->sink_cap = cap;
    }
    if (!k && E->sink_count < E->sink_cap) {
        k = &E->sinks[E->sink_count++];
        *k = (sink){.tx = rx, .ty = ry};
    }
    if (k && k->count == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 16;
        terra_cook_part_tile *nt = terra_realloc(k->tiles, cap * sizeof *nt);
        if (nt) k->tiles = nt, k->cap = cap;
    }
    const bool ok = k && k->count < k->cap;
    if (ok) k->tiles[k->count++] = pt;
    pthread_mutex_unlock(&E->lock);
    if (ok) return TERRA_OK;
    terra_free(stored);
    return terra_fail(TERRA_E_NOMEM, "cook: out of memory holding a part's tiles");
}

static void sink_free(sink *k) {
    for (size_t i = 0; i < k->count; i++) terra_free((void *)k->tiles[i].data);
    terra_free(k->tiles);
}

/* The roots this process builds in the round: its own, unless their part is already there. */
static bool part_want(void *user, int32_t tx, int32_t ty) {
    emitter *E = user;
    const terra_cook_split_round *R = E->round;
    size_t i = 0;
    while (i < R->root_count && (R->roots[2 * i] != tx || R->roots[2 * i + 1] != ty)) i++;
    if (i == R->root_count || R->owner[i] != E->split->rank) return false;
    const terra_cook_part_key k = part_key(E, R->bottom, R->top, tx, ty);
    char *path = part_path(E, &k);
    uint8_t *bytes = NULL;
    terra_cook_part p;
    const bool have = path && part_read(path, &k, true, &bytes, &p) == TERRA_OK;
    if (have) {
        terra_cook_part_free(&p);
        E->split->parts_reused++; /* one thread: the pyramid asks before its workers start */
    }
    terra_free(bytes);
    terra_free(path);
    return !have;
}

/* A root of the round below (or of the last round, for the levels over them), from its part. */
static terra_status part_load(void *user, int32_t tx, int32_t ty, terra_cook_root *out) {
    emitter *E = user;
    const terra_cook_split_plan *P = &E->split->plan;
    const int depth = E->round ? E->round->bottom : P->top_bottom;
    int r = 0;
    while (r < P->round_count && P->round[r].top != depth) r++;
    if (r == P->round_count) return terra_fail(TERRA_E_INVALID, "cook: no round ends at depth %d", depth);
    const terra_cook_part_key k = part_key(E, P->round[r].bottom, depth, tx, ty);
    char *path = part_path(E, &k);
    if (!path) return terra_fail(TERRA_E_NOMEM, "cook: out of memory");
    uint8_t *bytes;
    terra_cook_part p;
    terra_status st = part_read(path, &k, false, &bytes, &p);
    if (st == TERRA_E_NOT_FOUND) st = terra_fail(st, "cook: the part of root %d/%d,%d is missing: %s", depth, (int)tx, (int)ty,
                                                 terra_last_error());
    terra_free(path);
    if (st != TERRA_OK) return st;
    *out = p.root;
    memset(&p.root, 0, sizeof p.root);
    /* what the root's own tile in the part states, for its parent (terra_cook_tile.stated) */
    const terra_tile_key key = terra_cook_key(E->grid, depth, tx, ty);
    out->stated = 0;
    for (size_t i = 0; i < p.tile_count; i++)
        if (p.tiles[i].entry.key == key) out->stated = p.tiles[i].entry.geometric_error;
    terra_cook_part_free(&p);
    terra_free(bytes);
    return TERRA_OK;
}

/* A root built: its subtree's tiles and the root itself into its part file (renamed into place). */
static terra_status part_done(void *user, const terra_cook_root *root) {
    emitter *E = user;
    const terra_cook_split_round *R = E->round;
    sink k = {.tx = root->tx, .ty = root->ty};
    pthread_mutex_lock(&E->lock);
    for (size_t i = 0; i < E->sink_count; i++)
        if (E->sinks[i].tx == root->tx && E->sinks[i].ty == root->ty) {
            k = E->sinks[i];
            E->sinks[i] = E->sinks[--E->sink_count];
            break;
        }
    pthread_mutex_unlock(&E->lock);
    terra_cook_part p = {.fingerprint = E->split->fingerprint, .bottom = R->bottom, .depth = R->top, .root = *root,
                         .tile_count = k.count, .tiles = k.tiles};
    uint8_t *bytes = NULL;
    size_t n = 0;
    const terra_cook_part_key key = part_key(E, R->bottom, R->top, root->tx, root->ty);
    char *path = part_path(E, &key), *tmp = NULL;
    void *fv = NULL;
    terra_status st = path ? terra_cook_part_encode(&p, &bytes, &n) : terra_fail(TERRA_E_NOMEM, "cook: out of memory");
    sink_free(&k);
    if (st == TERRA_OK) st = terra_io_open_temp(path, &tmp, &fv);
    if (st == TERRA_OK) {
        FILE *f = fv;
        const bool ok = fwrite(bytes, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
        if (fclose(f) != 0 || !ok) {
            st = terra_fail(TERRA_E_IO, "%s: write failed: %s", path, strerror(errno));
            terra_io_abort(tmp);
        } else {
            st = terra_io_commit(tmp, path);
        }
    }
    terra_free(bytes);
    terra_free(path);
    if (st != TERRA_OK) return st;
    pthread_mutex_lock(&E->lock);
    E->split->parts_built++;
    const bool die = E->split->die_after && E->split->die_after(E->split->die_user);
    pthread_mutex_unlock(&E->lock);
    if (die) _exit(3);
    return TERRA_OK;
}

/* MERGE: every part's tiles into the archive, and into the report. */
static terra_status merge_parts(emitter *E) {
    const terra_cook_split_plan *P = &E->split->plan;
    terra_status st = TERRA_OK;
    for (int r = 0; r < P->round_count && st == TERRA_OK; r++) {
        const terra_cook_split_round *R = &P->round[r];
        for (size_t i = 0; i < R->root_count && st == TERRA_OK; i++) {
            const terra_cook_part_key k = part_key(E, R->bottom, R->top, R->roots[2 * i], R->roots[2 * i + 1]);
            char *path = part_path(E, &k);
            uint8_t *bytes = NULL;
            terra_cook_part p;
            st = path ? part_read(path, &k, false, &bytes, &p) : terra_fail(TERRA_E_NOMEM, "cook: out of memory");
            if (st == TERRA_E_NOT_FOUND) st = terra_fail(st, "cook: a part is missing: %s", terra_last_error());
            terra_free(path);
            for (size_t t = 0; st == TERRA_OK && t < p.tile_count; t++) {
                const terra_archive_entry *e = &p.tiles[t].entry;
                const terra_archive_tile_info info = {e->geometric_error, e->longest_edge, e->min_height, e->max_height};
                int d;
                int32_t tx, ty;
                if (!terra_cook_key_tile(E->grid, e->key, &d, &tx, &ty)) {
                    st = terra_fail(TERRA_E_CORRUPT, "cook: a part holds a tile off the grid");
                    break;
                }
                st = terra_archive_writer_add_stored(E->w, e->key, p.tiles[t].data, e->size, e->raw_size,
                                                     (terra_compression)e->compression, &info);
                E->rep->tiles++;
                E->rep->level[d].tiles++;
                E->rep->level[d].vertices += p.tiles[t].vertices;
                E->rep->level[d].triangles += p.tiles[t].triangles;
                E->rep->level[d].max_error = fmax(E->rep->level[d].max_error, e->geometric_error - p.tiles[t].quantization);
                E->rep->level[d].max_quantization = fmax(E->rep->level[d].max_quantization, p.tiles[t].quantization);
                E->rep->level[d].max_stated = fmax(E->rep->level[d].max_stated, e->geometric_error);
            }
            terra_cook_part_free(&p);
            terra_free(bytes);
        }
    }
    return st;
}

static terra_status emit_tile(void *user, const terra_cook_tile *t) {
    emitter *E = user;
    if (t->mesh->triangle_count == 0) return TERRA_OK; /* no ground here: no tile */
    const terra_tile_key key = terra_cook_key(E->grid, t->depth, t->tx, t->ty);
    const bool reuse = E->cache && terra_cook_cache_reusable(E->cache, key);
    terra_status st;
    double quant = 0, stated_d = 0;
    if (reuse) {
        st = terra_cook_cache_copy_tile(E->cache, key, E->w);
        if (st == TERRA_OK) st = terra_cook_cache_stated_error(E->cache, key, t->stated);
    } else {
        uint8_t *raw;
        size_t n;
        if ((st = terra_cook_encode(E->grid, t, &raw, &n)) != TERRA_OK) return st;
        /* decoded once: reordered for the packed codec, then measured as a client decodes it */
        terra_qmesh q;
        if ((st = terra_qmesh_decode(raw, n, NULL, &q)) != TERRA_OK) {
            terra_free(raw);
            return st;
        }
        if (E->packed) st = codec_order(&q, &raw, &n);
        if (st == TERRA_OK) st = decoded_error(E, t, &q, &stated_d);
        terra_qmesh_free(&q);
        /* never below a child's (terra_cook_tile), rounded up into the float the index holds: never
         * under what was measured */
        stated_d = fmax(stated_d, t->children_stated);
        float stated = (float)stated_d;
        if ((double)stated < stated_d) stated = nextafterf(stated, INFINITY);
        *t->stated = stated;
        quant = fmax(0, stated_d - t->geometric_error);
        terra_archive_tile_info info = {stated, (float)t->longest_edge, (float)t->min_height, (float)t->max_height};
        if (st == TERRA_OK) st = E->round ? sink_add(E, t, key, raw, n, &info, quant) : terra_archive_writer_add(E->w, key, raw, n, &info);
        terra_free(raw);
    }
    if (st != TERRA_OK) return st;
    pthread_mutex_lock(&E->lock);
    E->rep->tiles++;
    E->rep->tiles_reused += reuse;
    E->rep->level[t->depth].tiles++;
    E->rep->level[t->depth].vertices += t->mesh->vertex_count;
    E->rep->level[t->depth].triangles += t->mesh->triangle_count;
    E->rep->level[t->depth].max_error = fmax(E->rep->level[t->depth].max_error, t->geometric_error);
    E->rep->level[t->depth].max_quantization = fmax(E->rep->level[t->depth].max_quantization, quant);
    E->rep->level[t->depth].max_stated = fmax(E->rep->level[t->depth].max_stated, *t->stated);
    pthread_mutex_unlock(&E->lock);
    return TERRA_OK;
}

/* A scenery in the metadata: its ground layers (the material table the tiles' ids index), what was
 * left out and why, the files it names, the triangles dropped. */
static void add_scenery(cJSON *o, const terra_scenery *sc) {
    cJSON_AddStringToObject(o, "kind", "scenery");
    cJSON_AddNumberToObject(o, "triangles", (double)sc->triangle_count);
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (size_t i = 0; i < sc->layer_count; i++) {
        const terra_scenery_layer *L = &sc->layers[i];
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "name", L->name ? L->name : "");
        double tint[3] = {L->tint[0], L->tint[1], L->tint[2]};
        cJSON_AddItemToObject(l, "tint", cJSON_CreateDoubleArray(tint, 3));
        cJSON_AddNumberToObject(l, "metres_per_repeat", L->metres_per_repeat);
        cJSON_AddNumberToObject(l, "triangles", (double)L->triangles);
        cJSON_AddItemToArray(layers, l);
    }
    cJSON *out = cJSON_AddArrayToObject(o, "left_out");
    for (size_t i = 0; i < sc->left_out_count; i++) {
        const terra_scenery_left_out *L = &sc->left_out[i];
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "node", L->name ? L->name : "");
        cJSON_AddStringToObject(l, "reason", L->reason == TERRA_SCENERY_OBJECT ? "object" : "alpha");
        cJSON_AddNumberToObject(l, "triangles", (double)L->triangles);
        cJSON_AddItemToArray(out, l);
    }
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    for (size_t i = 0; i < sc->file_count; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", sc->files[i].path);
        cJSON_AddBoolToObject(f, "present", sc->files[i].present);
        cJSON_AddItemToArray(files, f);
    }
    cJSON_AddNumberToObject(o, "degenerate", (double)sc->degenerate);
    cJSON_AddNumberToObject(o, "duplicate", (double)sc->duplicate);
    cJSON_AddNumberToObject(o, "not_triangles", (double)sc->not_triangles);
    cJSON_AddNumberToObject(o, "out_of_range", (double)sc->out_of_range);
}

/* What the archive's metadata says of its source: the inputs, how they were read, and the plane. */
static char *source_json(const terra_cook_desc *d, const ground *G, const plan *P, double max_error) {
    cJSON *root = cJSON_CreateObject(), *ins = cJSON_AddArrayToObject(root, "inputs");
    cJSON_AddStringToObject(root, "kind", "cook");
    for (size_t k = 0; k < G->n; k++) {
        const terra_raster_info *I = &G->L[k].info;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", G->L[k].in->path ? G->L[k].in->path : "");
        if (G->L[k].in->scenery) {
            add_scenery(o, G->L[k].in->scenery);
            cJSON_AddItemToArray(ins, o);
            continue;
        }
        cJSON_AddNumberToObject(o, "width", I->width);
        cJSON_AddNumberToObject(o, "height", I->height);
        cJSON_AddBoolToObject(o, "georeferenced", I->georeferenced);
        cJSON_AddItemToObject(o, "geotransform", cJSON_CreateDoubleArray(I->geo, 6));
        if (I->epsg) cJSON_AddNumberToObject(o, "epsg", I->epsg);
        double sp[2] = {I->spacing_x, I->spacing_y};
        cJSON_AddItemToObject(o, "spacing_m", cJSON_CreateDoubleArray(sp, 2));
        cJSON_AddItemToArray(ins, o);
    }
    cJSON *opts = d->options_json ? terra_json_parse(d->options_json) : NULL;
    if (opts) cJSON_AddItemToObject(root, "options", opts);
    const terra_cook_grid *g = &P->grid;
    const bool geo = g->frame == TERRA_FRAME_GEOGRAPHIC;
    cJSON *c = cJSON_AddObjectToObject(root, "cook");
    cJSON_AddNumberToObject(c, "format", 1);
    cJSON_AddStringToObject(c, "frame", terra_frame_name(g->frame));
    cJSON_AddNumberToObject(c, "max_error", max_error);
    cJSON_AddNumberToObject(c, "tile_units", g->tile_units);
    cJSON_AddItemToObject(c, "origin", cJSON_CreateDoubleArray(g->origin, 2));
    cJSON_AddItemToObject(c, "unit", cJSON_CreateDoubleArray(g->unit, 2));
    cJSON_AddNumberToObject(c, "depth", g->depth);
    if (geo) cJSON_AddNumberToObject(c, "zoom_finest", g->depth);
    cJSON_AddStringToObject(c, "finest", G->L[0].in->scenery ? "the scenery's triangles cut along the grid and welded"
                                                             : "greedy-insertion TIN per tile, edge vertices by 1-D insertion");
    cJSON_AddStringToObject(c, "coarser", "four children merged, edge-collapsed, outer border kept");
    cJSON_AddStringToObject(c, "normals", G->L[0].in->scenery ? "the welded soup's, area-weighted"
                                                              : "central differences of the samples");
    cJSON_AddStringToObject(c, "resampling", !geo ? "none" : G->L[0].in->raster ? "bilinear by the geotransform"
                                                                          : "bilinear, GDAL's warp transformer");
    if (G->n > 1)
        cJSON_AddStringToObject(c, "overlap", "inputs in this order: the first with data at a place (inside its sample "
                                              "centres, every sample weighed there a height) is the ground there");
    const double hb[2] = {TERRA_COOK_MIN_HEIGHT, TERRA_COOK_MAX_HEIGHT};
    if (!G->L[0].in->scenery) cJSON_AddItemToObject(c, "heights", cJSON_CreateDoubleArray(hb, 2));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* The cache's plan: each finest tile with the inputs whose samples it reads (their sample centres'
 * box meets the tile's, its ring included), then which tiles the previous archive can give. */
static terra_status plan_cache(terra_cook_cache *c, const ground *G, const plan *P) {
    terra_status st = terra_cook_cache_begin(c, &P->grid, "");
    size_t most = G->n;
    for (size_t j = 0; j < G->n; j++) most += G->L[j].in->named_count;
    uint32_t *ins = terra_alloc(most * sizeof *ins + 1);
    if (!ins) return terra_fail(TERRA_E_NOMEM, "cook: out of memory");
    const terra_cook_grid *g = &P->grid;
    for (size_t i = 0; st == TERRA_OK && i < P->finest_count; i++) {
        double r[4];
        terra_cook_tile_rect(g, 0, P->finest[2 * i], P->finest[2 * i + 1], r);
        const double w = g->origin[0] + (r[0] - 1) * g->unit[0], e = g->origin[0] + (r[2] + 1) * g->unit[0];
        const double s = g->origin[1] + (r[1] - 1) * g->unit[1], n = g->origin[1] + (r[3] + 1) * g->unit[1];
        size_t k = 0;
        for (size_t j = 0; j < G->n; j++) {
            const double *b = G->L[j].info.lonlat_bounds;
            if (g->frame == TERRA_FRAME_GEOGRAPHIC && !(b[0] <= e && b[2] >= w && b[1] <= n && b[3] >= s)) continue;
            ins[k++] = G->L[j].index;
            for (size_t f = 0; f < G->L[j].in->named_count; f++) ins[k++] = G->L[j].in->named[f];
        }
        st = terra_cook_cache_set_finest(c, P->finest[2 * i], P->finest[2 * i + 1], ins, k);
    }
    terra_free(ins);
    return st == TERRA_OK ? terra_cook_cache_plan(c, NULL, NULL) : st;
}

/* The overlap rule's ranking: the finer input first (the smaller sample, in square degrees), then
 * the earlier in the desc's order (the command line's). */
static int cmp_rank(const void *a, const void *b) {
    const layer *p = a, *q = b;
    const double x = p->info.lonlat_step[0] * p->info.lonlat_step[1], y = q->info.lonlat_step[0] * q->info.lonlat_step[1];
    return x != y ? (x > y) - (x < y) : (p->index > q->index) - (p->index < q->index);
}

terra_status terra_cook(const terra_cook_desc *d, terra_cook_report *report) {
    terra_cook_report local;
    if (!report) report = &local;
    memset(report, 0, sizeof *report);
    const double t0 = terra_now_s();
    if (!d || !d->output || !d->inputs || d->input_count == 0) return terra_fail(TERRA_E_INVALID, "cook: no input");
    const double max_error = d->max_error ? d->max_error : 1.0;
    if (!(max_error > 0) || !isfinite(max_error))
        return terra_fail(TERRA_E_INVALID, "cook: the finest error must be positive, not %g", max_error);
    const int S = d->tile_size ? d->tile_size : DEFAULT_TILE;
    if (S < 2 || S > 4096) return terra_fail(TERRA_E_INVALID, "cook: the tile size must be 2..4096 samples, not %d", S);
    if (d->levels < 0 || d->levels > 25) return terra_fail(TERRA_E_INVALID, "cook: levels must be 1..25, not %d", d->levels);
    terra_status st = TERRA_OK;
    ground G = {.n = d->input_count};
    G.L = terra_calloc(d->input_count, sizeof *G.L);
    plan P;
    memset(&P, 0, sizeof P);
    char *src = NULL;
    terra_archive_writer *w = NULL;
    terra_scenery_cut *cut = NULL;
    size_t ready = 0; /* layers whose lock exists */
    if (!G.L) return terra_fail(TERRA_E_NOMEM, "cook: out of memory");
    bool geo = d->frame == TERRA_COOK_FRAME_GEOGRAPHIC;
    for (size_t k = 0; k < d->input_count && st == TERRA_OK; k++) {
        const terra_cook_input *in = &d->inputs[k];
        layer *l = &G.L[k];
        l->in = in;
        l->index = (uint32_t)k;
        if (in->scenery) {
            if (d->input_count > 1)
                st = terra_fail(TERRA_E_UNSUPPORTED, "cook: %s is a scenery: it cooks alone, not with other inputs",
                                in->path);
            continue;
        } else if (in->raster) {
            if (!in->raster->heights) {
                st = terra_fail(TERRA_E_INVALID, "cook: input %s has no samples", in->path);
                continue;
            }
            info_of(in->raster, &l->info);
            l->mem.raster = in->raster;
            const terra_raster_desc bound = {.path = in->path, .min_height = TERRA_COOK_MIN_HEIGHT,
                                             .max_height = TERRA_COOK_MAX_HEIGHT};
            st = terra_raster_check_window(&bound, in->raster->georeferenced ? in->raster->geo : NULL,
                                           l->info.has_lonlat, in->raster->heights, 0, 0, in->raster->width,
                                           in->raster->height);
            if (st != TERRA_OK) continue;
        } else {
            if (!in->sources || in->source_count < 1 || !in->sources[0]) {
                st = terra_fail(TERRA_E_INVALID, "cook: input %s has neither samples nor a source", in->path);
                continue;
            }
            l->info = *terra_raster_source_info(in->sources[0]);
        }
        l->busy = terra_calloc((size_t)(in->source_count > 0 ? in->source_count : 1), sizeof *l->busy);
        if (!l->busy) st = terra_fail(TERRA_E_NOMEM, "cook: out of memory");
        else if (l->info.width < 2 || l->info.height < 2)
            st = terra_fail(TERRA_E_INVALID, "cook: %s is %dx%d samples: at least 2x2 are needed", in->path,
                            l->info.width, l->info.height);
        /* another body's raster goes to the geographic frame, which refuses it by name */
        if (d->frame == TERRA_COOK_FRAME_AUTO && (l->info.has_lonlat || l->info.off_earth)) geo = true;
    }
    const terra_scenery *sc = d->inputs[0].scenery;
    if (sc && geo) st = terra_fail(TERRA_E_UNSUPPORTED, "cook: %s is a scenery: it cooks in the local frame", d->inputs[0].path);
    for (size_t k = 0; geo && st == TERRA_OK && k < G.n; k++) st = check_geographic(&G.L[k]);
    if (st == TERRA_OK && !geo && d->input_count > 1)
        st = terra_fail(TERRA_E_INVALID, "cook: %zu inputs in the local frame: nothing places one against another "
                        "(only georeferenced inputs make one ground)", d->input_count);
    if (st == TERRA_OK && geo && d->levels)
        st = terra_fail(TERRA_E_INVALID, "cook: geographic tiles go down to the two roots: levels cannot be set");
    if (st != TERRA_OK) goto done;
    if (geo) qsort(G.L, G.n, sizeof *G.L, cmp_rank);
    for (; ready < G.n; ready++) {
        pthread_mutex_init(&G.L[ready].lock, NULL);
        pthread_cond_init(&G.L[ready].freed, NULL);
    }
    if ((st = sc ? plan_scenery(d, sc, &P, &cut) : make_plan(d, &G, geo, &P)) != TERRA_OK) goto done;
    if (cut) terra_scenery_cut_get_info(cut, &report->cut);
    for (size_t k = 0; k < G.n; k++) report->samples += (uint64_t)G.L[k].info.width * (uint64_t)G.L[k].info.height;
    if (geo) {
        /* the warper's grid: every plane sample a finest tile reads, its ring included */
        int64_t x0 = INT64_MAX, y0 = INT64_MAX, x1 = INT64_MIN, y1 = INT64_MIN;
        for (size_t i = 0; i < P.finest_count; i++) {
            x0 = P.finest[2 * i] < x0 ? P.finest[2 * i] : x0, x1 = P.finest[2 * i] > x1 ? P.finest[2 * i] : x1;
            y0 = P.finest[2 * i + 1] < y0 ? P.finest[2 * i + 1] : y0, y1 = P.finest[2 * i + 1] > y1 ? P.finest[2 * i + 1] : y1;
        }
        G.gx = x0 * S - 1, G.gy = (y1 + 1) * S + 1;
        G.geo = (terra_raster_geo_grid){.west = P.grid.origin[0] + (double)G.gx * P.grid.unit[0],
                                        .north = P.grid.origin[1] + (double)G.gy * P.grid.unit[1],
                                        .step_x = P.grid.unit[0], .step_y = P.grid.unit[1],
                                        .width = (int)((x1 - x0 + 1) * S + 3), .height = (int)((y1 - y0 + 1) * S + 3)};
    }
    report->grid = P.grid;
    report->levels = P.grid.depth + 1;
    terra_cook_split *sp = d->split;
    if (sp && sc)
        st = terra_fail(TERRA_E_UNSUPPORTED, "cook: %s is a scenery: a cook split over processes takes rasters only",
                        d->inputs[0].path);
    else if (sp && d->cache)
        st = terra_fail(TERRA_E_UNSUPPORTED, "cook: a cook split over processes keeps parts, not the cook cache");
    if (st == TERRA_OK && sp && sp->stage == TERRA_COOK_STAGE_PLAN) {
        /* where each input's samples lie on the plane */
        terra_cook_footprint *fp = terra_alloc(G.n * sizeof *fp);
        if (!fp) st = terra_fail(TERRA_E_NOMEM, "cook: out of memory");
        for (size_t k = 0; fp && k < G.n; k++) {
            const terra_raster_info *I = &G.L[k].info;
            const double *b = I->lonlat_bounds, *o = P.grid.origin, *u = P.grid.unit;
            fp[k].samples = (uint64_t)I->width * (uint64_t)I->height;
            if (geo)
                fp[k] = (terra_cook_footprint){{(b[0] - o[0]) / u[0], (b[1] - o[1]) / u[1], (b[2] - o[0]) / u[0], (b[3] - o[1]) / u[1]},
                                               fp[k].samples};
            else
                fp[k] = (terra_cook_footprint){{0, 0, I->width - 1, I->height - 1}, fp[k].samples};
        }
        if (fp) st = terra_cook_split_plan_make(&P.grid, P.finest, P.finest_count, fp, G.n, sp->ranks, &sp->plan);
        terra_free(fp);
        goto done;
    }
    const bool round = sp && sp->stage == TERRA_COOK_STAGE_ROUND, merge = sp && sp->stage == TERRA_COOK_STAGE_MERGE;
    if (st == TERRA_OK && round && (sp->round < 0 || sp->round >= sp->plan.round_count))
        st = terra_fail(TERRA_E_INVALID, "cook: round %d of %d", sp->round, sp->plan.round_count);
    if (st == TERRA_OK && round && mkdir(sp->parts, 0777) != 0 && errno != EEXIST)
        st = terra_fail(TERRA_E_IO, "%s: cannot make the parts' directory: %s", sp->parts, strerror(errno));
    if (st != TERRA_OK) goto done;

    if (d->cache && (st = plan_cache(d->cache, &G, &P)) != TERRA_OK) goto done;
    src = source_json(d, &G, &P, max_error);
    /* gzip's default here is 6, not the writer's 9: on St Helens at 1 m level 9 takes three times as
     * long for 0.2% fewer bytes */
    const int level = d->compression_level ? d->compression_level : d->compression == TERRA_COMPRESS_GZIP ? 6 : 0;
    terra_archive_write_desc wd = {.frame = P.grid.frame, .compression = d->compression,
                                   .compression_level = level, .tin = true,
                                   .qmesh_extensions = TERRA_QMESH_HAS_NORMALS | (sc ? TERRA_QMESH_HAS_MATERIAL : 0u),
                                   .source_json = src,
                                   .name = "terra cook", .tile_size_m = S * P.grid.unit[0]};
    memcpy(wd.bounds, P.bounds, sizeof wd.bounds);
    if (!src) st = terra_fail(TERRA_E_NOMEM, "cook: out of memory");
    if (st == TERRA_OK && !round) st = terra_archive_writer_create(d->output, &wd, &w);
    if (st != TERRA_OK) goto done;

    terra_cook_raster_tiles rt = {.grid = &P.grid, .max_error = max_error, .window = ground_window, .window_user = &G};
    source_measure sm;
    source_measure_init(&sm, &G, &P.grid, &rt);
    emitter E = {.grid = &P.grid, .w = w, .rep = report, .cache = d->cache, .packed = d->compression == TERRA_COMPRESS_PACKED,
                 .make = sc ? terra_scenery_cut_tile : terra_cook_raster_finest, .make_user = sc ? (void *)cut : (void *)&rt,
                 .samples = sc ? NULL : &sm, .split = sp, .round = round ? &sp->plan.round[sp->round] : NULL,
                 .compression = d->compression, .compression_level = level};
    pthread_mutex_init(&E.lock, NULL);
    terra_cook_pyramid_desc pd = {.grid = &P.grid, .finest = P.finest, .finest_count = P.finest_count,
                                  .max_error = max_error, .make_finest = finest_tile, .finest_user = &E,
                                  .simplify = terra_cook_simplify_plane, .emit = emit_tile, .emit_user = &E,
                                  .distance = sc ? NULL : terra_cook_raster_distance, .distance_user = &rt,
                                  .window = sc ? NULL : ground_window, .window_user = &G, .window_max = COARSE_WINDOW_MAX,
                                  .threads = d->threads, .progress = d->progress, .progress_user = d->progress_user};
    if (round) {
        pd.part_bottom = E.round->bottom, pd.part_top = E.round->top;
        pd.want = part_want, pd.load_root = part_load, pd.root_done = part_done, pd.part_user = &E;
    } else if (merge && sp->plan.round_count) {
        pd.part_bottom = sp->plan.top_bottom, pd.load_root = part_load, pd.part_user = &E;
    }
    terra_cook_pyramid_stats ps;
    memset(&ps, 0, sizeof ps);
    const double top0 = terra_now_s();
    if (!merge || !sp->plan.round_count || pd.part_bottom < P.grid.depth) st = terra_cook_pyramid(&pd, &ps);
    const double merge0 = terra_now_s();
    if (merge) sp->top_s = merge0 - top0;
    if (st == TERRA_OK && merge) st = merge_parts(&E);
    for (size_t i = 0; i < E.sink_count; i++) sink_free(&E.sinks[i]);
    terra_free(E.sinks);
    pthread_mutex_destroy(&E.lock);
    report->mesh_peak_bytes = ps.peak_bytes;
    if (round) goto done;
    if (st == TERRA_OK && report->tiles == 0)
        st = terra_fail(TERRA_E_INVALID, "cook: no ground in %s%s: every sample is no-data or outside",
                        G.L[0].in->path, G.n > 1 ? " and the other inputs" : "");
    if (st != TERRA_OK) {
        terra_archive_writer_abort(w);
        goto done;
    }
    st = terra_archive_writer_finish(w);
    if (merge) sp->merge_s = terra_now_s() - merge0;
    if (st != TERRA_OK) goto done;
    if (d->cache && (st = terra_cook_cache_commit(d->cache)) == TERRA_E_IO) {
        /* the archive is good; only the next cook starts afresh */
        terra_log(TERRA_LOG_WARN, "%s", terra_last_error());
        st = TERRA_OK;
    }
    if (st != TERRA_OK) goto done;
    /* bytes per level, as stored */
    terra_archive *a;
    if (terra_archive_open(d->output, NULL, &a) == TERRA_OK) {
        const terra_archive_info *I = terra_archive_get_info(a);
        for (uint64_t i = 0; i < I->tile_count; i++) {
            terra_archive_entry e;
            int dd;
            int32_t tx, ty;
            if (terra_archive_entry_at(a, i, &e) != TERRA_OK || !terra_cook_key_tile(&P.grid, e.key, &dd, &tx, &ty)) continue;
            report->level[dd].bytes += e.size;
            report->bytes += e.size;
        }
        terra_archive_close(a);
    } else { /* the archive is in place; only the report lacks its sizes */
        terra_log(TERRA_LOG_WARN, "%s: written, but not read back for the bytes per level: %s", d->output,
                  terra_last_error());
    }
done:
    report->seconds = terra_now_s() - t0;
    cJSON_free(src);
    terra_free(P.finest);
    terra_scenery_cut_free(cut);
    for (size_t k = 0; k < G.n; k++) {
        if (k < ready) {
            pthread_mutex_destroy(&G.L[k].lock);
            pthread_cond_destroy(&G.L[k].freed);
        }
        terra_free(G.L[k].busy);
    }
    terra_free(G.L);
    return st;
}
