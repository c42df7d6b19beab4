/* libterra-gl, internal: occlusion culling on a planet by a horizon around the eye (occlusion.h). */
#include "occlusion.h"

#include "terra/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CELLS 32 /* blocks of two cells, at most 16 a side */
#define PI_D 3.14159265358979323846

/* A summary: the (cells + 1)^2 samples' positions relative to the tile's origin, then the tile's
 * bounding sphere (centre relative to the origin, radius), then how far under the planet's radius its
 * drawn ground may reach (metres, rounded down). */
#define SPHERE(s) (3 * (s) * (s))
#define LOWEST(s) (3 * (s) * (s) + 4)
int occ_planet_floats(const occ_layout *L) {
    if (L->block != 2 || L->cells > MAX_CELLS) return 0;
    return LOWEST(L->cells + 1) + 1;
}

/* The bounding sphere of a tile's samples (s x s): their mean (rounded to float, as kept) and their
 * farthest distance from it, rounded up. Morph targets are samples, so every drawn triangle lies in
 * the samples' hull, and so in the sphere. */
static void sphere_of(const float *pos, int s, float *out) {
    double c[3] = {0, 0, 0};
    for (int j = 0; j < s; j++)
        for (int i = 0; i < s; i++)
            for (int a = 0; a < 3; a++) c[a] += pos[3 * (j * s + i) + a];
    const double inv = 1.0 / (s * s);
    for (int a = 0; a < 3; a++) out[a] = (float)(c[a] * inv);
    double r = 0, size = 0;
    for (int j = 0; j < s; j++)
        for (int i = 0; i < s; i++) {
            double d2 = 0;
            for (int a = 0; a < 3; a++) {
                const double d = pos[3 * (j * s + i) + a] - (double)out[a];
                d2 += d * d;
            }
            r = fmax(r, sqrt(d2));
        }
    for (int a = 0; a < 3; a++) size = fmax(size, fabs((double)out[a]));
    out[3] = nextafterf((float)(r * (1 + 1e-6) + 1e-6 * (size + r)), INFINITY);
}

/* Whether sample (i, j)'s morph target is one the lattice allows: itself where both indices are even,
 * else an even neighbour along the odd index (or indices). */
static bool target_ok(const terra_grid_vertex *v, int s, int i, int j) {
    const terra_grid_vertex *p = &v[j * s + i];
    for (int dj = (j & 1) ? -1 : 0; dj <= ((j & 1) ? 1 : 0); dj += 2 - !(j & 1))
        for (int di = (i & 1) ? -1 : 0; di <= ((i & 1) ? 1 : 0); di += 2 - !(i & 1)) {
            const terra_grid_vertex *t = &v[(j + dj) * s + i + di];
            if (p->mx == t->x && p->my == t->y && p->mz == t->z) return true;
        }
    return false;
}

bool occ_planet_summarise(const occ_layout *L, const terra_planet *p, terra_vec3 o, const terra_grid_vertex *v, float *out) {
    const terra_planet_desc *pd = terra_planet_get_desc(p);
    if (occ_planet_floats(L) == 0) return false;
    const int n = L->cells, s = n + 1;
    for (int j = 0; j <= n; j++)
        for (int i = 0; i <= n; i++) {
            const terra_grid_vertex *q = &v[j * s + i];
            if (!isfinite(q->x) || !isfinite(q->y) || !isfinite(q->z) || !target_ok(v, s, i, j)) return false;
            out[3 * (j * s + i)] = q->x, out[3 * (j * s + i) + 1] = q->y, out[3 * (j * s + i) + 2] = q->z;
        }
    sphere_of(out, s, out + SPHERE(s));
    /* the least distance from the centre of a point in each two-cell piece's hull (where morphs keep its
     * ground): at least the least of its samples' along the direction of its middle sample */
    double lo = INFINITY;
    for (int pj = 0; pj < n; pj += 2)
        for (int pi = 0; pi < n; pi += 2) {
            const float *m = out + 3 * ((pj + 1) * s + pi + 1);
            const double cx = o.x + m[0], cy = o.y + m[1], cz = o.z + m[2], cl = sqrt(cx * cx + cy * cy + cz * cz);
            for (int j = pj; j <= pj + 2; j++)
                for (int i = pi; i <= pi + 2; i++) {
                    const float *q = out + 3 * (j * s + i);
                    lo = fmin(lo, ((o.x + q[0]) * cx + (o.y + q[1]) * cy + (o.z + q[2]) * cz) / cl);
                }
        }
    out[LOWEST(s)] = nextafterf((float)(lo - pd->radius_m - 1e-6 * pd->radius_m), -INFINITY);
    return true;
}

/* ---- the frame ------------------------------------------------------------------------------------------ */

typedef struct pframe {
    terra_vec3 eye, u, east, north; /* u: the eye's direction from the centre; east, north: across it */
    double er;                      /* the eye's distance from the centre */
    float *h;                       /* the horizon: OCC_BINS slopes */
    const terra_vec3 *sides;        /* the view's four side planes' inward unit normals, or NULL */
    bool horizon;                   /* the horizon may hide (else only the view's sides cull) */
    double rb, sin_cone, plane;     /* a ball under every drawn tile: its radius, the sine of the cone
                                       from the eye tangent to it, the distance of the plane of the
                                       tangent circle from the eye (0: none) */
    double side_c[4][3];            /* each side's normal in (up, east, north) */
    bool no_morph;                  /* the frame is drawn unmorphed */
    terra_vec3 fn[6], fa[6], fb[6]; /* each face's normal and axes (face_axes) */
} pframe;

/* Whether the sphere at q (relative to the eye) of radius rho lies wholly in the ball's shadow: inside
 * the cone from the eye tangent to it and beyond the plane of the tangent circle, whose disk lies in
 * the ball (a ray from the eye there enters the ball, inside the drawn ground about it, so meets that
 * first). */
static bool sphere_in_shadow(const pframe *f, double qx, double qy, double qz, double rho) {
    if (!(f->plane > 0)) return false;
    const double along = -(qx * f->u.x + qy * f->u.y + qz * f->u.z); /* toward the centre */
    if (!(along - rho > f->plane)) return false;
    const double ql = sqrt(qx * qx + qy * qy + qz * qz);
    return acos(fmin(1, along / ql)) + asin(fmin(1, rho / ql)) + 1e-9 < asin(f->sin_cone);
}

/* Whether the sphere at q (relative to the eye) of radius rho lies wholly outside one of the view's
 * side planes (through the eye). */
static bool sphere_outside(const pframe *f, double qx, double qy, double qz, double rho) {
    if (!f->sides) return false;
    const double margin = rho + PAD_M + 1e-6 * (fabs(qx) + fabs(qy) + fabs(qz));
    for (int k = 0; k < 4; k++)
        if (qx * f->sides[k].x + qy * f->sides[k].y + qz * f->sides[k].z < -margin) return true;
    return false;
}

/* One tile being visited: its origin relative to the eye, its morph range, and its samples relative to
 * the eye (up, east, north, distance), azimuths and slopes rounded down and up (found as needed:
 * stamp[k] == pass). */
typedef struct ptile {
    double ox, oy, oz;
    const float *pos;
    int s, pass;
    int stamp[(MAX_CELLS + 1) * (MAX_CELLS + 1)];
    double az[(MAX_CELLS + 1) * (MAX_CELLS + 1)], sl[(MAX_CELLS + 1) * (MAX_CELLS + 1)];
    double he[(MAX_CELLS + 1) * (MAX_CELLS + 1)], hn[(MAX_CELLS + 1) * (MAX_CELLS + 1)], v[(MAX_CELLS + 1) * (MAX_CELLS + 1)];
    double dist[(MAX_CELLS + 1) * (MAX_CELLS + 1)], su[(MAX_CELLS + 1) * (MAX_CELLS + 1)];
    float morph[2]; /* the tile's morph range */
} ptile;
_Static_assert(sizeof(ptile) <= sizeof(float) * (OCC_SCRATCH - OCC_BINS), "a tile's samples fit the scratch");

/* Whether the sphere at q (relative to the eye) of radius rho is hidden: wholly outside a side of the
 * view, in the ball's shadow, or below the horizon over every bin its azimuths touch. */
static bool sphere_hidden(const pframe *f, double qx, double qy, double qz, double rho) {
    if (sphere_outside(f, qx, qy, qz, rho)) return true;
    if (!f->horizon) return false;
    if (sphere_in_shadow(f, qx, qy, qz, rho)) return true;
    const double v = qx * f->u.x + qy * f->u.y + qz * f->u.z;
    const double he = qx * f->east.x + qy * f->east.y + qz * f->east.z, hn = qx * f->north.x + qy * f->north.y + qz * f->north.z;
    const double w = sqrt(he * he + hn * hn);
    if (!(w - rho > MIN_OCCLUDER_M)) return false;
    const double top = v + rho + PAD_M + 1e-6 * (w + fabs(v));
    const double slope = top >= 0 ? top / (w - rho) : top / (w + rho);
    /* its azimuths: between the directions of its two tangents from the axis */
    const double sb = rho / w, cb = sqrt(1 - sb * sb);
    const double p0 = pangle(he * cb + hn * sb, hn * cb - he * sb), p1 = pangle(he * cb - hn * sb, hn * cb + he * sb);
    const double d = wrap(p1 - p0);
    if (!(d >= 0 && d < 1.9)) return false;
    const long b0 = (long)floor((p0 - EPS_ANGLE) * BIN_SCALE), b1 = (long)floor((p0 + d + EPS_ANGLE) * BIN_SCALE);
    for (long b = b0; b <= b1; b++)
        if (!(f->h[BIN(b)] > slope)) return false;
    return true;
}

/* Finds sample k's place relative to the eye; false where it lies too near the axis to raise or hide
 * anything. */
static bool sample(const pframe *f, ptile *t, int k) {
    if (t->stamp[k] != t->pass) {
        t->stamp[k] = t->pass;
        const double qx = t->ox + t->pos[3 * k], qy = t->oy + t->pos[3 * k + 1], qz = t->oz + t->pos[3 * k + 2];
        const double v = qx * f->u.x + qy * f->u.y + qz * f->u.z;
        const double he = qx * f->east.x + qy * f->east.y + qz * f->east.z, hn = qx * f->north.x + qy * f->north.y + qz * f->north.z;
        const double w = sqrt(he * he + hn * hn);
        t->he[k] = he, t->hn[k] = hn, t->v[k] = v, t->dist[k] = sqrt(v * v + w * w);
        t->az[k] = pangle(he, hn);
        const double pad = PAD_M + 1e-6 * (w + fabs(v));
        t->sl[k] = w > MIN_OCCLUDER_M ? (v - pad) / w : NAN; /* rounded down (raising), up (hiding) */
        t->su[k] = w > MIN_OCCLUDER_M ? (v + pad) / w : NAN;
    }
    return !isnan(t->sl[k]);
}

/* Whether block (bi, bj) of the tile is hidden: the hull of its nine samples (where its drawn ground
 * lies, morphed or not) wholly outside a side of the view, in the ball's shadow (a convex region: so
 * where its samples are), or below the horizon over every bin its azimuths touch (the hull's azimuths
 * span its samples' where a line across them separates it from the axis). */
static bool block_hidden(const pframe *f, ptile *t, int bi, int bj) {
    int idx[9];
    for (int k = 0; k < 9; k++) {
        idx[k] = (2 * bj + k / 3) * t->s + 2 * bi + k % 3;
        sample(f, t, idx[k]);
    }
    for (int c = 0; f->sides && c < 4; c++) {
        bool out = true;
        for (int k = 0; k < 9 && out; k++) {
            const int i = idx[k];
            const double d = t->v[i] * f->side_c[c][0] + t->he[i] * f->side_c[c][1] + t->hn[i] * f->side_c[c][2];
            out = d < -(PAD_M + 1e-6 * (fabs(t->v[i]) + fabs(t->he[i]) + fabs(t->hn[i])));
        }
        if (out) return true;
    }
    if (!f->horizon) return false;
    if (f->plane > 0) {
        const double cos_cone = sqrt(1 - f->sin_cone * f->sin_cone);
        bool in = true;
        for (int k = 0; k < 9 && in; k++) {
            const int i = idx[k];
            const double along = -t->v[i], q = sqrt(t->v[i] * t->v[i] + t->he[i] * t->he[i] + t->hn[i] * t->hn[i]);
            in = along - PAD_M - 1e-6 * q > f->plane && along > cos_cone * q * (1 + 1e-9) + PAD_M;
        }
        if (in) return true;
    }
    double cx = 0, cy = 0;
    for (int k = 0; k < 9; k++) cx += t->he[idx[k]], cy += t->hn[idx[k]];
    const double cl = sqrt(cx * cx + cy * cy);
    if (!(cl > 0)) return false;
    cx /= cl, cy /= cl;
    double wmin = INFINITY, top = -INFINITY, lo = 0, hi = 0;
    const double ac = pangle(cx, cy);
    for (int k = 0; k < 9; k++) {
        const int i = idx[k];
        wmin = fmin(wmin, t->he[i] * cx + t->hn[i] * cy), top = fmax(top, t->v[i]);
        const double d = wrap(t->az[i] - ac);
        lo = fmin(lo, d), hi = fmax(hi, d);
    }
    if (!(wmin > MIN_OCCLUDER_M) || hi - lo > 1.9) return false;
    /* the horizon's lowest slope h over those bins; below it, v - h w < 0. Where h < 0 that function
     * is convex (w is), so the samples tell; else it is at most the highest v less h times the least w */
    double h = INFINITY;
    const long b0 = (long)floor((ac + lo - EPS_ANGLE) * BIN_SCALE), b1 = (long)floor((ac + hi + EPS_ANGLE) * BIN_SCALE);
    for (long b = b0; b <= b1 && h > -INFINITY; b++) h = fmin(h, f->h[BIN(b)]);
    if (h >= 0) return top + PAD_M + 1e-6 * (wmin + fabs(top)) < h * wmin;
    for (int k = 0; k < 9; k++)
        if (!(t->su[idx[k]] < h)) return false;
    return true;
}

/* Raises the horizon over the bins a drawn line spans whole: samples first + k stride (k = 0 .. cells,
 * cells even), in two-cell pieces (a, o, c): a and c stay put, o is drawn between itself and a or c
 * (where it morphs), so on a path through the three whose slope is no lower than its samples' least
 * (the slope is a quasi-concave function of the point: along a straight piece no lower than at its
 * ends). Each bin takes the least slope of the pieces that reach into it. */
static void raise_run(pframe *f, ptile *t, int first, int stride, int cells) {
    const int m = cells / 2;
    double A[MAX_CELLS / 2 + 1], b[MAX_CELLS / 2];
    for (int k = 0; k <= cells; k++)
        if (!sample(f, t, first + k * stride)) return;
    double sign = 0;
    A[0] = 0;
    for (int k = 0; k < m; k++) {
        const int a = first + 2 * k * stride, o = a + stride, c = o + stride;
        const double d = wrap(t->az[c] - t->az[a]);
        if (k == 0) sign = d >= 0 ? 1 : -1;
        if (d * sign < 0 || fabs(d) > 1) return;
        /* the piece keeps away from the axis: each point of its hull within its spread of a sample */
        const double spread = hypot(t->he[c] - t->he[a], t->hn[c] - t->hn[a]) + hypot(t->he[o] - t->he[a], t->hn[o] - t->hn[a]);
        if (hypot(t->he[a], t->hn[a]) - spread < MIN_OCCLUDER_M) return;
        A[k + 1] = A[k] + fabs(d);
        b[k] = fmin(t->sl[a], fmin(t->sl[o], t->sl[c]));
    }
    if (A[m] > 1.9) return;
    if (sign < 0) { /* in order of growing azimuth */
        for (int k = 0; k <= m / 2; k++) {
            const double x = A[k];
            A[k] = A[m] - A[m - k], A[m - k] = A[m] - x;
        }
        for (int k = 0; k < m / 2; k++) {
            const double x = b[k];
            b[k] = b[m - 1 - k], b[m - 1 - k] = x;
        }
    }
    const double base = sign > 0 ? t->az[first] : t->az[first + cells * stride];
    const long k0 = (long)ceil((base + EPS_ANGLE) * BIN_SCALE), k1 = (long)floor((base + A[m] - EPS_ANGLE) * BIN_SCALE) - 1;
    int j = 0;
    for (long k = k0; k <= k1; k++) {
        const double lo = k / BIN_SCALE - base, hi = (k + 1) / BIN_SCALE - base;
        while (j < m - 1 && A[j + 1] <= lo) j++;
        double v = b[j];
        for (int jj = j + 1; jj < m && A[jj] < hi; jj++) v = fmin(v, b[jj]);
        const float sv = (float)v;
        const float slope = (double)sv > v ? nextafterf(sv, -INFINITY) : sv;
        if (f->h[BIN(k)] < slope) f->h[BIN(k)] = slope;
    }
}

/* Whether the two-cell piece k of row line r (row 2 r) or column line r is drawn: a block beside it is. */
static bool piece_drawn(const occ_tile *ot, int nb, bool col, int r, int k) {
    if (k < 0 || k >= nb) return false;
    if (col) return (r < nb && occ_drawn(ot, occ_block_index(r, k))) || (r > 0 && occ_drawn(ot, occ_block_index(r - 1, k)));
    return (r < nb && occ_drawn(ot, occ_block_index(k, r))) || (r > 0 && occ_drawn(ot, occ_block_index(k, r - 1)));
}

/* Whether the ground of samples i .. i + 2 stride may be drawn morphed: its farthest sample reaches the
 * tile's morph start. */
static bool piece_morphs(const pframe *f, const ptile *t, int i, int stride) {
    if (!(t->morph[1] > t->morph[0]) || f->no_morph) return false;
    double far = 0;
    for (int k = 0; k <= 2; k++) far = fmax(far, t->dist[i + k * stride]);
    return far * (1 + 1e-5) + PAD_M >= t->morph[0];
}

/* Raises the four lines of drawn block (bi, bj), each with the drawn pieces beside it along its line (a
 * line the block across it raised already is left), and where the block is drawn unmorphed its two
 * middle lines too. */
static void raise_block(pframe *f, ptile *t, const occ_tile *ot, int nb, int bi, int bj) {
    const int s = t->s;
    for (int side = 0; side < 4; side++) {
        const bool col = side >= 2;
        const int r = col ? bi + (side == 3) : bj + (side == 1), k = col ? bj : bi; /* its line, its piece on it */
        const int across = col ? (side == 3 ? bi + 1 : bi - 1) : (side == 1 ? bj + 1 : bj - 1);
        if (across >= 0 && across < nb &&
            occ_drawn(ot, col ? occ_block_index(across, bj) : occ_block_index(bi, across)))
            continue;
        const int k0 = piece_drawn(ot, nb, col, r, k - 1) ? k - 1 : k, k1 = piece_drawn(ot, nb, col, r, k + 1) ? k + 1 : k;
        const int first = col ? (2 * k0) * s + 2 * r : (2 * r) * s + 2 * k0, stride = col ? s : 1;
        raise_run(f, t, first, stride, 2 * (k1 - k0 + 1));
    }
    const int corner = 2 * bj * s + 2 * bi;
    bool morphs = false;
    for (int k = 0; k < 3 && !morphs; k++) morphs = piece_morphs(f, t, corner + k * s, 1);
    if (morphs) return;
    raise_run(f, t, corner + s, 1, 2);
    raise_run(f, t, corner + 1, s, 2);
}

/* The face axes: face_dir(f, s, t) = unit(n + tan(s pi/4) a + tan(t pi/4) b). */
static void face_axes(int face, terra_vec3 *n, terra_vec3 *a, terra_vec3 *b) {
    *n = terra_planet_face_dir(face, 0, 0);
    const terra_vec3 pa = terra_planet_face_dir(face, 1, 0), pb = terra_planet_face_dir(face, 0, 1);
    *a = (terra_vec3){pa.x * sqrt(2.0) - n->x, pa.y * sqrt(2.0) - n->y, pa.z * sqrt(2.0) - n->z};
    *b = (terra_vec3){pb.x * sqrt(2.0) - n->x, pb.y * sqrt(2.0) - n->y, pb.z * sqrt(2.0) - n->z};
    /* exact axes: each component is -1, 0 or 1 */
    a->x = round(a->x), a->y = round(a->y), a->z = round(a->z), b->x = round(b->x), b->y = round(b->y), b->z = round(b->z);
}

static double dot3(terra_vec3 a, terra_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

/* Whether u lies on the side of the great circle of face coordinate c (along the axis `ax`, face
 * normal n) where the coordinate is greater. */
static bool beyond(terra_vec3 u, terra_vec3 n, terra_vec3 ax, double c) {
    return dot3(u, ax) - tan(c * (PI_D / 4)) * dot3(u, n) > 0;
}

static int cmp_order(const void *a, const void *b) {
    const uint64_t x = ((const occ_tile *)a)->order, y = ((const occ_tile *)b)->order;
    return (x > y) - (x < y);
}

/* Visibility order: faces by n . u, highest first (of two faces the one on the eye's side of the
 * great circle between them comes first along any arc from the foot that meets both), then per level
 * the child's rank among its parent's four by the parent's two splitting great circles (0 on the eye's
 * side of both, 3 of neither). */
static bool order_keys(const terra_planet *p, const pframe *pf, occ_tile *t, int n) {
    const int top = terra_planet_get_desc(p)->levels - 1;
    int lmin = top;
    for (int k = 0; k < n; k++) {
        const int l = terra_tile_key_level(t[k].key);
        lmin = l < lmin ? l : lmin;
    }
    const int digits = 2 * (top - lmin);
    if (digits > 60) return false;
    const terra_vec3 u = pf->u, *fn = pf->fn, *fa = pf->fa, *fb = pf->fb;
    double facing[6];
    for (int f = 0; f < 6; f++) facing[f] = dot3(fn[f], u);
    for (int k = 0; k < n; k++) {
        const int face = terra_tile_key_face(t[k].key), l = terra_tile_key_level(t[k].key);
        const int64_t x = terra_tile_key_x(t[k].key), y = terra_tile_key_y(t[k].key);
        uint64_t rank = 0;
        for (int f = 0; f < 6; f++) rank += facing[f] > facing[face] || (facing[f] == facing[face] && f < face);
        uint64_t key = rank << digits;
        for (int m = top - 1; m >= l; m--) {
            const int64_t ax = x >> (m - l), ay = y >> (m - l);
            const double per_side = ldexp(1.0, top - m); /* tiles along a face's side at level m */
            const double sx = 2 * (double)((ax >> 1) * 2 + 1) / per_side - 1, sy = 2 * (double)((ay >> 1) * 2 + 1) / per_side - 1;
            const int off_x = (int)(ax & 1) != beyond(u, fn[face], fa[face], sx);
            const int off_y = (int)(ay & 1) != beyond(u, fn[face], fb[face], sy);
            const uint64_t digit = off_x && off_y ? 3 : off_x ? 1 : off_y ? 2 : 0;
            key |= digit << (2 * (m - lmin));
        }
        t[k].order = key;
    }
    return true;
}

/* The highest radius the drawn ground reaches over the eye's foot: the samples' of the two-cell pieces
 * of the tiles holding it (morphs keep a piece's ground in its samples' hull); NAN where a tile without
 * a summary holds it, -INFINITY where no tile does. */
static double ground_at_foot(const occ_layout *L, const terra_planet *p, const occ_tile *t, int n, terra_vec3 u) {
    double su, tu;
    const int fu = terra_planet_dir_face(u, &su, &tu);
    const int top = terra_planet_get_desc(p)->levels - 1, N = L->cells, s = N + 1;
    double r = -INFINITY;
    for (int k = 0; k < n; k++) {
        if (terra_tile_key_face(t[k].key) != fu) continue;
        const int l = terra_tile_key_level(t[k].key);
        const double cells = ldexp((double)N, top - l); /* across the face */
        const double gi = (su + 1) / 2 * cells - (double)terra_tile_key_x(t[k].key) * N,
                     gj = (tu + 1) / 2 * cells - (double)terra_tile_key_y(t[k].key) * N;
        if (!(gi >= -1e-6 && gi <= N + 1e-6 && gj >= -1e-6 && gj <= N + 1e-6)) continue;
        if (!t[k].summary) return NAN;
        const terra_vec3 o = t[k].origin;
        /* the piece (or, within a millionth of a piece of its border, the pieces) holding the foot */
        const int i0 = (int)fmax(0, floor((gi - 2e-6) / 2)), i1 = (int)fmin(N / 2 - 1, floor((gi + 2e-6) / 2));
        const int j0 = (int)fmax(0, floor((gj - 2e-6) / 2)), j1 = (int)fmin(N / 2 - 1, floor((gj + 2e-6) / 2));
        for (int j = 2 * j0; j <= 2 * j1 + 2; j++)
            for (int i = 2 * i0; i <= 2 * i1 + 2; i++) {
                const float *q = t[k].summary + 3 * (j * s + i);
                const double x = o.x + q[0], y = o.y + q[1], z = o.z + q[2];
                r = fmax(r, sqrt(x * x + y * y + z * z));
            }
    }
    return r;
}

/* Draws what is not hidden of one summarised tile, nearest block first (by the block lines between
 * it and the eye), raising the horizon along each drawn block's lines. */
static void visit_tile(const occ_layout *L, const terra_planet *p, pframe *f, ptile *pt, occ_tile *t) {
    const terra_vec3 u = f->u;
    const int N = L->cells, nb = L->blocks, top = terra_planet_get_desc(p)->levels - 1;
    const int face = terra_tile_key_face(t->key), l = terra_tile_key_level(t->key);
    const terra_vec3 n = f->fn[face], a = f->fa[face], b = f->fb[face];
    /* per axis, how many block lines lie between the eye and each block */
    const double cells = ldexp((double)N, top - l);
    bool bx[MAX_CELLS / 2 + 1], by[MAX_CELLS / 2 + 1];
    for (int k = 0; k <= nb; k++) {
        bx[k] = beyond(u, n, a, 2 * ((double)terra_tile_key_x(t->key) * N + 2 * k) / cells - 1);
        by[k] = beyond(u, n, b, 2 * ((double)terra_tile_key_y(t->key) * N + 2 * k) / cells - 1);
    }
    int cx[MAX_CELLS / 2], cy[MAX_CELLS / 2], xmax = 0, ymax = 0;
    for (int k = 0; k < nb; k++) { /* block k lies beyond line k and short of line k + 1 */
        cx[k] = cy[k] = 0;
        for (int m = 0; m <= nb; m++) cx[k] += m <= k ? !bx[m] : bx[m], cy[k] += m <= k ? !by[m] : by[m];
        xmax = xmax > cx[k] ? xmax : cx[k], ymax = ymax > cy[k] ? ymax : cy[k];
    }
    const int dmax = xmax + ymax;
    for (int d = 0; d <= dmax; d++)
        for (int bj = 0; bj < nb; bj++)
            for (int bi = 0; bi < nb; bi++) {
                if (cx[bi] + cy[bj] != d) continue;
                const int m = occ_block_index(bi, bj);
                if (block_hidden(f, pt, bi, bj)) continue;
                t->mask[m >> 6] |= (uint64_t)1 << (m & 63);
                if (f->horizon) raise_block(f, pt, t, nb, bi, bj);
            }
}

bool occ_planet_frame(const occ_layout *L, const terra_planet *p, terra_vec3 eye, const terra_vec3 sides[4], bool cull,
                      bool no_morph, occ_tile *tiles, int n, float *scratch) {
    uint64_t all[OCC_MASK_WORDS] = {0};
    for (int m = 0; m < L->blocks * L->blocks; m++) all[m >> 6] |= (uint64_t)1 << (m & 63);
    for (int k = 0; k < n; k++)
        for (int w = 0; w < OCC_MASK_WORDS; w++) tiles[k].mask[w] = tiles[k].summary ? all[w] : w == 0;
    const double er = sqrt(dot3(eye, eye));
    bool any = false;
    for (int k = 0; k < n && !any; k++) any = tiles[k].summary != NULL;
    if (n == 0 || !(er > 0)) return false;
    const terra_vec3 u = {eye.x / er, eye.y / er, eye.z / er};
    /* front to back, culled or not (so that the same draws come in the same order either way) */
    pframe f = {.eye = eye, .u = u, .er = er, .h = scratch, .sides = sides, .no_morph = no_morph};
    for (int k = 0; k < 6; k++) face_axes(k, &f.fn[k], &f.fa[k], &f.fb[k]);
    f.horizon = order_keys(p, &f, tiles, n);
    if (f.horizon) qsort(tiles, (size_t)n, sizeof *tiles, cmp_order);
    if (!cull || !any) return false;
    /* on an ellipsoid ground points lie off their lattice's great circles: only the view's sides cull */
    const terra_planet_desc *pd = terra_planet_get_desc(p);
    f.horizon = f.horizon && pd->polar_radius_m == pd->radius_m;
    /* the horizon only with the eye above the drawn ground at its foot, and no stand-in near the foot
     * reaching the eye */
    const double g = ground_at_foot(L, p, tiles, n, u);
    f.horizon = f.horizon && !isnan(g) && er > g + PAD_M;
    const int s = L->cells + 1;
    for (int k = 0; k < n && f.horizon; k++) {
        if (!tiles[k].standin || !tiles[k].summary) continue;
        const terra_vec3 o = tiles[k].origin;
        const float *sp = tiles[k].summary + SPHERE(s);
        const terra_vec3 c = {o.x + sp[0], o.y + sp[1], o.z + sp[2]};
        const double cr = sqrt(dot3(c, c)), cos_g = dot3(c, u) / cr;
        const double off = cr * sqrt(fmax(0, 1 - cos_g * cos_g)); /* from the axis */
        f.horizon = !(cr + sp[3] + PAD_M >= er && off < 3 * sp[3]);
    }
    /* the ball: under the lowest any summarised tile's drawn ground reaches (a tile without a summary
     * may reach lower: then none) */
    double lowest = INFINITY;
    for (int k = 0; k < n; k++) lowest = tiles[k].summary ? fmin(lowest, tiles[k].summary[LOWEST(s)]) : -INFINITY;
    f.rb = terra_planet_get_desc(p)->radius_m + lowest;
    if (f.horizon && f.rb > 0 && er > f.rb) f.sin_cone = f.rb / er, f.plane = (er * er - f.rb * f.rb) / er;
    terra_vec3 up;
    terra_planet_frame(u, &f.east, &f.north, &up);
    for (int c = 0; sides && c < 4; c++)
        f.side_c[c][0] = dot3(sides[c], u), f.side_c[c][1] = dot3(sides[c], f.east), f.side_c[c][2] = dot3(sides[c], f.north);
    for (int b = 0; b < OCC_BINS; b++) scratch[b] = -INFINITY;
    ptile *pt = (ptile *)(scratch + OCC_BINS); /* the plane's tables' room */
    memset(pt->stamp, 0, sizeof pt->stamp);
    pt->s = s;
    for (int k = 0; k < n; k++) {
        occ_tile *t = &tiles[k];
        if (!t->summary) continue; /* drawn whole, hides nothing */
        for (int w = 0; w < OCC_MASK_WORDS; w++) t->mask[w] = 0;
        const terra_vec3 o = t->origin;
        pt->ox = o.x - eye.x, pt->oy = o.y - eye.y, pt->oz = o.z - eye.z;
        pt->pos = t->summary;
        pt->pass = k + 1;
        pt->morph[0] = t->morph[0], pt->morph[1] = t->morph[1];
        const float *sp = t->summary + SPHERE(s);
        if (sphere_hidden(&f, pt->ox + sp[0], pt->oy + sp[1], pt->oz + sp[2], sp[3])) continue;
        visit_tile(L, p, &f, pt, t);
    }
    return true;
}
