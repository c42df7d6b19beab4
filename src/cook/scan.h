/* Triangles against the samples under them, and 16-bit positions: shared by the cook's measures,
 * its simplifier and its encoder. */
#ifndef TERRA_COOK_SCAN_H
#define TERRA_COOK_SCAN_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "terra/cook_io.h"

/* The triangles of `mesh` by the finest tiles listed (tx, ty pairs; S plane units a side) whose
 * windows, far edges included, their boxes widened by `slack` meet: finest tile i's are
 * list[start[i] .. start[i + 1]) (both arrays the caller's to free). TERRA_E_NOMEM. */
TERRA_INTERNAL terra_status terra_cook_leaf_triangles(const terra_cook_mesh *mesh, double S, const int32_t *finest, size_t n,
                                       double slack, size_t **start, uint32_t **list);

/* The stated error of a decoded tile (`mesh`: its u, v and heights as a client decodes them) over
 * the plane's samples of the finest tiles listed: every sample inside or on a triangle against that
 * triangle's plane, and every one within `slack` plane units of a triangle but under none (the rim,
 * moved by quantization) against the nearest point of each such triangle. */
TERRA_INTERNAL terra_status terra_cook_decoded_distance(const terra_cook_raster_tiles *rt, const terra_cook_mesh *mesh,
                                                        const int32_t *finest, size_t n, double slack, double *out);

/* Sorts a[0..n) ascending; tmp: n entries of scratch. */
TERRA_INTERNAL void terra_cook_sort_u64(uint64_t *a, size_t n, uint64_t *tmp);

/* Whether the sorted a[0..n) holds key. */
static inline bool cook_holds(const uint64_t *a, size_t n, uint64_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && a[lo] == key;
}

static inline double cook_min3(double a, double b, double c) {
    double m = a < b ? a : b;
    return m < c ? m : c;
}
static inline double cook_max3(double a, double b, double c) {
    double m = a > b ? a : b;
    return m > c ? m : c;
}

/* 16-bit quantization of a tile's positions, as quantized-mesh writes them: v in [lo, hi] onto
 * 0..32767. */
static inline uint16_t cook_quant(double v, double lo, double hi) {
    if (!(hi > lo)) return 0;
    double q = (v - lo) / (hi - lo) * 32767.0;
    return (uint16_t)(q <= 0 ? 0 : q >= 32767 ? 32767 : lround(q));
}

/* A plane coordinate 0..w in the tile on 0..32767: the sides exactly, anything between them kept
 * off the sides (a vertex within half a step of a wide tile's side would otherwise decode onto it
 * and look like a border vertex the edge lists do not name). */
static inline uint16_t cook_quant_side(double v, double w) {
    if (!(v > 0)) return 0;
    if (!(v < w)) return 32767;
    uint16_t q = cook_quant(v, 0, w);
    return q < 1 ? 1 : q > 32766 ? 32766 : q;
}

/* Plane coordinate v of a tile spanning [lo, hi] as a client decodes it. */
static inline double cook_decoded(double v, double lo, double hi) {
    return lo + (hi - lo) * cook_quant_side(v - lo, hi - lo) / 32767.0;
}

/* Whether plane point x lies on a side of the tile rect (x0, y0, x1, y1), to 1e-9 of its width. */
static inline bool cook_on_side(const double *rect, const double *x) {
    const double tol = 1e-9 * (rect[2] - rect[0] > rect[3] - rect[1] ? rect[2] - rect[0] : rect[3] - rect[1]);
    return fabs(x[0] - rect[0]) <= tol || fabs(x[0] - rect[2]) <= tol || fabs(x[1] - rect[1]) <= tol ||
           fabs(x[1] - rect[3]) <= tol;
}

/* Whether v lies between p and n on the straight line through them (plane points): a rim through
 * p, v, n keeps its shape without v. */
static inline bool cook_straight(const double *p, const double *v, const double *n) {
    const double ax = v[0] - p[0], ay = v[1] - p[1], bx = n[0] - v[0], by = n[1] - v[1];
    const double cross = ax * by - ay * bx, dot = ax * bx + ay * by;
    return dot > 0 && fabs(cross) <= 1e-12 * dot;
}

/* ceil and floor of a plane coordinate (well within int64_t) without a call into libm */
static inline int64_t cook_ceil(double x) {
    int64_t i = (int64_t)x;
    return i + ((double)i < x);
}
static inline int64_t cook_floor(double x) {
    int64_t i = (int64_t)x;
    return i - ((double)i > x);
}

/* The samples of the window (plane point (x0, y0) first, W by H, rows of W) under triangle (a, b,
 * c) in plane units, each within `slack` outside it counted, against the triangle's plane: the
 * largest difference and `worst`, or once that passes cap, some value past it. No-data samples
 * are skipped; a triangle with no area covers none. mark (W by H, or NULL): set to 1 for every
 * sample counted. */
static inline double cook_scan_triangle(const double *a, const double *b, const double *c, const float z[3],
                                        const float *win, int64_t x0, int64_t y0, int W, int H, double slack,
                                        double worst, double cap, uint8_t *mark) {
    double area2 = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
    float za[3] = {z[0], z[1], z[2]};
    if (area2 < 0) { /* turned clockwise (a frame's convention): the same triangle the other way */
        const double *t = b;
        b = c, c = t, za[1] = z[2], za[2] = z[1], area2 = -area2;
    }
    if (!(area2 > 0)) return worst; /* a wall covers no sample */
    const double gx = (((double)za[1] - za[0]) * (c[1] - a[1]) - ((double)za[2] - za[0]) * (b[1] - a[1])) / area2;
    const double gy = ((b[0] - a[0]) * ((double)za[2] - za[0]) - (c[0] - a[0]) * ((double)za[1] - za[0])) / area2;
    /* each edge p -> q as n . (x, y) + k >= 0 inside, n a unit normal: points within slack outside
     * give n . (x, y) + k >= -slack */
    const double *v[3] = {a, b, c};
    double n[3][3], inv[3];
    for (int e = 0; e < 3; e++) {
        const double *p = v[e], *q = v[(e + 1) % 3];
        const double dx = q[0] - p[0], dy = q[1] - p[1], len = sqrt(dx * dx + dy * dy);
        n[e][0] = -dy / len, n[e][1] = dx / len;
        n[e][2] = -(n[e][0] * p[0] + n[e][1] * p[1]) + slack + 1e-9;
        inv[e] = n[e][0] != 0 ? -1 / n[e][0] : 0;
    }
    const double ylo = cook_min3(a[1], b[1], c[1]) - slack, yhi = cook_max3(a[1], b[1], c[1]) + slack;
    const double xlo = cook_min3(a[0], b[0], c[0]) - slack, xhi = cook_max3(a[0], b[0], c[0]) + slack;
    int64_t r0 = cook_ceil(ylo - 1e-9), r1 = cook_floor(yhi + 1e-9);
    if (r0 < y0) r0 = y0;
    if (r1 > y0 + H - 1) r1 = y0 + H - 1;
    double m = worst;
    for (int64_t r = r0; r <= r1; r++) {
        double lo = xlo, hi = xhi;
        bool empty = false;
        for (int e = 0; e < 3; e++) { /* where the row crosses each edge: the side inside */
            const double k = n[e][1] * (double)r + n[e][2], x = k * inv[e];
            if (n[e][0] > 0) lo = x > lo ? x : lo;
            else if (n[e][0] < 0) hi = x < hi ? x : hi;
            else empty |= k < 0;
        }
        if (empty || !(lo <= hi + 2e-9)) continue;
        int64_t c0 = cook_ceil(lo - 1e-9), c1 = cook_floor(hi + 1e-9);
        if (c0 < x0) c0 = x0;
        if (c1 > x0 + W - 1) c1 = x0 + W - 1;
        const float *row = win + (size_t)(r - y0) * (size_t)W - x0;
        const double base = za[0] + gy * ((double)r - a[1]) - gx * a[0];
        for (int64_t x = c0; x <= c1; x++) { /* a no-data sample gives NaN, which never passes m */
            const double d = fabs(base + gx * (double)x - row[x]);
            m = d > m ? d : m;
        }
        if (mark && c0 <= c1) memset(mark + (size_t)(r - y0) * (size_t)W + (size_t)(c0 - x0), 1, (size_t)(c1 - c0 + 1));
        if (m > cap) break;
    }
    return m;
}

/* The samples of the window within `slack` of triangle (a, b, c) but left unmarked by
 * cook_scan_triangle over every triangle at slack 0 (a decoded tile's rim moved off them by
 * quantization), each against the height of the triangle's point nearest to it (on an edge: never
 * its plane beyond, where a sliver's tilts without bound): the largest difference and `worst`. */
static inline double cook_scan_rim(const double *a, const double *b, const double *c, const float z[3], const float *win,
                                   const uint8_t *mark, int64_t x0, int64_t y0, int W, int H, double slack,
                                   double worst) {
    const double *v[3] = {a, b, c};
    const double ylo = cook_min3(a[1], b[1], c[1]) - slack, yhi = cook_max3(a[1], b[1], c[1]) + slack;
    const double xlo = cook_min3(a[0], b[0], c[0]) - slack, xhi = cook_max3(a[0], b[0], c[0]) + slack;
    int64_t r0 = cook_ceil(ylo), r1 = cook_floor(yhi), c0 = cook_ceil(xlo), c1 = cook_floor(xhi);
    if (r0 < y0) r0 = y0;
    if (r1 > y0 + H - 1) r1 = y0 + H - 1;
    if (c0 < x0) c0 = x0;
    if (c1 > x0 + W - 1) c1 = x0 + W - 1;
    double m = worst;
    for (int64_t r = r0; r <= r1; r++)
        for (int64_t x = c0; x <= c1; x++) {
            const size_t i = (size_t)(r - y0) * (size_t)W + (size_t)(x - x0);
            if (mark[i] || win[i] != win[i]) continue;
            double best = INFINITY, h = 0;
            for (int e = 0; e < 3; e++) { /* the nearest point of each edge */
                const double *p = v[e], *q = v[(e + 1) % 3];
                const double dx = q[0] - p[0], dy = q[1] - p[1], len2 = dx * dx + dy * dy;
                double t = len2 > 0 ? (((double)x - p[0]) * dx + ((double)r - p[1]) * dy) / len2 : 0;
                t = t < 0 ? 0 : t > 1 ? 1 : t;
                const double ex = (double)x - p[0] - t * dx, ey = (double)r - p[1] - t * dy, d2 = ex * ex + ey * ey;
                if (d2 < best) best = d2, h = z[e] + t * ((double)z[(e + 1) % 3] - z[e]);
            }
            if (best > (slack + 1e-9) * (slack + 1e-9)) continue;
            const double d = fabs(h - win[i]);
            m = d > m ? d : m;
        }
    return m;
}

#endif
