/* The cook's pyramid (terra/cook.h): finest tiles from real and random rasters, meshed by
 * terra_tin_tiles_build (neighbours share their border vertices), built up to the top depth and
 * every promise checked on every tile:
 *  - neighbours at any two depths meet exactly (same border vertices and edges where both have ground);
 *  - the stated error is at least the true error on every source sample (terra_tin_check, which
 *    rasterises each triangle on its own), and within the depth's bound;
 *  - no triangle covers a no-data sample; a coarse tile covers exactly the area of its finest tiles;
 *  - triangles only ever go (per tile and per depth);
 *  - one and two threads give the same tiles, byte for byte.
 * And terra_cook_vertical_distance against a brute-force overlay of random meshes; the cook's key
 * sort against qsort. */
#include "check.h"
#include "cook/scan.h"
#include "terra/cook_io.h"
#include "terra/tin.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- finest tiles from a raster ---------------------------------------------------------------- */

typedef struct source {
    int w, h;
    const float *heights;
    terra_tin_tiles tiles;
    int S;          /* plane units (samples) per finest tile */
    int ox, oy;     /* the raster's first tile in the grid (may be negative) */
    bool samples;   /* coarser tiles simplified and measured against the samples (as the cook does
                       for rasters), not against the finest meshes */
} source;

/* Plane position of raster sample (col, row): x east, y north. */
static double plane_x(const source *s, double col) { return (double)s->ox * s->S + col; }
static double plane_y(const source *s, double row) { return (double)(s->oy + s->tiles.tiles_y) * s->S - row; }
static int32_t raster_col(const source *s, double x) { return (int32_t)(x - (double)s->ox * s->S); }
static int32_t raster_row(const source *s, double y) { return (int32_t)((double)(s->oy + s->tiles.tiles_y) * s->S - y); }

/* A whole-raster mesh (raster sample coordinates) of a cook mesh, for terra_tin_check. */
static int32_t *raster_xy(const source *s, const terra_cook_mesh *m) {
    int32_t *xy = malloc(2 * (size_t)m->vertex_count * sizeof(int32_t) + 8);
    for (uint32_t i = 0; i < m->vertex_count; i++) {
        xy[2 * i] = raster_col(s, m->xy[2 * i]);
        xy[2 * i + 1] = raster_row(s, m->xy[2 * i + 1]);
    }
    return xy;
}

static terra_status make_finest(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error) {
    const source *s = user;
    int i = tx - s->ox, j = s->tiles.tiles_y - 1 - (ty - s->oy);
    const terra_tin_tile *t = &s->tiles.tiles[j * s->tiles.tiles_x + i];
    const terra_tin_level *lv = &t->mesh.levels[t->mesh.level_count - 1];
    terra_status st = terra_cook_mesh_reserve(out, (uint32_t)lv->vertex_count, (uint32_t)lv->triangle_count, false, false);
    if (st != TERRA_OK) return st;
    out->vertex_count = (uint32_t)lv->vertex_count;
    out->triangle_count = (uint32_t)lv->triangle_count;
    for (size_t v = 0; v < lv->vertex_count; v++) {
        out->xy[2 * v] = plane_x(s, t->x0 + t->mesh.xy[2 * v]);
        out->xy[2 * v + 1] = plane_y(s, t->y0 + t->mesh.xy[2 * v + 1]);
        out->z[v] = t->mesh.z[v];
    }
    memcpy(out->tri, lv->triangles, 3 * lv->triangle_count * sizeof(uint32_t));
    /* The finest error: measured on every sample (the same checker the test trusts below). */
    terra_tin_check_result r;
    int32_t *xy = raster_xy(s, out);
    st = terra_tin_check(s->heights, s->w, s->h, xy, out->z, out->vertex_count, out->tri, out->triangle_count, NULL, &r);
    free(xy);
    *error = r.max_error;
    return st;
}

/* ---- what the pyramid emits -------------------------------------------------------------------- */

typedef struct rec {
    int depth;
    int32_t tx, ty;
    terra_cook_mesh mesh;
    double error, longest, lo, hi;
} rec;

typedef struct sink {
    pthread_mutex_t lock;
    rec *r;
    size_t n, cap;
    uint64_t last_done, last_total;
    bool progress_backwards;
} sink;

static terra_status emit(void *user, const terra_cook_tile *t) {
    sink *k = user;
    const terra_cook_mesh *m = t->mesh;
    rec r = {.depth = t->depth, .tx = t->tx, .ty = t->ty, .error = t->geometric_error, .longest = t->longest_edge,
             .lo = t->min_height, .hi = t->max_height};
    terra_status st = terra_cook_mesh_reserve(&r.mesh, m->vertex_count, m->triangle_count, m->normal, m->material);
    if (st != TERRA_OK) return st;
    r.mesh.vertex_count = m->vertex_count, r.mesh.triangle_count = m->triangle_count;
    memcpy(r.mesh.xy, m->xy, 2 * (size_t)m->vertex_count * sizeof(double));
    memcpy(r.mesh.z, m->z, (size_t)m->vertex_count * sizeof(float));
    memcpy(r.mesh.tri, m->tri, 3 * (size_t)m->triangle_count * sizeof(uint32_t));
    pthread_mutex_lock(&k->lock);
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->r = realloc(k->r, k->cap * sizeof(rec));
    }
    k->r[k->n++] = r;
    pthread_mutex_unlock(&k->lock);
    return TERRA_OK;
}

static void progress(void *user, uint64_t done, uint64_t total) {
    sink *k = user;
    if (done < k->last_done) k->progress_backwards = true;
    k->last_done = done, k->last_total = total;
}

static int rec_cmp(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->depth != y->depth) return x->depth - y->depth;
    if (x->ty != y->ty) return x->ty < y->ty ? -1 : 1;
    return x->tx < y->tx ? -1 : x->tx > y->tx;
}

static void sink_free(sink *k) {
    for (size_t i = 0; i < k->n; i++) terra_cook_mesh_free(&k->r[i].mesh);
    free(k->r);
    pthread_mutex_destroy(&k->lock);
}

/* The raster's heights at plane points (a terra_cook_window_fn), NaN off the raster. */
static terra_status source_window(void *user, const terra_cook_grid *g, int64_t x0, int64_t y0, int w, int h, float *out) {
    (void)g;
    const source *s = user;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            int64_t c = raster_col(s, (double)(x0 + i)), r = raster_row(s, (double)(y0 + j));
            out[(size_t)j * w + i] = c >= 0 && c < s->w && r >= 0 && r < s->h ? s->heights[r * s->w + c] : NAN;
        }
    return TERRA_OK;
}

/* Builds the pyramid over a source's tiles with `threads` workers into k (sorted). */
static terra_status run_pyramid(source *s, const terra_cook_grid *g, double max_error, terra_cook_simplify_fn simplify,
                                int threads, sink *k, terra_cook_pyramid_stats *stats) {
    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->lock, NULL);
    size_t n = (size_t)s->tiles.tiles_x * (size_t)s->tiles.tiles_y;
    int32_t *finest = malloc(2 * n * sizeof(int32_t));
    for (int j = 0; j < s->tiles.tiles_y; j++)
        for (int i = 0; i < s->tiles.tiles_x; i++) {
            size_t t = (size_t)j * s->tiles.tiles_x + i;
            finest[2 * t] = s->ox + i;
            finest[2 * t + 1] = s->oy + s->tiles.tiles_y - 1 - j;
        }
    terra_cook_pyramid_desc d = {.grid = g, .finest = finest, .finest_count = n, .max_error = max_error,
                                 .make_finest = make_finest, .finest_user = s,
                                 .simplify = simplify, .emit = emit, .emit_user = k,
                                 .threads = threads, .progress = progress, .progress_user = k};
    terra_cook_raster_tiles rt = {.grid = g, .max_error = max_error, .window = source_window, .window_user = s};
    if (s->samples) {
        d.distance = terra_cook_raster_distance, d.distance_user = &rt;
        d.window = source_window, d.window_user = s, d.window_max = 1 << 20;
    }
    terra_status st = terra_cook_pyramid(&d, stats);
    free(finest);
    qsort(k->r, k->n, sizeof(rec), rec_cmp);
    return st;
}

/* ---- the checks -------------------------------------------------------------------------------- */

static double area2(const terra_cook_mesh *m, uint32_t t) {
    const uint32_t *v = m->tri + 3 * (size_t)t;
    const double *a = m->xy + 2 * (size_t)v[0], *b = m->xy + 2 * (size_t)v[1], *c = m->xy + 2 * (size_t)v[2];
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

static double mesh_area2(const terra_cook_mesh *m) {
    double sum = 0;
    for (uint32_t t = 0; t < m->triangle_count; t++) sum += area2(m, t);
    return sum;
}

/* An edge lying on a tile's border line: its two ends along the line, with heights, lower end first. */
typedef struct line_edge { double a, b; float za, zb; } line_edge;

static int line_edge_cmp(const void *p, const void *q) {
    const line_edge *x = p, *y = q;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->za != y->za) return x->za < y->za ? -1 : 1;
    return (x->zb > y->zb) - (x->zb < y->zb);
}

/* Edges of m on the line where coordinate `axis` equals c, overlapping (s0, s1); sorted. */
static size_t edges_on_line(const terra_cook_mesh *m, int axis, double c, double s0, double s1, line_edge *out) {
    size_t n = 0;
    for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++) {
        uint32_t p = m->tri[i], q = m->tri[i % 3 == 2 ? i - 2 : i + 1];
        if (m->xy[2 * p + axis] != c || m->xy[2 * q + axis] != c) continue;
        double a = m->xy[2 * p + 1 - axis], b = m->xy[2 * q + 1 - axis];
        float za = m->z[p], zb = m->z[q];
        if (a > b) {
            double t = a;
            a = b, b = t;
            float tz = za;
            za = zb, zb = tz;
        }
        if (b <= s0 || a >= s1) continue;
        out[n++] = (line_edge){a, b, za, zb};
    }
    qsort(out, n, sizeof(line_edge), line_edge_cmp);
    return n;
}

/* Two tiles touching along the line coordinate[axis] == c over (s0, s1): where both have ground
 * there, the same edges; no vertex of one inside an edge of the other; and with strict (no holes
 * anywhere near) exactly the same edges and vertices. Returns the number of broken promises. */
static int check_shared(const rec *A, const rec *B, int axis, double c, double s0, double s1, bool strict) {
    const terra_cook_mesh *m[2] = {&A->mesh, &B->mesh};
    line_edge *e[2];
    size_t n[2];
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        e[k] = malloc((3 * (size_t)m[k]->triangle_count + 1) * sizeof(line_edge));
        n[k] = edges_on_line(m[k], axis, c, s0, s1, e[k]);
    }
    for (size_t i = 0; i < n[0]; i++)
        for (size_t j = 0; j < n[1]; j++) {
            const line_edge *x = &e[0][i], *y = &e[1][j];
            if (fmax(x->a, y->a) < fmin(x->b, y->b) && line_edge_cmp(x, y) != 0) bad++;
        }
    for (int k = 0; k < 2; k++) {
        const terra_cook_mesh *o = m[1 - k];
        for (uint32_t v = 0; v < o->vertex_count; v++) {
            if (o->xy[2 * v + axis] != c) continue;
            double p = o->xy[2 * v + 1 - axis];
            for (size_t i = 0; i < n[k]; i++)
                if (e[k][i].a < p && p < e[k][i].b) bad++;
        }
    }
    if (strict) {
        if (n[0] != n[1]) bad++;
        for (size_t i = 0; i < n[0] && n[0] == n[1]; i++) bad += line_edge_cmp(&e[0][i], &e[1][i]) != 0;
    }
    free(e[0]);
    free(e[1]);
    return bad;
}

/* The finest tiles within a rect as one mesh (not welded: for edges and vertices on lines). */
static void concat_finest(const sink *k, const terra_cook_grid *g, const double rect[4], rec *out) {
    memset(out, 0, sizeof *out);
    terra_cook_mesh *m = &out->mesh;
    for (size_t i = 0; i < k->n; i++) {
        const rec *f = &k->r[i];
        double fr[4];
        terra_cook_tile_rect(g, f->depth, f->tx, f->ty, fr);
        if (f->depth || fr[0] < rect[0] || fr[2] > rect[2] || fr[1] < rect[1] || fr[3] > rect[3]) continue;
        uint32_t v0 = m->vertex_count, t0 = m->triangle_count;
        terra_cook_mesh_reserve(m, v0 + f->mesh.vertex_count, t0 + f->mesh.triangle_count, false, false);
        memcpy(m->xy + 2 * (size_t)v0, f->mesh.xy, 2 * (size_t)f->mesh.vertex_count * sizeof(double));
        memcpy(m->z + v0, f->mesh.z, (size_t)f->mesh.vertex_count * sizeof(float));
        for (size_t j = 0; j < 3 * (size_t)f->mesh.triangle_count; j++) m->tri[3 * (size_t)t0 + j] = v0 + f->mesh.tri[j];
        m->vertex_count += f->mesh.vertex_count, m->triangle_count += f->mesh.triangle_count;
    }
}

typedef struct checked {
    double worst_ratio;     /* largest true error / stated error over coarse tiles */
    uint64_t triangles[32];
} checked;

/* Every promise over one pyramid's tiles. strict: the source has no holes. */
static void check_pyramid(const source *s, const sink *k, const terra_cook_grid *g, double max_error, bool strict,
                          const terra_cook_pyramid_stats *stats, const char *what, checked *out) {
    memset(out, 0, sizeof *out);
    const int D = g->depth;
    CHECK(!k->progress_backwards && k->last_done == k->last_total && k->last_total >= k->n, "%s: progress %llu/%llu",
          what, (unsigned long long)k->last_done, (unsigned long long)k->last_total);
    uint64_t tiles[32] = {0};
    size_t broken_border = 0, source_broken = 0, outside = 0, flipped = 0;
    for (size_t i = 0; i < k->n; i++) {
        const rec *r = &k->r[i];
        CHECK(r->depth >= 0 && r->depth <= D, "%s: depth %d", what, r->depth);
        CHECK(i == 0 || rec_cmp(&k->r[i - 1], r) != 0, "%s: tile %d/%d,%d emitted twice", what, r->depth, r->tx, r->ty);
        CHECK(r->mesh.triangle_count > 0, "%s: empty tile emitted", what);
        tiles[r->depth]++;
        out->triangles[r->depth] += r->mesh.triangle_count;
        double rect[4];
        terra_cook_tile_rect(g, r->depth, r->tx, r->ty, rect);
        float lo = INFINITY, hi = -INFINITY;
        for (uint32_t v = 0; v < r->mesh.vertex_count; v++) {
            double x = r->mesh.xy[2 * v], y = r->mesh.xy[2 * v + 1];
            outside += x < rect[0] || x > rect[2] || y < rect[1] || y > rect[3];
            lo = fminf(lo, r->mesh.z[v]);
            hi = fmaxf(hi, r->mesh.z[v]);
        }
        CHECK(r->lo == lo && r->hi == hi, "%s: height range", what);
        for (uint32_t t = 0; t < r->mesh.triangle_count; t++) flipped += !(area2(&r->mesh, t) > 0);
        CHECK(r->longest > 0, "%s: longest edge %g", what, r->longest);
        /* Within the depth's bound (the finest ones are within max_error, so every depth can be). */
        CHECK(r->error <= ldexp(max_error, r->depth) * (1 + 1e-12), "%s: tile %d/%d,%d states %g over the bound %g",
              what, r->depth, r->tx, r->ty, r->error, ldexp(max_error, r->depth));
        /* Against every source sample, measured independently. */
        terra_tin_check_result cr;
        int32_t *xy = raster_xy(s, &r->mesh);
        terra_status st = terra_tin_check(s->heights, s->w, s->h, xy, r->mesh.z, r->mesh.vertex_count, r->mesh.tri,
                                          r->mesh.triangle_count, NULL, &cr);
        free(xy);
        CHECK(st == TERRA_OK, "%s: check: %s", what, terra_last_error());
        CHECK(cr.max_error <= r->error + 1e-6, "%s: tile %d/%d,%d true error %g over stated %g", what, r->depth, r->tx,
              r->ty, cr.max_error, r->error);
        CHECK(cr.holes_covered == 0, "%s: tile %d/%d,%d covers %zu no-data samples", what, r->depth, r->tx, r->ty,
              cr.holes_covered);
        if (r->depth > 0 && r->error > 0 && cr.max_error / r->error > out->worst_ratio)
            out->worst_ratio = cr.max_error / r->error;
        /* A coarse tile: the area of its finest tiles exactly, and no more triangles than its children. */
        if (r->depth > 0) {
            double fine_area = 0;
            uint64_t child_tris = 0;
            for (size_t j = 0; j < k->n; j++) {
                const rec *f = &k->r[j];
                double fr[4];
                terra_cook_tile_rect(g, f->depth, f->tx, f->ty, fr);
                bool under = fr[0] >= rect[0] && fr[2] <= rect[2] && fr[1] >= rect[1] && fr[3] <= rect[3];
                if (under && f->depth == 0) fine_area += mesh_area2(&f->mesh);
                if (under && f->depth == r->depth - 1) child_tris += f->mesh.triangle_count;
            }
            CHECK(mesh_area2(&r->mesh) == fine_area, "%s: tile %d/%d,%d area %.17g, its finest tiles %.17g", what,
                  r->depth, r->tx, r->ty, mesh_area2(&r->mesh), fine_area);
            /* Its outer border: exactly the edges and vertices of its finest tiles there. */
            rec fine;
            concat_finest(k, g, rect, &fine);
            for (int side = 0; side < 4; side++) {
                int axis = side % 2;
                CHECK(!check_shared(r, &fine, axis, rect[side], rect[1 - axis], rect[3 - axis], true),
                      "%s: tile %d/%d,%d changed its border on side %d", what, r->depth, r->tx, r->ty, side);
            }
            terra_cook_mesh_free(&fine.mesh);
            CHECK(r->mesh.triangle_count <= child_tris, "%s: tile %d/%d,%d has %u triangles, its children %llu", what,
                  r->depth, r->tx, r->ty, r->mesh.triangle_count, (unsigned long long)child_tris);
        }
        /* Every tile's parent is there too. */
        if (r->depth < D) {
            rec key = {.depth = r->depth + 1, .tx = (int32_t)floor(r->tx / 2.0), .ty = (int32_t)floor(r->ty / 2.0)};
            CHECK(bsearch(&key, k->r, k->n, sizeof(rec), rec_cmp), "%s: no parent for %d/%d,%d", what, r->depth, r->tx,
                  r->ty);
        }
    }
    CHECK(outside == 0, "%s: %zu vertices outside their tile", what, outside);
    CHECK(flipped == 0, "%s: %zu triangles turned over or flat", what, flipped);
    /* Every pair of tiles touching along an edge, at any two depths. */
    for (size_t i = 0; i < k->n; i++)
        for (size_t j = 0; j < k->n; j++) {
            const rec *A = &k->r[i], *B = &k->r[j];
            double ra[4], rb[4];
            terra_cook_tile_rect(g, A->depth, A->tx, A->ty, ra);
            terra_cook_tile_rect(g, B->depth, B->tx, B->ty, rb);
            for (int axis = 0; axis < 2; axis++) {
                /* B to the east of A (axis 0) or to the north (axis 1). */
                if (ra[2 + axis] != rb[axis]) continue;
                double s0 = fmax(ra[1 - axis], rb[1 - axis]), s1 = fmin(ra[3 - axis], rb[3 - axis]);
                if (!(s0 < s1)) continue;
                int bad = check_shared(A, B, axis, ra[2 + axis], s0, s1, strict);
                if (bad) {
                    /* Only the pyramid's fault if the finest tiles under both agree there. */
                    rec fa, fb;
                    concat_finest(k, g, ra, &fa);
                    concat_finest(k, g, rb, &fb);
                    if (check_shared(&fa, &fb, axis, ra[2 + axis], s0, s1, strict)) {
                        source_broken += A->depth == 0 && B->depth == 0;
                        bad = 0;
                    }
                    terra_cook_mesh_free(&fa.mesh);
                    terra_cook_mesh_free(&fb.mesh);
                }
                if (bad && broken_border < 5)
                    fprintf(stderr, "%s: %d/%d,%d and %d/%d,%d disagree on their border (%d)\n", what, A->depth, A->tx,
                            A->ty, B->depth, B->tx, B->ty, bad);
                broken_border += bad != 0;
            }
        }
    CHECK(broken_border == 0, "%s: %zu neighbour pairs disagree on their border", what, broken_border);
    /* Without holes the finest tiles agree everywhere; near holes terra_tin_tiles_build can leave a
     * border vertex in one tile only (a T-junction the pyramid inherits but never makes). */
    CHECK(!strict || source_broken == 0, "%s: %zu finest pairs disagree", what, source_broken);
    if (source_broken) printf("note: %s: %zu pairs of finest tiles disagree on their border\n", what, source_broken);
    for (int d = 0; d <= D; d++) {
        CHECK(stats->level[d].tiles == tiles[d] && stats->level[d].triangles == out->triangles[d],
              "%s: stats of depth %d", what, d);
        if (d > 0) CHECK(out->triangles[d] <= out->triangles[d - 1], "%s: depth %d has more triangles", what, d);
    }
    CHECK(stats->peak_bytes > 0, "%s: peak bytes", what);
}

/* One and two threads: the same tiles. */
static void check_same(const sink *a, const sink *b, const char *what) {
    bool same = a->n == b->n;
    for (size_t i = 0; same && i < a->n; i++) {
        const rec *x = &a->r[i], *y = &b->r[i];
        same = rec_cmp(x, y) == 0 && x->error == y->error && x->longest == y->longest &&
               x->mesh.vertex_count == y->mesh.vertex_count && x->mesh.triangle_count == y->mesh.triangle_count &&
               !memcmp(x->mesh.xy, y->mesh.xy, 2 * (size_t)x->mesh.vertex_count * sizeof(double)) &&
               !memcmp(x->mesh.z, y->mesh.z, (size_t)x->mesh.vertex_count * sizeof(float)) &&
               !memcmp(x->mesh.tri, y->mesh.tri, 3 * (size_t)x->mesh.triangle_count * sizeof(uint32_t));
    }
    CHECK(same, "%s: 1 and 2 threads differ", what);
}

/* The top depth whose one tile holds the whole raster (the grid starts at the raster's tile). */
static int depth_for(const source *s) {
    int D = 0;
    while ((1 << D) < s->tiles.tiles_x || (1 << D) < s->tiles.tiles_y) D++;
    return D;
}

/* Meshes a raster into finest tiles, cooks the pyramid with 1 and 2 threads and checks it all;
 * returns the vertices of the top depth's tiles. */
static uint64_t cook_raster(const float *heights, int w, int h, int tile_size, double max_error, int ox, int oy,
                        int extra_depth, terra_cook_simplify_fn simplify, bool samples, bool strict, const char *what,
                        bool report) {
    source s = {.w = w, .h = h, .heights = heights, .S = tile_size - 1, .ox = ox, .oy = oy, .samples = samples};
    terra_tin_tiles_desc td = {.width = w, .height = h, .heights = heights, .tile_size = tile_size,
                               .levels = &max_error, .level_count = 1, .threads = 2};
    terra_status st = terra_tin_tiles_build(&td, &s.tiles);
    CHECK(st == TERRA_OK, "%s: tiles: %s", what, terra_last_error());
    if (st != TERRA_OK) return 0;
    terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {10, 10}, .tile_units = s.S};
    g.depth = depth_for(&s) + extra_depth;
    sink one, two;
    terra_cook_pyramid_stats st1, st2;
    double t0 = terra_now_s();
    st = run_pyramid(&s, &g, max_error, simplify, 1, &one, &st1);
    double t1 = terra_now_s();
    CHECK(st == TERRA_OK, "%s: pyramid: %s", what, terra_last_error());
    terra_status st_two = run_pyramid(&s, &g, max_error, simplify, 2, &two, &st2);
    double t2 = terra_now_s();
    CHECK(st_two == TERRA_OK, "%s: pyramid (2 threads): %s", what, terra_last_error());
    if (st == TERRA_OK && st_two == TERRA_OK) {
        checked c;
        check_pyramid(&s, &one, &g, max_error, strict, &st1, what, &c);
        check_same(&one, &two, what);
        if (report) {
            printf("%s: %dx%d samples, tiles of %d, max error %g m, %zu tiles; 1 thread %.3f s, 2 threads %.3f s; "
                   "peak %.1f MB\n",
                   what, w, h, tile_size, max_error, one.n, t1 - t0, t2 - t1, st1.peak_bytes / 1e6);
            for (int d = 0; d <= g.depth; d++)
                printf("  depth %d: %llu tiles, %llu triangles, %llu vertices, stated error <= %.2f m (bound %.0f)\n", d,
                       (unsigned long long)st1.level[d].tiles, (unsigned long long)st1.level[d].triangles,
                       (unsigned long long)st1.level[d].vertices, st1.level[d].max_error, ldexp(max_error, d));
            printf("  worst true/stated error ratio over coarse tiles: %.3f\n", c.worst_ratio);
            for (int d = 1; d <= g.depth; d++)
                CHECK(c.triangles[d] < c.triangles[d - 1], "%s: depth %d did not shrink", what, d);
        }
    }
    sink_free(&one);
    sink_free(&two);
    terra_tin_tiles_free(&s.tiles);
    return st == TERRA_OK ? st1.level[g.depth].vertices : 0;
}

/* ---- the tests --------------------------------------------------------------------------------- */

static void test_grid_keys(void) {
    terra_cook_grid local = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = 256, .depth = 5};
    terra_cook_grid geo = {.frame = TERRA_FRAME_GEOGRAPHIC, .origin = {-180, -90}, .unit = {180.0 / 4096, 180.0 / 4096},
                           .tile_units = 256, .depth = 4};
    unsigned long long seed = 7;
    for (int i = 0; i < 2000; i++) {
        const terra_cook_grid *g = i % 2 ? &geo : &local;
        int d = (int)(test_rand_u64(&seed) % (uint64_t)(g->depth + 1));
        int32_t tx = (int32_t)(test_rand_u64(&seed) % 2001) - 1000, ty = (int32_t)(test_rand_u64(&seed) % 2001) - 1000;
        terra_tile_key key = terra_cook_key(g, d, tx, ty);
        int d2;
        int32_t x2, y2;
        CHECK(terra_cook_key_tile(g, key, &d2, &x2, &y2) && d2 == d && x2 == tx && y2 == ty, "key round trip");
        CHECK(terra_tile_key_level(key) == (g == &geo ? g->depth - d : d), "key level");
        double r[4];
        terra_cook_tile_rect(g, d, tx, ty, r);
        CHECK(r[0] == tx * 256.0 * (1 << d) && r[3] == (ty + 1) * 256.0 * (1 << d), "rect");
    }
    int d;
    int32_t x, y;
    CHECK(!terra_cook_key_tile(&geo, terra_tile_key_make(0, 5, 0, 0), &d, &x, &y), "level past the finest zoom");
    CHECK(!terra_cook_key_tile(&local, terra_tile_key_make(1, 0, 0, 0), &d, &x, &y), "another face");
}

/* ---- vertical distance against a brute-force overlay ------------------------------------------- */

/* Clips polygon p (n points, x y z_fine) by the half-plane left of a->b; returns the new count. */
static int clip(const double (*p)[3], int n, const double *a, const double *b, double (*out)[3]) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        const double *u = p[i], *v = p[(i + 1) % n];
        double su = (b[0] - a[0]) * (u[1] - a[1]) - (b[1] - a[1]) * (u[0] - a[0]);
        double sv = (b[0] - a[0]) * (v[1] - a[1]) - (b[1] - a[1]) * (v[0] - a[0]);
        if (su >= 0) memcpy(out[m++], u, sizeof(double[3]));
        if ((su >= 0) != (sv >= 0)) {
            double t = su / (su - sv);
            for (int k = 0; k < 3; k++) out[m][k] = u[k] + t * (v[k] - u[k]);
            m++;
        }
    }
    return m;
}

/* Height of triangle t of m at p (by barycentric weights). */
static double tri_height(const terra_cook_mesh *m, uint32_t t, const double *p) {
    const uint32_t *v = m->tri + 3 * (size_t)t;
    const double *A = m->xy + 2 * (size_t)v[0], *B = m->xy + 2 * (size_t)v[1], *C = m->xy + 2 * (size_t)v[2];
    double area = (B[0] - A[0]) * (C[1] - A[1]) - (B[1] - A[1]) * (C[0] - A[0]);
    double la = ((C[0] - B[0]) * (p[1] - B[1]) - (C[1] - B[1]) * (p[0] - B[0])) / area;
    double lb = ((A[0] - C[0]) * (p[1] - C[1]) - (A[1] - C[1]) * (p[0] - C[0])) / area;
    return la * m->z[v[0]] + lb * m->z[v[1]] + (1 - la - lb) * m->z[v[2]];
}

/* A grid mesh of n x n cells of side `cell` over [0, n*cell]^2, each cell cut by a random diagonal;
 * vertices not on multiples of `keep` are jittered; heights random. */
static void grid_mesh(terra_cook_mesh *m, int n, double cell, int keep, unsigned long long *seed) {
    uint32_t nv = (uint32_t)((n + 1) * (n + 1));
    terra_cook_mesh_reserve(m, nv, (uint32_t)(2 * n * n), false, false);
    m->vertex_count = nv, m->triangle_count = 0;
    for (int j = 0; j <= n; j++)
        for (int i = 0; i <= n; i++) {
            uint32_t v = (uint32_t)(j * (n + 1) + i);
            bool inner = i > 0 && j > 0 && i < n && j < n && (i % keep || j % keep);
            m->xy[2 * v] = i * cell + (inner ? test_rand_range(seed, -0.3, 0.3) * cell : 0);
            m->xy[2 * v + 1] = j * cell + (inner ? test_rand_range(seed, -0.3, 0.3) * cell : 0);
            m->z[v] = (float)test_rand_range(seed, -50, 50);
        }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            uint32_t a = (uint32_t)(j * (n + 1) + i), b = a + 1, c = a + (uint32_t)n + 1, d = c + 1;
            uint32_t *t = m->tri + 3 * (size_t)m->triangle_count;
            if (test_rand_u64(seed) & 1) {
                t[0] = a, t[1] = b, t[2] = d, t[3] = a, t[4] = d, t[5] = c;
            } else {
                t[0] = a, t[1] = b, t[2] = c, t[3] = b, t[4] = d, t[5] = c;
            }
            m->triangle_count += 2;
        }
}

static void test_vertical_distance(void) {
    unsigned long long seed = 99;
    for (int round = 0; round < 60; round++) {
        int k = 1 + (int)(test_rand_u64(&seed) % 4), nc = 1 + (int)(test_rand_u64(&seed) % 5);
        terra_cook_mesh coarse = {0}, fine[2] = {{0}, {0}};
        /* The coarse vertices sit on fine vertices (as edge collapse leaves them); two fine meshes,
         * one above the other, under the left half of the coarse. */
        grid_mesh(&coarse, 2 * nc, k, 1, &seed);
        for (int f = 0; f < 2; f++) {
            grid_mesh(&fine[f], nc * k, 1, k, &seed);
            for (uint32_t v = 0; v < fine[f].vertex_count; v++) fine[f].xy[2 * v + 1] += f * nc * k;
        }
        /* The fine heights at coarse lattice points may differ from the coarse ones; brute force. */
        double brute = 0;
        for (int f = 0; f < 2; f++)
            for (uint32_t ft = 0; ft < fine[f].triangle_count; ft++)
                for (uint32_t ct = 0; ct < coarse.triangle_count; ct++) {
                    double poly[2][16][3];
                    int n = 3;
                    for (int q = 0; q < 3; q++) {
                        uint32_t v = fine[f].tri[3 * ft + q];
                        poly[0][q][0] = fine[f].xy[2 * v], poly[0][q][1] = fine[f].xy[2 * v + 1];
                        poly[0][q][2] = fine[f].z[v];
                    }
                    int cur = 0;
                    for (int q = 0; q < 3 && n > 0; q++) {
                        const double *a = coarse.xy + 2 * (size_t)coarse.tri[3 * ct + q];
                        const double *b = coarse.xy + 2 * (size_t)coarse.tri[3 * ct + (q + 1) % 3];
                        n = clip((const double(*)[3])poly[cur], n, a, b, poly[1 - cur]);
                        cur = 1 - cur;
                    }
                    for (int q = 0; q < n; q++)
                        brute = fmax(brute, fabs(tri_height(&coarse, ct, poly[cur][q]) - poly[cur][q][2]));
                }
        const terra_cook_mesh *fp[2] = {&fine[0], &fine[1]};
        size_t uncovered = 99;
        double got = terra_cook_vertical_distance(&coarse, fp, 2, &uncovered);
        CHECK(fabs(got - brute) <= 1e-9 * (1 + brute), "round %d: measured %.12g, overlay %.12g", round, got, brute);
        CHECK(uncovered == 0, "round %d: %zu uncovered", round, uncovered);
        /* Half of the coarse gone: the fine vertices off it are counted. */
        size_t expect = 0;
        for (int f = 0; f < 2; f++)
            for (uint32_t v = 0; v < fine[f].vertex_count; v++) expect += fine[f].xy[2 * v + 1] > nc * k;
        coarse.triangle_count /= 2; /* the cells of the lower half of the rows */
        terra_cook_vertical_distance(&coarse, fp, 2, &uncovered);
        CHECK(uncovered == expect, "round %d: %zu uncovered, %zu expected", round, uncovered, expect);
        terra_cook_mesh_free(&coarse);
        terra_cook_mesh_free(&fine[0]);
        terra_cook_mesh_free(&fine[1]);
    }
}

/* ---- rasters ----------------------------------------------------------------------------------- */

/* Random terrain: octaves of bilinear value noise, with round no-data holes when holes > 0. */
static float *random_terrain(int w, int h, int holes, unsigned long long *seed) {
    float *z = malloc((size_t)w * (size_t)h * sizeof(float));
    for (size_t i = 0; i < (size_t)w * h; i++) z[i] = 0;
    for (int oct = 0; oct < 4; oct++) {
        int cell = 32 >> oct;
        double amp = 60.0 / (1 << oct);
        int gw = w / cell + 2, gh = h / cell + 2;
        double *g = malloc((size_t)gw * gh * sizeof(double));
        for (int i = 0; i < gw * gh; i++) g[i] = test_rand_range(seed, -amp, amp);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int gx = x / cell, gy = y / cell;
                double fx = (double)(x % cell) / cell, fy = (double)(y % cell) / cell;
                double a = g[gy * gw + gx], b = g[gy * gw + gx + 1], c = g[(gy + 1) * gw + gx], d = g[(gy + 1) * gw + gx + 1];
                z[(size_t)y * w + x] += (float)((a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy);
            }
        free(g);
    }
    for (int k = 0; k < holes; k++) {
        double cx = test_rand_range(seed, 0, w), cy = test_rand_range(seed, 0, h), r = test_rand_range(seed, 1, 6);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r) z[(size_t)y * w + x] = NAN;
    }
    return z;
}

static int u64_order(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Random keys shaped as the cook's are (two vertex indices, few high bits set) and fully random
 * ones, with repeats: the radix sort gives qsort's order, and cook_holds finds exactly the keys. */
static void test_key_sort(void) {
    unsigned long long seed = 7;
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)(test_rand_u64(&seed) % (round < 100 ? 40 : 5000));
        uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b), *tmp = malloc((n + 1) * sizeof *tmp);
        uint32_t range = 1u + (uint32_t)(test_rand_u64(&seed) % (round % 4 == 0 ? 3 : 1u << 20));
        for (size_t i = 0; i < n; i++) {
            uint64_t k = round % 5 == 0 ? test_rand_u64(&seed)
                                        : (test_rand_u64(&seed) % range) << 32 | test_rand_u64(&seed) % range;
            a[i] = b[i] = k;
        }
        terra_cook_sort_u64(a, n, tmp);
        qsort(b, n, sizeof *b, u64_order);
        size_t wrong = 0, missed = 0;
        for (size_t i = 0; i < n; i++) {
            wrong += a[i] != b[i];
            missed += !cook_holds(a, n, b[i]);
        }
        CHECK(wrong == 0 && missed == 0, "round %d: %zu of %zu out of order, %zu not found", round, wrong, n, missed);
        /* a key between two held ones, or past the ends, is not held */
        if (n > 0 && a[0] > 0) CHECK(!cook_holds(a, n, a[0] - 1), "round %d", round);
        if (n > 0 && a[n - 1] < UINT64_MAX) CHECK(!cook_holds(a, n, a[n - 1] + 1), "round %d", round);
        for (size_t i = 1; i < n; i++)
            if (a[i] > a[i - 1] + 1) CHECK(!cook_holds(a, n, a[i - 1] + 1), "round %d: %zu", round, i);
        free(a), free(b), free(tmp);
    }
}

static void test_random_terrain(void) {
    unsigned long long seed = 2026;
    int rounds = 80;
#ifdef TERRA_SANITIZED
    rounds = 16;
#endif
    for (int round = 0; round < rounds; round++) {
        int w = 12 + (int)(test_rand_u64(&seed) % 110), h = 12 + (int)(test_rand_u64(&seed) % 110);
        int ts = 4 + (int)(test_rand_u64(&seed) % 30);
        int holes = round % 3 == 0 ? 0 : (int)(test_rand_u64(&seed) % 8);
        double max_error = test_rand_range(&seed, 0.2, 4);
        int ox = (int)(test_rand_u64(&seed) % 9) - 4, oy = (int)(test_rand_u64(&seed) % 9) - 4;
        int extra = (int)(test_rand_u64(&seed) % 2);
        float *z = random_terrain(w, h, holes, &seed);
        /* terra_tin_tiles_build refuses a tile that is all holes: keep a sample in each. */
        for (int y0 = 0; y0 < h - 1; y0 += ts - 1)
            for (int x0 = 0; x0 < w - 1; x0 += ts - 1) {
                bool any = false;
                for (int y = y0; y < y0 + ts && y < h; y++)
                    for (int x = x0; x < x0 + ts && x < w; x++) any = any || !isnan(z[(size_t)y * w + x]);
                if (!any) z[(size_t)y0 * w + x0] = 0;
            }
        char what[128];
        /* Every fourth round through meshoptimizer, whose folded tries the pyramid must refuse; every
         * other against the samples, as the cook does rasters. */
        const bool samples = round % 2 == 0;
        snprintf(what, sizeof what, "random %d: %dx%d tiles of %d, %d holes, error %.2f, offset %d,%d%s", round, w, h,
                 ts, holes, max_error, ox, oy, samples ? ", samples" : "");
        cook_raster(z, w, h, ts, max_error, ox, oy, extra,
                    round % 4 == 3 ? terra_cook_simplify_meshopt : terra_cook_simplify_plane, samples, holes == 0, what,
                    false);
        free(z);
    }
}

/* Ground that ends inside the tiles (a plane within a frame of no-data): every coarser level keeps
 * the ground's outline exactly (check_pyramid: the area of the finest tiles), and the top one only
 * its four corners, the rim's straight runs taken out along it. */
static void test_rim(void) {
    const int w = 57, h = 49; /* 7 x 6 tiles, each with ground */
    float *z = malloc((size_t)w * h * sizeof *z);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            z[(size_t)y * w + x] = x < 7 || y < 5 || x > 50 || y > 44 ? NAN : (float)(0.25 * x - 0.5 * y + 3);
    for (int samples = 0; samples < 2; samples++)
        for (int round = 0; round < 2; round++) {
            char what[96];
            snprintf(what, sizeof what, "rim: tiles of 9, %s, %s", samples ? "samples" : "vertices",
                     round ? "meshoptimizer" : "plane");
            uint64_t top = cook_raster(z, w, h, 9, 0.5, 0, 0, 0, round ? terra_cook_simplify_meshopt : terra_cook_simplify_plane,
                                       samples, false, what, false);
            if (!round) CHECK(top == 4, "%s: the top tile keeps %llu vertices, not the rim's 4 corners", what,
                              (unsigned long long)top);
        }
    free(z);
}

static void test_fuji(void) {
    char path[512];
    if (!getenv("TERRA_SHARED")) {
        printf("SKIP test_fuji: TERRA_SHARED is not set\n");
        return;
    }
    terra_raster_desc rd = {.path = shared_path("data/dem/fuji.png", path, sizeof path),
                            .encoding = TERRA_RASTER_TERRAIN_RGB};
    terra_raster r;
    terra_status st = terra_raster_read_isolated(&rd, NULL, &r);
    CHECK(st == TERRA_OK, "fuji: %s", terra_last_error());
    if (st != TERRA_OK) return;
    cook_raster(r.heights, r.width, r.height, 65, 5, 0, 0, 0, terra_cook_simplify_plane, false, r.nodata_count == 0,
                "fuji", true);
    cook_raster(r.heights, r.width, r.height, 65, 5, 0, 0, 0, terra_cook_simplify_plane, true, r.nodata_count == 0,
                "fuji, against the samples", true);
    terra_raster_free(&r);
}

int main(void) {
    RUN(test_grid_keys);
    RUN(test_vertical_distance);
    RUN(test_key_sort);
    RUN(test_random_terrain);
    RUN(test_rim);
    RUN(test_fuji);
    return finish();
}
