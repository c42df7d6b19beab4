/* The stated error of a cooked tile: the largest vertical distance from the finest surface to it.
 *
 * Both surfaces are linear over their triangles, so over the overlap of a fine and a coarse triangle
 * the difference is linear too and its largest magnitude sits at a corner of the overlap: a fine
 * vertex inside the coarse triangle, a coarse vertex inside the fine one, or a crossing of their
 * edges. A coarse tile's vertices are finest vertices (edge collapse never moves one), so fine
 * vertices and edge crossings cover every corner: the maximum is exact up to rounding. Coarse
 * triangles are found through a uniform grid of buckets over the coarse tile. */
#include "terra/cook.h"

#include <string.h>

/* Twice the signed area of (a, b, p): > 0 when p lies left of a->b. */
static double orient(const double *a, const double *b, const double *p) {
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]);
}

/* A point counts as inside a triangle this far (in barycentric weight) past an edge: rounding of
 * inexact plane coordinates must not leave a point on a shared edge in neither triangle. */
#define INSIDE_SLACK 1e-9
#define NONE UINT32_MAX
#define UNUSED (UINT32_MAX - 1) /* a vertex no fine triangle uses */

typedef struct buckets {
    double x0, y0, sx, sy;   /* lower corner, cells per plane unit */
    int nx, ny;
    uint32_t *start;         /* nx * ny + 1: where each cell's triangles begin in items */
    uint32_t *items;         /* triangle indices, cell by cell */
} buckets;

static int cell_x(const buckets *b, double x) {
    double c = floor((x - b->x0) * b->sx);
    return c < 0 ? 0 : c >= b->nx ? b->nx - 1 : (int)c;
}
static int cell_y(const buckets *b, double y) {
    double c = floor((y - b->y0) * b->sy);
    return c < 0 ? 0 : c >= b->ny ? b->ny - 1 : (int)c;
}

static double tri_area2(const terra_cook_mesh *m, uint32_t t) {
    const uint32_t *v = m->tri + 3 * (size_t)t;
    return orient(m->xy + 2 * (size_t)v[0], m->xy + 2 * (size_t)v[1], m->xy + 2 * (size_t)v[2]);
}

/* The cells of row y that triangle v overlaps, widened a millionth of a cell against rounding:
 * the x range of the triangle clipped to the row's band (a long thin triangle lies in few of its
 * bounding box's cells, and the rims of holes make many of them). */
static void row_span(const buckets *b, const terra_cook_mesh *c, const uint32_t *v, int y, int *xa, int *xb) {
    const double slack = 1e-6 / b->sy, ylo = b->y0 + y / b->sy - slack, yhi = b->y0 + (y + 1) / b->sy + slack;
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < 3; k++) {
        const double *P = c->xy + 2 * (size_t)v[k], *Q = c->xy + 2 * (size_t)v[(k + 1) % 3];
        double p0 = fmax(fmin(P[1], Q[1]), ylo), p1 = fmin(fmax(P[1], Q[1]), yhi);
        if (p0 > p1) continue; /* the edge misses the band */
        if (P[1] == Q[1]) {
            lo = fmin(lo, fmin(P[0], Q[0])), hi = fmax(hi, fmax(P[0], Q[0]));
            continue;
        }
        double x0 = P[0] + (p0 - P[1]) / (Q[1] - P[1]) * (Q[0] - P[0]);
        double x1 = P[0] + (p1 - P[1]) / (Q[1] - P[1]) * (Q[0] - P[0]);
        lo = fmin(lo, fmin(x0, x1)), hi = fmax(hi, fmax(x0, x1));
    }
    const double sx = 1e-6 / b->sx;
    *xa = cell_x(b, lo - sx), *xb = cell_x(b, hi + sx);
}

/* Buckets of the coarse triangles with area in the plane, about two to a cell. false: no memory. */
static bool buckets_build(const terra_cook_mesh *c, buckets *b) {
    memset(b, 0, sizeof *b);
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    size_t n = 0;
    for (uint32_t t = 0; t < c->triangle_count; t++) {
        if (tri_area2(c, t) == 0) continue;
        n++;
        for (int k = 0; k < 3; k++)
            for (int a = 0; a < 2; a++) {
                double v = c->xy[2 * (size_t)c->tri[3 * (size_t)t + k] + a];
                lo[a] = fmin(lo[a], v);
                hi[a] = fmax(hi[a], v);
            }
    }
    b->nx = b->ny = 1;
    if (n) {
        double w = hi[0] - lo[0], h = hi[1] - lo[1], cells = (double)n / 2 + 1;
        double nx = ceil(sqrt(cells * w / h)), ny = ceil(cells / nx);
        b->nx = nx < 1 ? 1 : nx > 4096 ? 4096 : (int)nx;
        b->ny = ny < 1 ? 1 : ny > 4096 ? 4096 : (int)ny;
        b->x0 = lo[0], b->y0 = lo[1];
        b->sx = b->nx / w, b->sy = b->ny / h;
    }
    size_t cells = (size_t)b->nx * (size_t)b->ny;
    b->start = terra_calloc(cells + 1, sizeof(uint32_t));
    if (!b->start) return false;
    /* Two passes: count each cell's triangles, then place them. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t t = 0; t < c->triangle_count && n; t++) {
            if (tri_area2(c, t) == 0) continue;
            const uint32_t *v = c->tri + 3 * (size_t)t;
            double tlo[2] = {INFINITY, INFINITY}, thi[2] = {-INFINITY, -INFINITY};
            for (int k = 0; k < 3; k++)
                for (int a = 0; a < 2; a++) {
                    tlo[a] = fmin(tlo[a], c->xy[2 * (size_t)v[k] + a]);
                    thi[a] = fmax(thi[a], c->xy[2 * (size_t)v[k] + a]);
                }
            for (int y = cell_y(b, tlo[1]); y <= cell_y(b, thi[1]); y++) {
                int xa, xb;
                row_span(b, c, v, y, &xa, &xb);
                for (int x = xa; x <= xb; x++) {
                    size_t cell = (size_t)y * (size_t)b->nx + (size_t)x;
                    if (pass == 0)
                        b->start[cell + 1]++;
                    else
                        b->items[b->start[cell]++] = t;
                }
            }
        }
        if (pass == 0) {
            for (size_t i = 0; i < cells; i++) b->start[i + 1] += b->start[i];
            b->items = terra_alloc((size_t)b->start[cells] * sizeof(uint32_t) + 1);
            if (!b->items) return false;
        } else {
            /* Placing moved each start to the next cell's: shift back. */
            for (size_t i = cells; i > 0; i--) b->start[i] = b->start[i - 1];
            b->start[0] = 0;
        }
    }
    return true;
}

static void buckets_free(buckets *b) {
    terra_free(b->start);
    terra_free(b->items);
}

/* The smallest |coarse(p) - z| over the coarse triangles that hold p (one, or several where p lies on
 * their shared edges: the smallest keeps a point on top of a wall against the wall's top side);
 * false if none holds it. *strictly: the coarse triangle p lies well inside (past the slack from
 * every edge), else NONE. */
static bool distance_at(const terra_cook_mesh *c, const buckets *b, const double *p, double z, double *out,
                        uint32_t *strictly) {
    *strictly = NONE;
    size_t cell = (size_t)cell_y(b, p[1]) * (size_t)b->nx + (size_t)cell_x(b, p[0]);
    bool found = false;
    double best = INFINITY;
    for (uint32_t i = b->start[cell]; i < b->start[cell + 1]; i++) {
        const uint32_t *v = c->tri + 3 * (size_t)b->items[i];
        const double *A = c->xy + 2 * (size_t)v[0], *B = c->xy + 2 * (size_t)v[1], *C = c->xy + 2 * (size_t)v[2];
        double area = orient(A, B, C);
        double la = orient(B, C, p) / area, lb = orient(C, A, p) / area, lc = orient(A, B, p) / area;
        if (la < -INSIDE_SLACK || lb < -INSIDE_SLACK || lc < -INSIDE_SLACK) continue;
        if (la > INSIDE_SLACK && lb > INSIDE_SLACK && lc > INSIDE_SLACK) *strictly = b->items[i];
        double h = la * c->z[v[0]] + lb * c->z[v[1]] + lc * c->z[v[2]];
        best = fmin(best, fabs(h - z));
        found = true;
    }
    *out = best;
    return found;
}

/* The largest |coarse - fine| where the fine edge a->b properly crosses an edge of a coarse triangle
 * in the cells the edge passes through. */
static double crossings(const terra_cook_mesh *c, const buckets *b, const double *a, const double *bb, double za,
                        double zb) {
    double worst = 0;
    int y0 = cell_y(b, fmin(a[1], bb[1])), y1 = cell_y(b, fmax(a[1], bb[1]));
    for (int y = y0; y <= y1; y++) {
        /* The part of the edge inside this row of cells, widened a little against rounding. */
        double xlo = fmin(a[0], bb[0]), xhi = fmax(a[0], bb[0]);
        if (bb[1] != a[1]) {
            double r0 = b->y0 + y / b->sy, r1 = b->y0 + (y + 1) / b->sy;
            double t0 = (r0 - a[1]) / (bb[1] - a[1]), t1 = (r1 - a[1]) / (bb[1] - a[1]);
            double tl = fmax(0, fmin(t0, t1)), th = fmin(1, fmax(t0, t1));
            if (tl <= th) {
                double xa = a[0] + tl * (bb[0] - a[0]), xb = a[0] + th * (bb[0] - a[0]);
                xlo = fmax(xlo, fmin(xa, xb));
                xhi = fmin(xhi, fmax(xa, xb));
            }
        }
        double slack = 1e-9 / b->sx;
        int x0 = cell_x(b, xlo - slack), x1 = cell_x(b, xhi + slack);
        for (int x = x0; x <= x1; x++) {
            size_t cell = (size_t)y * (size_t)b->nx + (size_t)x;
            for (uint32_t i = b->start[cell]; i < b->start[cell + 1]; i++) {
                const uint32_t *v = c->tri + 3 * (size_t)b->items[i];
                for (int k = 0; k < 3; k++) {
                    uint32_t ic = v[k], id = v[(k + 1) % 3];
                    const double *C = c->xy + 2 * (size_t)ic, *D = c->xy + 2 * (size_t)id;
                    double o1 = orient(C, D, a), o2 = orient(C, D, bb);
                    if (!((o1 < 0 && o2 > 0) || (o1 > 0 && o2 < 0))) continue;
                    double o3 = orient(a, bb, C), o4 = orient(a, bb, D);
                    if (!((o3 < 0 && o4 > 0) || (o3 > 0 && o4 < 0))) continue;
                    double t = o1 / (o1 - o2), s = o3 / (o3 - o4);
                    double zf = za + t * (zb - za), zc = c->z[ic] + s * ((double)c->z[id] - c->z[ic]);
                    worst = fmax(worst, fabs(zc - zf));
                }
            }
        }
    }
    return worst;
}

double terra_cook_vertical_distance(const terra_cook_mesh *coarse, const terra_cook_mesh *const *fine, int n,
                                    size_t *uncovered) {
    return terra_cook_vertical_distance_within(coarse, fine, n, INFINITY, uncovered);
}

double terra_cook_vertical_distance_within(const terra_cook_mesh *coarse, const terra_cook_mesh *const *fine, int n,
                                           double limit, size_t *uncovered) {
    if (uncovered) *uncovered = 0;
    buckets b;
    if (!buckets_build(coarse, &b)) {
        buckets_free(&b);
        return INFINITY;
    }
    bool any = b.start[(size_t)b.nx * (size_t)b.ny] > 0;
    double worst = 0;
    size_t missed = 0;
    for (int f = 0; f < n && !(worst > limit); f++) {
        const terra_cook_mesh *m = fine[f];
        /* Only vertices the triangles use (an unused one may carry no height, NaN): where each
         * lies strictly inside one coarse triangle, an edge between two such vertices of the same
         * triangle crosses nothing (the triangle is convex) and is not walked. */
        uint32_t *inside = terra_alloc(((size_t)m->vertex_count + 1) * sizeof(uint32_t));
        if (!inside) {
            worst = INFINITY;
            break;
        }
        for (uint32_t i = 0; i < m->vertex_count; i++) inside[i] = UNUSED;
        for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++) inside[m->tri[i]] = NONE;
        for (uint32_t i = 0; i < m->vertex_count; i++) {
            double d;
            if (inside[i] == UNUSED) continue;
            if (any && distance_at(coarse, &b, m->xy + 2 * (size_t)i, m->z[i], &d, &inside[i]))
                worst = fmax(worst, d);
            else
                missed++;
        }
        for (uint32_t t = 0; any && t < m->triangle_count && !(worst > limit); t++)
            for (int k = 0; k < 3; k++) {
                uint32_t ia = m->tri[3 * (size_t)t + k], ib = m->tri[3 * (size_t)t + (k + 1) % 3];
                if (inside[ia] != NONE && inside[ia] == inside[ib]) continue;
                const double *A = m->xy + 2 * (size_t)ia, *B = m->xy + 2 * (size_t)ib;
                if (A[0] == B[0] && A[1] == B[1]) continue; /* a wall's vertical edge */
                worst = fmax(worst, crossings(coarse, &b, A, B, m->z[ia], m->z[ib]));
            }
        terra_free(inside);
    }
    buckets_free(&b);
    if (uncovered) *uncovered = missed;
    return worst;
}
