/* Scenery ground cut along the finest tile grid and welded (terra/scenery.h).
 *
 * Every vertex a cut makes is computed from what both tiles beside the cut share - the source
 * edge it lies on (endpoints in position order), or, for a tile corner inside a triangle, the
 * triangle's segment on the x side (its ends in a fixed order) - never from the piece of the
 * triangle a tile happens to hold. So the two tiles make the same doubles and their border
 * vertices match bit for bit, with no tolerance and nothing to stitch.
 */
#include "terra/scenery.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NO_EDGE UINT32_MAX /* support of a polygon edge that lies on a tile side */
#define MAX_POLY 16        /* a triangle clipped by four half-planes has at most 7 vertices */

struct terra_scenery_cut {
    terra_cook_grid grid;
    double side;            /* S */
    size_t vertex_count;
    double *p;              /* 3 per welded vertex: plane x, plane y, height (m) */
    float *normal;          /* 3 per welded vertex: unit, (plane x, plane y, up) */
    uint16_t *material;
    size_t triangle_count;
    uint32_t *tri;          /* counter-clockwise in the plane (walls as the source had them) */
    uint8_t *wall;          /* 1: no area in the plane */
    size_t tile_count;
    int32_t *tiles;         /* tx, ty pairs, sorted by key */
    uint64_t *tile_key;
    size_t *tile_first;     /* tile i's triangles: pair_tri[tile_first[i] .. tile_first[i + 1]) */
    uint32_t *pair_tri;
    terra_scenery_cut_info info;
};

/* A vertex of a piece being clipped. */
typedef struct pvert {
    double x, y, h;
    float n[3];
    uint16_t mat;
} pvert;

/* What a polygon edge lies on: source edge (a, b), a < b, or (a == NO_EDGE) a tile side, whose
 * segment through the triangle runs from p to q (set once the x sides are clipped). */
typedef struct support {
    uint32_t a, b;
    pvert p, q;
} support;

static double orient(const pvert *a, const pvert *b, const pvert *c) {
    return (b->x - a->x) * (c->y - a->y) - (b->y - a->y) * (c->x - a->x);
}

/* Made vertices: the point at parameter t from a to b, coordinate `axis` set to v exactly (it lies
 * on the line), the material the nearer end's. */
static pvert lerp(const pvert *a, const pvert *b, double t, int axis, double v) {
    pvert r;
    double xy[2] = {a->x + t * (b->x - a->x), a->y + t * (b->y - a->y)};
    xy[axis] = v;
    r.x = xy[0], r.y = xy[1];
    r.h = a->h + t * (b->h - a->h);
    float n[3], len = 0;
    for (int k = 0; k < 3; k++) {
        n[k] = (float)(a->n[k] + t * (b->n[k] - a->n[k]));
        len += n[k] * n[k];
    }
    len = sqrtf(len);
    for (int k = 0; k < 3; k++) r.n[k] = len > 0 ? n[k] / len : (k == 2);
    r.mat = t < 0.5 ? a->mat : t > 0.5 ? b->mat : (a->mat < b->mat ? a->mat : b->mat);
    return r;
}

static pvert source_vertex(const terra_scenery_cut *c, uint32_t v) {
    pvert r;
    r.x = c->p[3 * (size_t)v], r.y = c->p[3 * (size_t)v + 1], r.h = c->p[3 * (size_t)v + 2];
    memcpy(r.n, c->normal + 3 * (size_t)v, sizeof r.n);
    r.mat = c->material[v];
    return r;
}

/* Lexicographic order on (x, y, h): the order a made vertex's two ends are taken in. By position,
 * not index, so that the top, bottom and diagonal edges of a wall, which lie over one line in the
 * plane, cross a tile side at the very same plane point (the wall's pieces stay without area). */
static bool before(const pvert *a, const pvert *b) {
    if (a->x != b->x) return a->x < b->x;
    if (a->y != b->y) return a->y < b->y;
    return a->h < b->h;
}

/* Where the line coordinate[axis] = v crosses what the polygon edge lies on. */
static pvert cross(const terra_scenery_cut *c, const support *s, int axis, double v) {
    pvert a, b;
    if (s->a != NO_EDGE) a = source_vertex(c, s->a), b = source_vertex(c, s->b);
    else a = s->p, b = s->q;
    if (before(&b, &a)) {
        pvert x = a;
        a = b, b = x;
    }
    double pa = axis ? a.y : a.x, pb = axis ? b.y : b.x;
    pvert r = lerp(&a, &b, (v - pa) / (pb - pa), axis, v);
    /* A crossing that rounding puts a hair off a grid line of the other axis (the edge passes
     * through a tile corner) goes onto it, so that it lies in the tiles on both sides, not just
     * outside one: the same rule in every tile, so they still agree. */
    double *o = axis ? &r.x : &r.y, k = round(*o / c->side) * c->side;
    if (fabs(*o - k) <= 1e-12 * fmax(fabs(k), c->side)) *o = k;
    return r;
}

/* One Sutherland-Hodgman pass: keeps sign * (coordinate[axis] - v) >= 0. A vertex on the line is
 * kept and makes no crossing; the new edge along the line gets a NO_EDGE support. Returns -1 (out
 * untouched) when every vertex is kept: the pass would give the polygon back as it is. */
static int clip(const terra_scenery_cut *c, const pvert *in, const support *ins, int n, int axis, double v,
                double sign, pvert *out, support *outs) {
    bool all = true;
    for (int i = 0; i < n && all; i++) all = sign * ((axis ? in[i].y : in[i].x) - v) >= 0;
    if (all) return -1;
    int m = 0;
    for (int i = 0; i < n && m <= MAX_POLY - 2; i++) {
        const pvert *u = &in[i], *w = &in[(i + 1) % n];
        double du = sign * ((axis ? u->y : u->x) - v), dw = sign * ((axis ? w->y : w->x) - v);
        if (du >= 0) {
            out[m] = *u;
            outs[m] = ins[i];
            if (du == 0 && dw < 0) outs[m].a = NO_EDGE; /* from u the piece runs along the line */
            m++;
        }
        if ((du > 0 && dw < 0) || (du < 0 && dw > 0)) {
            out[m] = cross(c, &ins[i], axis, v);
            outs[m] = ins[i];
            if (du > 0) outs[m].a = NO_EDGE; /* leaving: on along the line to where it comes back */
            m++;
        }
    }
    return m;
}

/* The pieces of triangle t inside rect, fanned: 3 vertices a triangle into out. Returns how many. */
static int cut_triangle(const terra_scenery_cut *c, size_t t, const double rect[4], pvert out[3 * MAX_POLY]) {
    pvert poly[2][MAX_POLY];
    support sup[2][MAX_POLY];
    const uint32_t *v = c->tri + 3 * t;
    for (int k = 0; k < 3; k++) {
        uint32_t i = v[k], j = v[(k + 1) % 3];
        poly[0][k] = source_vertex(c, i);
        sup[0][k] = (support){.a = i < j ? i : j, .b = i < j ? j : i};
    }
    /* x sides first, then y (the order the corners' rule relies on) */
    const int axis[4] = {0, 0, 1, 1};
    const double side[4] = {rect[0], rect[2], rect[1], rect[3]}, sign[4] = {1, -1, 1, -1};
    int n = 3, cur = 0;
    for (int k = 0; k < 4; k++) {
        if (k == 2) {
            /* The segments along the x sides end at source vertices and source-edge crossings, the
             * same ones in the tiles on both sides: the tile corners on them are taken from those. */
            for (int i = 0; i < n; i++)
                if (sup[cur][i].a == NO_EDGE) sup[cur][i].p = poly[cur][i], sup[cur][i].q = poly[cur][(i + 1) % n];
        }
        int m = clip(c, poly[cur], sup[cur], n, axis[k], side[k], sign[k], poly[1 - cur], sup[1 - cur]);
        if (m >= 0) n = m, cur = 1 - cur;
        if (n < 3) return 0;
    }
    const pvert *a = poly[cur];
    bool wall = c->wall[t];
    int m = 0;
    for (int i = 1; i + 1 < n; i++) {
        const pvert *p = &a[0], *q = &a[i], *r = &a[i + 1];
        if (wall) {
            /* Kept when it has area in 3-D (the fan over collinear points makes some that do not). */
            double e1[3] = {q->x - p->x, q->y - p->y, q->h - p->h}, e2[3] = {r->x - p->x, r->y - p->y, r->h - p->h};
            double cx = e1[1] * e2[2] - e1[2] * e2[1], cy = e1[2] * e2[0] - e1[0] * e2[2],
                   cz = e1[0] * e2[1] - e1[1] * e2[0];
            if (cx == 0 && cy == 0 && cz == 0) continue;
            /* Three distinct plane points of a wall (a tile corner on it) are collinear only up to
             * rounding: never let the sliver turn clockwise. */
            if (orient(p, q, r) < 0) {
                const pvert *x = q;
                q = r, r = x;
            }
        } else if (!(orient(p, q, r) > 0)) {
            continue; /* collinear (or turned by rounding): no area to lose */
        }
        out[3 * m] = *p, out[3 * m + 1] = *q, out[3 * m + 2] = *r;
        m++;
    }
    return m;
}

/* ---- building ---------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t tile_key(int32_t tx, int32_t ty) {
    return (uint64_t)((uint32_t)ty ^ 0x80000000u) << 32 | ((uint32_t)tx ^ 0x80000000u);
}

/* The tile column (or row) holding coordinate x: k * side <= x < (k + 1) * side, exactly. */
static bool tile_of(double x, double side, int64_t *k) {
    double f = floor(x / side);
    if (!(f >= -2147483648.0 && f <= 2147483647.0)) return false;
    int64_t i = (int64_t)f;
    if ((double)i * side > x) i--;
    if ((double)(i + 1) * side <= x) i++;
    *k = i;
    return i >= INT32_MIN && i <= INT32_MAX;
}

/* Welds the soup's vertices: a vertex within tol of an earlier kept one becomes it. Cells of side
 * tol, hashed; each holds a chain of the kept vertices in it. */
static terra_status weld(const terra_scenery *s, double tol, terra_scenery_cut *c, uint32_t *map) {
    size_t n = s->vertex_count, slots = 16;
    while (slots < 2 * n) slots *= 2;
    int64_t *cell = terra_alloc(slots * 3 * sizeof(int64_t));
    uint32_t *head = terra_alloc(slots * sizeof(uint32_t)), *next = terra_alloc((n ? n : 1) * sizeof(uint32_t));
    uint32_t *orig = terra_alloc((n ? n : 1) * sizeof(uint32_t));
    terra_status st = TERRA_OK;
    if (!cell || !head || !next || !orig) {
        st = terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory welding %zu vertices", n);
        goto done;
    }
    memset(head, 0xff, slots * sizeof(uint32_t));
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const double *q = s->position + 3 * i;
        int64_t k[3];
        for (int d = 0; d < 3; d++) k[d] = (int64_t)floor(q[d] / tol);
        uint32_t best = UINT32_MAX;
        for (int dx = -1; dx <= 1; dx++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dz = -1; dz <= 1; dz++) {
                    int64_t w[3] = {k[0] + dx, k[1] + dy, k[2] + dz};
                    size_t h = mix64((uint64_t)w[0] ^ mix64((uint64_t)w[1] ^ mix64((uint64_t)w[2]))) & (slots - 1);
                    for (; head[h] != UINT32_MAX; h = (h + 1) & (slots - 1)) {
                        if (memcmp(cell + 3 * h, w, sizeof w)) continue;
                        for (uint32_t r = head[h]; r != UINT32_MAX; r = next[r]) {
                            const double *o = s->position + 3 * (size_t)orig[r];
                            double dd = (o[0] - q[0]) * (o[0] - q[0]) + (o[1] - q[1]) * (o[1] - q[1]) +
                                        (o[2] - q[2]) * (o[2] - q[2]);
                            if (dd <= tol * tol && r < best) best = r;
                        }
                        break;
                    }
                }
        if (best != UINT32_MAX) {
            map[i] = best;
            if (s->material[i] < c->material[best]) c->material[best] = s->material[i];
            continue;
        }
        uint32_t r = (uint32_t)kept++;
        orig[r] = (uint32_t)i;
        map[i] = r;
        c->material[r] = s->material[i];
        /* Plane position: x and the plane's y from scenery x and z, the height scenery y. */
        c->p[3 * (size_t)r] = (q[0] - c->grid.origin[0]) / c->grid.unit[0];
        c->p[3 * (size_t)r + 1] = (q[2] - c->grid.origin[1]) / c->grid.unit[1];
        c->p[3 * (size_t)r + 2] = q[1];
        size_t h = mix64((uint64_t)k[0] ^ mix64((uint64_t)k[1] ^ mix64((uint64_t)k[2]))) & (slots - 1);
        while (head[h] != UINT32_MAX && memcmp(cell + 3 * h, k, sizeof k)) h = (h + 1) & (slots - 1);
        if (head[h] == UINT32_MAX) memcpy(cell + 3 * h, k, sizeof k);
        next[r] = head[h];
        head[h] = r;
    }
    c->vertex_count = kept;
    c->info.vertices = kept;
    c->info.welded = n - kept;
done:
    terra_free(cell);
    terra_free(head);
    terra_free(next);
    terra_free(orig);
    return st;
}

static int triple_cmp(const void *x, const void *y) {
    const uint32_t *a = x, *b = y;
    for (int k = 0; k < 4; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

terra_status terra_scenery_drop_repeats(uint32_t *tri, size_t *count, size_t *dropped) {
    size_t n = *count;
    uint32_t *key = terra_alloc((n ? n : 1) * 4 * sizeof(uint32_t));
    uint8_t *drop = terra_calloc(n ? n : 1, 1);
    if (!key || !drop) {
        terra_free(key);
        terra_free(drop);
        return terra_fail(TERRA_E_NOMEM, "scenery: out of memory for %zu triangles", n);
    }
    /* sorted corners, then the index: equal triples end up side by side, the earliest first */
    for (size_t t = 0; t < n; t++) {
        uint32_t v[3] = {tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]};
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                if (v[j] < v[i]) {
                    uint32_t x = v[i];
                    v[i] = v[j], v[j] = x;
                }
        memcpy(key + 4 * t, v, sizeof v);
        key[4 * t + 3] = (uint32_t)t;
    }
    qsort(key, n, 4 * sizeof(uint32_t), triple_cmp);
    for (size_t i = 1; i < n; i++)
        if (!memcmp(key + 4 * i, key + 4 * (i - 1), 3 * sizeof(uint32_t))) drop[key[4 * i + 3]] = 1;
    terra_free(key);
    size_t kept = 0;
    for (size_t t = 0; t < n; t++)
        if (!drop[t]) memmove(tri + 3 * kept++, tri + 3 * t, 3 * sizeof(uint32_t));
    terra_free(drop);
    *dropped = n - kept;
    *count = kept;
    return TERRA_OK;
}

/* Remaps the triangles onto the welded vertices, drops those left without 3-D area or repeating an
 * earlier one, turns the rest counter-clockwise in the plane and marks walls. */
static terra_status triangles(const terra_scenery *s, const uint32_t *map, terra_scenery_cut *c) {
    size_t n = 0;
    for (size_t t = 0; t < s->triangle_count; t++) {
        uint32_t *v = c->tri + 3 * n;
        for (int k = 0; k < 3; k++) v[k] = map[s->tri[3 * t + k]];
        const double *A = c->p + 3 * (size_t)v[0], *B = c->p + 3 * (size_t)v[1], *C = c->p + 3 * (size_t)v[2];
        double e1[3] = {B[0] - A[0], B[1] - A[1], B[2] - A[2]}, e2[3] = {C[0] - A[0], C[1] - A[1], C[2] - A[2]};
        bool flat = e1[1] * e2[2] == e1[2] * e2[1] && e1[2] * e2[0] == e1[0] * e2[2] && e1[0] * e2[1] == e1[1] * e2[0];
        n += !(v[0] == v[1] || v[1] == v[2] || v[0] == v[2] || flat);
    }
    size_t repeated;
    terra_status st = terra_scenery_drop_repeats(c->tri, &n, &repeated);
    if (st != TERRA_OK) return st;
    for (size_t t = 0; t < n; t++) {
        uint32_t *o = c->tri + 3 * t;
        pvert a = source_vertex(c, o[0]), b = source_vertex(c, o[1]), d = source_vertex(c, o[2]);
        double area = orient(&a, &b, &d);
        if (area < 0) {
            uint32_t x = o[1];
            o[1] = o[2], o[2] = x;
        }
        c->wall[t] = area == 0;
        c->info.walls += area == 0;
    }
    c->triangle_count = n;
    c->info.triangles = n;
    c->info.collapsed = s->triangle_count - n;
    return TERRA_OK;
}

/* Area-weighted normals in metres (plane units scaled by grid.unit), ground and walls apart. */
static terra_status normals(terra_scenery_cut *c) {
    double *acc = terra_calloc(c->vertex_count ? 6 * c->vertex_count : 1, sizeof(double));
    if (!acc) return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for normals");
    for (size_t t = 0; t < c->triangle_count; t++) {
        const uint32_t *v = c->tri + 3 * t;
        const double *A = c->p + 3 * (size_t)v[0], *B = c->p + 3 * (size_t)v[1], *C = c->p + 3 * (size_t)v[2];
        double e1[3] = {(B[0] - A[0]) * c->grid.unit[0], (B[1] - A[1]) * c->grid.unit[1], B[2] - A[2]};
        double e2[3] = {(C[0] - A[0]) * c->grid.unit[0], (C[1] - A[1]) * c->grid.unit[1], C[2] - A[2]};
        double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
        int off = c->wall[t] ? 3 : 0;
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < 3; d++) acc[6 * (size_t)v[k] + off + d] += n[d];
    }
    for (size_t i = 0; i < c->vertex_count; i++) {
        const double *g = acc + 6 * i;
        double len = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
        if (!(len > 0)) g += 3, len = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
        for (int d = 0; d < 3; d++) c->normal[3 * i + d] = len > 0 ? (float)(g[d] / len) : (float)(d == 2);
    }
    terra_free(acc);
    return TERRA_OK;
}

typedef struct pair {
    uint64_t key;
    uint32_t tri;
} pair;

static int pair_cmp(const void *x, const void *y) {
    const pair *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->tri > b->tri) - (a->tri < b->tri);
}

/* Which finest tiles each triangle leaves a piece in (the same cut the tiles make, so a listed
 * tile is never empty), sorted by tile. The tiles tried are those whose half-open span
 * [k S, (k + 1) S) holds the triangle's bounding box: a wall standing exactly on a grid line is
 * tried, and laid, only in the tile on the line's +x (+y) side, so it is laid once; a triangle with
 * area only touching a tile's side leaves nothing there. */
static terra_status index_tiles(terra_scenery_cut *c) {
    size_t cap = c->triangle_count + 16, n = 0;
    pair *pairs = terra_alloc(cap * sizeof(pair));
    if (!pairs) return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for the tile index");
    pvert scratch[3 * MAX_POLY];
    for (size_t t = 0; t < c->triangle_count; t++) {
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < 2; d++) {
                double x = c->p[3 * (size_t)c->tri[3 * t + k] + d];
                lo[d] = fmin(lo[d], x), hi[d] = fmax(hi[d], x);
            }
        int64_t t0[2], t1[2];
        for (int d = 0; d < 2; d++)
            if (!tile_of(lo[d], c->side, &t0[d]) || !tile_of(hi[d], c->side, &t1[d])) {
                terra_free(pairs);
                return terra_fail(TERRA_E_INVALID,
                                  "scenery cut: triangle %zu reaches %g plane units, past tile index 2^31 of side %g",
                                  t, fabs(lo[d]) > fabs(hi[d]) ? lo[d] : hi[d], c->side);
            }
        for (int64_t ty = t0[1]; ty <= t1[1]; ty++)
            for (int64_t tx = t0[0]; tx <= t1[0]; tx++) {
                double rect[4];
                terra_cook_tile_rect(&c->grid, 0, (int32_t)tx, (int32_t)ty, rect);
                /* A triangle within one tile is its own piece (it has area, in the plane or in 3-D,
                 * by the same sums the fan is judged with); one across tiles may leave none here. */
                bool one = t0[0] == t1[0] && t0[1] == t1[1];
                if (!one && !cut_triangle(c, t, rect, scratch)) continue;
                if (n == cap) {
                    pair *q = cap > SIZE_MAX / 2 / sizeof(pair) ? NULL : terra_realloc(pairs, 2 * cap * sizeof(pair));
                    if (!q) {
                        terra_free(pairs);
                        return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for the tile index");
                    }
                    pairs = q, cap *= 2;
                }
                pairs[n].key = tile_key((int32_t)tx, (int32_t)ty);
                pairs[n++].tri = (uint32_t)t;
            }
    }
    qsort(pairs, n, sizeof(pair), pair_cmp);
    size_t tiles = 0;
    for (size_t i = 0; i < n; i++) tiles += !i || pairs[i].key != pairs[i - 1].key;
    c->pair_tri = terra_alloc((n ? n : 1) * sizeof(uint32_t));
    c->tiles = terra_alloc((tiles ? tiles : 1) * 2 * sizeof(int32_t));
    c->tile_key = terra_alloc((tiles ? tiles : 1) * sizeof(uint64_t));
    c->tile_first = terra_alloc((tiles + 1) * sizeof(size_t));
    if (!c->pair_tri || !c->tiles || !c->tile_key || !c->tile_first) {
        terra_free(pairs);
        return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for %zu tiles", tiles);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!i || pairs[i].key != pairs[i - 1].key) {
            c->tile_key[k] = pairs[i].key;
            c->tiles[2 * k] = (int32_t)((uint32_t)pairs[i].key ^ 0x80000000u);
            c->tiles[2 * k + 1] = (int32_t)((uint32_t)(pairs[i].key >> 32) ^ 0x80000000u);
            c->tile_first[k++] = i;
        }
        c->pair_tri[i] = pairs[i].tri;
    }
    c->tile_first[tiles] = n;
    c->tile_count = tiles;
    c->info.tiles = tiles;
    terra_free(pairs);
    return TERRA_OK;
}

terra_status terra_scenery_cut_build(const terra_scenery *s, const terra_scenery_cut_desc *desc,
                                     terra_scenery_cut **out) {
    *out = NULL;
    const terra_cook_grid *g = desc ? desc->grid : NULL;
    if (!s || !g) return terra_fail(TERRA_E_INVALID, "scenery cut: no scenery or no grid");
    if (g->frame != TERRA_FRAME_LOCAL)
        return terra_fail(TERRA_E_INVALID, "scenery cut: scenery meshes cook in the local frame only");
    if (!(g->tile_units > 0) || !isfinite(g->tile_units) || !(g->unit[0] > 0) || !(g->unit[1] > 0) ||
        !isfinite(g->unit[0]) || !isfinite(g->unit[1]) || !isfinite(g->origin[0]) || !isfinite(g->origin[1]))
        return terra_fail(TERRA_E_INVALID, "scenery cut: grid tile side %g, unit %g x %g, origin %g, %g: need "
                          "positive finite sides and units", g->tile_units, g->unit[0], g->unit[1], g->origin[0],
                          g->origin[1]);
    double tol = desc->weld_tolerance == 0 ? 0.001 : desc->weld_tolerance;
    if (!(tol > 0) || !isfinite(tol))
        return terra_fail(TERRA_E_INVALID, "scenery cut: weld tolerance %g m: need a positive distance",
                          desc->weld_tolerance);
    if (s->vertex_count >= UINT32_MAX || s->triangle_count > UINT32_MAX / 3)
        return terra_fail(TERRA_E_CAPACITY, "scenery cut: %zu vertices, %zu triangles: over 32-bit indices",
                          s->vertex_count, s->triangle_count);
    for (size_t i = 0; i < 3 * s->vertex_count; i++)
        if (!isfinite(s->position[i]) || fabs(s->position[i]) / tol > 0x1p62)
            return terra_fail(TERRA_E_INVALID, "scenery cut: vertex %zu: position %g is not finite or too far out "
                              "for the weld tolerance %g m", i / 3, s->position[i], tol);
    for (size_t i = 0; i < 3 * s->triangle_count; i++)
        if (s->tri[i] >= s->vertex_count)
            return terra_fail(TERRA_E_INVALID, "scenery cut: triangle %zu uses vertex %u of %zu", i / 3, s->tri[i],
                              s->vertex_count);
    terra_scenery_cut *c = terra_calloc(1, sizeof *c);
    size_t nv = s->vertex_count ? s->vertex_count : 1, nt = s->triangle_count ? s->triangle_count : 1;
    uint32_t *map = terra_alloc(nv * sizeof(uint32_t));
    if (c) {
        c->grid = *g;
        c->side = g->tile_units;
        c->p = terra_alloc(nv * 3 * sizeof(double));
        c->normal = terra_alloc(nv * 3 * sizeof(float));
        c->material = terra_alloc(nv * sizeof(uint16_t));
        c->tri = terra_alloc(nt * 3 * sizeof(uint32_t));
        c->wall = terra_alloc(nt);
    }
    terra_status st = TERRA_OK;
    if (!c || !map || !c->p || !c->normal || !c->material || !c->tri || !c->wall)
        st = terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for %zu vertices, %zu triangles", s->vertex_count,
                        s->triangle_count);
    if (st == TERRA_OK) st = weld(s, tol, c, map);
    if (st == TERRA_OK) st = triangles(s, map, c);
    if (st == TERRA_OK) st = normals(c);
    if (st == TERRA_OK) st = index_tiles(c);
    terra_free(map);
    if (st != TERRA_OK) {
        terra_scenery_cut_free(c);
        return st;
    }
    *out = c;
    return TERRA_OK;
}

void terra_scenery_cut_free(terra_scenery_cut *c) {
    if (!c) return;
    terra_free(c->p);
    terra_free(c->normal);
    terra_free(c->material);
    terra_free(c->tri);
    terra_free(c->wall);
    terra_free(c->tiles);
    terra_free(c->tile_key);
    terra_free(c->tile_first);
    terra_free(c->pair_tri);
    terra_free(c);
}

void terra_scenery_cut_get_info(const terra_scenery_cut *c, terra_scenery_cut_info *info) { *info = c->info; }

const int32_t *terra_scenery_cut_tiles(const terra_scenery_cut *c, size_t *count) {
    *count = c->tile_count;
    return c->tiles;
}

/* ---- one tile ----------------------------------------------------------------------------------- */

static uint64_t vertex_hash(const pvert *v) {
    uint64_t bx, by;
    uint32_t bz;
    double x = v->x + 0.0, y = v->y + 0.0; /* + 0 turns -0 into +0, which == takes as equal */
    float z = (float)v->h + 0.0f;
    memcpy(&bx, &x, sizeof bx);
    memcpy(&by, &y, sizeof by);
    memcpy(&bz, &z, sizeof bz);
    return mix64(bx ^ mix64(by ^ mix64(bz)));
}

typedef struct vertex_set {
    uint32_t *slot;
    size_t mask;
} vertex_set;

/* The index of v in the tile's mesh, added if new (an existing one takes the lower material). */
static terra_status add_vertex(vertex_set *vs, terra_cook_mesh *m, const pvert *v, uint32_t *index) {
    if (2 * ((size_t)m->vertex_count + 1) > vs->mask + 1) {
        size_t slots = 2 * (vs->mask + 1);
        uint32_t *s = terra_alloc(slots * sizeof(uint32_t));
        if (!s) return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for %u tile vertices", m->vertex_count);
        memset(s, 0xff, slots * sizeof(uint32_t));
        for (uint32_t i = 0; i < m->vertex_count; i++) {
            pvert p = {.x = m->xy[2 * (size_t)i], .y = m->xy[2 * (size_t)i + 1], .h = m->z[i]};
            size_t h = vertex_hash(&p) & (slots - 1);
            while (s[h] != UINT32_MAX) h = (h + 1) & (slots - 1);
            s[h] = i;
        }
        terra_free(vs->slot);
        vs->slot = s, vs->mask = slots - 1;
    }
    float z = (float)v->h;
    size_t h = vertex_hash(v) & vs->mask;
    for (; vs->slot[h] != UINT32_MAX; h = (h + 1) & vs->mask) {
        uint32_t e = vs->slot[h];
        if (m->xy[2 * (size_t)e] == v->x && m->xy[2 * (size_t)e + 1] == v->y && m->z[e] == z) {
            if (v->mat < m->material[e]) m->material[e] = v->mat;
            *index = e;
            return TERRA_OK;
        }
    }
    if (m->vertex_count == UINT32_MAX - 1)
        return terra_fail(TERRA_E_CAPACITY, "scenery cut: a tile with more than 2^32 vertices");
    terra_status st = terra_cook_mesh_reserve(m, m->vertex_count + 1, m->triangle_count, true, true);
    if (st != TERRA_OK) return st;
    uint32_t e = m->vertex_count++;
    m->xy[2 * (size_t)e] = v->x, m->xy[2 * (size_t)e + 1] = v->y, m->z[e] = z;
    memcpy(m->normal + 3 * (size_t)e, v->n, sizeof v->n);
    m->material[e] = v->mat;
    vs->slot[h] = e;
    *index = e;
    return TERRA_OK;
}

terra_status terra_scenery_cut_tile(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error) {
    const terra_scenery_cut *c = user;
    *error = 0;
    out->vertex_count = out->triangle_count = 0;
    uint64_t key = tile_key(tx, ty);
    size_t lo = 0, hi = c->tile_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->tile_key[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    if (lo == c->tile_count || c->tile_key[lo] != key) return TERRA_OK;
    double rect[4];
    terra_cook_tile_rect(&c->grid, 0, tx, ty, rect);
    vertex_set vs = {terra_alloc(64 * sizeof(uint32_t)), 63};
    if (!vs.slot) return terra_fail(TERRA_E_NOMEM, "scenery cut: out of memory for tile %d,%d", (int)tx, (int)ty);
    memset(vs.slot, 0xff, 64 * sizeof(uint32_t));
    terra_status st = TERRA_OK;
    pvert piece[3 * MAX_POLY];
    for (size_t i = c->tile_first[lo]; i < c->tile_first[lo + 1] && st == TERRA_OK; i++) {
        int n = cut_triangle(c, c->pair_tri[i], rect, piece);
        for (int t = 0; t < n && st == TERRA_OK; t++) {
            uint32_t v[3];
            for (int k = 0; k < 3 && st == TERRA_OK; k++) st = add_vertex(&vs, out, &piece[3 * t + k], &v[k]);
            if (st != TERRA_OK) break;
            if (v[0] == v[1] || v[1] == v[2] || v[0] == v[2]) continue; /* corners the same in float heights */
            if (out->triangle_count == UINT32_MAX / 3) {
                st = terra_fail(TERRA_E_CAPACITY, "scenery cut: tile %d,%d has over 2^30 triangles", (int)tx, (int)ty);
                break;
            }
            st = terra_cook_mesh_reserve(out, out->vertex_count, out->triangle_count + 1, true, true);
            if (st == TERRA_OK) memcpy(out->tri + 3 * (size_t)out->triangle_count++, v, sizeof v);
        }
    }
    terra_free(vs.slot);
    return st;
}
