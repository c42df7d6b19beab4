/* The pyramid: every tile from the finest up, each coarser one its children merged and
 * edge-collapsed within its depth's error bound, its outer border kept (terra/cook.h).
 *
 * Scheduling: tiles are nodes of a quadtree; a node is ready once all its children are built. The
 * finest tiles are taken in Morton order and a ready parent goes before any further finest tile, so
 * subtrees finish early and their children's meshes are dropped early. A tile's result depends only
 * on its children and the finest meshes under it, never on the order, so any number of workers
 * gives the same tiles.
 *
 * Measures: with a raster's samples (desc.distance and desc.window) the simplifier weighs each
 * collapse against the samples under the tile's ground (and those up to half a 16-bit step outside
 * a triangle, where decoding may move it), so one run at the depth's bound is the answer, and the
 * stated error is the distance to the samples measured the same way. Otherwise (sceneries, and ground too wide to hold every
 * sample: then every 2nd, 4th... is weighed) the simplifier's cost is an estimate, what is stated
 * is measured (against the samples, or the finest meshes under the tile plus their own error), and
 * the target moves by the ratio of bound to measure over a few tries. The children merged and not
 * simplified are the answer where no try fits (each child fits a bound half as large; only 16-bit
 * positions of the wider tile can add to that).
 * Every try is checked: the same border edges as the merged children (the outer border unchanged,
 * so neighbours at any depths still share their border; a hole rim only straightened where it was
 * straight, so the ground covered stays the same) and no triangle turned over in the plane. */
#include "terra/cook.h"
#include "scan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tries of the simplifier's target per tile. */
#define SIMPLIFY_TRIES 4

enum { ROLE_BUILD, ROLE_SKIP, ROLE_LOADED }; /* what a part of the pyramid does with a node */

typedef struct node {
    int depth;
    uint8_t role;
    int32_t tx, ty;
    int32_t parent;          /* index into nodes, -1 at the top depth */
    int32_t child[4];        /* x + 2y, -1 where there is none */
    int pending;             /* children not built yet */
    terra_cook_mesh mesh;    /* the built tile: kept until its parent is built (finest: until the
                                top of its subtree is) */
    bool ground;             /* finest: it has triangles (kept once its mesh is dropped) */
    double finest_error;     /* the largest finest error under this tile */
    double error;            /* measured */
    double stated;           /* what emit stated (terra_cook_tile.stated); 0: not emitted */
} node;

typedef struct pyramid {
    const terra_cook_pyramid_desc *d;
    node *nodes;             /* depth 0 first, in Morton order; then each depth above */
    size_t count, leaves;
    pthread_mutex_t lock;
    pthread_cond_t wake;     /* a parent became ready, everything was built, or a failure */
    size_t next_leaf;
    int32_t *ready;          /* parents ready to build (a stack) */
    size_t ready_count;
    size_t done;
    size_t base;             /* done before any work: nodes a part skips or loads */
    size_t bytes;            /* tile meshes held now */
    terra_cook_pyramid_stats stats;
    terra_status status;
    char error[256];
} pyramid;

/* ---- small helpers ----------------------------------------------------------------------------- */

static double orient(const double *a, const double *b, const double *c) {
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

static double tri_area2(const terra_cook_mesh *m, const uint32_t *t) {
    return orient(m->xy + 2 * (size_t)t[0], m->xy + 2 * (size_t)t[1], m->xy + 2 * (size_t)t[2]);
}

static size_t mesh_bytes(const terra_cook_mesh *m) {
    size_t per_vertex = 2 * sizeof(double) + sizeof(float) + (m->normal ? 3 * sizeof(float) : 0) +
                        (m->material ? sizeof(uint16_t) : 0);
    return (size_t)m->vertex_capacity * per_vertex + (size_t)m->triangle_capacity * 3 * sizeof(uint32_t);
}

/* Adds (or with release, takes away) a mesh's bytes from those held, keeping the peak. */
static void account(pyramid *P, const terra_cook_mesh *m, bool release) {
    size_t b = mesh_bytes(m);
    pthread_mutex_lock(&P->lock);
    P->bytes = release ? P->bytes - b : P->bytes + b;
    if (P->bytes > P->stats.peak_bytes) P->stats.peak_bytes = P->bytes;
    pthread_mutex_unlock(&P->lock);
}

static void drop(pyramid *P, terra_cook_mesh *m) {
    account(P, m, true);
    terra_cook_mesh_free(m);
}

static int32_t floor_half(int32_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

static uint64_t morton(int32_t tx, int32_t ty) {
    /* Offset into unsigned so that order stays numeric for negative indices (28-bit keys). */
    uint64_t x = (uint32_t)(tx + (1 << 28)), y = (uint32_t)(ty + (1 << 28)), m = 0;
    for (int b = 0; b < 30; b++) m |= ((x >> b) & 1) << (2 * b) | ((y >> b) & 1) << (2 * b + 1);
    return m;
}

typedef struct tile_ref { uint64_t order; int32_t tx, ty; } tile_ref;

static int tile_ref_cmp(const void *a, const void *b) {
    uint64_t x = ((const tile_ref *)a)->order, y = ((const tile_ref *)b)->order;
    return x < y ? -1 : x > y;
}

/* Metres per plane unit in x and y at a tile: the grid's units, or degrees at the tile's centre
 * latitude (a sphere of the WGS84 equatorial radius: enough to steer the simplifier and to state
 * longest edges). */
static void metres_per_unit(const terra_cook_grid *g, const double rect[4], double s[2]) {
    if (g->frame != TERRA_FRAME_GEOGRAPHIC) {
        s[0] = g->unit[0], s[1] = g->unit[1];
        return;
    }
    const double rad = 3.14159265358979323846 / 180.0;
    double lat = g->origin[1] + 0.5 * (rect[1] + rect[3]) * g->unit[1];
    s[0] = g->unit[0] * rad * TERRA_WGS84_A * cos(lat * rad);
    s[1] = g->unit[1] * rad * TERRA_WGS84_A;
}

/* ---- meshes ------------------------------------------------------------------------------------ */

/* dst = the vertices of src that `tri` uses (in order of first use) and those triangles renumbered.
 * map: scratch of src->vertex_count entries. */
static terra_status compact(const terra_cook_mesh *src, const uint32_t *tri, size_t tn, terra_cook_mesh *dst,
                            uint32_t *map) {
    for (uint32_t i = 0; i < src->vertex_count; i++) map[i] = UINT32_MAX;
    uint32_t nv = 0;
    for (size_t i = 0; i < 3 * tn; i++)
        if (map[tri[i]] == UINT32_MAX) map[tri[i]] = nv++;
    dst->vertex_count = dst->triangle_count = 0;
    terra_status st = terra_cook_mesh_reserve(dst, nv, (uint32_t)tn, src->normal != NULL, src->material != NULL);
    if (st != TERRA_OK) return st;
    for (uint32_t i = 0; i < src->vertex_count; i++) {
        uint32_t k = map[i];
        if (k == UINT32_MAX) continue;
        dst->xy[2 * (size_t)k] = src->xy[2 * (size_t)i];
        dst->xy[2 * (size_t)k + 1] = src->xy[2 * (size_t)i + 1];
        dst->z[k] = src->z[i];
        if (src->normal) memcpy(dst->normal + 3 * (size_t)k, src->normal + 3 * (size_t)i, 3 * sizeof(float));
        if (src->material) dst->material[k] = src->material[i];
    }
    for (size_t i = 0; i < 3 * tn; i++) dst->tri[i] = map[tri[i]];
    dst->vertex_count = nv;
    dst->triangle_count = (uint32_t)tn;
    return TERRA_OK;
}

/* A finest tile from the callback: indices in range, every used vertex finite. */
static terra_status check_finest(const terra_cook_mesh *m, double error, int32_t tx, int32_t ty) {
    if (!(error >= 0) || !isfinite(error))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d: error %g is not a finite number >= 0",
                          (int)tx, (int)ty, error);
    if (m->triangle_count && (!m->tri || !m->xy || !m->z))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d: triangles without vertex arrays", (int)tx,
                          (int)ty);
    for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++) {
        uint32_t v = m->tri[i];
        if (v >= m->vertex_count)
            return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d: triangle %zu uses vertex %u of %u",
                              (int)tx, (int)ty, i / 3, v, m->vertex_count);
        if (!isfinite(m->xy[2 * (size_t)v]) || !isfinite(m->xy[2 * (size_t)v + 1]) || !isfinite(m->z[v]))
            return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d: vertex %u is not finite", (int)tx,
                              (int)ty, v);
    }
    return TERRA_OK;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t vertex_hash(double x, double y, float z, uint16_t material) {
    /* + 0 turns -0 into +0, which == treats as equal. */
    uint64_t bx, by;
    uint32_t bz;
    x += 0.0, y += 0.0, z += 0.0f;
    memcpy(&bx, &x, sizeof bx);
    memcpy(&by, &y, sizeof by);
    memcpy(&bz, &z, sizeof bz);
    return mix64(bx ^ mix64(by ^ mix64(bz | (uint64_t)material << 32)));
}

/* The children's meshes as one, vertices with the same position (and material) welded: the
 * children's shared edges carry identical vertices, so the cross between them becomes interior. */
static terra_status merge(pyramid *P, const node *n, terra_cook_mesh *out) {
    const terra_cook_mesh *c[4];
    int k = 0;
    size_t nv = 0, nt = 0, most = 0;
    bool normals = true, materials = false;
    for (int i = 0; i < 4; i++) {
        if (n->child[i] < 0) continue;
        const terra_cook_mesh *m = &P->nodes[n->child[i]].mesh;
        if (!m->triangle_count) continue;
        c[k++] = m;
        nv += m->vertex_count, nt += m->triangle_count;
        most = m->vertex_count > most ? m->vertex_count : most;
        normals = normals && m->normal;
        materials = materials || m->material;
    }
    if (nv > UINT32_MAX - 1 || nt > UINT32_MAX / 3)
        return terra_fail(TERRA_E_CAPACITY, "cook pyramid: tile %d/%d,%d: %zu vertices merged, over 32-bit indices",
                          n->depth, (int)n->tx, (int)n->ty, nv);
    out->vertex_count = out->triangle_count = 0;
    if (!k) return TERRA_OK;
    size_t slots = 16;
    while (slots < 2 * nv) slots *= 2;
    uint32_t *table = terra_alloc(slots * sizeof(uint32_t)), *map = terra_alloc(most * sizeof(uint32_t));
    terra_status st = terra_cook_mesh_reserve(out, (uint32_t)nv, (uint32_t)nt, normals, materials);
    if (st == TERRA_OK && (!table || !map))
        st = terra_fail(TERRA_E_NOMEM, "cook pyramid: out of memory merging %zu vertices", nv);
    if (st != TERRA_OK) {
        terra_free(table);
        terra_free(map);
        return st;
    }
    memset(table, 0xff, slots * sizeof(uint32_t));
    for (int i = 0; i < k; i++) {
        const terra_cook_mesh *m = c[i];
        for (uint32_t v = 0; v < m->vertex_count; v++) {
            double x = m->xy[2 * (size_t)v], y = m->xy[2 * (size_t)v + 1];
            float z = m->z[v];
            uint16_t mat = m->material ? m->material[v] : 0;
            size_t h = vertex_hash(x, y, z, mat) & (slots - 1);
            for (;; h = (h + 1) & (slots - 1)) {
                uint32_t e = table[h];
                if (e == UINT32_MAX) {
                    e = table[h] = out->vertex_count++;
                    out->xy[2 * (size_t)e] = x, out->xy[2 * (size_t)e + 1] = y, out->z[e] = z;
                    if (normals) memcpy(out->normal + 3 * (size_t)e, m->normal + 3 * (size_t)v, 3 * sizeof(float));
                    if (materials) out->material[e] = mat;
                }
                if (out->xy[2 * (size_t)e] == x && out->xy[2 * (size_t)e + 1] == y && out->z[e] == z &&
                    (!materials || out->material[e] == mat)) {
                    map[v] = e;
                    break;
                }
            }
        }
        for (uint32_t t = 0; t < m->triangle_count; t++) {
            uint32_t a = map[m->tri[3 * (size_t)t]], b = map[m->tri[3 * (size_t)t + 1]], cc = map[m->tri[3 * (size_t)t + 2]];
            if (a == b || b == cc || a == cc) continue; /* two corners welded into one: nothing left */
            uint32_t *o = out->tri + 3 * (size_t)out->triangle_count++;
            o[0] = a, o[1] = b, o[2] = cc;
        }
    }
    terra_free(table);
    terra_free(map);
    return TERRA_OK;
}

/* The border half-edges of a triangle list (a->b with no b->a), sorted, into out (3 * tn entries:
 * the first part holds the result). scratch: 3 * tn. Returns how many. */
static size_t border_edges(const uint32_t *tri, size_t tn, uint64_t *out, uint64_t *scratch) {
    for (size_t t = 0; t < tn; t++)
        for (int k = 0; k < 3; k++)
            scratch[3 * t + k] = (uint64_t)tri[3 * t + k] << 32 | tri[3 * t + (k + 1) % 3];
    terra_cook_sort_u64(scratch, 3 * tn, out);
    size_t n = 0;
    for (size_t i = 0; i < 3 * tn; i++)
        if (!cook_holds(scratch, 3 * tn, scratch[i] << 32 | scratch[i] >> 32)) out[n++] = scratch[i];
    return n;
}

/* ---- one tile ---------------------------------------------------------------------------------- */

typedef struct tile_work {
    terra_cook_mesh merged, cand;
    const terra_cook_mesh **finest;
    int32_t *leaves;         /* tx, ty of each finest tile under the tile */
    int finest_count;
    float *pos, *heights;    /* heights: the source's samples under the tile, or NULL */
    terra_cook_samples samples;
    uint32_t *tri, *best, *map;
    uint64_t *border, *edges, *scratch;
    size_t border_count, merged_flat;
} tile_work;

static void collect_finest(pyramid *P, const node *n, tile_work *w) {
    if (n->depth == 0) {
        if (n->ground) {
            w->leaves[2 * w->finest_count] = n->tx, w->leaves[2 * w->finest_count + 1] = n->ty;
            w->finest[w->finest_count++] = &n->mesh;
        }
        return;
    }
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) collect_finest(P, &P->nodes[n->child[i]], w);
}

/* Whether the try's border edges (w->edges, nb of them) are the merged children's, except that a
 * run of rim edges in a straight line, off the tile's sides, may have become one edge: each old
 * edge is kept or lies in exactly one new one, and the vertices between are gone. */
static bool same_border(tile_work *w, size_t nb, const uint32_t *tri, size_t tn, const double *rect) {
    const terra_cook_mesh *m = &w->merged;
    const size_t old = w->border_count;
    if (nb == old && memcmp(w->edges, w->border, nb * sizeof(uint64_t)) == 0) return true;
    uint8_t *taken = terra_calloc(old + 1, 1);
    if (!taken) return false;
    uint32_t *used = w->map; /* scratch here: compact fills it afresh */
    memset(used, 0, m->vertex_count * sizeof(uint32_t));
    for (size_t i = 0; i < 3 * tn; i++) used[tri[i]] = 1;
    size_t count = 0;
    bool ok = true;
    for (size_t i = 0; i < nb && ok; i++) {
        const uint32_t a = (uint32_t)(w->edges[i] >> 32), b = (uint32_t)w->edges[i];
        const double *A = m->xy + 2 * (size_t)a, *B = m->xy + 2 * (size_t)b;
        /* old edges from `at`, untaken, towards b: b itself or a vertex between */
        uint32_t at = a;
        while (ok && at != b) {
            size_t lo = 0, hi = old;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if ((w->border[mid] >> 32) < at) lo = mid + 1;
                else hi = mid;
            }
            uint32_t to = UINT32_MAX;
            for (size_t k = lo; k < old && (uint32_t)(w->border[k] >> 32) == at && to == UINT32_MAX; k++) {
                const uint32_t c = (uint32_t)w->border[k];
                const double *C = m->xy + 2 * (size_t)c;
                if (taken[k]) continue;
                if (c != b && (used[c] || !cook_straight(A, C, B) || cook_on_side(rect, C))) continue;
                taken[k] = 1, to = c, count++;
            }
            if (to == UINT32_MAX) ok = false;
            at = to;
        }
    }
    terra_free(taken);
    return ok && count == old;
}

/* Whether the triangles of a try keep the merged children's border (same_border) and turn no
 * triangle over in the plane. */
static bool keeps_border(tile_work *w, const uint32_t *tri, size_t tn, const double *rect) {
    const terra_cook_mesh *m = &w->merged;
    size_t flat = 0;
    for (size_t t = 0; t < tn; t++) {
        double a = tri_area2(m, tri + 3 * t);
        if (a < 0) return false;
        flat += a == 0;
    }
    /* Walls (no area in the plane) may stay or go, never appear. */
    if (flat > w->merged_flat) return false;
    return same_border(w, border_edges(tri, tn, w->edges, w->scratch), tri, tn, rect);
}

/* The stated error of the mesh the triangles make (w->cand), or once it passes `limit`, some error
 * past it: its distance to the source, or to the finest meshes plus what they state. */
static terra_status measure(pyramid *P, const node *n, tile_work *w, const uint32_t *tri, size_t tn, double limit,
                            double *stated) {
    terra_status st = compact(&w->merged, tri, tn, &w->cand, w->map);
    if (st != TERRA_OK) return st;
    if (P->d->distance) { /* samples within what decoding moves a vertex outside a triangle count */
        double r[4];
        terra_cook_tile_rect(P->d->grid, n->depth, n->tx, n->ty, r);
        return P->d->distance(P->d->distance_user, &w->cand, w->leaves, (size_t)w->finest_count,
                              0.5 * fmax(r[2] - r[0], r[3] - r[1]) / 32767.0, limit, stated);
    }
    double dist = terra_cook_vertical_distance_within(&w->cand, w->finest, w->finest_count, limit - n->finest_error, NULL);
    if (isinf(dist))
        return terra_fail(TERRA_E_NOMEM, "cook pyramid: tile %d/%d,%d: out of memory measuring", n->depth, (int)n->tx,
                          (int)n->ty);
    *stated = dist + n->finest_error;
    return TERRA_OK;
}

/* The source's samples under the merged mesh's box (its ground: the tile's part that has any), into
 * w->samples: all of them, or where the box is wider than window_max samples, every stride-th in
 * both directions (read a row at a time). */
static terra_status tile_samples(pyramid *P, const node *n, tile_work *w, const double *rect) {
    const terra_cook_pyramid_desc *d = P->d;
    const terra_cook_mesh *m = &w->merged;
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (uint32_t v = 0; v < m->vertex_count; v++)
        for (int k = 0; k < 2; k++) {
            lo[k] = fmin(lo[k], m->xy[2 * (size_t)v + k]);
            hi[k] = fmax(hi[k], m->xy[2 * (size_t)v + k]);
        }
    const int64_t x0 = (int64_t)fmax(rect[0], floor(lo[0])), y0 = (int64_t)fmax(rect[1], floor(lo[1]));
    const int64_t x1 = (int64_t)fmin(rect[2], ceil(hi[0])), y1 = (int64_t)fmin(rect[3], ceil(hi[1]));
    const int64_t bw = x1 - x0 + 1, bh = y1 - y0 + 1;
    int64_t stride = 1;
    while ((bw - 1) / stride + 1 > d->window_max || (bh - 1) / stride + 1 > d->window_max) stride *= 2;
    const int nw = (int)((bw - 1) / stride + 1), nh = (int)((bh - 1) / stride + 1);
    w->heights = terra_alloc((size_t)nw * (size_t)nh * sizeof(float));
    float *row = stride > 1 ? terra_alloc((size_t)bw * sizeof(float)) : NULL;
    terra_status st = TERRA_OK;
    if (!w->heights || (stride > 1 && !row))
        st = terra_fail(TERRA_E_NOMEM, "cook pyramid: tile %d/%d,%d: out of memory for %dx%d samples", n->depth,
                        (int)n->tx, (int)n->ty, nw, nh);
    else if (stride == 1)
        st = d->window(d->window_user, d->grid, x0, y0, nw, nh, w->heights);
    for (int j = 0; st == TERRA_OK && stride > 1 && j < nh; j++) {
        st = d->window(d->window_user, d->grid, x0, y0 + j * stride, (int)bw, 1, row);
        for (int i = 0; st == TERRA_OK && i < nw; i++) w->heights[(size_t)j * nw + i] = row[(size_t)i * stride];
    }
    terra_free(row);
    w->samples = (terra_cook_samples){w->heights, x0, y0, nw, nh, (int)stride};
    return st;
}

/* Chooses the fewest triangles whose stated error fits the depth's bound; the result in w->best,
 * its count in *best_count and its error in *best_error. */
static terra_status simplify_tile(pyramid *P, const node *n, tile_work *w, size_t *best_count, double *best_error) {
    const terra_cook_pyramid_desc *d = P->d;
    const terra_cook_mesh *m = &w->merged;
    const size_t tn = m->triangle_count;
    double rect[4], s[2];
    terra_cook_tile_rect(d->grid, n->depth, n->tx, n->ty, rect);
    metres_per_unit(d->grid, rect, s);
    /* Metres from the tile's corner, for the simplifier's costs: floats keep them to about 1e-7 of
     * the tile's width (0.07 m on a 1250 km geographic tile); area is judged on xy. */
    for (uint32_t v = 0; v < m->vertex_count; v++) {
        w->pos[3 * (size_t)v] = (float)((m->xy[2 * (size_t)v] - rect[0]) * s[0]);
        w->pos[3 * (size_t)v + 1] = (float)((m->xy[2 * (size_t)v + 1] - rect[1]) * s[1]);
        w->pos[3 * (size_t)v + 2] = m->z[v];
    }
    w->merged_flat = 0;
    for (size_t t = 0; t < tn; t++) w->merged_flat += tri_area2(m, m->tri + 3 * t) == 0;
    w->border_count = border_edges(m->tri, tn, w->border, w->scratch);

    /* The simplifier's cost is the error against the samples (one run at the bound), or at the
     * vertices merged, so its target starts at the bound; what is stated is measured, and the target
     * moves by the ratio of bound to measure: down after a miss, up after a fit well inside, halfway
     * between once there are both. */
    const double bound = ldexp(d->max_error, n->depth);
    double children = 0;
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) children = fmax(children, P->nodes[n->child[i]].error);
    size_t best = tn;
    double err = children; /* the children merged as they are: their own stated errors */
    double target = bound - (d->distance ? 0 : n->finest_error), fit = 0, miss = INFINITY;
    /* (rounding: the measure may weigh a triangle's corners in another order than the simplifier) */
    if (d->distance) target *= 1 - 1e-9;
    bool fitted = false;
    const terra_cook_samples *samples = NULL;
    if (d->window && d->window_max > 1) {
        terra_status st = tile_samples(P, n, w, rect);
        if (st != TERRA_OK) return st;
        samples = &w->samples;
    }
    /* Against every sample the simplifier's cost is the error: one run at the bound is the answer.
     * What fits is the bound, unless the children lie further from the source already (a side whose
     * vertices are spaced for wider tiles may): then, against every sample, the run at the bound
     * (no collapse adds more), else the children's error. */
    const bool exact = samples && samples->stride == 1;
    const double limit = children <= bound ? bound : exact ? INFINITY : children * (1 + 1e-6);
    for (int i = 0; i < SIMPLIFY_TRIES && target > 0; i++) {
        size_t got =
            d->simplify(d->simplify_user, m->xy, w->pos, m->vertex_count, m->tri, tn, target, rect, samples, w->tri);
        double stated = INFINITY;
        if (got < best && keeps_border(w, w->tri, got, rect)) {
            terra_status st = measure(P, n, w, w->tri, got, limit, &stated);
            if (st != TERRA_OK) return st;
        }
        if (stated <= limit) {
            if (got < best) {
                best = got, err = stated, fitted = true;
                memcpy(w->best, w->tri, 3 * got * sizeof(uint32_t));
            }
            fit = target;
            if (exact || stated > 0.97 * limit) break;
        } else {
            miss = target;
        }
        target = isfinite(miss) ? (fitted ? 0.5 * (fit + miss) : 0.9 * target * bound / stated)
                                : target * fmin(2, 0.98 * bound / fmax(stated, 1e-9));
        if (!isfinite(target)) target = 0.5 * miss;
    }
    if (!fitted) memcpy(w->best, m->tri, 3 * tn * sizeof(uint32_t));
    *best_count = best;
    *best_error = err;
    return TERRA_OK;
}

/* Longest edge (metres, in three dimensions) and height range of a tile, then the emit call. */
static terra_status emit(pyramid *P, node *n, double error, const int32_t *finest, size_t finest_count) {
    const terra_cook_mesh *m = &n->mesh;
    double rect[4], s[2];
    terra_cook_tile_rect(P->d->grid, n->depth, n->tx, n->ty, rect);
    metres_per_unit(P->d->grid, rect, s);
    double children = 0;
    for (int i = 0; n->depth && i < 4; i++)
        if (n->child[i] >= 0) children = fmax(children, P->nodes[n->child[i]].stated);
    n->stated = fmax(error, children);
    terra_cook_tile t = {.depth = n->depth, .tx = n->tx, .ty = n->ty, .mesh = m, .geometric_error = error,
                         .finest = finest, .finest_count = finest_count, .children_stated = children,
                         .stated = &n->stated};
    t.min_height = INFINITY, t.max_height = -INFINITY;
    for (uint32_t v = 0; v < m->vertex_count; v++) {
        t.min_height = fmin(t.min_height, m->z[v]);
        t.max_height = fmax(t.max_height, m->z[v]);
    }
    double longest = 0;
    for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++) {
        uint32_t a = m->tri[i], b = m->tri[i % 3 == 2 ? i - 2 : i + 1];
        double dx = (m->xy[2 * (size_t)b] - m->xy[2 * (size_t)a]) * s[0];
        double dy = (m->xy[2 * (size_t)b + 1] - m->xy[2 * (size_t)a + 1]) * s[1];
        double dz = (double)m->z[b] - m->z[a];
        longest = fmax(longest, dx * dx + dy * dy + dz * dz);
    }
    t.longest_edge = sqrt(longest);
    terra_status st = P->d->emit(P->d->emit_user, &t);
    if (st != TERRA_OK) return st;
    pthread_mutex_lock(&P->lock);
    terra_cook_level_stats *ls = &P->stats.level[n->depth];
    ls->tiles++;
    ls->vertices += m->vertex_count;
    ls->triangles += m->triangle_count;
    ls->max_error = fmax(ls->max_error, error);
    pthread_mutex_unlock(&P->lock);
    return TERRA_OK;
}

static terra_status build_finest(pyramid *P, node *n) {
    const terra_cook_pyramid_desc *d = P->d;
    terra_cook_mesh raw = {0};
    double error = 0;
    terra_status st = d->make_finest(d->finest_user, n->tx, n->ty, &raw, &error);
    if (st == TERRA_OK) st = check_finest(&raw, error, n->tx, n->ty);
    /* Unused vertices go (a raster's hole corners carry no height). */
    uint32_t *map = st == TERRA_OK ? terra_alloc((size_t)raw.vertex_count * sizeof(uint32_t) + 1) : NULL;
    if (st == TERRA_OK && !map) st = terra_fail(TERRA_E_NOMEM, "cook pyramid: out of memory");
    if (st == TERRA_OK) st = compact(&raw, raw.tri, raw.triangle_count, &n->mesh, map);
    terra_free(map);
    terra_cook_mesh_free(&raw);
    if (st != TERRA_OK) return st;
    account(P, &n->mesh, false);
    n->finest_error = n->error = error;
    n->ground = n->mesh.triangle_count > 0;
    const int32_t self[2] = {n->tx, n->ty};
    return n->mesh.triangle_count ? emit(P, n, error, self, 1) : TERRA_OK;
}

static void free_work(tile_work *w) {
    terra_cook_mesh_free(&w->merged);
    terra_cook_mesh_free(&w->cand);
    terra_free(w->finest);
    terra_free(w->leaves);
    terra_free(w->pos);
    terra_free(w->heights);
    terra_free(w->tri);
    terra_free(w->best);
    terra_free(w->map);
    terra_free(w->border);
    terra_free(w->edges);
    terra_free(w->scratch);
}

static terra_status build_coarse(pyramid *P, node *n) {
    tile_work w;
    memset(&w, 0, sizeof w);
    n->finest_error = 0;
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) n->finest_error = fmax(n->finest_error, P->nodes[n->child[i]].finest_error);
    terra_status st = merge(P, n, &w.merged);
    const size_t nv = w.merged.vertex_count, tn = w.merged.triangle_count;
    if (st == TERRA_OK && tn) {
        w.finest = terra_alloc(P->leaves * sizeof(*w.finest));
        w.leaves = terra_alloc(2 * P->leaves * sizeof(*w.leaves));
        w.pos = terra_alloc(3 * nv * sizeof(float));
        w.tri = terra_alloc(3 * tn * sizeof(uint32_t));
        w.best = terra_alloc(3 * tn * sizeof(uint32_t));
        w.map = terra_alloc(nv * sizeof(uint32_t));
        w.border = terra_alloc(3 * tn * sizeof(uint64_t));
        w.edges = terra_alloc(3 * tn * sizeof(uint64_t));
        w.scratch = terra_alloc(3 * tn * sizeof(uint64_t));
        if (!w.finest || !w.leaves || !w.pos || !w.tri || !w.best || !w.map || !w.border || !w.edges || !w.scratch)
            st = terra_fail(TERRA_E_NOMEM, "cook pyramid: tile %d/%d,%d: out of memory", n->depth, (int)n->tx,
                            (int)n->ty);
    }
    size_t count = 0;
    double error = 0;
    if (st == TERRA_OK && tn) {
        collect_finest(P, n, &w);
        st = simplify_tile(P, n, &w, &count, &error);
    }
    if (st == TERRA_OK && tn) st = compact(&w.merged, w.best, count, &n->mesh, w.map);
    if (st == TERRA_OK) {
        n->error = error;
        account(P, &n->mesh, false);
        /* The children are done with (the finest stay for the measures further up, unless those
         * are against the source). */
        for (int i = 0; i < 4; i++)
            if (n->child[i] >= 0 && (n->depth > 1 || P->d->distance)) drop(P, &P->nodes[n->child[i]].mesh);
        if (n->mesh.triangle_count) st = emit(P, n, error, w.leaves, (size_t)w.finest_count);
    }
    free_work(&w);
    return st;
}

/* At the top depth nothing needs the finest meshes under a tile once it is built. */
static void drop_finest(pyramid *P, node *n) {
    if (n->depth == 0) {
        drop(P, &n->mesh);
        return;
    }
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) drop_finest(P, &P->nodes[n->child[i]]);
}

/* ---- parts of the pyramid ----------------------------------------------------------------------- */

static size_t count_ground(const pyramid *P, const node *n) {
    if (n->depth == 0) return n->ground;
    size_t k = 0;
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) k += count_ground(P, &P->nodes[n->child[i]]);
    return k;
}

static void list_ground(const pyramid *P, const node *n, int32_t *out, size_t *k) {
    if (n->depth == 0) {
        if (n->ground) out[2 * *k] = n->tx, out[2 * *k + 1] = n->ty, ++*k;
        return;
    }
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) list_ground(P, &P->nodes[n->child[i]], out, k);
}

/* A part's root, built: to root_done with the finest tiles with ground under it. */
static terra_status hand_root(pyramid *P, const node *n) {
    terra_cook_root r = {.tx = n->tx, .ty = n->ty, .mesh = n->mesh, .error = n->error, .finest_error = n->finest_error,
                         .stated = n->stated};
    r.finest = terra_alloc(2 * count_ground(P, n) * sizeof *r.finest + 1);
    if (!r.finest) return terra_fail(TERRA_E_NOMEM, "cook pyramid: out of memory");
    list_ground(P, n, r.finest, &r.finest_count);
    terra_status st = P->d->root_done(P->d->part_user, &r);
    terra_free(r.finest);
    return st;
}

static int pair_cmp(const void *a, const void *b) {
    const int32_t *p = a, *q = b;
    return p[0] != q[0] ? (p[0] > q[0]) - (p[0] < q[0]) : (p[1] > q[1]) - (p[1] < q[1]);
}

/* The finest tiles under a loaded root get their ground flags from its list (sorted). */
static void mark_ground(pyramid *P, node *n, const int32_t *list, size_t k) {
    if (n->depth == 0) {
        const int32_t me[2] = {n->tx, n->ty};
        n->ground = k && bsearch(me, list, k, 2 * sizeof *list, pair_cmp);
        return;
    }
    for (int i = 0; i < 4; i++)
        if (n->child[i] >= 0) mark_ground(P, &P->nodes[n->child[i]], list, k);
}

/* What a part of the pyramid builds (terra_cook_pyramid_desc.part_*): every node's role, the
 * loaded roots in place, and what is ready to build. */
static terra_status part_setup(pyramid *P) {
    const terra_cook_pyramid_desc *d = P->d;
    const int B = d->part_bottom, T = d->part_top ? d->part_top : d->grid->depth;
    if (!d->part_bottom && !d->part_top) return TERRA_OK;
    if (!d->distance)
        return terra_fail(TERRA_E_UNSUPPORTED, "cook pyramid: a part of a pyramid is measured against the source only");
    if (B < 0 || T > d->grid->depth || B >= T || (B && !d->load_root) || (d->part_top && !d->root_done))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: a part from depth %d to %d of 0..%d (or a callback missing)", B,
                          T, d->grid->depth);
    for (size_t i = P->count; i-- > 0;) { /* parents come after their children */
        node *n = &P->nodes[i];
        if (n->depth > T || n->depth < B) n->role = ROLE_SKIP;
        else if (n->depth == T) n->role = d->want && !d->want(d->part_user, n->tx, n->ty) ? ROLE_SKIP : ROLE_BUILD;
        else n->role = P->nodes[n->parent].role;
    }
    for (size_t i = 0; i < P->count; i++) {
        node *n = &P->nodes[i];
        if (n->role == ROLE_BUILD && B && n->depth == B) {
            terra_cook_root r;
            memset(&r, 0, sizeof r);
            terra_status st = d->load_root(d->part_user, n->tx, n->ty, &r);
            if (st == TERRA_OK && (r.tx != n->tx || r.ty != n->ty || !(r.error >= 0) || !(r.finest_error >= 0)))
                st = terra_fail(TERRA_E_CORRUPT, "cook pyramid: root %d/%d,%d came back as %d,%d (error %g)", B, (int)n->tx,
                                (int)n->ty, (int)r.tx, (int)r.ty, r.error);
            if (st == TERRA_OK) st = check_finest(&r.mesh, r.error, n->tx, n->ty);
            if (st != TERRA_OK) {
                terra_cook_mesh_free(&r.mesh);
                terra_free(r.finest);
                return st;
            }
            qsort(r.finest, r.finest_count, 2 * sizeof *r.finest, pair_cmp);
            mark_ground(P, n, r.finest, r.finest_count);
            terra_free(r.finest);
            n->mesh = r.mesh;
            n->error = r.error, n->finest_error = r.finest_error, n->stated = r.stated;
            account(P, &n->mesh, false);
            n->role = ROLE_LOADED;
            if (--P->nodes[n->parent].pending == 0) P->ready[P->ready_count++] = n->parent;
        }
        if (n->role != ROLE_BUILD) P->done++;
    }
    P->base = P->done;
    return TERRA_OK;
}

/* ---- workers ----------------------------------------------------------------------------------- */

static void worker(terra_job *job) {
    pyramid *P = job->user;
    pthread_mutex_lock(&P->lock);
    for (;;) {
        if (P->status != TERRA_OK || P->done == P->count) break;
        size_t i;
        while (P->next_leaf < P->leaves && P->nodes[P->next_leaf].role != ROLE_BUILD) P->next_leaf++;
        if (P->ready_count)
            i = (size_t)P->ready[--P->ready_count];
        else if (P->next_leaf < P->leaves)
            i = P->next_leaf++;
        else {
            pthread_cond_wait(&P->wake, &P->lock);
            continue;
        }
        pthread_mutex_unlock(&P->lock);
        node *n = &P->nodes[i];
        terra_status st = n->depth == 0 ? build_finest(P, n) : build_coarse(P, n);
        const bool root = P->d->part_top && n->depth == P->d->part_top, top = n->parent < 0 || root;
        if (st == TERRA_OK && root) st = hand_root(P, n);
        if (st == TERRA_OK && top) {
            if (!P->d->distance || n->depth == 0) drop_finest(P, n);
            if (n->depth > 0) drop(P, &n->mesh);
        }
        pthread_mutex_lock(&P->lock);
        if (st != TERRA_OK) {
            if (P->status == TERRA_OK) {
                P->status = st;
                snprintf(P->error, sizeof P->error, "%s", terra_last_error());
            }
            pthread_cond_broadcast(&P->wake);
            break;
        }
        P->done++;
        if (!top && --P->nodes[n->parent].pending == 0) {
            P->ready[P->ready_count++] = n->parent;
            pthread_cond_signal(&P->wake);
        }
        if (P->done == P->count) pthread_cond_broadcast(&P->wake);
    }
    pthread_mutex_unlock(&P->lock);
    job->status = TERRA_OK;
}

/* The quadtree over the finest tiles: nodes depth by depth, each depth in Morton order. */
static terra_status plan(pyramid *P) {
    const terra_cook_pyramid_desc *d = P->d;
    const int depth = d->grid->depth;
    tile_ref *refs = terra_alloc(d->finest_count * sizeof(tile_ref) + 1);
    P->nodes = terra_calloc((size_t)(depth + 1) * d->finest_count + 1, sizeof(node));
    if (!refs || !P->nodes) {
        terra_free(refs);
        return terra_fail(TERRA_E_NOMEM, "cook pyramid: out of memory for %zu tiles", d->finest_count);
    }
    for (size_t i = 0; i < d->finest_count; i++) {
        int32_t tx = d->finest[2 * i], ty = d->finest[2 * i + 1];
        if (tx < TERRA_TILE_COORD_MIN || tx > TERRA_TILE_COORD_MAX || ty < TERRA_TILE_COORD_MIN ||
            ty > TERRA_TILE_COORD_MAX) {
            terra_free(refs);
            return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d is off the key range", (int)tx, (int)ty);
        }
        refs[i] = (tile_ref){morton(tx, ty), tx, ty};
    }
    size_t n = d->finest_count, first = 0;
    for (int dep = 0; dep <= depth; dep++) {
        qsort(refs, n, sizeof(tile_ref), tile_ref_cmp);
        size_t u = 0;
        for (size_t i = 0; i < n; i++) {
            if (u && refs[u - 1].order == refs[i].order) {
                if (dep == 0) {
                    terra_free(refs);
                    return terra_fail(TERRA_E_INVALID, "cook pyramid: finest tile %d,%d is listed twice",
                                      (int)refs[i].tx, (int)refs[i].ty);
                }
                continue;
            }
            refs[u++] = refs[i];
        }
        for (size_t i = 0; i < u; i++) {
            node *nd = &P->nodes[first + i];
            nd->depth = dep, nd->tx = refs[i].tx, nd->ty = refs[i].ty, nd->parent = -1;
            for (int k = 0; k < 4; k++) nd->child[k] = -1;
        }
        first += u;
        n = u;
        for (size_t i = 0; i < n; i++) {
            int32_t px = floor_half(refs[i].tx), py = floor_half(refs[i].ty);
            refs[i] = (tile_ref){morton(px, py), px, py};
        }
    }
    P->count = first;
    terra_free(refs);
    /* Link each node to its parent: parents of depth dep + 1 are sorted by Morton order. */
    size_t lo = 0;
    while (lo < P->count) {
        size_t hi = lo;
        while (hi < P->count && P->nodes[hi].depth == P->nodes[lo].depth) hi++;
        size_t plo = hi, phi = hi;
        while (phi < P->count && P->nodes[phi].depth == P->nodes[lo].depth + 1) phi++;
        for (size_t i = lo; i < hi && plo < phi; i++) {
            node *c = &P->nodes[i];
            int32_t px = floor_half(c->tx), py = floor_half(c->ty);
            uint64_t key = morton(px, py);
            size_t a = plo, b = phi;
            while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (morton(P->nodes[mid].tx, P->nodes[mid].ty) < key) a = mid + 1;
                else b = mid;
            }
            node *p = &P->nodes[a];
            c->parent = (int32_t)a;
            p->child[(c->tx - 2 * px) + 2 * (c->ty - 2 * py)] = (int32_t)i;
            p->pending++;
        }
        if (P->nodes[lo].depth == 0) P->leaves = hi;
        lo = hi;
    }
    return TERRA_OK;
}

terra_status terra_cook_pyramid(const terra_cook_pyramid_desc *d, terra_cook_pyramid_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!d || !d->grid || !d->make_finest || !d->simplify || !d->emit || (d->finest_count && !d->finest))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: NULL argument");
    if (d->grid->depth < 0 || d->grid->depth > TERRA_TILE_MAX_LEVEL)
        return terra_fail(TERRA_E_INVALID, "cook pyramid: depth %d is outside 0..%d", d->grid->depth,
                          TERRA_TILE_MAX_LEVEL);
    if (!(d->grid->tile_units > 0) || !isfinite(d->grid->tile_units) || !(d->grid->unit[0] > 0) ||
        !(d->grid->unit[1] > 0))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: tile size and units must be positive");
    if (!(d->max_error > 0) || !isfinite(d->max_error))
        return terra_fail(TERRA_E_INVALID, "cook pyramid: max error %g must be positive", d->max_error);
    if (d->finest_count > (size_t)INT32_MAX / (size_t)(d->grid->depth + 1))
        return terra_fail(TERRA_E_CAPACITY, "cook pyramid: %zu finest tiles are too many", d->finest_count);
    pyramid P;
    memset(&P, 0, sizeof P);
    P.d = d;
    terra_status st = plan(&P);
    if (st == TERRA_OK && !(P.ready = terra_alloc(P.count * sizeof(int32_t) + 1)))
        st = terra_fail(TERRA_E_NOMEM, "cook pyramid: out of memory");
    if (st == TERRA_OK) st = part_setup(&P);
    terra_pool *pool = d->pool, *own = NULL;
    if (st == TERRA_OK && !pool &&
        (st = terra_pool_create(&(terra_pool_desc){.threads = d->threads > 0 ? d->threads : terra_default_threads()}, &own)) == TERRA_OK)
        pool = own;
    terra_job_queue *queue = NULL;
    if (st == TERRA_OK) st = terra_job_queue_create(&queue);
    if (st == TERRA_OK && P.count > P.base) {
        pthread_mutex_init(&P.lock, NULL);
        pthread_cond_init(&P.wake, NULL);
        int nj = terra_pool_threads(pool);
        if (nj > 64) nj = 64;
        terra_job jobs[64];
        for (int i = 0; i < nj; i++) {
            jobs[i] = (terra_job){.run = worker, .user = &P, .queue = queue};
            terra_pool_submit(pool, &jobs[i]);
        }
        /* Progress is reported here, on the calling thread, while the workers build. */
        uint64_t shown = UINT64_MAX;
        for (int back = 0; back < nj;) {
            terra_job *done_jobs[64];
            int got = terra_job_queue_poll(queue, done_jobs, 64);
            back += got;
            pthread_mutex_lock(&P.lock);
            uint64_t done = P.done;
            pthread_mutex_unlock(&P.lock);
            if (d->progress && done != shown) d->progress(d->progress_user, done - P.base, P.count - P.base);
            shown = done;
            if (got == 0) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
        pthread_cond_destroy(&P.wake);
        pthread_mutex_destroy(&P.lock);
        if (P.status != TERRA_OK) st = terra_fail(P.status, "%s", P.error);
    }
    terra_job_queue_destroy(queue);
    terra_pool_destroy(own);
    for (size_t i = 0; P.nodes && i < P.count; i++) terra_cook_mesh_free(&P.nodes[i].mesh);
    terra_free(P.nodes);
    terra_free(P.ready);
    if (stats && st == TERRA_OK) *stats = P.stats;
    return st;
}
