/* Greedy insertion (Garland & Heckbert 1995) over a raster into a Delaunay triangulation.
 *
 * Data layout (half-edge arrays, after delatin/hmm):
 *   hv[3t+i]  half-edge i of triangle t: .v its first vertex (vertex i of t, positive orient, see
 *             orient()), .he the opposite half-edge of 3t+i (vertex i -> i+1), -1 on the hull
 *             (vertices and twins side by side: a triangle is 24 bytes, mostly one cache line)
 *   cand[t]   the triangle's worst sample (x | y << 16); its error lives in the queue beside the id.
 *             Only triangles whose error is over the finest bound enter the queue: the rest can never
 *             be refined, and leaving them out keeps the queue small.
 *   qi[t]     >= 0: position in the max-queue; -1: nowhere; <= -2: position -2-qi in `pend`
 * Triangle slots are never freed: a split reuses the old slot and adds two, a flip reuses both,
 * so every slot in [0, nt) is a live triangle. Triangles whose candidate is stale wait in `pend`
 * until flush() rasterises them.
 *
 * Exactness: coordinates are integers below 2^16 (TERRA_TIN_MAX_SIDE), so orient() is exact in
 * int64 and incircle() in a double filter backed by int128; the rasteriser's edge functions are
 * integers and each row's span is walked exactly from row to row, so the set of samples scanned
 * per triangle is exact (the closed triangle, edges included). Heights are interpolated in double
 * as delatin does (z0*w0 + z1*w1 + z2*w2 at the span start, then a step per sample), the worst
 * sample is the first maximum in row-major order: the same meshes as delatin on the same heights
 * (fuji 30 m: 5,668 vertices, 11,140 triangles), bar ties broken by the queue. */
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 tin_i128;
#else
#error "terra tin needs a compiler with 128-bit integers (gcc, clang)"
#endif

typedef struct tin_half {
    uint32_t v;                 /* vertex the half-edge starts from */
    int32_t he;                 /* opposite half-edge, -1 on the hull */
} tin_half;

typedef struct tin_vtx {
    int32_t x, y;
    float z;                    /* lower height (NaN on a hole) */
} tin_vtx;

typedef struct tin_qent {
    double e;
    int32_t t;
} tin_qent;

typedef struct tin {
    int w, h;
    const float *hl, *hu;       /* lower, upper (NULL) */
    tin_vtx *vt;                /* vertices: sample position and height side by side */
    size_t nv, cap_v;
    tin_half *hv;               /* per half-edge: its first vertex and its opposite half-edge */
    uint32_t *cand;             /* worst sample, x | y << 16 */
    int32_t *qi;
    size_t nt, cap_t;
    tin_qent *q;                /* queue: binary max-heap of (error, triangle) */
    size_t nq;
    size_t cap_q;
    int32_t *pend;
    size_t npend, cap_pend;
    double bound;               /* finest bound: triangles at or under it stay out of the queue */
    bool nomem;
} tin;

/* ---- exact predicates ------------------------------------------------------------------- */

/* (b - c) x (a - c) in the raster's (column, row) frame; > 0 for every live triangle. */
static inline int64_t orient(int64_t ax, int64_t ay, int64_t bx, int64_t by, int64_t cx, int64_t cy) {
    return (bx - cx) * (ay - cy) - (by - cy) * (ax - cx);
}

/* True when p lies strictly inside the circle through a, b, c (a, b, c with positive orient).
 * A floating-point filter first: with |coordinates| < 2^16 the inner terms (a difference times a
 * lifted square, < 2^52) and their differences are exact in doubles, so only the three outer
 * products and two sums round; when |det| is above a bound on that rounding its sign is right.
 * Otherwise the same formula runs in 128-bit integers (exact for |coordinates| < 2^30). */
static bool incircle(int64_t ax, int64_t ay, int64_t bx, int64_t by, int64_t cx, int64_t cy, int64_t px,
                     int64_t py) {
    int64_t dx = ax - px, dy = ay - py, ex = bx - px, ey = by - py, fx = cx - px, fy = cy - py;
    int64_t ap = dx * dx + dy * dy, bp = ex * ex + ey * ey, cp = fx * fx + fy * fy;
    double t0 = (double)(ey * cp - bp * fy), t1 = (double)(ex * cp - bp * fx), t2 = (double)(ex * fy - ey * fx);
    double p0 = (double)dx * t0, p1 = (double)dy * t1, p2 = (double)ap * t2;
    double det = p0 - p1 + p2;
    double bound = (fabs(p0) + fabs(p1) + fabs(p2)) * 0x1p-50; /* 8 ulp: far above the two roundings */
    if (det > bound) return false;
    if (det < -bound) return true;
    tin_i128 e = (tin_i128)dx * (ey * cp - bp * fy) - (tin_i128)dy * (ex * cp - bp * fx) + (tin_i128)ap * (ex * fy - ey * fx);
    return e < 0;
}

/* ---- storage ----------------------------------------------------------------------------- */

static bool grow(void **p, size_t elem, size_t n) {
    void *q = terra_realloc(*p, elem * n);
    if (!q) return false;
    *p = q;
    return true;
}

static bool reserve_triangles(tin *T, size_t need) {
    if (need <= T->cap_t) return true;
    size_t cap = T->cap_t ? T->cap_t + T->cap_t / 2 : 1024;
    if (cap < need) cap = need;
    if (!grow((void **)&T->hv, 3 * sizeof(tin_half), cap) ||
        !grow((void **)&T->cand, sizeof(uint32_t), cap) || !grow((void **)&T->qi, sizeof(int32_t), cap)) {
        T->nomem = true;
        return false;
    }
    T->cap_t = cap;
    return true;
}

static bool reserve_vertices(tin *T, size_t need) {
    if (need <= T->cap_v) return true;
    size_t cap = T->cap_v ? T->cap_v + T->cap_v / 2 : 1024;
    if (cap < need) cap = need;
    if (!grow((void **)&T->vt, sizeof(tin_vtx), cap)) {
        T->nomem = true;
        return false;
    }
    T->cap_v = cap;
    return true;
}

static uint32_t add_point(tin *T, int32_t x, int32_t y) {
    size_t i = T->nv++;
    T->vt[i].x = x;
    T->vt[i].y = y;
    T->vt[i].z = T->hl[(size_t)y * (size_t)T->w + (size_t)x];
    return (uint32_t)i;
}

/* ---- the queue (max-heap of triangles by error; errors stored by heap position) ----------- */

static inline bool q_less(const tin *T, size_t i, size_t j) { return T->q[i].e > T->q[j].e; }

static inline void q_swap(tin *T, size_t i, size_t j) {
    tin_qent a = T->q[i], b = T->q[j];
    T->q[i] = b;
    T->q[j] = a;
    T->qi[a.t] = (int32_t)j;
    T->qi[b.t] = (int32_t)i;
}

static void q_up(tin *T, size_t j) {
    while (j > 0) {
        size_t i = (j - 1) >> 1;
        if (!q_less(T, j, i)) break;
        q_swap(T, i, j);
        j = i;
    }
}

static bool q_down(tin *T, size_t i0, size_t n) {
    size_t i = i0;
    for (;;) {
        size_t j1 = 2 * i + 1;
        if (j1 >= n) break;
        size_t j = j1, j2 = j1 + 1;
        if (j2 < n && q_less(T, j2, j1)) j = j2;
        if (!q_less(T, j, i)) break;
        q_swap(T, i, j);
        i = j;
    }
    return i > i0;
}

static void q_push(tin *T, int32_t t, double err) {
    if (!(err > T->bound)) return; /* never refined: stays out of the queue (qi = -1) */
    if (T->nq == T->cap_q) {
        size_t cap = T->cap_q ? T->cap_q * 2 : 1024;
        if (!grow((void **)&T->q, sizeof(tin_qent), cap)) {
            T->nomem = true;
            return;
        }
        T->cap_q = cap;
    }
    size_t i = T->nq++;
    T->q[i].t = t;
    T->q[i].e = err;
    T->qi[t] = (int32_t)i;
    q_up(T, i);
}

static int32_t q_pop_back(tin *T) {
    int32_t t = T->q[--T->nq].t;
    T->qi[t] = -1;
    return t;
}

static int32_t q_pop(tin *T) {
    size_t n = T->nq - 1;
    q_swap(T, 0, n);
    q_down(T, 0, n);
    return q_pop_back(T);
}

static void pend_add(tin *T, int32_t t) {
    if (T->npend == T->cap_pend) {
        size_t cap = T->cap_pend ? 2 * T->cap_pend : 256;
        if (!grow((void **)&T->pend, sizeof(int32_t), cap)) {
            T->nomem = true;
            T->qi[t] = -1;
            return;
        }
        T->cap_pend = cap;
    }
    T->qi[t] = -2 - (int32_t)T->npend;
    T->pend[T->npend++] = t;
}

/* Takes t out of the queue or the pending list. */
static void q_remove(tin *T, int32_t t) {
    int32_t i = T->qi[t];
    if (i < 0) {
        if (i <= -2) {
            size_t k = (size_t)(-2 - i);
            int32_t last = T->pend[--T->npend];
            T->pend[k] = last;
            if (last != t) T->qi[last] = -2 - (int32_t)k;
            T->qi[t] = -1;
        }
        return;
    }
    size_t n = T->nq - 1;
    if (n != (size_t)i) {
        q_swap(T, (size_t)i, n);
        if (!q_down(T, (size_t)i, n)) q_up(T, (size_t)i);
    }
    q_pop_back(T);
}

/* ---- triangles ----------------------------------------------------------------------------- */

/* Writes triangle (a, b, c) with outer half-edges ab, bc, ca into slot e (or a new one when e < 0)
 * and marks it pending. Returns its first half-edge. */
static int32_t add_tri(tin *T, uint32_t a, uint32_t b, uint32_t c, int32_t ab, int32_t bc, int32_t ca, int32_t e) {
    if (e < 0) e = (int32_t)(3 * T->nt++);
    int32_t t = e / 3;
    T->hv[e].v = a;
    T->hv[e + 1].v = b;
    T->hv[e + 2].v = c;
    T->hv[e].he = ab;
    T->hv[e + 1].he = bc;
    T->hv[e + 2].he = ca;
    if (ab >= 0) T->hv[ab].he = e;
    if (bc >= 0) T->hv[bc].he = e + 1;
    if (ca >= 0) T->hv[ca].he = e + 2;
    T->cand[t] = 0;
    pend_add(T, t);
    return e;
}

static void legalize(tin *T, int32_t a) {
    int32_t b = T->hv[a].he;
    if (b < 0) return;
    int32_t a0 = a - a % 3, b0 = b - b % 3;
    int32_t al = a0 + (a + 1) % 3, ar = a0 + (a + 2) % 3;
    int32_t bl = b0 + (b + 2) % 3, br = b0 + (b + 1) % 3;
    uint32_t p0 = T->hv[ar].v, pr = T->hv[a].v, pl = T->hv[al].v, p1 = T->hv[bl].v;
    const tin_vtx *c = T->vt;
    if (!incircle(c[p0].x, c[p0].y, c[pr].x, c[pr].y, c[pl].x, c[pl].y, c[p1].x,
                  c[p1].y))
        return;
    int32_t hal = T->hv[al].he, har = T->hv[ar].he, hbl = T->hv[bl].he, hbr = T->hv[br].he;
    q_remove(T, a0 / 3);
    q_remove(T, b0 / 3);
    int32_t t0 = add_tri(T, p0, p1, pl, -1, hbl, hal, a0);
    int32_t t1 = add_tri(T, p1, p0, pr, t0, har, hbr, b0);
    legalize(T, t0 + 1);
    legalize(T, t1 + 2);
}

/* Inserts vertex pn on half-edge a (pn lies on it, strictly between its ends). */
static void split_edge(tin *T, uint32_t pn, int32_t a) {
    int32_t a0 = a - a % 3, al = a0 + (a + 1) % 3, ar = a0 + (a + 2) % 3;
    uint32_t p0 = T->hv[ar].v, pr = T->hv[a].v, pl = T->hv[al].v;
    int32_t hal = T->hv[al].he, har = T->hv[ar].he;
    int32_t b = T->hv[a].he;
    if (b < 0) {
        int32_t t0 = add_tri(T, pn, p0, pr, -1, har, -1, a0);
        int32_t t1 = add_tri(T, p0, pn, pl, t0, -1, hal, -1);
        legalize(T, t0 + 1);
        legalize(T, t1 + 2);
        return;
    }
    int32_t b0 = b - b % 3, bl = b0 + (b + 2) % 3, br = b0 + (b + 1) % 3;
    uint32_t p1 = T->hv[bl].v;
    int32_t hbl = T->hv[bl].he, hbr = T->hv[br].he;
    q_remove(T, b0 / 3);
    int32_t t0 = add_tri(T, p0, pr, pn, har, -1, -1, a0);
    int32_t t1 = add_tri(T, pr, p1, pn, hbr, -1, t0 + 1, b0);
    int32_t t2 = add_tri(T, p1, pl, pn, hbl, -1, t1 + 1, -1);
    int32_t t3 = add_tri(T, pl, p0, pn, hal, t0 + 2, t2 + 1, -1);
    legalize(T, t0);
    legalize(T, t1);
    legalize(T, t2);
    legalize(T, t3);
}

/* Inserts (px, py) into triangle t (already out of the queue). */
static void insert_in(tin *T, int32_t t, int32_t px, int32_t py) {
    int32_t e0 = 3 * t, e1 = e0 + 1, e2 = e0 + 2;
    uint32_t p0 = T->hv[e0].v, p1 = T->hv[e1].v, p2 = T->hv[e2].v;
    const tin_vtx *c = T->vt;
    int64_t ax = c[p0].x, ay = c[p0].y, bx = c[p1].x, by = c[p1].y, cx = c[p2].x, cy = c[p2].y;
    uint32_t pn = add_point(T, px, py);
    if (orient(ax, ay, bx, by, px, py) == 0) {
        split_edge(T, pn, e0);
    } else if (orient(bx, by, cx, cy, px, py) == 0) {
        split_edge(T, pn, e1);
    } else if (orient(cx, cy, ax, ay, px, py) == 0) {
        split_edge(T, pn, e2);
    } else {
        int32_t h0 = T->hv[e0].he, h1 = T->hv[e1].he, h2 = T->hv[e2].he;
        int32_t t0 = add_tri(T, p0, p1, pn, h0, -1, -1, e0);
        int32_t t1 = add_tri(T, p1, p2, pn, h1, -1, t0 + 1, -1);
        int32_t t2 = add_tri(T, p2, p0, pn, h2, t0 + 2, t1 + 1, -1);
        legalize(T, t0);
        legalize(T, t1);
        legalize(T, t2);
    }
}

/* ---- candidates: rasterise a triangle, find its worst sample -------------------------------- */

/* Exact scanline spans. For each edge, w(k) = w + a*k is the edge function along the current row
 * (k = offset from minx); the samples inside are those where all three are >= 0. Each edge keeps
 * its crossing offset (first k with w(k) >= 0 for a > 0, last for a < 0) and walks it from row to
 * row, so a row costs a few additions instead of divisions. */
typedef struct edge_walk {
    int64_t w, a, b;            /* w at (minx, row); per-column a, per-row b */
    int64_t k;                  /* crossing offset (unclamped) */
} edge_walk;

static inline void edge_init(edge_walk *e, int64_t w, int64_t a, int64_t b) {
    e->w = w, e->a = a, e->b = b;
    /* The crossing from a floating-point division (integer division is slow), then made exact. */
    if (a > 0) {
        int64_t k = (int64_t)ceil(-(double)w / (double)a);   /* ceil(-w / a) */
        while (w + a * k < 0) k++;
        while (w + a * (k - 1) >= 0) k--;
        e->k = k;
    } else if (a < 0) {
        int64_t k = (int64_t)floor((double)w / (double)-a);  /* floor(w / -a) */
        while (w + a * k < 0) k--;
        while (w + a * (k + 1) >= 0) k++;
        e->k = k;
    } else {
        e->k = 0;
    }
}

static inline void edge_next_row(edge_walk *e) {
    e->w += e->b;
    int64_t a = e->a;
    if (a > 0) {
        int64_t v = e->w + a * e->k;
        while (v < 0) e->k++, v += a;
        while (v - a >= 0) e->k--, v -= a;
    } else if (a < 0) {
        int64_t v = e->w + a * e->k;
        while (v < 0) e->k--, v -= a;
        while (v + a >= 0) e->k++, v += a;
    }
}

static inline void edge_clip(const edge_walk *e, int64_t *lo, int64_t *hi) {
    if (e->a > 0) {
        if (e->k > *lo) *lo = e->k;
    } else if (e->a < 0) {
        if (e->k < *hi) *hi = e->k;
    } else if (e->w < 0) {
        *lo = 1, *hi = 0;
    }
}

typedef struct tri_geom {
    int64_t x[3], y[3];
    float z[3];
    int64_t minx, miny, maxx, maxy;
    int64_t a01, b01, a12, b12, a20, b20, area;
    edge_walk e0, e1, e2;       /* edges opposite vertex 0, 1, 2 (barycentric weights times area) */
} tri_geom;

static void tri_setup_from(const tin *T, const tin_half *hv, int32_t t, tri_geom *g) {
    for (int i = 0; i < 3; i++) {
        uint32_t v = hv[3 * t + i].v;
        g->x[i] = T->vt[v].x;
        g->y[i] = T->vt[v].y;
        g->z[i] = T->vt[v].z;
    }
    int64_t *x = g->x, *y = g->y;
    g->minx = x[0] < x[1] ? (x[0] < x[2] ? x[0] : x[2]) : (x[1] < x[2] ? x[1] : x[2]);
    g->miny = y[0] < y[1] ? (y[0] < y[2] ? y[0] : y[2]) : (y[1] < y[2] ? y[1] : y[2]);
    g->maxx = x[0] > x[1] ? (x[0] > x[2] ? x[0] : x[2]) : (x[1] > x[2] ? x[1] : x[2]);
    g->maxy = y[0] > y[1] ? (y[0] > y[2] ? y[0] : y[2]) : (y[1] > y[2] ? y[1] : y[2]);
    g->a01 = y[1] - y[0], g->b01 = x[0] - x[1];
    g->a12 = y[2] - y[1], g->b12 = x[1] - x[2];
    g->a20 = y[0] - y[2], g->b20 = x[2] - x[0];
    g->area = orient(x[0], y[0], x[1], y[1], x[2], y[2]);
    edge_init(&g->e0, orient(x[1], y[1], x[2], y[2], g->minx, g->miny), g->a12, g->b12);
    edge_init(&g->e1, orient(x[2], y[2], x[0], y[0], g->minx, g->miny), g->a20, g->b20);
    edge_init(&g->e2, orient(x[0], y[0], x[1], y[1], g->minx, g->miny), g->a01, g->b01);
}

static inline void tri_setup(const tin *T, int32_t t, tri_geom *g) { tri_setup_from(T, T->hv, t, g); }

/* Span of the current row (offsets from minx) inside the closed triangle; empty when lo > hi. */
static inline void row_span(const tri_geom *g, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = g->maxx - g->minx;
    edge_clip(&g->e0, lo, hi);
    edge_clip(&g->e1, lo, hi);
    edge_clip(&g->e2, lo, hi);
}

static inline void next_row(tri_geom *g) {
    edge_next_row(&g->e0);
    edge_next_row(&g->e1);
    edge_next_row(&g->e2);
}

static inline bool is_vertex(const tri_geom *g, int64_t x, int64_t y) {
    return (x == g->x[0] && y == g->y[0]) || (x == g->x[1] && y == g->y[1]) || (x == g->x[2] && y == g->y[2]);
}

/* General path: holes and/or two layers. Layers whose triangle would cover an invalid sample or
 * use an invalid vertex are not drawn; if such a layer has valid samples left inside (besides the
 * vertices) the triangle must be split: error +inf, candidate the valid sample nearest the centroid. */
static void find_candidate_general(tin *T, int32_t t, const tri_geom *g) {
    const int nl = T->hu ? 2 : 1;
    const float *layer[2] = {T->hl, T->hu};
    double zv[2][3];
    bool vert_ok[2];
    for (int k = 0; k < nl; k++) {
        vert_ok[k] = true;
        for (int i = 0; i < 3; i++) {
            size_t s = (size_t)g->y[i] * (size_t)T->w + (size_t)g->x[i];
            float hv = layer[k][s];
            if (k == 1 && T->hl[s] != T->hl[s]) hv = NAN;
            if (hv != hv) vert_ok[k] = false;
            zv[k][i] = (double)hv / (double)g->area;
        }
    }
    int64_t invalid[2] = {0, 0}, valid_nv[2] = {0, 0};
    int64_t near_d[2] = {INT64_MAX, INT64_MAX}, near_x[2] = {0, 0}, near_y[2] = {0, 0};
    int64_t sx = g->x[0] + g->x[1] + g->x[2], sy = g->y[0] + g->y[1] + g->y[2];
    double best = 0;
    int64_t bx = 0, by = 0;
    tri_geom G = *g;
    for (int64_t y = G.miny; y <= G.maxy; y++, next_row(&G)) {
        int64_t lo, hi;
        row_span(&G, &lo, &hi);
        double w0 = (double)(G.e0.w + g->a12 * lo), w1 = (double)(G.e1.w + g->a20 * lo), w2 = (double)(G.e2.w + g->a01 * lo);
        for (int64_t k = lo; k <= hi; k++) {
            int64_t x = g->minx + k;
            size_t s = (size_t)y * (size_t)T->w + (size_t)x;
            bool lower_ok = T->hl[s] == T->hl[s];
            bool vtx = is_vertex(g, x, y);
            for (int l = 0; l < nl; l++) {
                float hv = layer[l][s];
                bool ok = (hv == hv) && lower_ok;
                if (!ok) {
                    invalid[l]++;
                    continue;
                }
                if (vtx) continue;
                valid_nv[l]++;
                int64_t dx = 3 * x - sx, dy = 3 * y - sy, d = dx * dx + dy * dy;
                if (d < near_d[l]) near_d[l] = d, near_x[l] = x, near_y[l] = y;
                if (vert_ok[l]) {
                    double z = zv[l][0] * w0 + zv[l][1] * w1 + zv[l][2] * w2;
                    double dz = fabs(z - (double)hv);
                    if (dz > best) best = dz, bx = x, by = y;
                }
            }
            w0 += (double)g->a12;
            w1 += (double)g->a20;
            w2 += (double)g->a01;
        }
    }
    for (int l = 0; l < nl; l++) {
        bool drawable = vert_ok[l] && invalid[l] == 0;
        if (!drawable && valid_nv[l] > 0) {
            T->cand[t] = (uint32_t)near_x[l] | (uint32_t)near_y[l] << 16;
            q_push(T, t, INFINITY);
            return;
        }
    }
    T->cand[t] = (uint32_t)bx | (uint32_t)by << 16;
    q_push(T, t, best);
}

static void find_candidate(tin *T, int32_t t) {
    tri_geom g;
    tri_setup(T, t, &g);
    if (T->hu) {
        find_candidate_general(T, t, &g);
        return;
    }
    const float *hd = T->hl;
    const size_t W = (size_t)T->w;
    float h0 = g.z[0], h1 = g.z[1], h2 = g.z[2];
    if (h0 != h0 || h1 != h1 || h2 != h2) {
        find_candidate_general(T, t, &g);
        return;
    }
    const double area = (double)g.area;
    const double z0 = (double)h0 / area, z1 = (double)h1 / area, z2 = (double)h2 / area;
    const double dzdx = z0 * (double)g.a12 + z1 * (double)g.a20 + z2 * (double)g.a01;
    double best = 0;
    int64_t bx = 0, by = 0;
    bool nan = false;
    tri_geom G = g;
    for (int64_t y = g.miny; y <= g.maxy; y++, next_row(&G)) {
        int64_t lo, hi;
        row_span(&G, &lo, &hi);
        /* Rows are far apart in memory: ask for the one a few rows down early. */
        if (y + 4 <= g.maxy) __builtin_prefetch(hd + (size_t)(y + 4) * W + (size_t)(g.minx + lo));
        if (lo > hi) continue;
        const float *row = hd + (size_t)y * W + (size_t)g.minx + lo;
        /* z is affine along the row: its value at the span start plus a step per sample. */
        double w0 = (double)(G.e0.w + g.a12 * lo), w1 = (double)(G.e1.w + g.a20 * lo), w2 = (double)(G.e2.w + g.a01 * lo);
        const double zs = z0 * w0 + z1 * w1 + z2 * w2;
        double rbest = best;
        int64_t rk = -1;
        const int64_t n = hi - lo;
        for (int64_t k = 0; k <= n; k++) {
            double z = zs + (double)k * dzdx;
            float hv = row[k];
            double dz = fabs(z - (double)hv);
            if (dz > rbest) rbest = dz, rk = k;
            nan |= hv != hv;
        }
        if (rk >= 0) rk += lo;
        if (rk >= 0) best = rbest, bx = g.minx + rk, by = y;
    }
    if (nan) {
        find_candidate_general(T, t, &g);
        return;
    }
    if (is_vertex(&g, bx, by)) best = 0;
    T->cand[t] = (uint32_t)bx | (uint32_t)by << 16;
    q_push(T, t, best);
}

static void flush(tin *T) {
    for (size_t i = 0; i < T->npend; i++) {
        int32_t t = T->pend[i];
        T->qi[t] = -1;
        find_candidate(T, t);
    }
    T->npend = 0;
}

/* Inserts the worst sample of the worst triangle. */
static void step(tin *T) {
    int32_t t = q_pop(T);
    insert_in(T, t, (int32_t)(T->cand[t] & 0xffffu), (int32_t)(T->cand[t] >> 16));
    flush(T);
}

/* Walks from triangle `start` to the one containing (px, py). -1 if outside the raster. */
static int32_t locate(const tin *T, int32_t start, int64_t px, int64_t py) {
    int32_t t = start;
    size_t guard = 0;
    for (;;) {
        bool moved = false;
        for (int i = 0; i < 3 && !moved; i++) {
            uint32_t a = T->hv[3 * t + i].v, b = T->hv[3 * t + (i + 1) % 3].v;
            if (orient(T->vt[a].x, T->vt[a].y, T->vt[b].x, T->vt[b].y, px, py) < 0) {
                int32_t n = T->hv[3 * t + i].he;
                if (n < 0) return -1;
                t = n / 3;
                moved = true;
            }
        }
        if (!moved) return t;
        if (++guard > 4 * T->nt + 16) return -1;
    }
}

/* ---- output ------------------------------------------------------------------------------- */

/* Bit 0: the lower layer may draw triangle t; bit 1: the upper layer may. */
static unsigned tri_drawable(const tin *T, const tin_half *hv, int32_t t) {
    tri_geom g;
    tri_setup_from(T, hv, t, &g);
    const int nl = T->hu ? 2 : 1;
    unsigned ok = nl == 2 ? 3u : 1u;
    for (int64_t y = g.miny; y <= g.maxy && ok; y++, next_row(&g)) {
        int64_t lo, hi;
        row_span(&g, &lo, &hi);
        const size_t base = (size_t)y * (size_t)T->w + (size_t)g.minx;
        for (int64_t k = lo; k <= hi; k++) {
            float l = T->hl[base + (size_t)k];
            if (l != l) return 0;
            if (nl == 2) {
                float u = T->hu[base + (size_t)k];
                if (u != u) ok &= 1u;
            }
        }
    }
    return ok;
}

/* Copies the live triangles (those the layers may draw) into a level. `in_place` (the last level):
 * the half-edge array itself is compacted into the triangle list (triangle t moves from byte 24t
 * to 12t, never over a triangle still to be read) and handed over, saving a copy at the peak. */
static terra_status take_level(tin *T, terra_tin_level *lv, bool filter, bool in_place) {
    lv->vertex_count = T->nv;
    size_t n = T->nt;
    lv->triangles = in_place ? (uint32_t *)(void *)T->hv : terra_alloc(3 * n * sizeof(uint32_t) + 1);
    if (T->hu) lv->upper_triangles = terra_alloc(3 * n * sizeof(uint32_t) + 1);
    if (in_place) T->hv = NULL, T->cap_t = 0;
    if (!lv->triangles || (T->hu && !lv->upper_triangles)) return terra_fail(TERRA_E_NOMEM, "tin: out of memory");
    size_t nl = 0, nu = 0;
    const bool check = filter || T->hu;
    const tin_half *hv = in_place ? (const tin_half *)(const void *)lv->triangles : T->hv;
    for (size_t t = 0; t < n; t++) {
        unsigned ok = 1u;
        if (check) ok = tri_drawable(T, hv, (int32_t)t); /* reads triangle t only */
        uint32_t v0 = hv[3 * t].v, v1 = hv[3 * t + 1].v, v2 = hv[3 * t + 2].v;
        if (ok & 1u) {
            lv->triangles[3 * nl] = v0, lv->triangles[3 * nl + 1] = v1, lv->triangles[3 * nl + 2] = v2;
            nl++;
        }
        if (ok & 2u) {
            lv->upper_triangles[3 * nu] = v0, lv->upper_triangles[3 * nu + 1] = v1, lv->upper_triangles[3 * nu + 2] = v2;
            nu++;
        }
    }
    if (in_place) {
        uint32_t *shrunk = terra_realloc(lv->triangles, 3 * nl * sizeof(uint32_t) + 1);
        if (shrunk) lv->triangles = shrunk;
    }
    lv->triangle_count = nl;
    lv->upper_triangle_count = nu;
    return TERRA_OK;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

void terra_tin_mesh_free(terra_tin_mesh *m) {
    if (!m) return;
    terra_free(m->xy);
    terra_free(m->z);
    terra_free(m->z_upper);
    for (int i = 0; i < m->level_count && m->levels; i++) {
        terra_free(m->levels[i].triangles);
        terra_free(m->levels[i].upper_triangles);
    }
    terra_free(m->levels);
    memset(m, 0, sizeof *m);
}

static void tin_release(tin *T) {
    terra_free(T->vt);
    terra_free(T->hv);
    terra_free(T->cand);
    terra_free(T->qi);
    terra_free(T->q);
    terra_free(T->pend);
}

terra_status terra_tin_build(const terra_tin_desc *d, terra_tin_mesh *out) {
    if (!d || !out) return terra_fail(TERRA_E_INVALID, "tin: NULL argument");
    memset(out, 0, sizeof *out);
    if (!d->heights) return terra_fail(TERRA_E_INVALID, "tin: no heights");
    if (d->width < 2 || d->height < 2)
        return terra_fail(TERRA_E_INVALID, "tin: raster %dx%d is too small (at least 2x2 samples)", d->width,
                          d->height);
    if (d->width > TERRA_TIN_MAX_SIDE || d->height > TERRA_TIN_MAX_SIDE)
        return terra_fail(TERRA_E_UNSUPPORTED, "tin: raster %dx%d is past the supported size (%d samples a side)",
                          d->width, d->height, TERRA_TIN_MAX_SIDE);
    if (!(d->max_error > 0) || !isfinite(d->max_error))
        return terra_fail(TERRA_E_INVALID, "tin: max error must be a positive number of metres (got %g)",
                          d->max_error);
    if (d->level_count < 0 || d->level_count > 64 || (d->level_count && !d->levels))
        return terra_fail(TERRA_E_INVALID, "tin: bad level list");

    const size_t W = (size_t)d->width, H = (size_t)d->height, N = W * H;
    bool holes = false, any_valid = false;
    for (size_t i = 0; i < N; i++) {
        float v = d->heights[i];
        if (v != v) {
            holes = true;
        } else if (!isfinite(v)) {
            return terra_fail(TERRA_E_SOURCE, "tin: infinite height at sample (%zu, %zu)", i % W, i / W);
        } else {
            any_valid = true;
        }
    }
    if (!any_valid) return terra_fail(TERRA_E_SOURCE, "tin: every sample is no-data");
    if (d->upper)
        for (size_t i = 0; i < N; i++)
            if (isinf(d->upper[i]))
                return terra_fail(TERRA_E_SOURCE, "tin: infinite upper height at sample (%zu, %zu)", i % W, i / W);

    /* Bounds to stop at: the extra levels (coarser than max_error), descending, then max_error. */
    double bounds[65];
    int nb = 0;
    for (int i = 0; i < d->level_count; i++) {
        double b = d->levels[i];
        if (!(b > 0) || !isfinite(b)) return terra_fail(TERRA_E_INVALID, "tin: level bound %g is not positive", b);
        if (b > d->max_error) bounds[nb++] = b;
    }
    qsort(bounds, (size_t)nb, sizeof(double), cmp_desc);
    int nu = 0;
    for (int i = 0; i < nb; i++)
        if (nu == 0 || bounds[nu - 1] != bounds[i]) bounds[nu++] = bounds[i];
    nb = nu;
    bounds[nb++] = d->max_error;

    tin T;
    memset(&T, 0, sizeof T);
    T.w = d->width;
    T.h = d->height;
    T.hl = d->heights;
    T.hu = d->upper;
    T.bound = d->max_error;
    terra_status st = TERRA_OK;
    out->levels = terra_calloc((size_t)nb, sizeof(terra_tin_level));
    if (!out->levels || !reserve_triangles(&T, 1024) || !reserve_vertices(&T, 1024 + d->seed_count)) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }
    out->level_count = nb;
    out->width = d->width;
    out->height = d->height;
    out->has_holes = holes;

    int32_t x1 = d->width - 1, y1 = d->height - 1;
    uint32_t p0 = add_point(&T, 0, 0), p1 = add_point(&T, x1, 0), p2 = add_point(&T, 0, y1), p3 = add_point(&T, x1, y1);
    int32_t t0 = add_tri(&T, p3, p0, p2, -1, -1, -1, -1);
    add_tri(&T, p0, p3, p1, t0, -1, -1, -1);

    for (size_t i = 0; i < d->seed_count; i++) {
        int32_t sx = d->seed_xy[2 * i], sy = d->seed_xy[2 * i + 1];
        if (sx < 0 || sy < 0 || sx > x1 || sy > y1) {
            st = terra_fail(TERRA_E_INVALID, "tin: seed point (%d, %d) is outside the raster", sx, sy);
            goto done;
        }
        if (!reserve_triangles(&T, T.nt + 3) || !reserve_vertices(&T, T.nv + 1)) break;
        int32_t t = locate(&T, (int32_t)T.nt - 1, sx, sy);
        if (t < 0) {
            st = terra_fail(TERRA_E_INVALID, "tin: cannot place seed point (%d, %d)", sx, sy);
            goto done;
        }
        bool dup = false;
        for (int k = 0; k < 3; k++) {
            uint32_t v = T.hv[3 * t + k].v;
            if (T.vt[v].x == sx && T.vt[v].y == sy) dup = true;
        }
        if (dup) continue;
        q_remove(&T, t);
        insert_in(&T, t, sx, sy);
    }
    flush(&T);
    if (T.nomem) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }

    int li = 0;
    terra_tin_stop stop = TERRA_TIN_STOP_ERROR;
    for (;;) {
        double top = T.nq ? T.q[0].e : 0.0;
        while (li < nb && top <= bounds[li]) {
            terra_tin_level *lv = &out->levels[li];
            lv->max_error = bounds[li];
            lv->reached_error = top;
            lv->stop = TERRA_TIN_STOP_ERROR;
            if (li < nb - 1 && (st = take_level(&T, lv, holes, false)) != TERRA_OK) goto done;
            li++;
        }
        if (li == nb) break;
        if (d->max_vertices && T.nv >= d->max_vertices) stop = TERRA_TIN_STOP_VERTICES;
        if (d->max_triangles && T.nt + 2 > d->max_triangles) stop = TERRA_TIN_STOP_TRIANGLES;
        if (T.nv >= TERRA_TIN_MAX_VERTICES) {
            st = terra_fail(TERRA_E_CAPACITY, "tin: more than %u vertices", TERRA_TIN_MAX_VERTICES);
            goto done;
        }
        if (stop != TERRA_TIN_STOP_ERROR) {
            for (; li < nb; li++) {
                terra_tin_level *lv = &out->levels[li];
                lv->max_error = bounds[li];
                lv->reached_error = top;
                lv->stop = stop;
                if (li < nb - 1 && (st = take_level(&T, lv, holes, false)) != TERRA_OK) goto done;
            }
            break;
        }
        if (!reserve_triangles(&T, T.nt + 2) || !reserve_vertices(&T, T.nv + 1)) {
            st = terra_fail(TERRA_E_NOMEM, "tin: out of memory at %zu triangles", T.nt);
            goto done;
        }
        step(&T);
        if (T.nomem) {
            st = terra_fail(TERRA_E_NOMEM, "tin: out of memory at %zu triangles", T.nt);
            goto done;
        }
    }

    /* The last level: the queue and candidates go first, then the half-edges become its list. */
    terra_free(T.q), T.q = NULL;
    terra_free(T.cand), T.cand = NULL;
    terra_free(T.qi), T.qi = NULL;
    terra_free(T.pend), T.pend = NULL;
    if ((st = take_level(&T, &out->levels[nb - 1], holes, true)) != TERRA_OK) goto done;
    out->vertex_count = T.nv;
    out->xy = terra_alloc(2 * T.nv * sizeof(int32_t));
    out->z = terra_alloc(T.nv * sizeof(float));
    if (d->upper) out->z_upper = terra_alloc(T.nv * sizeof(float));
    if (!out->xy || !out->z || (d->upper && !out->z_upper)) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }
    for (size_t v = 0; v < T.nv; v++) out->xy[2 * v] = T.vt[v].x, out->xy[2 * v + 1] = T.vt[v].y;
    for (size_t v = 0; v < T.nv; v++) {
        size_t s = (size_t)T.vt[v].y * W + (size_t)T.vt[v].x;
        out->z[v] = d->heights[s];
        if (d->upper) out->z_upper[v] = d->heights[s] == d->heights[s] ? d->upper[s] : NAN;
    }
done:
    tin_release(&T);
    if (st != TERRA_OK) terra_tin_mesh_free(out);
    return st;
}
