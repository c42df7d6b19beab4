/* terra check: what a cooked archive promises, checked a second way (terra/cook_check.h).
 *
 * Nothing here comes from the cook: tiles are read as a client reads them (decoded quantized-mesh,
 * positions from u, v and the tile's rectangle, heights from the header's range), so a mistake
 * the cook makes consistently in its plane, its measuring or its encoder shows up here.
 *
 * One pass decodes every tile (promise 1), measures it against the sources (3) and keeps only its
 * border: per side the vertices (t along the side, height) and the border edges, sorted by t.
 * A second pass compares borders pair by pair (2). World units throughout: metres in the local
 * frame, degrees (t) and metres (heights) in the geographic one. */
#include "terra/cook_check.h"
#include "../json.h"

#include "terra/archive_io.h"
#include "terra/scenery.h"

#include <assimp/cimport.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QMAX ((double)TERRA_QMESH_MAX_COORD)
/* A millimetre in degrees along a meridian: the geographic frame's horizontal millimetre (a
 * degree of longitude is never longer, so this never loosens the test). */
#define MM_DEGREES (1e-3 / 111319.49)
/* What a stated error may fall short by without quantization allowed: a millimetre (float32
 * heights near 9000 m are 1 mm apart). */
#define STATED_SLACK 1e-3

enum { WEST = TERRA_QMESH_WEST, SOUTH = TERRA_QMESH_SOUTH, EAST = TERRA_QMESH_EAST, NORTH = TERRA_QMESH_NORTH };
static const char *side_names[4] = {"west", "south", "east", "north"};

typedef struct bvert {
    double t, h;
} bvert;
typedef struct bedge {
    bvert a, b; /* a.t <= b.t (a.h <= b.h when equal) */
} bedge;

typedef struct side_data {
    size_t v0, vn; /* range in ck->verts */
    size_t e0, en; /* range in ck->edges */
    double longest; /* longest edge along t, for searches by start */
} side_data;

typedef struct tile_data {
    terra_tile_key key;
    int level;
    int32_t x, y;
    double size;             /* side in world units (m, or degrees) */
    double x0, y0;           /* south-west corner */
    double step_v;           /* (max - min) / 32767 of the header */
    double stated;           /* the index entry's geometric error */
    side_data side[4];
} tile_data;

typedef struct source {
    terra_raster r;
    double a[6];    /* sample (c, r) centre -> world: X = a0 + a1 c + a2 r, Y = a3 + a4 c + a5 r */
    double inv[6];  /* world -> (c, r), same layout */
    double extent[4]; /* world box of the sample centres */
    double area;    /* world area of one sample (finer = smaller) */
    const char *path;
} source;

typedef struct checker {
    const terra_cook_check_desc *d;
    terra_cook_check_report *rep;
    terra_archive *a;
    const char *path;
    terra_frame frame;
    double base;            /* a level-0 tile's side: tile_size_m, or 180 degrees */
    double origin[2];       /* world position of tile (0, 0)'s corner */
    tile_data *tiles;
    size_t tile_count;
    bvert *verts;
    size_t vert_count, vert_cap;
    bedge *edges;
    size_t edge_count, edge_cap;
    struct wall_tri *walls;
    size_t wall_count, wall_cap;
    source *src;
    int src_count;
    terra_tile_rules rules; /* what every reader applies (grid archives: the lattice) */
    struct mesh_source *mesh;
    int mesh_count;
    uint64_t *rim;          /* scratch: a tile's rim (tile_measure) */
    size_t rim_cap;
} checker;

/* ---- small pieces ------------------------------------------------------------------------------ */

/* Level exponent: a tile at level L is base * 2^exponent wide (local: level 0 finest; geographic:
 * level = zoom). */
static int level_exp(const checker *ck, int level) { return ck->frame == TERRA_FRAME_LOCAL ? level : -level; }

static double tile_side(const checker *ck, int level) { return ldexp(ck->base, level_exp(ck, level)); }

static terra_status broken(checker *ck, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static terra_status broken(checker *ck, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ck->rep->broken = true;
    return terra_fail(TERRA_E_CORRUPT, "%s: %s", ck->path, msg);
}

static void tile_name(const tile_data *t, char *buf, size_t n) { snprintf(buf, n, "%d/%d/%d", t->level, t->x, t->y); }

/* "x 1234.5 m, z 640 m" or "lon -71.5, lat 44.25" for a point on side `s` of a tile at t. */
static void place_name(const checker *ck, const tile_data *tl, int s, double t, char *buf, size_t n) {
    const double fixed = s == WEST ? tl->x0 : s == EAST ? tl->x0 + tl->size : s == SOUTH ? tl->y0 : tl->y0 + tl->size;
    const double X = (s == WEST || s == EAST) ? fixed : t, Y = (s == WEST || s == EAST) ? t : fixed;
    if (ck->frame == TERRA_FRAME_LOCAL) snprintf(buf, n, "x %.4f m, z %.4f m", X, Y);
    else snprintf(buf, n, "lon %.9f, lat %.9f", X, Y);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = terra_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static int cmp_bvert(const void *pa, const void *pb) {
    const bvert *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->h > b->h) - (a->h < b->h);
}
static int cmp_bedge(const void *pa, const void *pb) {
    const bedge *a = pa, *b = pb;
    int c = cmp_bvert(&a->a, &b->a);
    return c ? c : cmp_bvert(&a->b, &b->b);
}

/* ---- archive metadata -------------------------------------------------------------------------- */

static terra_status read_frame(checker *ck) {
    const terra_archive_info *I = terra_archive_get_info(ck->a);
    ck->frame = I->frame;
    ck->rep->frame = I->frame;
    if (ck->frame == TERRA_FRAME_GEOGRAPHIC) {
        ck->base = 180.0;
        ck->origin[0] = -180.0, ck->origin[1] = -90.0;
        return TERRA_OK;
    }
    /* local: a level-0 tile's side is the metadata's tile_size_m (io/archive_io.c writes it) */
    cJSON *root = terra_json_parse(I->metadata);
    const cJSON *ts = root ? cJSON_GetObjectItemCaseSensitive(root, "tile_size_m") : NULL;
    const double v = cJSON_IsNumber(ts) ? ts->valuedouble : NAN;
    cJSON_Delete(root);
    if (!(v > 0) || !isfinite(v))
        return terra_fail(TERRA_E_CORRUPT, "%s: local-frame archive without a positive tile_size_m in its metadata",
                          ck->path);
    ck->base = v;
    ck->origin[0] = ck->origin[1] = 0;
    ck->rep->tile_size_m = v;
    return TERRA_OK;
}

/* ---- promise 1: the tile decodes and reads back as written ------------------------------------- */

static terra_status reads_back(checker *ck, const terra_archive_entry *e, terra_qmesh *m, const char *name) {
    uint8_t *raw = NULL, *again = NULL;
    size_t raw_n = 0, written = 0;
    terra_status st = terra_archive_read_entry(ck->a, e, &raw, &raw_n);
    if (st) return st;
    /* a decoded tile is in first-use order already (high-water-mark coding makes it so); the
     * reorder is the encoder's precondition, and a tile that is not in that order is not as written */
    st = terra_qmesh_reorder(m, NULL);
    const size_t cap = terra_qmesh_encoded_size(m);
    if (!st) {
        again = terra_alloc(cap ? cap : 1);
        if (!again) st = terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    }
    if (!st) st = terra_qmesh_encode(m, again, cap, &written);
    if (st == TERRA_E_INVALID || st == TERRA_E_CAPACITY)
        st = broken(ck, "tile %s decodes but does not encode again: %s", name, terra_last_error());
    if (!st && (written != raw_n || memcmp(again, raw, raw_n) != 0)) {
        size_t at = 0;
        while (at < written && at < raw_n && again[at] == raw[at]) at++;
        st = broken(ck, "tile %s does not read back as written: its decoded mesh encodes to %zu bytes, the stored tile "
                        "has %zu, first difference at byte %zu",
                    name, written, raw_n, at);
    }
    terra_free(again);
    terra_free(raw);
    return st;
}

/* The edge lists name exactly the vertices on each side; header heights inside the entry's range. */
static terra_status tile_consistent(checker *ck, const terra_archive_entry *e, const terra_qmesh *m, const char *name,
                                    uint8_t *mark) {
    if (m->header.min_height < e->min_height || m->header.max_height > e->max_height)
        return broken(ck, "tile %s: header heights %g..%g outside the index entry's %g..%g", name,
                      (double)m->header.min_height, (double)m->header.max_height, (double)e->min_height,
                      (double)e->max_height);
    for (int s = 0; s < 4; s++) {
        memset(mark, 0, m->vertex_count);
        uint32_t on_side = 0;
        for (uint32_t i = 0; i < m->vertex_count; i++) {
            const uint16_t c = (s == WEST || s == EAST) ? m->u[i] : m->v[i];
            const bool on = (s == WEST || s == SOUTH) ? c == 0 : c == TERRA_QMESH_MAX_COORD;
            if (on) mark[i] = 1, on_side++;
        }
        for (uint32_t k = 0; k < m->edge_count[s]; k++) {
            const uint32_t i = m->edges[s][k];
            if (mark[i] != 1)
                return broken(ck, "tile %s: its %s edge list names vertex %u %s", name, side_names[s], i,
                              mark[i] == 2 ? "twice" : "which is not on that side");
            mark[i] = 2;
        }
        if (m->edge_count[s] != on_side)
            return broken(ck, "tile %s: %u vertices lie on its %s side, its edge list names %u", name, on_side,
                          side_names[s], m->edge_count[s]);
    }
    return TERRA_OK;
}

/* ---- the border of one tile -------------------------------------------------------------------- */

static terra_status keep_border(checker *ck, tile_data *tl, const terra_qmesh *m, const double *X, const double *Y,
                                const double *H) {
    for (int s = 0; s < 4; s++) {
        side_data *sd = &tl->side[s];
        const bool vertical = s == WEST || s == EAST;
        sd->v0 = ck->vert_count;
        for (uint32_t k = 0; k < m->edge_count[s]; k++) {
            const uint32_t i = m->edges[s][k];
            if (!grow((void **)&ck->verts, &ck->vert_cap, ck->vert_count + 1, sizeof *ck->verts))
                return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
            ck->verts[ck->vert_count++] = (bvert){vertical ? Y[i] : X[i], H[i]};
        }
        sd->vn = ck->vert_count - sd->v0;
        qsort(ck->verts + sd->v0, sd->vn, sizeof *ck->verts, cmp_bvert);
        /* border edges: triangle edges with both ends on this side (the edge lists say which) */
        sd->e0 = ck->edge_count;
        sd->longest = 0;
        for (uint32_t t = 0; t < m->triangle_count; t++)
            for (int j = 0; j < 3; j++) {
                const uint32_t p = m->indices[3 * t + j], q = m->indices[3 * t + (j + 1) % 3];
                const uint16_t cp = vertical ? m->u[p] : m->v[p], cq = vertical ? m->u[q] : m->v[q];
                const uint16_t want = (s == WEST || s == SOUTH) ? 0 : TERRA_QMESH_MAX_COORD;
                if (cp != want || cq != want) continue;
                bvert va = {vertical ? Y[p] : X[p], H[p]}, vb = {vertical ? Y[q] : X[q], H[q]};
                if (cmp_bvert(&va, &vb) > 0) {
                    const bvert tmp = va;
                    va = vb, vb = tmp;
                }
                if (!grow((void **)&ck->edges, &ck->edge_cap, ck->edge_count + 1, sizeof *ck->edges))
                    return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
                ck->edges[ck->edge_count++] = (bedge){va, vb};
                if (vb.t - va.t > sd->longest) sd->longest = vb.t - va.t;
            }
        sd->en = ck->edge_count - sd->e0;
        qsort(ck->edges + sd->e0, sd->en, sizeof *ck->edges, cmp_bedge);
    }
    return TERRA_OK;
}

/* ---- promise 3: stated error against the sources ----------------------------------------------- */

/* The overlap rule (terra/cook_io.h, docs/FORMAT.md): sources ranked finest first (the smaller
 * sample, in world units squared), then in the order given. Whether source j is the ground at world
 * point (X, Y) as a bilinear reader sees it: inside its sample centres (to a millionth of a sample)
 * and every sample with a weight there holds a height. */
static bool has_data(const checker *ck, int j, double X, double Y) {
    const source *S = &ck->src[j];
    double c = S->inv[0] + S->inv[1] * X + S->inv[2] * Y, r = S->inv[3] + S->inv[4] * X + S->inv[5] * Y;
    if (fabs(c - nearbyint(c)) < 1e-6) c = nearbyint(c);
    if (fabs(r - nearbyint(r)) < 1e-6) r = nearbyint(r);
    if (!(c >= 0 && c <= S->r.width - 1 && r >= 0 && r <= S->r.height - 1)) return false;
    const size_t i = (size_t)c, k = (size_t)r, W = (size_t)S->r.width;
    for (size_t b = 0; b <= (r > (double)k); b++)
        for (size_t a = 0; a <= (c > (double)i); a++)
            if (isnan(S->r.heights[(k + b) * W + i + a])) return false;
    return true;
}

static bool ranks_before(const checker *ck, int j, int i) {
    const double a = ck->src[j].area, b = ck->src[i].area;
    return a < b || (a == b && j < i);
}

/* Whether another source decides the ground at (X, Y): for a sample of source i that holds a height,
 * one ranked before it with data there; for a no-data sample, any with data there. */
static bool other_ground(const checker *ck, int i, bool nodata, double X, double Y) {
    for (int j = 0; j < ck->src_count; j++)
        if (j != i && (nodata || ranks_before(ck, j, i)) && has_data(ck, j, X, Y)) return true;
    return false;
}

typedef struct tile_measure {
    double worst_excess;   /* largest deviation - (stated + allowance) */
    double dev, allowance, tile_h, sample_h;
    int src, c, r;
    double max_dev, max_allowance;
    uint64_t samples;      /* distinct samples checked */
    /* the tile's window of the source being measured: one byte a sample, set once checked */
    long wc0, wr0, ww, wh;
    uint8_t *seen;
    /* the tile as decoded (world positions) and its rim: the edges one triangle alone has (its
     * sides and hole rims), vertex pairs, found at the first no-data sample under it */
    const terra_qmesh *m;
    const double *X, *Y;
    uint64_t *rim;
    size_t rim_count, rim_cap;
    bool rim_found;
} tile_measure;

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The tile's rim into tm->rim (each edge as min << 32 | max). */
static terra_status find_rim(tile_measure *tm) {
    const terra_qmesh *m = tm->m;
    const size_t n = 3 * (size_t)m->triangle_count;
    if (!grow((void **)&tm->rim, &tm->rim_cap, n + 1, sizeof *tm->rim))
        return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    for (size_t i = 0; i < n; i++) {
        const uint64_t a = m->indices[i], b = m->indices[i % 3 == 2 ? i - 2 : i + 1];
        tm->rim[i] = a < b ? a << 32 | b : b << 32 | a;
    }
    qsort(tm->rim, n, sizeof *tm->rim, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && tm->rim[j] == tm->rim[i]) j++;
        if (j - i == 1) tm->rim[k++] = tm->rim[i];
        i = j;
    }
    tm->rim_count = k, tm->rim_found = true;
    return TERRA_OK;
}

/* Distance, in source S's samples, from sample (c, r) to the tile's rim. */
static double rim_distance(const source *S, const tile_measure *tm, double c, double r) {
    const double *iv = S->inv;
    double best = INFINITY;
    for (size_t i = 0; i < tm->rim_count; i++) {
        const uint32_t e[2] = {(uint32_t)(tm->rim[i] >> 32), (uint32_t)tm->rim[i]};
        double pc[2], pr[2];
        for (int k = 0; k < 2; k++) {
            pc[k] = iv[0] + iv[1] * tm->X[e[k]] + iv[2] * tm->Y[e[k]];
            pr[k] = iv[3] + iv[4] * tm->X[e[k]] + iv[5] * tm->Y[e[k]];
        }
        const double dc = pc[1] - pc[0], dr = pr[1] - pr[0], len2 = dc * dc + dr * dr;
        double t = len2 > 0 ? ((c - pc[0]) * dc + (r - pr[0]) * dr) / len2 : 0;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        best = fmin(best, hypot(c - pc[0] - t * dc, r - pr[0] - t * dr));
    }
    return best;
}

/* One sample's deviation (height ht drawn for it, hs the source's) into the tile's figures. */
static void record(const checker *ck, tile_measure *tm, int si, long cc, long rr, double ht, float hs, double stated,
                   double allowance) {
    uint8_t *seen = &tm->seen[(size_t)(rr - tm->wr0) * (size_t)tm->ww + (size_t)(cc - tm->wc0)];
    tm->samples += !*seen;
    const double dev = fabs(ht - hs);
    if (dev > tm->max_dev) tm->max_dev = dev;
    if (allowance > tm->max_allowance) tm->max_allowance = allowance;
    const double excess = dev - (stated + (ck->d->allow_quantization ? allowance : STATED_SLACK));
    if (excess > tm->worst_excess) {
        tm->worst_excess = excess, tm->dev = dev, tm->allowance = allowance;
        tm->tile_h = ht, tm->sample_h = hs, tm->src = si, tm->c = (int)cc, tm->r = (int)rr;
    }
}

/* Every sample of source si under one triangle (world X, Y, H at its corners), as a client draws
 * it: inside or on it (pass 0, marked seen 1), against its plane; or (pass 1) within what 16-bit
 * quantization moves its edges of it but under no triangle (seen 0: the tile's rim moved off it),
 * against its nearest point (never its plane beyond the triangle, where a sliver's tilts without
 * bound). */
static terra_status measure_triangle(checker *ck, const tile_data *tl, int si, const double X[3], const double Y[3],
                                     const double H[3], double stated, double step_h, int pass, tile_measure *tm) {
    const source *S = &ck->src[si];
    const double *iv = S->inv;
    double c[3], r[3];
    for (int k = 0; k < 3; k++) {
        c[k] = iv[0] + iv[1] * X[k] + iv[2] * Y[k];
        r[k] = iv[3] + iv[4] * X[k] + iv[5] * Y[k];
    }
    const double area2 = (c[1] - c[0]) * (r[2] - r[0]) - (c[2] - c[0]) * (r[1] - r[0]);
    /* a triangle with no area in the plane (a wall) covers no sample */
    if (fabs(area2) < 1e-12) return TERRA_OK;
    /* quantization moves a vertex by up to half a step in x and y: in samples, along c and r */
    const double qc = 0.5 * step_h * (fabs(iv[1]) + fabs(iv[2])), qr = 0.5 * step_h * (fabs(iv[4]) + fabs(iv[5]));
    const double q = hypot(qc, qr);
    const double cmin = fmin(c[0], fmin(c[1], c[2])) - q, cmax = fmax(c[0], fmax(c[1], c[2])) + q;
    const double rmin = fmin(r[0], fmin(r[1], r[2])) - q, rmax = fmax(r[0], fmax(r[1], r[2])) + q;
    const long c0 = (long)fmax((double)tm->wc0, ceil(cmin)), c1 = (long)fmin((double)(tm->wc0 + tm->ww - 1), floor(cmax));
    const long r0 = (long)fmax((double)tm->wr0, ceil(rmin)), r1 = (long)fmin((double)(tm->wr0 + tm->wh - 1), floor(rmax));
    if (c0 > c1 || r0 > r1) return TERRA_OK;
    /* plane of the triangle in (c, r): h = H0 + gc (c - c0) + gr (r - r0) */
    const double gc = ((H[1] - H[0]) * (r[2] - r[0]) - (H[2] - H[0]) * (r[1] - r[0])) / area2;
    const double gr = ((c[1] - c[0]) * (H[2] - H[0]) - (c[2] - c[0]) * (H[1] - H[0])) / area2;
    /* what 16-bit quantization of this tile may add here: a vertical step, and the slope over a
     * horizontal step (both twice the half step each vertex may move) */
    const double allowance = tl->step_v + (fabs(gc) * qc + fabs(gr) * qr) * 2;
    double en[3][3]; /* per edge: unit normal (c, r) pointing inside, offset */
    const double sgn = area2 > 0 ? 1 : -1;
    for (int k = 0; k < 3; k++) {
        const int k1 = (k + 1) % 3;
        const double dc = c[k1] - c[k], dr = r[k1] - r[k], len = hypot(dc, dr);
        en[k][0] = -dr * sgn / len, en[k][1] = dc * sgn / len;
        en[k][2] = -(en[k][0] * c[k] + en[k][1] * r[k]);
    }
    for (long rr = r0; rr <= r1; rr++)
        for (long cc = c0; cc <= c1; cc++) {
            double dmin = INFINITY;
            for (int k = 0; k < 3; k++) dmin = fmin(dmin, en[k][0] * cc + en[k][1] * rr + en[k][2]);
            const bool under = dmin >= -1e-10;
            if (pass == 0 ? !under : under || tm->seen[(size_t)(rr - tm->wr0) * (size_t)tm->ww + (size_t)(cc - tm->wc0)] == 1)
                continue;
            const float hs = S->r.heights[(size_t)rr * (size_t)S->r.width + (size_t)cc];
            if (pass == 1 && isnan(hs)) continue;
            double ht = H[0] + gc * (cc - c[0]) + gr * (rr - r[0]);
            if (pass == 1) { /* the triangle's nearest point: on the nearest of its edges */
                double best = INFINITY;
                for (int k = 0; k < 3; k++) {
                    const int k1 = (k + 1) % 3;
                    const double dc = c[k1] - c[k], dr = r[k1] - r[k];
                    double t = ((cc - c[k]) * dc + (rr - r[k]) * dr) / (dc * dc + dr * dr);
                    t = t < 0 ? 0 : t > 1 ? 1 : t;
                    const double d = hypot(cc - c[k] - t * dc, rr - r[k] - t * dr);
                    if (d < best) best = d, ht = H[k] + t * (H[k1] - H[k]);
                }
                if (best > q) continue;
            }
            const double Xs = S->a[0] + S->a[1] * cc + S->a[2] * rr, Ys = S->a[3] + S->a[4] * cc + S->a[5] * rr;
            if (ck->src_count > 1 && other_ground(ck, si, isnan(hs), Xs, Ys)) continue;
            if (isnan(hs)) {
                /* a hole under the drawn ground by more than quantization moves its rim */
                if (!tm->rim_found) {
                    terra_status st = find_rim(tm);
                    if (st) return st;
                }
                if (!(rim_distance(S, tm, cc, rr) > q)) continue;
                char nm[64];
                tile_name(tl, nm, sizeof nm);
                const bool loc = ck->frame == TERRA_FRAME_LOCAL;
                return broken(ck, "tile %s covers a hole: no-data sample (%ld, %ld) of %s (%s %.9g, %s %.9g) lies inside "
                                  "its triangle (%.9g, %.9g), (%.9g, %.9g), (%.9g, %.9g)",
                              nm, cc, rr, S->path, loc ? "x" : "lon", Xs, loc ? "z" : "lat", Ys, X[0], Y[0], X[1], Y[1],
                              X[2], Y[2]);
            }
            record(ck, tm, si, cc, rr, ht, hs, stated, allowance);
            uint8_t *seen = &tm->seen[(size_t)(rr - tm->wr0) * (size_t)tm->ww + (size_t)(cc - tm->wc0)];
            *seen = (uint8_t)(pass + 1);
        }
    return TERRA_OK;
}

/* The tile against every source: the samples under its triangles. */
static terra_status measure_tile(checker *ck, const tile_data *tl, const terra_qmesh *m, const double *X,
                                 const double *Y, const double *H, double stated, tile_measure *tm, uint8_t **seen,
                                 size_t *seen_cap) {
    const double step_h = tl->size / QMAX;
    for (int si = 0; si < ck->src_count; si++) {
        const source *S = &ck->src[si];
        /* the tile's rectangle in samples, one sample wider all round (quantization) */
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int k = 0; k < 4; k++) {
            const double wx = tl->x0 + ((k & 1) ? tl->size : 0), wy = tl->y0 + ((k & 2) ? tl->size : 0);
            const double cr[2] = {S->inv[0] + S->inv[1] * wx + S->inv[2] * wy, S->inv[3] + S->inv[4] * wx + S->inv[5] * wy};
            for (int j = 0; j < 2; j++) lo[j] = fmin(lo[j], cr[j]), hi[j] = fmax(hi[j], cr[j]);
        }
        tm->wc0 = (long)fmax(0, floor(lo[0]) - 1), tm->wr0 = (long)fmax(0, floor(lo[1]) - 1);
        const long wc1 = (long)fmin(S->r.width - 1, ceil(hi[0]) + 1), wr1 = (long)fmin(S->r.height - 1, ceil(hi[1]) + 1);
        if (wc1 < tm->wc0 || wr1 < tm->wr0) continue;
        tm->ww = wc1 - tm->wc0 + 1, tm->wh = wr1 - tm->wr0 + 1;
        const size_t cells = (size_t)tm->ww * (size_t)tm->wh;
        if (!grow((void **)seen, seen_cap, cells, 1)) return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
        memset(*seen, 0, cells);
        tm->seen = *seen;
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t t = 0; t < m->triangle_count; t++) {
                const uint32_t *ix = &m->indices[3 * t];
                const double tx[3] = {X[ix[0]], X[ix[1]], X[ix[2]]}, ty[3] = {Y[ix[0]], Y[ix[1]], Y[ix[2]]};
                const double th[3] = {H[ix[0]], H[ix[1]], H[ix[2]]};
                terra_status st = measure_triangle(ck, tl, si, tx, ty, th, stated, step_h, pass, tm);
                if (st) return st;
            }
    }
    return TERRA_OK;
}

/* ---- scenery meshes as sources ----------------------------------------------------------------
 * The ground of a scenery (terra_scenery_read: what the cook takes as ground) in the local frame:
 * x = scenery x, z = scenery z, height = scenery y. Its vertices that belong to a triangle with area
 * in the plane are the samples (a vertex only walls use has no ground under it to compare); its
 * triangles with area say where ground is. Both in one bucket grid over the plane. */

typedef struct mesh_source {
    terra_scenery s;
    const char *path;
    double gx0, gz0, cell;
    long gw, gh;
    uint32_t *tri_start, *tri_items; /* ground triangles by cell (counting sort) */
    uint32_t *vtx_start, *vtx_items; /* ground vertices by cell */
    uint32_t *stamp;                 /* per vertex: 1 + the tile that last measured it */
    double *best;                    /* per vertex: the smallest distance to that tile's triangles */
    uint32_t *touched;               /* the vertices that tile measured */
} mesh_source;

static double tri_area2(const double *p, const uint32_t *t) {
    const double *a = p + 3 * t[0], *b = p + 3 * t[1], *c = p + 3 * t[2];
    return (b[0] - a[0]) * (c[2] - a[2]) - (c[0] - a[0]) * (b[2] - a[2]);
}

static long cell_of(const mesh_source *M, double v, bool z) {
    const long n = z ? M->gh : M->gw;
    const long i = (long)floor((v - (z ? M->gz0 : M->gx0)) / M->cell);
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* Counting sort of items into the cells their boxes overlap. */
static terra_status bucket(mesh_source *M, size_t n, const double *box /* 4 per item, NAN: skip */, uint32_t **start,
                           uint32_t **items) {
    const size_t cells = (size_t)M->gw * (size_t)M->gh;
    *start = terra_calloc(cells + 1, sizeof **start);
    if (!*start) return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (size_t c = 0; c < cells; c++) (*start)[c + 1] += (*start)[c];
            *items = terra_alloc(((size_t)(*start)[cells] + 1) * sizeof **items);
            if (!*items) return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            const double *b = box + 4 * i;
            if (isnan(b[0])) continue;
            for (long cz = cell_of(M, b[1], true); cz <= cell_of(M, b[3], true); cz++)
                for (long cx = cell_of(M, b[0], false); cx <= cell_of(M, b[2], false); cx++) {
                    const size_t c = (size_t)cz * (size_t)M->gw + (size_t)cx;
                    if (pass == 0) (*start)[c + 1]++;
                    else (*items)[(*start)[c]++] = (uint32_t)i;
                }
        }
        if (pass == 1) /* the fill moved each start to the next cell's: move them back */
            for (size_t c = cells; c > 0; c--) (*start)[c] = (*start)[c - 1];
        if (pass == 1) (*start)[0] = 0;
    }
    return TERRA_OK;
}

static terra_status open_mesh(mesh_source *M) {
    const terra_scenery *S = &M->s;
    const double *p = S->position;
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (size_t v = 0; v < S->vertex_count; v++)
        lo[0] = fmin(lo[0], p[3 * v]), hi[0] = fmax(hi[0], p[3 * v]), lo[1] = fmin(lo[1], p[3 * v + 2]),
        hi[1] = fmax(hi[1], p[3 * v + 2]);
    const double ext = fmax(hi[0] - lo[0], hi[1] - lo[1]);
    M->cell = fmax(ext / sqrt((double)S->triangle_count / 2 + 1), 1e-6);
    M->gx0 = lo[0], M->gz0 = lo[1];
    M->gw = (long)((hi[0] - lo[0]) / M->cell) + 1, M->gh = (long)((hi[1] - lo[1]) / M->cell) + 1;
    double *box = terra_alloc(4 * (S->triangle_count > S->vertex_count ? S->triangle_count : S->vertex_count) * sizeof *box + 1);
    bool *ground = terra_calloc(S->vertex_count + 1, sizeof *ground);
    M->stamp = terra_calloc(S->vertex_count + 1, sizeof *M->stamp);
    M->best = terra_alloc((S->vertex_count + 1) * sizeof *M->best);
    M->touched = terra_alloc((S->vertex_count + 1) * sizeof *M->touched);
    terra_status st = box && ground && M->stamp && M->best && M->touched ? TERRA_OK
                                                                         : terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    for (size_t t = 0; !st && t < S->triangle_count; t++) {
        const uint32_t *ix = S->tri + 3 * t;
        double *b = box + 4 * t;
        if (fabs(tri_area2(p, ix)) <= 1e-12) { /* a wall: no ground under it */
            b[0] = NAN;
            continue;
        }
        b[0] = b[2] = p[3 * ix[0]], b[1] = b[3] = p[3 * ix[0] + 2];
        for (int k = 0; k < 3; k++) {
            ground[ix[k]] = true;
            b[0] = fmin(b[0], p[3 * ix[k]]), b[2] = fmax(b[2], p[3 * ix[k]]);
            b[1] = fmin(b[1], p[3 * ix[k] + 2]), b[3] = fmax(b[3], p[3 * ix[k] + 2]);
        }
    }
    if (!st) st = bucket(M, S->triangle_count, box, &M->tri_start, &M->tri_items);
    for (size_t v = 0; !st && v < S->vertex_count; v++) {
        double *b = box + 4 * v;
        b[0] = ground[v] ? p[3 * v] : NAN, b[1] = b[3] = p[3 * v + 2], b[2] = p[3 * v];
    }
    if (!st) st = bucket(M, S->vertex_count, box, &M->vtx_start, &M->vtx_items);
    terra_free(box);
    terra_free(ground);
    return st;
}

static void close_mesh(mesh_source *M) {
    terra_scenery_free(&M->s);
    terra_free(M->tri_start), terra_free(M->tri_items), terra_free(M->vtx_start), terra_free(M->vtx_items);
    terra_free(M->stamp), terra_free(M->best), terra_free(M->touched);
}

/* Signed distances of (x, z) to the three edge lines of a triangle, the smallest (positive inside). */
static double inside_by(const double tx[3], const double tz[3], double x, double z) {
    const double area2 = (tx[1] - tx[0]) * (tz[2] - tz[0]) - (tx[2] - tx[0]) * (tz[1] - tz[0]);
    const double sgn = area2 > 0 ? 1 : -1;
    double dmin = INFINITY;
    for (int k = 0; k < 3; k++) {
        const int k1 = (k + 1) % 3;
        const double dx = tx[k1] - tx[k], dz = tz[k1] - tz[k], len = hypot(dx, dz);
        dmin = fmin(dmin, sgn * (dx * (z - tz[k]) - dz * (x - tx[k])) / len);
    }
    return dmin;
}

/* One tile against one scenery: every ground vertex under its triangles (the nearest of the heights
 * there: where a wall stands a point has two), and every triangle over ground. */
static terra_status measure_tile_mesh(checker *ck, const tile_data *tl, uint32_t tile_index, const terra_qmesh *m,
                                      const double *X, const double *Y, const double *H, double stated, int mi,
                                      tile_measure *tm) {
    mesh_source *M = &ck->mesh[mi];
    const double *p = M->s.position;
    const double q = 0.5 * tl->size / QMAX * 2; /* a vertex moves by up to half a step in x and in z */
    size_t touched = 0;
    char nm[64];
    for (uint32_t t = 0; t < m->triangle_count; t++) {
        const uint32_t *ix = &m->indices[3 * t];
        const double tx[3] = {X[ix[0]], X[ix[1]], X[ix[2]]}, tz[3] = {Y[ix[0]], Y[ix[1]], Y[ix[2]]};
        const double area2 = (tx[1] - tx[0]) * (tz[2] - tz[0]) - (tx[2] - tx[0]) * (tz[1] - tz[0]);
        if (fabs(area2) < q * q) continue; /* a wall, or quantized to one */
        /* over ground: its centroid inside one of the scenery's ground triangles */
        const double cx = (tx[0] + tx[1] + tx[2]) / 3, cz = (tz[0] + tz[1] + tz[2]) / 3;
        const size_t c = (size_t)cell_of(M, cz, true) * (size_t)M->gw + (size_t)cell_of(M, cx, false);
        bool over = false;
        for (uint32_t k = M->tri_start[c]; k < M->tri_start[c + 1] && !over; k++) {
            const uint32_t *sx = M->s.tri + 3 * M->tri_items[k];
            const double ax[3] = {p[3 * sx[0]], p[3 * sx[1]], p[3 * sx[2]]};
            const double az[3] = {p[3 * sx[0] + 2], p[3 * sx[1] + 2], p[3 * sx[2] + 2]};
            over = inside_by(ax, az, cx, cz) >= -q;
        }
        if (!over) {
            tile_name(tl, nm, sizeof nm);
            return broken(ck, "tile %s covers a hole: its triangle (%.9g, %.9g), (%.9g, %.9g), (%.9g, %.9g) (x, z) has no "
                              "ground of %s under its centre (x %.9g, z %.9g)",
                          nm, tx[0], tz[0], tx[1], tz[1], tx[2], tz[2], M->path, cx, cz);
        }
        /* the scenery's vertices under it */
        const double bx0 = fmin(tx[0], fmin(tx[1], tx[2])) - q, bx1 = fmax(tx[0], fmax(tx[1], tx[2])) + q;
        const double bz0 = fmin(tz[0], fmin(tz[1], tz[2])) - q, bz1 = fmax(tz[0], fmax(tz[1], tz[2])) + q;
        const double gx = ((H[ix[1]] - H[ix[0]]) * (tz[2] - tz[0]) - (H[ix[2]] - H[ix[0]]) * (tz[1] - tz[0])) / area2;
        const double gz = ((tx[1] - tx[0]) * (H[ix[2]] - H[ix[0]]) - (tx[2] - tx[0]) * (H[ix[1]] - H[ix[0]])) / area2;
        const double allowance = tl->step_v + (fabs(gx) + fabs(gz)) * q * 2;
        for (long gz_ = cell_of(M, bz0, true); gz_ <= cell_of(M, bz1, true); gz_++)
            for (long gx_ = cell_of(M, bx0, false); gx_ <= cell_of(M, bx1, false); gx_++) {
                const size_t cc = (size_t)gz_ * (size_t)M->gw + (size_t)gx_;
                for (uint32_t k = M->vtx_start[cc]; k < M->vtx_start[cc + 1]; k++) {
                    const uint32_t v = M->vtx_items[k];
                    const double vx = p[3 * v], vz = p[3 * v + 2];
                    if (vx < bx0 || vx > bx1 || vz < bz0 || vz > bz1 || inside_by(tx, tz, vx, vz) < -q) continue;
                    const double dev = fabs(H[ix[0]] + gx * (vx - tx[0]) + gz * (vz - tz[0]) - p[3 * v + 1]);
                    if (M->stamp[v] != tile_index + 1) {
                        M->stamp[v] = tile_index + 1;
                        M->best[v] = INFINITY;
                        M->touched[touched++] = v;
                    }
                    if (dev < M->best[v]) M->best[v] = dev;
                    if (allowance > tm->max_allowance) tm->max_allowance = allowance;
                }
            }
    }
    for (size_t k = 0; k < touched; k++) {
        const uint32_t v = M->touched[k];
        const double dev = M->best[v];
        tm->samples++;
        if (dev > tm->max_dev) tm->max_dev = dev;
        const double excess = dev - (stated + (ck->d->allow_quantization ? tm->max_allowance : STATED_SLACK));
        if (excess > tm->worst_excess) {
            tm->worst_excess = excess, tm->dev = dev, tm->allowance = tm->max_allowance;
            tm->sample_h = p[3 * v + 1], tm->tile_h = NAN, tm->src = -1 - mi, tm->c = (int)v, tm->r = 0;
        }
    }
    return TERRA_OK;
}

/* ---- walls laid once ---------------------------------------------------------------------------
 * A wall is a triangle with no area in the plane (its three u, v on one line) and some height. The
 * same wall twice at one level (in one tile, or in two tiles on either side of the line it stands
 * on) is a wall laid twice. */
typedef struct wall_tri {
    int level;
    uint32_t tile;
    double p[9]; /* corners (x, z, h), sorted */
    double tol_h, tol_v;
} wall_tri;

static int cmp_corner(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}
static int cmp_wall(const void *pa, const void *pb) {
    const wall_tri *a = pa, *b = pb;
    if (a->level != b->level) return a->level < b->level ? -1 : 1;
    for (int k = 0; k < 9; k++)
        if (a->p[k] != b->p[k]) return a->p[k] < b->p[k] ? -1 : 1;
    return 0;
}

static terra_status keep_walls(checker *ck, const tile_data *tl, uint32_t tile, const terra_qmesh *m, const double *X,
                               const double *Y, const double *H) {
    for (uint32_t t = 0; t < m->triangle_count; t++) {
        const uint32_t *ix = &m->indices[3 * t];
        const int64_t cross = ((int64_t)m->u[ix[1]] - m->u[ix[0]]) * ((int64_t)m->v[ix[2]] - m->v[ix[0]]) -
                              ((int64_t)m->u[ix[2]] - m->u[ix[0]]) * ((int64_t)m->v[ix[1]] - m->v[ix[0]]);
        if (cross != 0 || (m->h[ix[0]] == m->h[ix[1]] && m->h[ix[1]] == m->h[ix[2]])) continue;
        if (!grow((void **)&ck->walls, &ck->wall_cap, ck->wall_count + 1, sizeof *ck->walls))
            return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
        wall_tri *w = &ck->walls[ck->wall_count++];
        w->level = tl->level, w->tile = tile;
        for (int k = 0; k < 3; k++) w->p[3 * k] = X[ix[k]], w->p[3 * k + 1] = Y[ix[k]], w->p[3 * k + 2] = H[ix[k]];
        qsort(w->p, 3, 3 * sizeof(double), cmp_corner);
        w->tol_h = fmax(ck->frame == TERRA_FRAME_LOCAL ? 1e-3 : MM_DEGREES, tl->size / QMAX);
        w->tol_v = fmax(1e-3, tl->step_v);
    }
    return TERRA_OK;
}

static bool same_wall(const wall_tri *a, const wall_tri *b) {
    const double th = fmax(a->tol_h, b->tol_h), tv = fmax(a->tol_v, b->tol_v);
    for (int k = 0; k < 3; k++)
        if (fabs(a->p[3 * k] - b->p[3 * k]) > th || fabs(a->p[3 * k + 1] - b->p[3 * k + 1]) > th ||
            fabs(a->p[3 * k + 2] - b->p[3 * k + 2]) > tv)
            return false;
    return true;
}

static terra_status check_walls(checker *ck) {
    if (ck->wall_count == 0) return TERRA_OK;
    qsort(ck->walls, ck->wall_count, sizeof *ck->walls, cmp_wall);
    for (size_t i = 0; i < ck->wall_count; i++) {
        /* sorted by the first corner's x: a twin lies within tolerance of it further on */
        for (size_t j = i + 1; j < ck->wall_count && ck->walls[j].level == ck->walls[i].level &&
                               ck->walls[j].p[0] <= ck->walls[i].p[0] + fmax(ck->walls[i].tol_h, ck->walls[j].tol_h);
             j++) {
            if (!same_wall(&ck->walls[i], &ck->walls[j])) continue;
            char na[64], nb[64];
            tile_name(&ck->tiles[ck->walls[i].tile], na, sizeof na);
            tile_name(&ck->tiles[ck->walls[j].tile], nb, sizeof nb);
            const double *p = ck->walls[i].p;
            return broken(ck, "a wall is laid twice at level %d, in tile %s and in tile %s: the vertical triangle (%.9g, "
                              "%.9g, %.6g m), (%.9g, %.9g, %.6g m), (%.9g, %.9g, %.6g m)",
                          ck->walls[i].level, na, nb, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]);
        }
    }
    return TERRA_OK;
}

/* ---- pass 1: every tile ------------------------------------------------------------------------ */

static terra_status check_tile(checker *ck, uint64_t index, tile_data *tl, double **scratch, size_t *scratch_cap,
                               uint8_t **mark, size_t *mark_cap, uint8_t **seen, size_t *seen_cap) {
    terra_archive_entry e;
    terra_status st = terra_archive_entry_at(ck->a, index, &e);
    if (st) return st == TERRA_E_CORRUPT ? broken(ck, "index entry %llu: %s", (unsigned long long)index, terra_last_error()) : st;
    const int level = terra_tile_key_level(e.key);
    tl->key = e.key, tl->level = level, tl->x = terra_tile_key_x(e.key), tl->y = terra_tile_key_y(e.key);
    tl->size = tile_side(ck, level);
    tl->x0 = ck->origin[0] + tl->x * tl->size, tl->y0 = ck->origin[1] + tl->y * tl->size;
    char name[64];
    tile_name(tl, name, sizeof name);

    terra_qmesh m;
    st = terra_archive_check_tile(ck->a, &e, &ck->rules, &m, NULL);
    if (st == TERRA_E_CORRUPT || st == TERRA_E_CAPACITY || st == TERRA_E_FORMAT)
        return broken(ck, "tile %s does not decode: %s", name, terra_last_error());
    if (st) return st;
    if (!grow((void **)mark, mark_cap, m.vertex_count + 1, 1) ||
        !grow((void **)scratch, scratch_cap, 3 * (size_t)m.vertex_count + 1, sizeof **scratch)) {
        terra_qmesh_free(&m);
        return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    }
    st = reads_back(ck, &e, &m, name);
    if (!st) st = tile_consistent(ck, &e, &m, name, *mark);
    /* world positions: u, v across the tile's rectangle, heights across the header's range */
    double *X = *scratch, *Y = X + m.vertex_count, *H = Y + m.vertex_count;
    const double lo = m.header.min_height, hi = m.header.max_height;
    tl->step_v = (hi - lo) / QMAX;
    for (uint32_t i = 0; !st && i < m.vertex_count; i++) {
        X[i] = tl->x0 + m.u[i] / QMAX * tl->size;
        Y[i] = tl->y0 + m.v[i] / QMAX * tl->size;
        H[i] = lo + m.h[i] / QMAX * (hi - lo);
    }
    if (!st) st = keep_border(ck, tl, &m, X, Y, H);
    if (!st) st = keep_walls(ck, tl, (uint32_t)index, &m, X, Y, H);
    for (uint32_t i = 0; !st && ck->rep->layers && m.materials && i < m.vertex_count; i++)
        if (m.materials[i] >= ck->rep->layers)
            st = broken(ck, "tile %s: vertex %u carries material %u, the layer table has %d", name, i, m.materials[i],
                        ck->rep->layers);

    terra_cook_check_level *L = &ck->rep->level[level];
    L->tiles++, L->vertices += m.vertex_count, L->triangles += m.triangle_count;
    if (e.geometric_error > L->stated_error_max) L->stated_error_max = e.geometric_error;
    tl->stated = e.geometric_error;
    if (!st && (ck->src_count || ck->mesh_count)) {
        tile_measure tm = {.worst_excess = 0, .m = &m, .X = X, .Y = Y, .rim = ck->rim, .rim_cap = ck->rim_cap};
        if (ck->src_count) st = measure_tile(ck, tl, &m, X, Y, H, e.geometric_error, &tm, seen, seen_cap);
        ck->rim = tm.rim, ck->rim_cap = tm.rim_cap;
        for (int mi = 0; !st && mi < ck->mesh_count; mi++)
            st = measure_tile_mesh(ck, tl, (uint32_t)index, &m, X, Y, H, e.geometric_error, mi, &tm);
        L->samples += tm.samples;
        if (tm.max_dev > L->measured_error_max) L->measured_error_max = tm.max_dev;
        if (tm.max_allowance > L->quantization_max) L->quantization_max = tm.max_allowance;
        if (!st && tm.worst_excess > 0) {
            char allowed[96] = "", where[256];
            if (ck->d->allow_quantization)
                snprintf(allowed, sizeof allowed, ", 16-bit quantization allowance there %.3g m", tm.allowance);
            else
                snprintf(allowed, sizeof allowed, "; 16-bit quantization accounts for up to %.3g m of it there", tm.allowance);
            if (tm.src >= 0) {
                const source *S = &ck->src[tm.src];
                const double Xs = S->a[0] + S->a[1] * tm.c + S->a[2] * tm.r, Ys = S->a[3] + S->a[4] * tm.c + S->a[5] * tm.r;
                const bool loc = ck->frame == TERRA_FRAME_LOCAL;
                snprintf(where, sizeof where, "sample (%d, %d) of %s (%s %.9g, %s %.9g): tile %.6g m, source %.6g m", tm.c,
                         tm.r, S->path, loc ? "x" : "lon", Xs, loc ? "z" : "lat", Ys, tm.tile_h, tm.sample_h);
            } else {
                const mesh_source *M = &ck->mesh[-1 - tm.src];
                const double *v = M->s.position + 3 * (size_t)tm.c;
                snprintf(where, sizeof where, "ground vertex %d of %s (x %.9g, y %.9g, z %.9g; the nearest of the tile's "
                         "heights there)", tm.c, M->path, v[0], v[1], v[2]);
            }
            st = broken(ck, "tile %s states a geometric error of %.6g m but lies %.6g m from %s%s", name,
                        (double)e.geometric_error, tm.dev, where, allowed);
        }
    }
    terra_qmesh_free(&m);
    return st;
}

/* ---- pass 2: borders --------------------------------------------------------------------------- */

typedef struct pair_ctx {
    checker *ck;
    const tile_data *fine, *coarse;  /* coarse: the wider (or, same level, the east / north one) */
    int fine_side, coarse_side;
    double s0, s1, tol_h, tol_v;
} pair_ctx;

/* First vertex of a side with t >= t (binary search). */
static size_t lower_vert(const bvert *v, size_t n, double t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].t < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
static size_t lower_edge(const bedge *e, size_t n, double t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e[mid].a.t < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The length of [t0, t1] that the side's border edges cover (t0 == t1: tol when covered). */
static double covered(const checker *ck, const side_data *sd, double t0, double t1, double tol) {
    const bedge *e = ck->edges + sd->e0;
    double len = 0;
    for (size_t k = lower_edge(e, sd->en, t0 - sd->longest - tol); k < sd->en && e[k].a.t <= t1 + tol; k++) {
        const double lo = fmax(t0, e[k].a.t - tol), hi = fmin(t1, e[k].b.t + tol);
        if (hi >= lo) len += t0 == t1 ? tol : hi - lo;
    }
    return len;
}

static bool same_vert(const bvert *a, const bvert *b, double tol_h, double tol_v) {
    return fabs(a->t - b->t) <= tol_h && fabs(a->h - b->h) <= tol_v;
}

/* The heights a wall on the side spans at t (its vertical edges there: both ends at one t),
 * widened into *lo, *hi; false when the side has no wall at t. */
static bool wall_at(const checker *ck, const side_data *sd, double t, double tol, double *lo, double *hi) {
    const bedge *e = ck->edges + sd->e0;
    bool any = false;
    for (size_t k = lower_edge(e, sd->en, t - tol); k < sd->en && e[k].a.t <= t + tol; k++)
        if (e[k].b.t == e[k].a.t) {
            *lo = fmin(*lo, e[k].a.h), *hi = fmax(*hi, e[k].b.h);
            any = true;
        }
    return any;
}

/* Where a wall (two heights over one point of the side) stands on the shared side, the tile on
 * its foot's side has ground at one height only: a scenery's wall on a tile line is laid once, in
 * one of the two tiles. There the rule is that the two meet: the other tile has a vertex at t
 * within the wall's span. */
static bool meets_wall(const checker *ck, const side_data *A, const bvert *v, const side_data *B, double tol_h,
                       double tol_v, bool *walled) {
    double lo = INFINITY, hi = -INFINITY;
    const bool wa = wall_at(ck, A, v->t, tol_h, &lo, &hi), wb = wall_at(ck, B, v->t, tol_h, &lo, &hi);
    *walled = wa || wb;
    if (!*walled) return false;
    if (wb && v->h >= lo - tol_v && v->h <= hi + tol_v) return true;
    const bvert *vb = ck->verts + B->v0;
    for (size_t j = lower_vert(vb, B->vn, v->t - tol_h); j < B->vn && vb[j].t <= v->t + tol_h; j++)
        if (vb[j].h >= lo - tol_v && vb[j].h <= hi + tol_v) return true;
    return false;
}

/* Every vertex of side `a` on the segment where both have ground has its twin on side `b`. */
static terra_status match_vertices(pair_ctx *p, const tile_data *ta, int sa, const tile_data *tb, int sb,
                                   uint64_t *matched) {
    checker *ck = p->ck;
    const side_data *A = &ta->side[sa], *B = &tb->side[sb];
    const bvert *va = ck->verts + A->v0, *vb = ck->verts + B->v0;
    for (size_t k = lower_vert(va, A->vn, p->s0 - p->tol_h); k < A->vn && va[k].t <= p->s1 + p->tol_h; k++) {
        const double t = va[k].t;
        if (covered(ck, A, t, t, p->tol_h) <= 0 || covered(ck, B, t, t, p->tol_h) <= 0) continue;
        size_t j = lower_vert(vb, B->vn, t - p->tol_h), near = SIZE_MAX;
        bool found = false;
        for (; j < B->vn && vb[j].t <= t + p->tol_h; j++) {
            if (same_vert(&va[k], &vb[j], p->tol_h, p->tol_v)) found = true;
            if (near == SIZE_MAX || fabs(vb[j].h - va[k].h) < fabs(vb[near].h - va[k].h)) near = j;
        }
        bool walled = false;
        if (found || meets_wall(ck, A, &va[k], B, p->tol_h, p->tol_v, &walled)) {
            (*matched)++;
            continue;
        }
        char na[64], nb[64], at[128];
        tile_name(ta, na, sizeof na), tile_name(tb, nb, sizeof nb), place_name(ck, ta, sa, t, at, sizeof at);
        const char *unit = ck->frame == TERRA_FRAME_LOCAL ? "m" : "degrees";
        if (walled)
            return broken(ck, "crack between tiles %s and %s: at %s a wall stands on the shared side (%s's %s, %s's %s) "
                              "and the other tile has no vertex within its heights (%s's vertex %.6g m high)",
                          na, nb, at, na, side_names[sa], nb, side_names[sb], na, va[k].h);
        if (near != SIZE_MAX)
            return broken(ck, "crack between tiles %s and %s: at %s (%s's %s side, %s's %s side) one is %.6g m high, the "
                              "other %.6g m (%.3g m apart; tolerance %.3g m up)",
                          na, nb, at, na, side_names[sa], nb, side_names[sb], va[k].h, vb[near].h,
                          fabs(vb[near].h - va[k].h), p->tol_v);
        return broken(ck, "T-junction between tiles %s and %s: %s's %s side has a vertex at %s, %.6g m high, that %s's %s "
                          "side lacks (none within %.3g %s along it, where both have ground)",
                      na, nb, na, side_names[sa], at, va[k].h, nb, side_names[sb], p->tol_h, unit);
    }
    return TERRA_OK;
}

/* Every border edge of side `a` on the segment where `b` has ground too has its twin on `b`. */
static terra_status match_edges(pair_ctx *p, const tile_data *ta, int sa, const tile_data *tb, int sb) {
    checker *ck = p->ck;
    const side_data *A = &ta->side[sa], *B = &tb->side[sb];
    const bedge *ea = ck->edges + A->e0, *eb = ck->edges + B->e0;
    for (size_t k = lower_edge(ea, A->en, p->s0 - A->longest - p->tol_h); k < A->en && ea[k].a.t <= p->s1 + p->tol_h;
         k++) {
        const bedge *x = &ea[k];
        const double lo = fmax(x->a.t, p->s0), hi = fmin(x->b.t, p->s1);
        if (x->b.t > x->a.t ? hi - lo <= p->tol_h || covered(ck, B, lo, hi, p->tol_h) <= p->tol_h
                            : x->a.t < p->s0 - p->tol_h || x->a.t > p->s1 + p->tol_h || covered(ck, B, lo, lo, p->tol_h) <= 0)
            continue;
        double wlo = INFINITY, whi = -INFINITY;
        if ((wall_at(ck, A, x->a.t, p->tol_h, &wlo, &whi) || wall_at(ck, B, x->a.t, p->tol_h, &wlo, &whi)) &&
            (wall_at(ck, A, x->b.t, p->tol_h, &wlo, &whi) || wall_at(ck, B, x->b.t, p->tol_h, &wlo, &whi)))
            continue; /* along a wall on the side: the vertex rule has seen that the two meet */
        bool found = false;
        for (size_t j = lower_edge(eb, B->en, x->a.t - p->tol_h); j < B->en && eb[j].a.t <= x->a.t + p->tol_h && !found; j++)
            found = same_vert(&x->a, &eb[j].a, p->tol_h, p->tol_v) && same_vert(&x->b, &eb[j].b, p->tol_h, p->tol_v);
        if (found) continue;
        char na[64], nb[64], at0[128], at1[128];
        tile_name(ta, na, sizeof na), tile_name(tb, nb, sizeof nb);
        place_name(ck, ta, sa, x->a.t, at0, sizeof at0), place_name(ck, ta, sa, x->b.t, at1, sizeof at1);
        return broken(ck, "T-junction between tiles %s and %s: %s's %s side has a border edge from %s (%.6g m) to %s "
                          "(%.6g m) that %s's %s side does not have (its vertices split it or it lies elsewhere)",
                      na, nb, na, side_names[sa], at0, x->a.h, at1, x->b.h, nb, side_names[sb]);
    }
    return TERRA_OK;
}

static const tile_data *find_tile(const checker *ck, terra_tile_key key) {
    const uint64_t want = terra_archive_order(key);
    size_t lo = 0, hi = ck->tile_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint64_t o = terra_archive_order(ck->tiles[mid].key);
        if (o == want) return &ck->tiles[mid];
        if (o < want) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int64_t floor_div(int64_t a, int64_t f) { return a / f - ((a % f) != 0 && a < 0); }

static terra_status check_pair(checker *ck, const tile_data *fine, int fs, const tile_data *coarse) {
    static const int opposite[4] = {EAST, NORTH, WEST, SOUTH};
    const int cs = opposite[fs];
    const bool vertical = fs == WEST || fs == EAST;
    pair_ctx p = {ck, fine, coarse, fs, cs, 0, 0, 0, 0};
    p.s0 = vertical ? fine->y0 : fine->x0;
    p.s1 = p.s0 + fine->size;
    const double step_h = coarse->size / QMAX, mm = ck->frame == TERRA_FRAME_LOCAL ? 1e-3 : MM_DEGREES;
    const bool hold_mm = step_h <= mm;
    p.tol_h = hold_mm ? mm : step_h;
    p.tol_v = fmax(1e-3, fmax(fine->step_v, coarse->step_v));
    terra_cook_check_level *L = &ck->rep->level[fine->level];
    L->border_pairs++;
    L->border_pairs_mm += hold_mm && p.tol_v <= 1e-3;
    if (p.tol_h > L->border_tolerance_max) L->border_tolerance_max = p.tol_h;
    if (p.tol_v > L->border_vertical_tolerance_max) L->border_vertical_tolerance_max = p.tol_v;
    uint64_t matched = 0;
    terra_status st = match_vertices(&p, fine, fs, coarse, cs, &matched);
    if (!st) st = match_vertices(&p, coarse, cs, fine, fs, &matched);
    if (!st) st = match_edges(&p, fine, fs, coarse, cs);
    if (!st) st = match_edges(&p, coarse, cs, fine, fs);
    L->border_vertices += matched / 2;
    return st;
}

/* Every tile against its same-level neighbours east and north, and against every wider tile whose
 * side its own side lies on. */
/* ---- promise 4: a coarser tile states no less than its children ------------------------------- */

/* A client refines a tile whose error is too large for the view into its children, so none of
 * theirs may be larger (Cesium's terrain levels and 3D Tiles' geometricError keep that order). */
static terra_status check_stated_order(checker *ck) {
    for (size_t i = 0; i < ck->tile_count; i++) {
        const tile_data *c = &ck->tiles[i];
        const int up = ck->frame == TERRA_FRAME_LOCAL ? c->level + 1 : c->level - 1;
        if (up < 0 || up > TERRA_TILE_MAX_LEVEL) continue;
        const int32_t px = (int32_t)floor(c->x / 2.0), py = (int32_t)floor(c->y / 2.0);
        const tile_data *p = find_tile(ck, terra_tile_key_make(terra_tile_key_face(c->key), up, px, py));
        if (p && p->stated < c->stated) {
            char pn[64], cn[64];
            tile_name(p, pn, sizeof pn), tile_name(c, cn, sizeof cn);
            return broken(ck, "tile %s states a geometric error of %.6g m, less than its child %s's %.6g m: a coarser "
                              "tile must not state less",
                          pn, p->stated, cn, c->stated);
        }
    }
    return TERRA_OK;
}

static terra_status check_borders(checker *ck) {
    bool present[32] = {false};
    for (size_t i = 0; i < ck->tile_count; i++) present[ck->tiles[i].level] = true;
    for (size_t i = 0; i < ck->tile_count; i++) {
        const tile_data *b = &ck->tiles[i];
        for (int lv = 0; lv < 32; lv++) {
            if (!present[lv]) continue;
            const int k = level_exp(ck, lv) - level_exp(ck, b->level);
            if (k < 0 || k > 30) continue;
            const int64_t f = (int64_t)1 << k;
            for (int s = 0; s < 4; s++) {
                if (k == 0 && (s == WEST || s == SOUTH)) continue; /* the pair is met from the other tile */
                const bool vertical = s == WEST || s == EAST;
                const int64_t edge = (s == EAST) ? (int64_t)b->x + 1 : (s == NORTH) ? (int64_t)b->y + 1 : (s == WEST) ? b->x : b->y;
                if (edge % f != 0) continue; /* this side runs inside the wider tile: no border there */
                int64_t ax = vertical ? edge / f - (s == WEST) : floor_div(b->x, f);
                int64_t ay = vertical ? floor_div(b->y, f) : edge / f - (s == SOUTH);
                if (ck->frame == TERRA_FRAME_GEOGRAPHIC) {
                    const int64_t cols = (int64_t)2 << lv, rows = (int64_t)1 << lv;
                    if (ay < 0 || ay >= rows) continue;
                    ax = ((ax % cols) + cols) % cols; /* across the antimeridian */
                }
                if (ax < TERRA_TILE_COORD_MIN || ax > TERRA_TILE_COORD_MAX || ay < TERRA_TILE_COORD_MIN ||
                    ay > TERRA_TILE_COORD_MAX)
                    continue;
                const tile_data *a =
                    find_tile(ck, terra_tile_key_make(terra_tile_key_face(b->key), lv, (int32_t)ax, (int32_t)ay));
                if (!a) continue;
                /* a tile across the antimeridian sits at the other end of the world: compare along the
                 * side (t is latitude there), which both share */
                terra_status st = check_pair(ck, b, s, a);
                if (st) return st;
            }
        }
    }
    return TERRA_OK;
}

/* ---- sources ----------------------------------------------------------------------------------- */

static terra_status open_sources(checker *ck) {
    const terra_cook_check_desc *d = ck->d;
    if (d->source_count <= 0) return TERRA_OK;
    ck->src = terra_calloc((size_t)d->source_count, sizeof *ck->src);
    ck->mesh = terra_calloc((size_t)d->source_count, sizeof *ck->mesh);
    if (!ck->src || !ck->mesh) return terra_fail(TERRA_E_NOMEM, "terra check: out of memory");
    for (int i = 0; i < d->source_count; i++) {
        /* a scenery when assimp reads the extension (the cook's rule: meshes through assimp) */
        const char *dot = strrchr(d->sources[i].path, '.');
        if (dot && aiIsExtensionSupported(dot)) {
            if (ck->frame != TERRA_FRAME_LOCAL)
                return terra_fail(TERRA_E_UNSUPPORTED, "%s: a scenery cooks in the local frame, %s is geographic",
                                  d->sources[i].path, ck->path);
            mesh_source *M = &ck->mesh[ck->mesh_count];
            M->path = d->sources[i].path;
            const terra_scenery_desc sd = {.path = M->path};
            terra_status st = terra_scenery_read_isolated(&sd, NULL, &M->s);
            if (st) return st;
            ck->mesh_count++;
            st = open_mesh(M);
            if (st) return st;
            continue;
        }
        source *S = &ck->src[ck->src_count];
        S->path = d->sources[i].path;
        terra_status st = terra_raster_read_isolated(&d->sources[i], d->raster_reader, &S->r);
        if (st) return st;
        ck->src_count++;
        const terra_raster *r = &S->r;
        ck->rep->holes += r->nodata_count;
        if (ck->frame == TERRA_FRAME_LOCAL) {
            const double a[6] = {0, r->spacing_x, 0, 0, 0, r->spacing_y};
            memcpy(S->a, a, sizeof a);
        } else {
            const double *g = r->geo;
            if (!r->georeferenced)
                return terra_fail(TERRA_E_UNSUPPORTED, "%s: no georeferencing, so its samples have no place in the "
                                                       "geographic archive %s", S->path, ck->path);
            const double a[6] = {g[0] + 0.5 * g[1] + 0.5 * g[2], g[1], g[2], g[3] + 0.5 * g[4] + 0.5 * g[5], g[4], g[5]};
            memcpy(S->a, a, sizeof a);
        }
        const double det = S->a[1] * S->a[5] - S->a[2] * S->a[4];
        if (!(fabs(det) > 0) || !isfinite(det))
            return terra_fail(TERRA_E_UNSUPPORTED, "%s: its geotransform has no inverse", S->path);
        S->inv[1] = S->a[5] / det, S->inv[2] = -S->a[2] / det;
        S->inv[4] = -S->a[4] / det, S->inv[5] = S->a[1] / det;
        S->inv[0] = -(S->inv[1] * S->a[0] + S->inv[2] * S->a[3]);
        S->inv[3] = -(S->inv[4] * S->a[0] + S->inv[5] * S->a[3]);
        S->area = fabs(det);
        S->extent[0] = S->extent[1] = INFINITY, S->extent[2] = S->extent[3] = -INFINITY;
        for (int k = 0; k < 4; k++) {
            const double c = (k & 1) ? r->width - 1 : 0, rr = (k & 2) ? r->height - 1 : 0;
            const double X = S->a[0] + S->a[1] * c + S->a[2] * rr, Y = S->a[3] + S->a[4] * c + S->a[5] * rr;
            S->extent[0] = fmin(S->extent[0], X), S->extent[1] = fmin(S->extent[1], Y);
            S->extent[2] = fmax(S->extent[2], X), S->extent[3] = fmax(S->extent[3], Y);
        }
        if (ck->frame == TERRA_FRAME_GEOGRAPHIC &&
            (S->extent[0] < -360 || S->extent[2] > 360 || S->extent[1] < -90.5 || S->extent[3] > 90.5))
            return terra_fail(TERRA_E_UNSUPPORTED, "%s: its georeferencing is not in degrees (a projected raster): check "
                                                   "against its EPSG:4326 reprojection", S->path);
    }
    return TERRA_OK;
}

/* ---- materials --------------------------------------------------------------------------------
 * A scenery's ground materials ride per vertex (terra-material) with a layer table in the archive's
 * metadata: source.inputs[k].layers for the k-th input of kind "scenery", one object per id with
 * "name" and "metres_per_repeat" (io/cook/cook.c writes it). Matched with the sceneries given, in
 * order, it must be theirs: the same layers in the same order, each repeat the same length (to
 * 1e-9 relative), so every material tiles as in the source; every id a tile carries must name a
 * layer (of the first scenery's table). */
static terra_status check_one_table(checker *ck, const mesh_source *M, const cJSON *layers) {
    const terra_scenery *S = &M->s;
    const int n = cJSON_GetArraySize(layers);
    if ((size_t)n != S->layer_count)
        return broken(ck, "the metadata's layer table for %s has %d layers, the scenery has %zu ground materials",
                      M->path, n, S->layer_count);
    for (int i = 0; i < n; i++) {
        const cJSON *L = cJSON_GetArrayItem(layers, i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(L, "name");
        const cJSON *mpr = cJSON_GetObjectItemCaseSensitive(L, "metres_per_repeat");
        const double want = S->layers[i].metres_per_repeat, got = cJSON_IsNumber(mpr) ? mpr->valuedouble : NAN;
        const char *sname = S->layers[i].name ? S->layers[i].name : "";
        if (!cJSON_IsString(name) || strcmp(name->valuestring, sname) != 0)
            return broken(ck, "layer %d of the metadata is '%s', material %d of %s is '%s'", i,
                          cJSON_IsString(name) ? name->valuestring : "(no name)", i, M->path, sname);
        if (!(fabs(got - want) <= 1e-9 * fmax(1, fabs(want))))
            return broken(ck, "layer %d ('%s') repeats every %.9g m in the metadata, every %.9g m in %s: its tiling "
                              "differs from the source's",
                          i, sname, got, want, M->path);
    }
    return TERRA_OK;
}

static terra_status check_layers(checker *ck) {
    if (ck->mesh_count == 0) return TERRA_OK;
    cJSON *root = terra_json_parse(terra_archive_get_info(ck->a)->metadata);
    const cJSON *source = root ? cJSON_GetObjectItemCaseSensitive(root, "source") : NULL;
    const cJSON *inputs = source ? cJSON_GetObjectItemCaseSensitive(source, "inputs") : NULL;
    terra_status st = TERRA_OK;
    int k = 0;
    const cJSON *in;
    cJSON_ArrayForEach(in, inputs) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(in, "kind");
        const cJSON *layers = cJSON_GetObjectItemCaseSensitive(in, "layers");
        if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "scenery") != 0 || !cJSON_IsArray(layers)) continue;
        if (k == ck->mesh_count) break;
        if (k == 0) ck->rep->layers = cJSON_GetArraySize(layers);
        st = check_one_table(ck, &ck->mesh[k++], layers);
        if (st) break;
    }
    cJSON_Delete(root);
    return st;
}

/* ---- the whole check --------------------------------------------------------------------------- */

terra_status terra_cook_check(const terra_cook_check_desc *d, terra_cook_check_report *rep) {
    memset(rep, 0, sizeof *rep);
    rep->min_level = 32, rep->max_level = -1;
    if (!d || !d->archive) return terra_fail(TERRA_E_INVALID, "terra check: no archive named");
    checker ck = {.d = d, .rep = rep, .path = d->archive};
    terra_status st = terra_archive_open(d->archive, NULL, &ck.a);
    if (st) return st;
    st = read_frame(&ck);
    if (!st) {
        st = terra_archive_tile_rules(ck.a, &ck.rules);
        if (st == TERRA_E_CORRUPT) st = broken(&ck, "the tiles' rules: %s", terra_last_error());
    }
    if (!st) st = open_sources(&ck);
    if (!st) st = check_layers(&ck);
    const uint64_t n = terra_archive_get_info(ck.a)->tile_count;
    if (!st) {
        /* every array exists from the start: borders and walls index into them even when empty */
        ck.tiles = terra_calloc(n ? (size_t)n : 1, sizeof *ck.tiles);
        if (!ck.tiles || !grow((void **)&ck.verts, &ck.vert_cap, 1, sizeof *ck.verts) ||
            !grow((void **)&ck.edges, &ck.edge_cap, 1, sizeof *ck.edges))
            st = terra_fail(TERRA_E_NOMEM, "terra check: out of memory for %llu tiles", (unsigned long long)n);
    }
    double *scratch = NULL;
    uint8_t *mark = NULL, *seen = NULL;
    size_t scratch_cap = 0, mark_cap = 0, seen_cap = 0;
    for (uint64_t i = 0; !st && i < n; i++) {
        st = check_tile(&ck, i, &ck.tiles[i], &scratch, &scratch_cap, &mark, &mark_cap, &seen, &seen_cap);
        ck.tile_count = (size_t)i + 1;
        const int l = ck.tiles[i].level;
        rep->tiles++;
        if (l < rep->min_level) rep->min_level = l;
        if (l > rep->max_level) rep->max_level = l;
        /* entries come in index order, which find_tile's binary search relies on */
        if (!st && i > 0 && terra_archive_order(ck.tiles[i].key) <= terra_archive_order(ck.tiles[i - 1].key))
            st = broken(&ck, "index entry %llu (tile %d/%d/%d) is out of order", (unsigned long long)i, l, ck.tiles[i].x,
                        ck.tiles[i].y);
    }
    terra_free(scratch);
    terra_free(mark);
    terra_free(seen);
    if (!st) st = check_stated_order(&ck);
    if (!st) st = check_borders(&ck);
    if (!st) st = check_walls(&ck);
    for (int i = 0; i < ck.src_count; i++) terra_raster_free(&ck.src[i].r);
    for (int i = 0; i < ck.mesh_count; i++) close_mesh(&ck.mesh[i]);
    terra_free(ck.src);
    terra_free(ck.mesh);
    terra_free(ck.tiles);
    terra_free(ck.verts);
    terra_free(ck.edges);
    terra_free(ck.walls);
    terra_free(ck.rim);
    terra_archive_close(ck.a);
    return st;
}
