/* Baking a source into quantized-mesh tiles and an archive. See terra/bake.h. */
#include "terra/bake.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

static int top_level(const terra_bake_desc *d);

terra_status terra_bake_desc_resolve(const terra_bake_desc *in, terra_bake_desc *d) {
    *d = in ? *in : (terra_bake_desc){0};
    if (!d->levels) d->levels = 5;
    if (!d->cells) d->cells = 32;
    if (!d->tile0_size) d->tile0_size = 64;
    if (!d->metres_per_degree) d->metres_per_degree = 111319.49;
    if (!d->threads) d->threads = terra_default_threads();
    if (d->area[0] == 0 && d->area[1] == 0 && d->area[2] == 0 && d->area[3] == 0)
        d->area[2] = d->area[3] = 1024;
    if (d->bounds[0] == 0 && d->bounds[1] == 0 && d->bounds[2] == 0 && d->bounds[3] == 0) {
        d->bounds[0] = 7.0, d->bounds[1] = 45.0, d->bounds[2] = 7.5, d->bounds[3] = 45.5;
    }
    if (d->frame != TERRA_FRAME_LOCAL && d->frame != TERRA_FRAME_GEOGRAPHIC)
        return terra_fail(TERRA_E_INVALID, "bake: unknown frame %d", (int)d->frame);
    if (d->levels < 1 || d->levels > 25)
        return terra_fail(TERRA_E_INVALID, "bake: levels (how many) must be 1..25, got %d", d->levels);
    if (d->cells < 2 || d->cells > 256 || (d->cells & (d->cells - 1)))
        return terra_fail(TERRA_E_INVALID, "bake: cells must be a power of two in 2..256, got %d", d->cells);
    if (!(d->tile0_size > 0) || !isfinite(d->tile0_size))
        return terra_fail(TERRA_E_INVALID, "bake: tile size must be positive");
    if (!(d->area[2] > d->area[0]) || !(d->area[3] > d->area[1]))
        return terra_fail(TERRA_E_INVALID, "bake: the area must have x1 > x0 and z1 > z0");
    if (!(d->bounds[2] > d->bounds[0]) || !(d->bounds[3] > d->bounds[1]) || d->bounds[0] < -180 || d->bounds[2] > 180 ||
        d->bounds[1] < -90 || d->bounds[3] > 90)
        return terra_fail(TERRA_E_INVALID, "bake: bounds must be west < east within -180..180, south < north within -90..90");
    if (d->threads < 1 || d->threads > 64) return terra_fail(TERRA_E_INVALID, "bake: threads must be 1..64");
    /* Sizes that keep every coordinate exact (the limits of select.h): the coarsest tiles at most
     * 2^44 m on a side, the ground within 2^44 m of the origin. */
    const double max_side = 17592186044416.0; /* 2^44 m */
    if (d->frame == TERRA_FRAME_LOCAL) {
        double span = fmax(fabs(d->area[0]), fmax(fabs(d->area[1]), fmax(fabs(d->area[2]), fabs(d->area[3]))));
        if (!(span <= max_side))
            return terra_fail(TERRA_E_INVALID, "bake: the area must lie within 2^44 m (%g m) of the origin (got %g m)",
                              max_side, span);
        if (!(ldexp(d->tile0_size, top_level(d)) <= max_side))
            return terra_fail(TERRA_E_INVALID,
                              "bake: the coarsest tiles, tile size x 2^levels = %g m, must be at most 2^44 m (%g m)",
                              ldexp(d->tile0_size, top_level(d)), max_side);
        if (span / d->tile0_size > (double)TERRA_TILE_COORD_MAX)
            return terra_fail(TERRA_E_INVALID,
                              "bake: the area, out to %g m, needs tile coordinates beyond 2^27 at a tile size of %g m",
                              span, d->tile0_size);
    } else if (!(d->metres_per_degree > 0 && 180.0 * d->metres_per_degree <= max_side)) {
        return terra_fail(TERRA_E_INVALID,
                          "bake: metres per degree must be positive and at most 2^44 m / 180 (%g), got %g",
                          max_side / 180.0, d->metres_per_degree);
    }
    return TERRA_OK;
}

/* ---- tile geometry ------------------------------------------------------------------------------ */

/* Where a tile's vertices sit on the source's lattice: vertex (i, jr) is lattice point
 * (ix0 + i, J0 + jr) at spacing s; J runs along +z (for geographic tiles: southwards). r is the
 * ratio to the finest level's spacing. */
typedef struct geom {
    int n;
    int64_t ix0, J0, r;
    double s;
    bool geo;
    double lon_w, lat_n, dcell; /* geographic: degrees */
} geom;

/* The coarsest level baked. */
static int top_level(const terra_bake_desc *d) { return d->levels - 1; }

static void tile_geom(const terra_bake_desc *d, terra_tile_key key, geom *g) {
    int level = terra_tile_key_level(key);
    int64_t x = terra_tile_key_x(key), y = terra_tile_key_y(key), n = d->cells;
    memset(g, 0, sizeof *g);
    g->n = d->cells;
    if (d->frame == TERRA_FRAME_LOCAL) {
        double side = d->tile0_size * ldexp(1.0, level);
        g->s = side / (double)n;
        g->ix0 = x * n;
        g->J0 = y * n;
        g->r = (int64_t)1 << level;
    } else {
        double deg = 180.0 / ldexp(1.0, level);
        int64_t p = (int64_t)1 << level;
        g->geo = true;
        g->dcell = deg / (double)n;
        g->s = d->metres_per_degree * g->dcell;
        g->ix0 = n * x - n * p;
        g->J0 = n * p / 2 - (y + 1) * n; /* -lat_north / dcell */
        g->lon_w = -180.0 + (double)x * deg;
        g->lat_n = -90.0 + (double)(y + 1) * deg;
        g->r = (int64_t)1 << (top_level(d) - level);
    }
}

/* The finest level's lattice window that holds baked tiles: [fx0, fx1] x [fJ0, fJ1]. */
static void fine_region(const terra_bake_desc *d, int64_t *fx0, int64_t *fx1, int64_t *fJ0, int64_t *fJ1) {
    int64_t n = d->cells;
    if (d->frame == TERRA_FRAME_LOCAL) {
        double side = d->tile0_size;
        int64_t tx0 = (int64_t)floor(d->area[0] / side), tx1 = (int64_t)ceil(d->area[2] / side) - 1;
        int64_t ty0 = (int64_t)floor(d->area[1] / side), ty1 = (int64_t)ceil(d->area[3] / side) - 1;
        if (tx1 < tx0) tx1 = tx0;
        if (ty1 < ty0) ty1 = ty0;
        *fx0 = tx0 * n, *fx1 = (tx1 + 1) * n, *fJ0 = ty0 * n, *fJ1 = (ty1 + 1) * n;
    } else {
        int z = top_level(d);
        double deg = 180.0 / ldexp(1.0, z);
        int64_t p = (int64_t)1 << z;
        int64_t x0 = (int64_t)floor((d->bounds[0] + 180) / deg), x1 = (int64_t)ceil((d->bounds[2] + 180) / deg) - 1;
        int64_t y0 = (int64_t)floor((d->bounds[1] + 90) / deg), y1 = (int64_t)ceil((d->bounds[3] + 90) / deg) - 1;
        if (x1 < x0) x1 = x0;
        if (y1 < y0) y1 = y0;
        *fx0 = n * x0 - n * p, *fx1 = n * (x1 + 1) - n * p;
        *fJ0 = n * p / 2 - (y1 + 1) * n, *fJ1 = n * p / 2 - y0 * n;
    }
}

/* ---- scratch ------------------------------------------------------------------------------------ */

typedef struct scratch {
    int n;
    float *hr;         /* (n+3)^2 samples with a ring */
    terra_surface *sr; /* same, surfaces */
    float *hd;         /* dequantized heights, (n+1)^2 */
    double *pos;       /* (n+1)^2 * 3 */
    uint16_t *u, *v, *h, *mat;
    uint8_t *nrm;
    uint32_t *idx, *edge;
    float *fine;
    size_t fine_cap;
} scratch;

static void scratch_free(scratch *s) {
    if (!s) return;
    terra_free(s->hr), terra_free(s->sr), terra_free(s->hd), terra_free(s->pos), terra_free(s->u), terra_free(s->v);
    terra_free(s->h), terra_free(s->mat), terra_free(s->nrm), terra_free(s->idx), terra_free(s->edge), terra_free(s->fine);
    terra_free(s);
}

static scratch *scratch_get(terra_bake_tile *t, int n) {
    scratch *s = t->scratch_;
    if (s && s->n == n) return s;
    scratch_free(s);
    t->scratch_ = NULL;
    s = terra_calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t w = (size_t)(n + 3) * (n + 3), vc = (size_t)(n + 1) * (n + 1);
    s->n = n;
    s->hr = terra_alloc(w * sizeof *s->hr);
    s->sr = terra_alloc(w * sizeof *s->sr);
    s->hd = terra_alloc(vc * sizeof *s->hd);
    s->pos = terra_alloc(vc * 3 * sizeof *s->pos);
    s->u = terra_alloc(vc * 2);
    s->v = terra_alloc(vc * 2);
    s->h = terra_alloc(vc * 2);
    s->mat = terra_alloc(vc * 2);
    s->nrm = terra_alloc(vc * 2);
    s->idx = terra_alloc((size_t)n * n * 6 * sizeof *s->idx);
    s->edge = terra_alloc((size_t)(n + 1) * 4 * sizeof *s->edge);
    if (!s->hr || !s->sr || !s->hd || !s->pos || !s->u || !s->v || !s->h || !s->mat || !s->nrm || !s->idx || !s->edge) {
        scratch_free(s);
        return NULL;
    }
    t->scratch_ = s;
    return s;
}

void terra_bake_tile_free(terra_bake_tile *t) {
    if (!t) return;
    scratch_free(t->scratch_);
    memset(t, 0, sizeof *t);
}

/* ---- one tile ---------------------------------------------------------------------------------- */

static uint16_t quant(double v, double lo, double hi) {
    if (!(hi > lo)) return 0;
    double q = (v - lo) / (hi - lo) * 32767.0;
    return (uint16_t)(q < 0 ? 0 : q > 32767 ? 32767 : lround(q));
}

/* Largest |fine sample - tile surface| over the finest lattice inside the tile and the baked area. */
static terra_status fine_error(const terra_source *src, const terra_bake_desc *d, const geom *g, scratch *s,
                               double *err) {
    *err = 0;
    if (g->r <= 1) return TERRA_OK;
    int64_t fx0, fx1, fJ0, fJ1, n = g->n, r = g->r;
    fine_region(d, &fx0, &fx1, &fJ0, &fJ1);
    int64_t ax = g->ix0 * r, bx = (g->ix0 + n) * r, aJ = g->J0 * r, bJ = (g->J0 + n) * r;
    if (ax < fx0) ax = fx0;
    if (bx > fx1) bx = fx1;
    if (aJ < fJ0) aJ = fJ0;
    if (bJ > fJ1) bJ = fJ1;
    if (ax > bx || aJ > bJ) return TERRA_OK;
    int64_t nx = bx - ax + 1, rows = 64;
    if ((size_t)(nx * rows) > s->fine_cap) {
        terra_free(s->fine);
        s->fine_cap = (size_t)(nx * rows);
        s->fine = terra_alloc(s->fine_cap * sizeof *s->fine);
        if (!s->fine) {
            s->fine_cap = 0;
            return terra_fail(TERRA_E_NOMEM, "bake: out of memory");
        }
    }
    double fs = g->s / (double)r, worst = 0;
    const float *hd = s->hd;
    int64_t stride = n + 1;
    for (int64_t J = aJ; J <= bJ; J += rows) {
        int64_t nz = bJ - J + 1 < rows ? bJ - J + 1 : rows;
        terra_grid_request req = {.ix0 = ax, .iz0 = J, .spacing = fs, .nx = (int)nx, .nz = (int)nz};
        terra_status st = terra_source_sample(src, &req, s->fine, NULL);
        if (st) return st;
        for (int64_t j = 0; j < nz; j++) {
            int64_t lj = J + j - g->J0 * r, cj = lj / r;
            double b = (double)(lj % r) / (double)r;
            if (cj >= n) cj = n - 1, b = 1.0;
            for (int64_t i = 0; i < nx; i++) {
                int64_t li = ax + i - g->ix0 * r, ci = li / r;
                double a = (double)(li % r) / (double)r;
                if (ci >= n) ci = n - 1, a = 1.0;
                double h00 = hd[cj * stride + ci], h10 = hd[cj * stride + ci + 1];
                double h01 = hd[(cj + 1) * stride + ci], h11 = hd[(cj + 1) * stride + ci + 1];
                double h = a >= b ? h00 + a * (h10 - h00) + b * (h11 - h10) : h00 + b * (h01 - h00) + a * (h11 - h01);
                double e = fabs((double)s->fine[j * nx + i] - h);
                if (e > worst) worst = e;
            }
        }
    }
    *err = worst;
    return TERRA_OK;
}

static double dist3(const double *p, const double *q) {
    double dx = p[0] - q[0], dy = p[1] - q[1], dz = p[2] - q[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

terra_status terra_bake_tile_build(const terra_source *src, const terra_bake_desc *d, terra_tile_key key,
                                   bool want_error, terra_bake_tile *t) {
    int n = d->cells;
    scratch *s = scratch_get(t, n);
    if (!s) return terra_fail(TERRA_E_NOMEM, "bake: out of memory");
    geom g;
    tile_geom(d, key, &g);
    int w = n + 3;
    terra_grid_request req = {.ix0 = g.ix0 - 1, .iz0 = g.J0 - 1, .spacing = g.s, .nx = w, .nz = w};
    terra_status st = terra_source_sample(src, &req, s->hr, d->no_surfaces ? NULL : s->sr);
    if (st) return st;
    double lo = INFINITY, hi = -INFINITY;
    for (int jr = 0; jr <= n; jr++)
        for (int i = 0; i <= n; i++) {
            double h = s->hr[(jr + 1) * w + i + 1];
            if (h < lo) lo = h;
            if (h > hi) hi = h;
        }
    /* heights go through float32 in the header: quantize against those */
    lo = (double)(float)lo;
    hi = (double)(float)hi;
    if (hi < lo) hi = lo;
    int stride = n + 1;
    size_t vc = (size_t)stride * stride;
    for (int jr = 0; jr <= n; jr++)
        for (int i = 0; i <= n; i++) {
            size_t k = (size_t)jr * stride + i;
            double h = s->hr[(jr + 1) * w + i + 1];
            s->u[k] = (uint16_t)lround((double)i * 32767.0 / n);
            s->v[k] = (uint16_t)lround((double)(g.geo ? n - jr : jr) * 32767.0 / n);
            s->h[k] = quant(h, lo, hi);
            s->hd[k] = (float)(lo + (hi - lo) * s->h[k] / 32767.0);
            s->mat[k] = d->no_surfaces ? 0 : s->sr[(jr + 1) * w + i + 1];
            double *p = s->pos + 3 * k;
            double hq = s->hd[k];
            double up[3], east[3], north[3];
            if (g.geo) {
                double lon = (g.lon_w + i * g.dcell) * DEG2RAD, lat = (g.lat_n - jr * g.dcell) * DEG2RAD;
                terra_qmesh_geodetic_to_ecef(lon, lat, hq, p);
                terra_qmesh_geodetic_up(lon, lat, up);
                east[0] = -sin(lon), east[1] = cos(lon), east[2] = 0;
                north[0] = -sin(lat) * cos(lon), north[1] = -sin(lat) * sin(lon), north[2] = cos(lat);
            } else {
                p[0] = (double)(g.ix0 + i) * g.s;
                p[1] = hq;
                p[2] = (double)(g.J0 + jr) * g.s;
            }
            if (!d->no_normals) {
                /* central differences over the ring: neighbours across tile borders are shared */
                double hxm = s->hr[(jr + 1) * w + i], hxp = s->hr[(jr + 1) * w + i + 2];
                double hzm = s->hr[jr * w + i + 1], hzp = s->hr[(jr + 2) * w + i + 1];
                double nn[3];
                if (g.geo) {
                    double lat = (g.lat_n - jr * g.dcell) * DEG2RAD;
                    double ge = g.dcell * DEG2RAD * TERRA_WGS84_A * fmax(cos(lat), 1e-6), gn = g.dcell * DEG2RAD * TERRA_WGS84_A;
                    double dhde = (hxp - hxm) / (2 * ge), dhdn = (hzm - hzp) / (2 * gn); /* +J is south */
                    for (int c = 0; c < 3; c++) nn[c] = -dhde * east[c] - dhdn * north[c] + up[c];
                } else {
                    nn[0] = -(hxp - hxm) / (2 * g.s);
                    nn[1] = 1.0;
                    nn[2] = -(hzp - hzm) / (2 * g.s);
                }
                terra_qmesh_oct_encode(nn, s->nrm + 2 * k);
            }
        }
    /* triangles: every cell split along v00-v11, as terra/grid.h splits it */
    size_t q = 0;
    double longest = 0;
    for (int jr = 0; jr < n; jr++)
        for (int i = 0; i < n; i++) {
            uint32_t v00 = (uint32_t)(jr * stride + i), v10 = v00 + 1, v01 = v00 + (uint32_t)stride, v11 = v01 + 1;
            s->idx[q++] = v00, s->idx[q++] = v01, s->idx[q++] = v11;
            s->idx[q++] = v00, s->idx[q++] = v11, s->idx[q++] = v10;
            double e1 = dist3(s->pos + 3 * v00, s->pos + 3 * v01), e2 = dist3(s->pos + 3 * v01, s->pos + 3 * v11);
            double e3 = dist3(s->pos + 3 * v00, s->pos + 3 * v11), e4 = dist3(s->pos + 3 * v11, s->pos + 3 * v10);
            double e5 = dist3(s->pos + 3 * v00, s->pos + 3 * v10);
            double m = fmax(fmax(e1, e2), fmax(e3, fmax(e4, e5)));
            if (m > longest) longest = m;
        }
    /* edges in increasing v (west, east) or u (south, north) */
    uint32_t *E = s->edge;
    for (int k = 0; k <= n; k++) {
        int jr_up = g.geo ? n - k : k;   /* k-th vertex going north (increasing v) */
        int jr_s = g.geo ? n : 0, jr_n = g.geo ? 0 : n;
        E[0 * stride + k] = (uint32_t)(jr_up * stride + 0);
        E[1 * stride + k] = (uint32_t)(jr_s * stride + k);
        E[2 * stride + k] = (uint32_t)(jr_up * stride + n);
        E[3 * stride + k] = (uint32_t)(jr_n * stride + k);
    }
    double err = 0;
    if (want_error) {
        st = fine_error(src, d, &g, s, &err);
        if (st) return st;
    }
    terra_qmesh *m = &t->mesh;
    memset(m, 0, sizeof *m);
    m->vertex_count = (uint32_t)vc;
    m->triangle_count = (uint32_t)(2 * n * n);
    m->u = s->u, m->v = s->v, m->h = s->h, m->indices = s->idx;
    for (int e = 0; e < 4; e++) {
        m->edge_count[e] = (uint32_t)stride;
        m->edges[e] = E + e * stride;
    }
    if (!d->no_normals) {
        m->normals = s->nrm;
        m->extensions |= TERRA_QMESH_HAS_NORMALS;
    }
    if (!d->no_surfaces) {
        m->materials = s->mat;
        m->extensions |= TERRA_QMESH_HAS_MATERIAL;
    }
    if (g.geo) {
        double mid = 0.5 * (lo + hi), c[3];
        terra_qmesh_geodetic_to_ecef((g.lon_w + 0.5 * n * g.dcell) * DEG2RAD, (g.lat_n - 0.5 * n * g.dcell) * DEG2RAD, mid, c);
        terra_qmesh_header_geographic(&m->header, s->pos, vc, c, lo, hi);
    } else {
        terra_qmesh_header_local(&m->header, s->pos, vc, lo, hi);
    }
    st = terra_qmesh_reorder(m, NULL);
    if (st) return st;
    t->info.geometric_error = (float)err;
    t->info.longest_edge = (float)longest;
    t->info.min_height = (float)lo;
    t->info.max_height = (float)hi;
    return TERRA_OK;
}

/* ---- keys and the whole bake ------------------------------------------------------------------------ */

static int cmp_key(const void *a, const void *b) {
    uint64_t x = terra_archive_order(*(const terra_tile_key *)a), y = terra_archive_order(*(const terra_tile_key *)b);
    return (x > y) - (x < y);
}

terra_status terra_bake_keys(const terra_bake_desc *d, terra_tile_key **keys_out, size_t *count_out) {
    *keys_out = NULL;
    *count_out = 0;
    size_t total = 0;
    int64_t rx0[32], rx1[32], ry0[32], ry1[32];
    for (int l = 0; l <= top_level(d); l++) {
        if (d->frame == TERRA_FRAME_LOCAL) {
            double side = d->tile0_size * ldexp(1.0, l);
            rx0[l] = (int64_t)floor(d->area[0] / side), rx1[l] = (int64_t)ceil(d->area[2] / side) - 1;
            ry0[l] = (int64_t)floor(d->area[1] / side), ry1[l] = (int64_t)ceil(d->area[3] / side) - 1;
        } else {
            double deg = 180.0 / ldexp(1.0, l);
            int64_t p = (int64_t)1 << l;
            rx0[l] = (int64_t)floor((d->bounds[0] + 180) / deg), rx1[l] = (int64_t)ceil((d->bounds[2] + 180) / deg) - 1;
            ry0[l] = (int64_t)floor((d->bounds[1] + 90) / deg), ry1[l] = (int64_t)ceil((d->bounds[3] + 90) / deg) - 1;
            if (rx0[l] < 0) rx0[l] = 0;
            if (ry0[l] < 0) ry0[l] = 0;
            if (rx1[l] > 2 * p - 1) rx1[l] = 2 * p - 1;
            if (ry1[l] > p - 1) ry1[l] = p - 1;
            if (l == 0) rx0[0] = 0, rx1[0] = 1, ry0[0] = 0, ry1[0] = 0; /* both roots, always */
        }
        if (rx1[l] < rx0[l]) rx1[l] = rx0[l];
        if (ry1[l] < ry0[l]) ry1[l] = ry0[l];
        double cnt = (double)(rx1[l] - rx0[l] + 1) * (double)(ry1[l] - ry0[l] + 1);
        if (cnt + (double)total > 64e6) return terra_fail(TERRA_E_CAPACITY, "bake: more than 64 M tiles asked for");
        total += (size_t)cnt;
    }
    terra_tile_key *keys = terra_alloc(total * sizeof *keys + 1);
    if (!keys) return terra_fail(TERRA_E_NOMEM, "bake: out of memory for %zu keys", total);
    size_t k = 0;
    for (int l = 0; l <= top_level(d); l++)
        for (int64_t y = ry0[l]; y <= ry1[l]; y++)
            for (int64_t x = rx0[l]; x <= rx1[l]; x++) keys[k++] = terra_tile_key_make(0, l, (int32_t)x, (int32_t)y);
    qsort(keys, k, sizeof *keys, cmp_key);
    *keys_out = keys;
    *count_out = k;
    return TERRA_OK;
}

typedef struct bake_job {
    const terra_source *src;
    const terra_bake_desc *d;
    terra_archive_writer *w;
    const terra_tile_key *keys;
    size_t count, next;
    pthread_mutex_t lock;
    terra_status failed;
    char error[512];
    terra_bake_stats *stats;
} bake_job;

static void *bake_worker(void *p) {
    bake_job *j = p;
    terra_bake_tile t;
    memset(&t, 0, sizeof t);
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next++;
        bool stop = j->failed || i >= j->count;
        pthread_mutex_unlock(&j->lock);
        if (stop) break;
        terra_status st = terra_bake_tile_build(j->src, j->d, j->keys[i], true, &t);
        size_t need = st ? 0 : terra_qmesh_encoded_size(&t.mesh), n = 0;
        if (st == TERRA_OK && need > cap) {
            terra_free(buf);
            buf = terra_alloc(need);
            cap = buf ? need : 0;
            if (!buf) st = terra_fail(TERRA_E_NOMEM, "bake: out of memory");
        }
        if (st == TERRA_OK) st = terra_qmesh_encode(&t.mesh, buf, cap, &n);
        if (st == TERRA_OK) st = terra_archive_writer_add(j->w, j->keys[i], buf, n, &t.info);
        pthread_mutex_lock(&j->lock);
        if (st && !j->failed) {
            j->failed = st;
            snprintf(j->error, sizeof j->error, "%s", terra_last_error());
        } else if (st == TERRA_OK) {
            j->stats->tiles++;
            j->stats->vertices += t.mesh.vertex_count;
            j->stats->triangles += t.mesh.triangle_count;
            j->stats->raw_bytes += n;
            int l = terra_tile_key_level(j->keys[i]);
            if (t.info.geometric_error > j->stats->max_error_per_level[l])
                j->stats->max_error_per_level[l] = t.info.geometric_error;
        }
        pthread_mutex_unlock(&j->lock);
    }
    terra_free(buf);
    terra_bake_tile_free(&t);
    return NULL;
}

terra_status terra_bake(const terra_source *src, const char *path, const terra_bake_desc *in, terra_bake_stats *stats) {
    terra_bake_stats local_stats;
    if (!stats) stats = &local_stats;
    memset(stats, 0, sizeof *stats);
    double t0 = terra_now_s();
    terra_bake_desc d;
    terra_status st = terra_bake_desc_resolve(in, &d);
    if (st) return st;
    terra_tile_key *keys;
    size_t count;
    if ((st = terra_bake_keys(&d, &keys, &count))) return st;
    terra_archive_write_desc wd = {0};
    wd.frame = d.frame;
    wd.compression = d.compression;
    wd.compression_level = d.compression_level;
    if (d.frame == TERRA_FRAME_LOCAL) memcpy(wd.bounds, d.area, sizeof wd.bounds);
    else memcpy(wd.bounds, d.bounds, sizeof wd.bounds);
    wd.tile_size_m = d.tile0_size;
    wd.qmesh_extensions = (d.no_normals ? 0u : TERRA_QMESH_HAS_NORMALS) | (d.no_surfaces ? 0u : TERRA_QMESH_HAS_MATERIAL);
    wd.source_json = d.source_json;
    wd.name = d.name;
    terra_archive_writer *w;
    if ((st = terra_archive_writer_create(path, &wd, &w))) {
        terra_free(keys);
        return st;
    }
    bake_job job = {.src = src, .d = &d, .w = w, .keys = keys, .count = count, .stats = stats};
    pthread_mutex_init(&job.lock, NULL);
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < d.threads; i++)
        if (pthread_create(&th[started], NULL, bake_worker, &job) == 0) started++;
    if (!started) bake_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&job.lock);
    terra_free(keys);
    if (job.failed) {
        terra_archive_writer_abort(w);
        return terra_fail(job.failed, "%s", job.error);
    }
    st = terra_archive_writer_finish(w);
    stats->seconds = terra_now_s() - t0;
    if (st == TERRA_OK) {
        terra_archive *a;
        if (terra_archive_open(path, NULL, &a) == TERRA_OK) {
            const terra_archive_info *I = terra_archive_get_info(a);
            stats->stored_bytes = I->file_size - I->data_offset;
            terra_archive_close(a);
        } else { /* the archive is in place; only the stats lack its size */
            terra_log(TERRA_LOG_WARN, "%s: written, but not read back for its size: %s", path, terra_last_error());
        }
    }
    return st;
}
