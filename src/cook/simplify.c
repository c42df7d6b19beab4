/* Edge collapse for ground: a terra_cook_simplify_fn that knows the mesh is a height field over
 * the plane (terra/cook.h, terra_cook_simplify_plane).
 *
 * A general simplifier (meshoptimizer's) guards against normals turning over in three dimensions;
 * on steep ground a collapse can fold triangles over in the plane while their normals turn by less
 * than that, and a folded tile is no height field. Here a vertex v goes into a neighbour u only if
 * every triangle of the new fan turns counter-clockwise in the plane, both where it is and (given
 * the tile's bounds) where a client decodes it on the tile's 16-bit lattice. The cost of a collapse
 * is the largest vertical distance of the new fan from the source's samples under it, or up to half
 * a 16-bit step outside it, where the caller has them (each new triangle scanned over them: the
 * cost is the error itself, never a sum of steps).
 * Without samples it is the distance from every vertex the call started with that lies under the
 * fan (each triangle keeps the vertices removed inside it) and from the star it replaces at the
 * crossings of old edges (v to its neighbours) with new ones (u to its neighbours). Collapses are
 * taken cheapest first (a heap, ties by vertex index: deterministic) until the next would exceed
 * the target; a lower target stops earlier on the same sequence. Vertices on the tile's outer border
 * and corners of triangles with no area in the plane (walls) never move or go. A vertex of a hole
 * rim (an edge of one triangle inside the tile) goes only where the rim runs straight through it,
 * into one of its two rim neighbours: the rim keeps its shape and the ground covered stays the
 * same (the edge of a 1-degree cell would otherwise keep all its 1201 samples a side up to the
 * hemisphere tile, where 16-bit positions no longer tell them apart). */
#include "terra/cook.h"
#include "scan.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
/* A point counts as inside a triangle this far (in barycentric weight) past an edge. */
#define INSIDE_SLACK 1e-9

typedef struct incidence {
    uint32_t *t;
    uint32_t n, cap;
} incidence;

/* A vertex's cheapest collapse (u set, err its cost) or, until it is weighed, a bound no collapse
 * of it is under (u NONE). */
typedef struct candidate {
    double err;
    uint32_t v, u;
} candidate;

typedef struct scan_entry {
    uint32_t t[3];
    double err;
} scan_entry;

typedef struct simp {
    const double *xy;        /* plane positions: the judge of area */
    double *qxy;             /* given the tile's bounds: where a client decodes them, else NULL */
    double slack;            /* half a 16-bit step of the tile: how far decoding moves a vertex */
    const float *pos;
    uint32_t *tri;
    size_t tn;
    incidence *inc;          /* per vertex: its live triangles */
    uint8_t *locked, *gone, *dead;
    uint32_t *rim_prev, *rim_next; /* per vertex on a border: its neighbours along it (p -> v -> n) */
    const double *rect;      /* the tile's bounds in xy, or NULL: every border vertex stays */
    const terra_cook_samples *samples; /* the source under the tile, or NULL */
    uint32_t *head, *next;   /* without samples: per triangle the first removed vertex under it, per
                                vertex the next */
    uint32_t *mark, epoch;   /* per vertex: seen in this round */
    uint32_t *touched, touched_n, touched_cap; /* the vertices a collapse gives new stars */
    candidate *heap;         /* at most one per vertex: its latest (a star that changes replaces it) */
    uint32_t *slot;          /* per vertex: its candidate's place in the heap, or NONE */
    size_t heap_n;
    double target;           /* collapses past it are never taken: not worth weighing exactly */
    scan_entry *scans;       /* with samples: triangle errors, scan_mask + 1 of them */
    uint32_t scan_mask;
    bool nomem;
} simp;

static double orient(const float *a, const float *b, const float *c) {
    return ((double)b[0] - a[0]) * ((double)c[1] - a[1]) - ((double)b[1] - a[1]) * ((double)c[0] - a[0]);
}

static const float *P(const simp *s, uint32_t v) { return s->pos + 3 * (size_t)v; }

static double area2(const double *A, const double *B, const double *C) {
    return (B[0] - A[0]) * (C[1] - A[1]) - (B[1] - A[1]) * (C[0] - A[0]);
}

/* Twice the signed area of (a, b, c) in the plane, computed as the pyramid computes it. */
static double plane_area2(const simp *s, uint32_t a, uint32_t b, uint32_t c) {
    return area2(s->xy + 2 * (size_t)a, s->xy + 2 * (size_t)b, s->xy + 2 * (size_t)c);
}

/* Whether a new triangle (a, b, c) keeps an area in the plane, and as decoded (where it would not,
 * it would decode onto a line or turned over). */
static bool keeps_area(const simp *s, uint32_t a, uint32_t b, uint32_t c) {
    if (!(plane_area2(s, a, b, c) > 0)) return false;
    return !s->qxy || area2(s->qxy + 2 * (size_t)a, s->qxy + 2 * (size_t)b, s->qxy + 2 * (size_t)c) > 0;
}

static bool push_u32(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t x) {
    if (*n == *cap) {
        uint32_t c = *cap ? 2 * *cap : 8;
        uint32_t *q = terra_realloc(*a, (size_t)c * sizeof(uint32_t));
        if (!q) return false;
        *a = q, *cap = c;
    }
    (*a)[(*n)++] = x;
    return true;
}

/* Cheapest first; at equal cost a bound before a weighed collapse (it may weigh the same and come
 * first by vertex), then by vertex: the collapses taken are those of weighing every vertex at once. */
static bool candidate_less(const candidate *a, const candidate *b) {
    if (a->err != b->err) return a->err < b->err;
    if ((a->u == NONE) != (b->u == NONE)) return a->u == NONE;
    return a->v != b->v ? a->v < b->v : a->u < b->u;
}

static void heap_place(simp *s, size_t i, candidate c) {
    s->heap[i] = c;
    s->slot[c.v] = (uint32_t)i;
}

static void sift_up(simp *s, size_t i, candidate c) {
    while (i > 0 && candidate_less(&c, &s->heap[(i - 1) / 2])) {
        heap_place(s, i, s->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_place(s, i, c);
}

static void sift_down(simp *s, size_t i, candidate c) {
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= s->heap_n) break;
        if (k + 1 < s->heap_n && candidate_less(&s->heap[k + 1], &s->heap[k])) k++;
        if (!candidate_less(&s->heap[k], &c)) break;
        heap_place(s, i, s->heap[k]);
        i = k;
    }
    heap_place(s, i, c);
}

/* c becomes its vertex's candidate (in place of any it had). */
static void heap_set(simp *s, candidate c) {
    const uint32_t i = s->slot[c.v];
    if (i == NONE) sift_up(s, s->heap_n++, c);
    else if (candidate_less(&c, &s->heap[i])) sift_up(s, i, c);
    else sift_down(s, i, c);
}

static void heap_remove(simp *s, uint32_t v) {
    const uint32_t i = s->slot[v];
    if (i == NONE) return;
    s->slot[v] = NONE;
    const candidate last = s->heap[--s->heap_n];
    if (i == s->heap_n) return;
    if (candidate_less(&last, &s->heap[i])) sift_up(s, i, last);
    else sift_down(s, i, last);
}

static bool has(const simp *s, uint32_t t, uint32_t x) {
    return s->tri[3 * t] == x || s->tri[3 * t + 1] == x || s->tri[3 * t + 2] == x;
}

/* The corner of triangle t that follows x (counter-clockwise). */
static uint32_t after(const simp *s, uint32_t t, uint32_t x) {
    const uint32_t *c = s->tri + 3 * (size_t)t;
    return c[0] == x ? c[1] : c[1] == x ? c[2] : c[0];
}

/* Where point p lies in the fan that collapsing v into u makes: the new triangle (u, a, b) of v's
 * triangle that holds it (the one it is deepest in where rounding puts it in none), and the fan's
 * height there minus p's; *depth (-INFINITY on the call) becomes p's least barycentric weight in it. */
static uint32_t locate(const simp *s, uint32_t v, uint32_t u, const float *p, double *diff, double *depth) {
    const incidence *in = &s->inc[v];
    const float *U = P(s, u);
    uint32_t best = NONE;
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t t = in->t[i];
        if (has(s, t, u)) continue;
        uint32_t a = after(s, t, v), b = after(s, t, a);
        const float *A = P(s, a), *B = P(s, b);
        double area = orient(U, A, B);
        double ou = orient(A, B, p), oa = orient(B, U, p), ob = orient(U, A, p);
        /* the least weight, one division (rounding keeps the order of quotients by one divisor) */
        double m = area > 0 ? cook_min3(ou, oa, ob) / area
                 : area < 0 ? cook_max3(ou, oa, ob) / area
                            : fmin(ou / area, fmin(oa / area, ob / area));
        if (m > *depth) {
            *depth = m, best = t;
            *diff = ou / area * U[2] + oa / area * A[2] + ob / area * B[2] - p[2];
            if (m >= -INSIDE_SLACK) break;
        }
    }
    return best;
}

/* A rim vertex v goes onto the new rim edge (prev, next) either way: its height's distance from it. */
static double rim_distance(const simp *s, uint32_t v) {
    const double *A = s->xy + 2 * (size_t)s->rim_prev[v], *B = s->xy + 2 * (size_t)s->rim_next[v];
    const double *X = s->xy + 2 * (size_t)v;
    const double dx = B[0] - A[0], dy = B[1] - A[1];
    const double t = ((X[0] - A[0]) * dx + (X[1] - A[1]) * dy) / (dx * dx + dy * dy);
    const float za = P(s, s->rim_prev[v])[2], zb = P(s, s->rim_next[v])[2];
    return fabs(za + t * ((double)zb - za) - P(s, v)[2]);
}

/* The largest distance of triangle (a, b, c) from the samples under it (see collapse_cost), or
 * INFINITY past the target. A vertex's star is weighed again each time a neighbour's collapse
 * changes it, mostly over the same new triangles: each triangle is scanned once (a cache indexed
 * by its corners, in order: the same arithmetic gives the same value). */
static double triangle_error(simp *s, uint32_t a, uint32_t b, uint32_t c) {
    scan_entry *e = &s->scans[((a * 0x9E3779B1u) ^ (b * 0x85EBCA77u) ^ (c * 0xC2B2AE3Du)) & s->scan_mask];
    if (e->t[0] == a && e->t[1] == b && e->t[2] == c) return e->err;
    const terra_cook_samples *sm = s->samples;
    const float z[3] = {P(s, a)[2], P(s, b)[2], P(s, c)[2]};
    const double *x[3] = {s->xy + 2 * (size_t)a, s->xy + 2 * (size_t)b, s->xy + 2 * (size_t)c};
    double err;
    if (sm->stride == 1) {
        err = cook_scan_triangle(x[0], x[1], x[2], z, sm->heights, sm->x0, sm->y0, sm->width, sm->height, s->slack, 0,
                                 s->target, NULL);
    } else { /* in the thinned window's own steps */
        double w[3][2];
        for (int k = 0; k < 3; k++)
            w[k][0] = (x[k][0] - sm->x0) / sm->stride, w[k][1] = (x[k][1] - sm->y0) / sm->stride;
        err = cook_scan_triangle(w[0], w[1], w[2], z, sm->heights, 0, 0, sm->width, sm->height,
                                 s->slack / sm->stride, 0, s->target, NULL);
    }
    if (err > s->target) err = INFINITY;
    *e = (scan_entry){{a, b, c}, err};
    return err;
}

/* The cost of collapsing v into u, or INFINITY where a triangle would fold or the cost would pass
 * cap (no use weighing further). first_only: only v's own distance from the new fan, which the cost
 * is never under (cheap: no sample or crossing weighed). */
static double collapse_cost(simp *s, uint32_t v, uint32_t u, double cap, bool first_only) {
    const incidence *in = &s->inc[v];
    const float *V = P(s, v), *U = P(s, u);
    double local = INFINITY;
    bool inside = false;
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t t = in->t[i];
        if (has(s, t, u)) continue;
        /* The new triangle (u, a, b) where t was (v, a, b). */
        uint32_t a = after(s, t, v), b = after(s, t, a);
        const float *A = P(s, a), *B = P(s, b);
        if (!keeps_area(s, u, a, b)) return INFINITY;
        double area = orient(U, A, B);
        if (!(area > 0)) return INFINITY; /* metres in floats: too thin to weigh */
        /* v against the new fan, in the one (or first) new triangle that holds it. */
        if (inside) continue;
        double ou = orient(A, B, V), oa = orient(B, U, V), ob = orient(U, A, V);
        if (cook_min3(ou, oa, ob) / area >= -INSIDE_SLACK) { /* as locate weighs it */
            local = fabs(ou / area * U[2] + oa / area * A[2] + ob / area * B[2] - V[2]);
            inside = true;
        }
    }
    if (s->rim_next[v] != NONE) {
        local = rim_distance(s, v);
        inside = true;
    }
    if (!inside || local > cap) return INFINITY;
    if (first_only) return local;
    if (s->samples) { /* the samples under the new fan against it, those within what decoding moves
                         a vertex outside it too (a sliver's plane tilts far there: it would decode
                         badly) */
        for (uint32_t i = 0; i < in->n; i++) {
            uint32_t t = in->t[i];
            if (has(s, t, u)) continue;
            uint32_t a = after(s, t, v);
            local = fmax(local, triangle_error(s, u, a, after(s, t, a)));
            if (local > cap) return INFINITY;
        }
        return local;
    }
    /* The vertices removed under the star, against the fan. */
    for (uint32_t i = 0; i < in->n; i++)
        for (uint32_t p = s->head[in->t[i]]; p != NONE; p = s->next[p]) {
            double diff = 0, depth = -INFINITY;
            locate(s, v, u, P(s, p), &diff, &depth);
            local = fmax(local, fabs(diff));
            if (local > cap) return INFINITY;
        }
    /* Old edges v-w against new edges u-x, where they cross. */
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t w = after(s, in->t[i], v);
        if (w == u) continue;
        const float *W = P(s, w);
        for (uint32_t j = 0; j < in->n; j++) {
            uint32_t x = after(s, in->t[j], v);
            if (x == u || x == w) continue;
            const float *X = P(s, x);
            double o1 = orient(U, X, V), o2 = orient(U, X, W);
            if (!((o1 < 0 && o2 > 0) || (o1 > 0 && o2 < 0))) continue;
            double o3 = orient(V, W, U), o4 = orient(V, W, X);
            if (!((o3 < 0 && o4 > 0) || (o3 > 0 && o4 < 0))) continue;
            double t = o1 / (o1 - o2), q = o3 / (o3 - o4);
            double old_h = V[2] + t * ((double)W[2] - V[2]), new_h = U[2] + q * ((double)X[2] - U[2]);
            local = fmax(local, fabs(new_h - old_h));
            if (local > cap) return INFINITY;
        }
    }
    return local;
}

/* v's distance from the fan that collapsing it into u makes, or INFINITY where it lies in none of
 * its triangles: collapse_cost's first_only without the fold tests (still no more than the cost). */
static double own_distance(const simp *s, uint32_t v, uint32_t u) {
    if (s->rim_next[v] != NONE) return rim_distance(s, v);
    double diff = 0, depth = -INFINITY;
    locate(s, v, u, P(s, v), &diff, &depth);
    return depth >= -INSIDE_SLACK ? fabs(diff) : INFINITY;
}

/* v's star has changed: a bound on its collapses onto the heap (v's own distance from each new fan,
 * which no cost is under), weighed in full only once it comes first. Most stars change again
 * before that: of the collapses a simplification weighs eagerly, about one in ten is ever taken. */
static void consider(simp *s, uint32_t v) {
    if (s->locked[v] || s->gone[v]) return;
    double bound = INFINITY;
    if (s->rim_next[v] != NONE) {
        bound = rim_distance(s, v);
    } else {
        const incidence *in = &s->inc[v];
        for (uint32_t i = 0; i < in->n; i++) {
            const double d = own_distance(s, v, after(s, in->t[i], v));
            bound = d < bound ? d : bound;
        }
    }
    if (bound <= s->target) heap_set(s, (candidate){bound, v, NONE});
    else heap_remove(s, v);
}

/* v's cheapest collapse into a neighbour, onto the heap. */
static void weigh(simp *s, uint32_t v) {
    candidate best = {INFINITY, v, NONE};
    if (s->rim_next[v] != NONE) { /* a rim vertex goes along the rim */
        const uint32_t along[2] = {s->rim_prev[v], s->rim_next[v]};
        for (int i = 0; i < 2; i++) {
            double e = collapse_cost(s, v, along[i], (best.err < s->target ? best.err : s->target), false);
            if (e < best.err || (e == best.err && along[i] < best.u)) best.err = e, best.u = along[i];
        }
        if (best.u != NONE && isfinite(best.err)) heap_set(s, best);
        return;
    }
    const incidence *in = &s->inc[v];
    /* v is interior: each neighbour follows it in exactly one of its triangles. Without samples
     * they are weighed in the order of v's own distance from their fans, which no cost is under:
     * once that passes the best so far, none of the rest can beat it (with samples the triangles'
     * errors mostly come from the cache, and ordering costs more than it saves). */
    enum { ORDERED = 64 }; /* stars this large (walls' corners, rims) are weighed in any order */
    uint32_t order[ORDERED];
    double first[ORDERED];
    const bool ordered = !s->samples && in->n <= ORDERED;
    uint32_t n = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t u = after(s, in->t[i], v);
        if (!ordered) {
            double e = collapse_cost(s, v, u, (best.err < s->target ? best.err : s->target), false);
            if (e < best.err || (e == best.err && u < best.u)) best.err = e, best.u = u;
            continue;
        }
        double f = collapse_cost(s, v, u, s->target, true);
        if (isinf(f)) continue;
        uint32_t k = n++;
        for (; k > 0 && (first[k - 1] > f || (first[k - 1] == f && order[k - 1] > u)); k--)
            first[k] = first[k - 1], order[k] = order[k - 1];
        first[k] = f, order[k] = u;
    }
    for (uint32_t i = 0; i < n && first[i] <= (best.err < s->target ? best.err : s->target); i++) {
        double e = collapse_cost(s, v, order[i], (best.err < s->target ? best.err : s->target), false);
        if (e < best.err || (e == best.err && order[i] < best.u)) best.err = e, best.u = order[i];
    }
    if (best.u != NONE && isfinite(best.err)) heap_set(s, best);
}

static void drop_incidence(simp *s, uint32_t x, uint32_t t) {
    incidence *in = &s->inc[x];
    for (uint32_t i = 0; i < in->n; i++)
        if (in->t[i] == t) {
            in->t[i] = in->t[--in->n];
            return;
        }
}

static void collapse(simp *s, uint32_t v, uint32_t u) {
    incidence *in = &s->inc[v];
    /* The corners of v's triangles are the vertices whose stars change (a star elsewhere around u
     * keeps its triangles, and with them its costs): marked now, weighed again below. */
    s->epoch++;
    s->touched_n = 0;
    for (uint32_t i = 0; i < in->n; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t w = s->tri[3 * in->t[i] + k];
            if (w == v || s->mark[w] == s->epoch) continue;
            s->mark[w] = s->epoch;
            if (!push_u32(&s->touched, &s->touched_n, &s->touched_cap, w)) s->nomem = true;
        }
    /* The removed vertices under the star, v among them, go to the new fan triangle that holds
     * them (located before the star changes). */
    uint32_t moving = v;
    s->next[v] = NONE;
    for (uint32_t i = 0; i < in->n && !s->samples; i++) {
        uint32_t t = in->t[i];
        for (uint32_t p = s->head[t], q; p != NONE; p = q) {
            q = s->next[p];
            s->next[p] = moving, moving = p;
        }
        s->head[t] = NONE;
    }
    for (uint32_t p = s->samples ? NONE : moving, q; p != NONE; p = q) {
        q = s->next[p];
        double diff, depth = -INFINITY;
        uint32_t t = locate(s, v, u, P(s, p), &diff, &depth);
        if (t != NONE) s->next[p] = s->head[t], s->head[t] = p;
    }
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t t = in->t[i];
        if (has(s, t, u)) {
            s->dead[t] = 1;
            for (int k = 0; k < 3; k++)
                if (s->tri[3 * t + k] != v) drop_incidence(s, s->tri[3 * t + k], t);
        } else {
            for (int k = 0; k < 3; k++)
                if (s->tri[3 * t + k] == v) s->tri[3 * t + k] = u;
            if (!push_u32(&s->inc[u].t, &s->inc[u].n, &s->inc[u].cap, t)) s->nomem = true;
        }
    }
    in->n = 0;
    s->gone[v] = 1;
    if (s->rim_next[v] != NONE) { /* the rim now runs prev -> next */
        s->rim_next[s->rim_prev[v]] = s->rim_next[v];
        s->rim_prev[s->rim_next[v]] = s->rim_prev[v];
    }
    /* Their queued collapses are stale: weighed again. */
    for (uint32_t i = 0; i < s->touched_n; i++) consider(s, s->touched[i]);
}

/* Border vertices (an edge with no twin, or used twice the same way) and wall corners are locked,
 * except (given the tile's bounds) a rim vertex off the tile's sides with one rim edge in and one
 * out in a straight line: it keeps its rim neighbours instead. */
static bool lock_vertices(simp *s, uint32_t vertex_count) {
    size_t ne = 3 * s->tn;
    uint64_t *e = terra_alloc(2 * ne * sizeof(uint64_t) + 8);
    if (!e) return false;
    for (size_t t = 0; t < s->tn; t++) {
        if (!(plane_area2(s, s->tri[3 * t], s->tri[3 * t + 1], s->tri[3 * t + 2]) > 0))
            for (int k = 0; k < 3; k++) s->locked[s->tri[3 * t + k]] = 1;
        for (int k = 0; k < 3; k++) e[3 * t + k] = (uint64_t)s->tri[3 * t + k] << 32 | s->tri[3 * t + (k + 1) % 3];
    }
    terra_cook_sort_u64(e, ne, e + ne);
    /* rim edges in and out per vertex: more than one either way (two rims touching) locks it */
    uint8_t *ins = terra_calloc((size_t)vertex_count + 1, 2);
    if (!ins) {
        terra_free(e);
        return false;
    }
    uint8_t *outs = ins + vertex_count + 1;
    for (size_t i = 0; i < ne; i++) {
        uint64_t twin = e[i] << 32 | e[i] >> 32;
        bool twice = (i > 0 && e[i - 1] == e[i]) || (i + 1 < ne && e[i + 1] == e[i]);
        const uint32_t a = (uint32_t)(e[i] >> 32), b = (uint32_t)(e[i] & 0xffffffffu);
        if (twice) {
            s->locked[a] = s->locked[b] = outs[a] = ins[b] = 2;
        } else if (!cook_holds(e, ne, twin)) {
            s->rim_next[a] = b, s->rim_prev[b] = a;
            if (outs[a] < 2) outs[a]++;
            if (ins[b] < 2) ins[b]++;
        }
    }
    for (uint32_t v = 0; v < vertex_count; v++) {
        if (!outs[v] && !ins[v]) continue;
        const double *x = s->xy + 2 * (size_t)v;
        bool moves = s->rect && !s->locked[v] && outs[v] == 1 && ins[v] == 1 && !cook_on_side(s->rect, x) &&
                     cook_straight(s->xy + 2 * (size_t)s->rim_prev[v], x, s->xy + 2 * (size_t)s->rim_next[v]);
        if (!moves) s->locked[v] = 1;
    }
    terra_free(ins);
    terra_free(e);
    return true;
}

size_t terra_cook_simplify_plane(void *user, const double *xy, const float *pos, uint32_t vertex_count,
                                 const uint32_t *tri, size_t triangle_count, double target_error,
                                 const double *rect, const terra_cook_samples *samples, uint32_t *out_tri) {
    (void)user;
    simp s;
    memset(&s, 0, sizeof s);
    s.xy = xy, s.pos = pos, s.tn = triangle_count, s.target = target_error, s.samples = samples, s.rect = rect;
    s.tri = terra_alloc(3 * triangle_count * sizeof(uint32_t) + 4);
    s.inc = terra_calloc((size_t)vertex_count + 1, sizeof(incidence));
    s.locked = terra_calloc((size_t)vertex_count + 1, 1);
    s.gone = terra_calloc((size_t)vertex_count + 1, 1);
    s.dead = terra_calloc(triangle_count + 1, 1);
    s.head = terra_alloc((triangle_count + 1) * sizeof(uint32_t));
    s.next = terra_alloc(((size_t)vertex_count + 1) * sizeof(uint32_t));
    s.heap = terra_alloc(((size_t)vertex_count + 1) * sizeof(candidate));
    s.slot = terra_alloc(((size_t)vertex_count + 1) * sizeof(uint32_t));
    s.mark = terra_calloc((size_t)vertex_count + 1, sizeof(uint32_t));
    s.rim_prev = terra_alloc(((size_t)vertex_count + 1) * sizeof(uint32_t));
    s.rim_next = terra_alloc(((size_t)vertex_count + 1) * sizeof(uint32_t));
    if (rect) {
        s.qxy = terra_alloc(((size_t)vertex_count + 1) * 2 * sizeof(double));
        for (uint32_t v = 0; s.qxy && v < vertex_count; v++) {
            s.qxy[2 * (size_t)v] = cook_decoded(xy[2 * (size_t)v], rect[0], rect[2]);
            s.qxy[2 * (size_t)v + 1] = cook_decoded(xy[2 * (size_t)v + 1], rect[1], rect[3]);
        }
        s.slack = 0.5 * fmax(rect[2] - rect[0], rect[3] - rect[1]) / 32767.0;
    }
    if (samples) {
        size_t n = 1024;
        while (n < 8 * triangle_count && n < ((size_t)1 << 18)) n *= 2;
        s.scans = terra_alloc(n * sizeof(scan_entry));
        if (s.scans) memset(s.scans, 0xff, n * sizeof(scan_entry));
        s.scan_mask = (uint32_t)(n - 1);
    }
    size_t out = 0;
    bool ok = (s.scans || !samples) && s.tri && s.inc && s.locked && s.gone && s.dead && s.head && s.next && s.heap && s.slot && s.mark && s.rim_prev &&
              s.rim_next && (s.qxy || !rect);
    if (ok) {
        memcpy(s.tri, tri, 3 * triangle_count * sizeof(uint32_t));
        memset(s.head, 0xff, triangle_count * sizeof(uint32_t));
        memset(s.slot, 0xff, (size_t)vertex_count * sizeof(uint32_t));
        memset(s.rim_prev, 0xff, (size_t)vertex_count * sizeof(uint32_t));
        memset(s.rim_next, 0xff, (size_t)vertex_count * sizeof(uint32_t));
        for (size_t t = 0; t < 3 * triangle_count && ok; t++)
            ok = push_u32(&s.inc[tri[t]].t, &s.inc[tri[t]].n, &s.inc[tri[t]].cap, (uint32_t)(t / 3));
        ok = ok && lock_vertices(&s, vertex_count);
    }
    if (ok) {
        for (uint32_t v = 0; v < vertex_count; v++) consider(&s, v);
        while (s.heap_n && !s.nomem) {
            const candidate c = s.heap[0];
            heap_remove(&s, c.v);
            if (c.u == NONE)
                weigh(&s, c.v);
            else
                collapse(&s, c.v, c.u);
        }
        ok = !s.nomem;
    }
    /* Out of memory: the triangles as they came (never wrong, only not simplified). */
    for (size_t t = 0; t < triangle_count; t++)
        if (!ok || !s.dead[t]) {
            memcpy(out_tri + 3 * out, ok ? s.tri + 3 * t : tri + 3 * t, 3 * sizeof(uint32_t));
            out++;
        }
    for (uint32_t v = 0; s.inc && v < vertex_count; v++) terra_free(s.inc[v].t);
    terra_free(s.inc);
    terra_free(s.tri);
    terra_free(s.locked);
    terra_free(s.gone);
    terra_free(s.dead);
    terra_free(s.head);
    terra_free(s.next);
    terra_free(s.slot);
    terra_free(s.mark);
    terra_free(s.rim_prev);
    terra_free(s.rim_next);
    terra_free(s.qxy);
    terra_free(s.heap);
    terra_free(s.touched);
    terra_free(s.scans);
    return out;
}
