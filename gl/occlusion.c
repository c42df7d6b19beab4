/* libterra-gl, internal: occlusion culling on the plane by a horizon around the eye (occlusion.h). */
#include "occlusion.h"

#include "terra/core.h"

#include <math.h>
#include <stdlib.h>

enum {
    STRIP = 8,     /* cells per strip within a block, as terra_grid_indices lays them */
    MIN_BLOCK = 2, /* cells along a block's side, at least */
    MAX_SIDE = 16  /* blocks along a tile's side, at most */
};


void occ_layout_for(int cells, occ_layout *out) {
    const int block = cells / MAX_SIDE > MIN_BLOCK ? cells / MAX_SIDE : MIN_BLOCK;
    out->cells = cells;
    out->block = block < cells ? block : cells;
    out->blocks = cells / out->block;
    out->floats = out->blocks * out->blocks + 2 * (cells / 2 + 1) * (cells + 1) + (cells / 2) * (cells / 2) + 1;
}

int occ_block_index(int x, int y) {
    int m = 0;
    for (int b = 0; b < 4; b++) m |= ((x >> b) & 1) << (2 * b) | ((y >> b) & 1) << (2 * b + 1);
    return m;
}

void occ_grid_indices(const occ_layout *L, uint32_t *out) {
    const uint32_t stride = (uint32_t)L->cells + 1;
    const int nb = L->blocks, B = L->block;
    for (int bj = 0; bj < nb; bj++)
        for (int bi = 0; bi < nb; bi++) { /* each block at its Morton position */
            size_t k = (size_t)occ_block_index(bi, bj) * 6 * (size_t)(B * B);
            for (int c0 = bi * B; c0 < (bi + 1) * B; c0 += STRIP)
                for (int j = bj * B; j < (bj + 1) * B; j++)
                    for (int i = c0; i < c0 + STRIP && i < (bi + 1) * B; i++) {
                        const uint32_t v00 = (uint32_t)j * stride + (uint32_t)i, v10 = v00 + 1, v01 = v00 + stride,
                                       v11 = v01 + 1;
                        /* as terra_grid_indices: diagonal v00-v11, counter-clockwise seen from +y */
                        out[k++] = v00, out[k++] = v01, out[k++] = v11;
                        out[k++] = v00, out[k++] = v11, out[k++] = v10;
                    }
        }
}

static float highest(const terra_grid_vertex *v) { return v->y > v->my ? v->y : v->my; }
static float max_f(float a, float b) { return a > b ? a : b; }

bool occ_summarise(const occ_layout *L, const terra_grid_vertex *v, double spacing, float *out) {
    const int n = L->cells, s = n + 1, nb = L->blocks, B = L->block;
    /* the lattice's rule, checked: samples at (i * spacing, j * spacing), each morphing onto the
     * sample of even indices at or below it (an even line's samples stay on their line) */
    float lo = INFINITY;
    for (int j = 0; j <= n; j++)
        for (int i = 0; i <= n; i++) {
            const terra_grid_vertex *p = &v[j * s + i], *t = &v[(j & ~1) * s + (i & ~1)];
            if (!(fabs(p->x - i * spacing) <= 1e-3 * spacing) || !(fabs(p->z - j * spacing) <= 1e-3 * spacing)) return false;
            if (p->mx != t->x || p->mz != t->z || p->my != t->y || !isfinite(p->y)) return false;
            lo = p->y < lo ? p->y : lo;
        }
    for (int bj = 0; bj < nb; bj++)
        for (int bi = 0; bi < nb; bi++) {
            float hi = -INFINITY;
            for (int j = bj * B; j <= (bj + 1) * B; j++)
                for (int i = bi * B; i <= (bi + 1) * B; i++) hi = max_f(hi, highest(&v[j * s + i]));
            out[occ_block_index(bi, bj)] = hi;
        }
    /* the samples of each even row and column: line r is row (column) 2 r */
    float *rows = out + nb * nb, *cols = rows + (n / 2 + 1) * s;
    for (int r = 0; r <= n / 2; r++)
        for (int i = 0; i <= n; i++) rows[r * s + i] = v[2 * r * s + i].y, cols[r * s + i] = v[i * s + 2 * r].y;
    /* each two-cell patch's highest point (aligned at even samples: its own morph within it) */
    float *patch = cols + (n / 2 + 1) * s;
    for (int pj = 0; pj < n / 2; pj++)
        for (int pi = 0; pi < n / 2; pi++) {
            float hi = -INFINITY;
            for (int j = 2 * pj; j <= 2 * pj + 2; j++)
                for (int i = 2 * pi; i <= 2 * pi + 2; i++) hi = max_f(hi, highest(&v[j * s + i]));
            patch[pj * (n / 2) + pi] = hi;
        }
    patch[(n / 2) * (n / 2)] = lo; /* the tile's lowest sample (morph targets are samples too) */
    return true;
}

/* ---- the frame ------------------------------------------------------------------------------------------ */


typedef struct frame {
    double ex, ey, ez;
    float *h;            /* the horizon: OCC_BINS slopes */
    const float *tables; /* occ_scratch_init's */
} frame;

void occ_scratch_init(float *scratch) {
    float *t = scratch + OCC_BINS;
    for (int k = 0; k <= OCC_BINS; k++) {
        const double e = k / BIN_SCALE, fr = e - floor(e);
        double dx, dz; /* the direction of pseudo-angle e, by quadrant (pangle inverted) */
        switch ((int)floor(e) & 3) {
        case 0: dx = 1 - fr, dz = fr; break;
        case 1: dx = -fr, dz = 1 - fr; break;
        case 2: dx = fr - 1, dz = -fr; break;
        default: dx = fr, dz = fr - 1; break;
        }
        const double l = sqrt(dx * dx + dz * dz);
        t[k] = (float)(dx / dz), t[(OCC_BINS + 1) + k] = (float)(fabs(dz) / l);
        t[2 * (OCC_BINS + 1) + k] = (float)(dz / dx), t[3 * (OCC_BINS + 1) + k] = (float)(fabs(dx) / l);
    }
}

/* Raises the horizon over the bins a grid line spans whole: the line at `across` (z for a row, x for
 * a column, relative to the foot) from `along0`, `cells` cells `sp` apart, drawn no lower than the
 * polyline through h[0..cells]. Each bin takes that polyline's lowest point where the bin's
 * azimuths cross the line (its edges' crossings and the samples between) over the farthest (or,
 * below the eye, nearest) distance of them. `joint` >= 0: only the bins about that sample. */
static void raise_line(frame *f, double across, double along0, double sp, int cells, const float *h, bool col, int joint) {
    if (fabs(across) < MIN_OCCLUDER_M) return;
    const double along1 = along0 + cells * sp;
    const double pa = col ? pangle(across, along0) : pangle(along0, across);
    const double d = wrap((col ? pangle(across, along1) : pangle(along1, across)) - pa);
    if (fabs(d) > 1.9) return;
    const double lo = d > 0 ? pa : pa + d, hi = lo + fabs(d);
    long b0 = (long)ceil((lo + EPS_ANGLE) * BIN_SCALE), b1 = (long)floor((hi - EPS_ANGLE) * BIN_SCALE) - 1;
    if (joint >= 0) { /* only the bins about sample `joint`: the line's two sides raised the rest */
        const double x = along0 + joint * sp, pj = lo + wrap((col ? pangle(across, x) : pangle(x, across)) - lo);
        const long kj = (long)floor(pj * BIN_SCALE);
        b0 = b0 > kj - 1 ? b0 : kj - 1, b1 = b1 < kj + 1 ? b1 : kj + 1;
    }
    if (b1 < b0) return;
    /* the most the line can raise a bin: bins already that high are left */
    float hmax = h[0];
    for (int i = 1; i <= cells; i++) hmax = h[i] > hmax ? h[i] : hmax;
    const double ra = fabs(across), inv_ra = 1 / ra, up = hmax - PAD_M - f->ey;
    const float top = (float)(up >= 0 ? up * inv_ra : up / sqrt(fmax(along0 * along0, along1 * along1) + ra * ra));
    /* edge k crosses the line at along = across * ratio[k], at distance |across| / inv_len[k] */
    const float *ratio = f->tables + (col ? 2 * (OCC_BINS + 1) : 0), *inv_len = ratio + (OCC_BINS + 1);
    const double inv_sp = 1 / sp, eps = 1e-3; /* crossings widened by a thousandth of a cell */
    for (long k = b0; k <= b1; k++) {
        const unsigned e0 = BIN(k), e1 = e0 + 1;
        if (f->h[e0] >= top) continue;
        const double ua = (across * ratio[e0] - along0) * inv_sp, ub = (across * ratio[e1] - along0) * inv_sp;
        double u0 = (ua < ub ? ua : ub) - eps, u1 = (ua < ub ? ub : ua) + eps;
        u0 = u0 > 0 ? u0 : 0, u1 = u1 < cells ? u1 : cells;
        const int i0 = u0 < cells ? (int)u0 : cells - 1, i1 = u1 < cells ? (int)u1 : cells - 1;
        const double y0 = h[i0] + (h[i0 + 1] - h[i0]) * (u0 - i0), y1 = h[i1] + (h[i1 + 1] - h[i1]) * (u1 - i1);
        double y = y0 < y1 ? y0 : y1;
        for (int i = i0 + 1; i <= i1; i++) y = h[i] < y ? h[i] : y;
        const double rise = y - PAD_M - f->ey, w0 = inv_len[e0], w1 = inv_len[e1];
        /* over the bin the distance runs between its edges' (or down to |across| where the foot's
         * perpendicular falls inside it); float tables rounded by a millionth */
        double w;
        if (rise >= 0) w = (w0 < w1 ? w0 : w1) * (1 - 1e-6);
        else w = ratio[e0] * ratio[e1] <= 0 ? 1 : (w0 > w1 ? w0 : w1) * (1 + 1e-6);
        const float slope = (float)(rise * inv_ra * w);
        if (f->h[e0] < slope) f->h[e0] = slope;
    }
}

/* Whether the square [x0, x1] x [z0, z1] (relative to the foot) with ground no higher than `hi`
 * lies below the horizon everywhere; *span: the bins its azimuths cross. */
static bool hidden(const frame *f, double x0, double x1, double z0, double z1, float hi, double *span) {
    *span = 4;
    if (x0 <= 0 && x1 >= 0 && z0 <= 0 && z1 >= 0) return false;
    const double cx[4] = {x0, x1, x0, x1}, cz[4] = {z0, z0, z1, z1};
    const double p0 = pangle(cx[0], cz[0]);
    double lo = 0, up = 0, rmax = 0;
    for (int k = 0; k < 4; k++) {
        const double d = k ? wrap(pangle(cx[k], cz[k]) - p0) : 0;
        lo = d < lo ? d : lo;
        up = d > up ? d : up;
        const double r = sqrt(cx[k] * cx[k] + cz[k] * cz[k]);
        rmax = r > rmax ? r : rmax;
    }
    *span = (up - lo) * BIN_SCALE;
    const double nx = x0 > 0 ? x0 : x1 < 0 ? -x1 : 0, nz = z0 > 0 ? z0 : z1 < 0 ? -z1 : 0;
    const double rmin = sqrt(nx * nx + nz * nz);
    const double rise = (double)hi + PAD_M - f->ey;
    const float slope = (float)(rise >= 0 ? rise / rmin : rise / rmax);
    const long b0 = (long)floor((p0 + lo - EPS_ANGLE) * BIN_SCALE), b1 = (long)floor((p0 + up + EPS_ANGLE) * BIN_SCALE);
    if (b1 - b0 >= OCC_BINS) return false;
    for (long b = b0; b <= b1; b++)
        if (!(f->h[BIN(b)] > slope)) return false;
    return true;
}

static int64_t floor_shift(int64_t v, int k) { return v >= 0 ? v >> k : -((-v - 1) >> k) - 1; }

static int cmp_order(const void *a, const void *b) {
    const uint64_t x = ((const occ_tile *)a)->order, y = ((const occ_tile *)b)->order;
    return (x > y) - (x < y);
}

/* Visibility order: the recursive front-to-back walk of the quadtree, as a key. Over the coarsest
 * level's tiles, the Manhattan distance (in tiles) from the eye's (along any ray from the eye both
 * tile indices move away from the eye's, so it grows); then per level the child's rank among its
 * parent's four (0 on the eye's side of both split lines, 3 on neither; the two between cannot
 * hide each other). False where the key would not fit 64 bits. */
static bool order_keys(occ_tile *t, int n, double tile0, double ex, double ez) {
    int lmin = TERRA_TILE_MAX_LEVEL, lmax = 0;
    for (int k = 0; k < n; k++) {
        const int l = terra_tile_key_level(t[k].key);
        lmin = l < lmin ? l : lmin;
        lmax = l > lmax ? l : lmax;
    }
    const int digits = 2 * (lmax - lmin);
    if (digits > 48) return false;
    const double top_side = ldexp(tile0, lmax);
    const int64_t ecx = (int64_t)floor(ex / top_side), ecz = (int64_t)floor(ez / top_side);
    for (int k = 0; k < n; k++) {
        const int l = terra_tile_key_level(t[k].key);
        const int64_t x = terra_tile_key_x(t[k].key), z = terra_tile_key_y(t[k].key);
        const int64_t dx = floor_shift(x, lmax - l) - ecx, dz = floor_shift(z, lmax - l) - ecz;
        const uint64_t root = (uint64_t)(llabs(dx) + llabs(dz));
        if (root >> (63 - digits)) return false;
        uint64_t key = root << digits;
        for (int m = lmax - 1; m >= l; m--) {
            const int64_t ax = floor_shift(x, m - l), az = floor_shift(z, m - l);
            const double parent_side = ldexp(tile0, m + 1);
            const int sx = ex >= ((double)floor_shift(ax, 1) + 0.5) * parent_side;
            const int sz = ez >= ((double)floor_shift(az, 1) + 0.5) * parent_side;
            const int off_x = (int)(ax & 1) != sx, off_z = (int)(az & 1) != sz;
            const uint64_t digit = off_x && off_z ? 3 : off_x ? 1 : off_z ? 2 : 0;
            key |= digit << (2 * (m - lmin));
        }
        t[k].order = key;
    }
    return true;
}

/* The drawn ground's height at the eye's foot, from the tile under it: a grid tile's triangles
 * morphed as the vertex stage morphs them (within a cell of the foot's cell: morph moves a sample
 * at most one cell), else (a mesh tile, or no triangle found) its highest point; NAN: no tile
 * drawn there. */
static double ground_at_foot(const occ_layout *L, const occ_tile *t, int n, double tile0, double ex, double ey, double ez,
                             bool no_morph) {
    for (int k = 0; k < n; k++) {
        const double side = ldexp(tile0, terra_tile_key_level(t[k].key));
        const double ox = terra_tile_key_x(t[k].key) * side, oz = terra_tile_key_y(t[k].key) * side;
        const double x = ex - ox, z = ez - oz;
        if (!(x >= 0 && x <= side && z >= 0 && z <= side)) continue;
        if (!t[k].verts) return t[k].hi;
        const int c = L->cells, s = c + 1;
        int ci = (int)(x / side * c), cj = (int)(z / side * c);
        ci = ci < c ? ci : c - 1, cj = cj < c ? cj : c - 1;
        double p[4][4][3]; /* the morphed samples (ci - 1 .. ci + 2, cj - 1 .. cj + 2) relative to the foot */
        bool in[4][4];
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) {
                const int vi = ci - 1 + i, vj = cj - 1 + j;
                in[j][i] = vi >= 0 && vi <= c && vj >= 0 && vj <= c;
                if (!in[j][i]) continue;
                const terra_grid_vertex *v = &t[k].verts[vj * s + vi];
                const double px = ox + v->x - ex, py = v->y - ey, pz = oz + v->z - ez;
                const double ms = t[k].morph[0], me = t[k].morph[1], d = sqrt(px * px + py * py + pz * pz);
                const double m = me > ms && !no_morph ? fmin(fmax((d - ms) / (me - ms), 0), 1) : 0;
                p[j][i][0] = px + (ox + v->mx - ex - px) * m;
                p[j][i][1] = v->y + (v->my - v->y) * m;
                p[j][i][2] = pz + (oz + v->mz - ez - pz) * m;
            }
        double g = -INFINITY;
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 3; i++) {
                if (!in[j][i] || !in[j][i + 1] || !in[j + 1][i] || !in[j + 1][i + 1]) continue;
                /* the cell's two triangles, split along (i, j)-(i + 1, j + 1) */
                const double *tri[2][3] = {{p[j][i], p[j + 1][i], p[j + 1][i + 1]}, {p[j][i], p[j + 1][i + 1], p[j][i + 1]}};
                for (int h = 0; h < 2; h++) {
                    const double *a = tri[h][0], *b = tri[h][1], *q = tri[h][2];
                    const double det = (b[0] - a[0]) * (q[2] - a[2]) - (q[0] - a[0]) * (b[2] - a[2]);
                    if (fabs(det) < 1e-12) continue; /* folded flat by the morph */
                    const double u = ((0 - a[0]) * (q[2] - a[2]) - (q[0] - a[0]) * (0 - a[2])) / det;
                    const double w = ((b[0] - a[0]) * (0 - a[2]) - (0 - a[0]) * (b[2] - a[2])) / det;
                    if (u < -1e-6 || w < -1e-6 || u + w > 1 + 1e-6) continue;
                    g = fmax(g, a[1] + u * (b[1] - a[1]) + w * (q[1] - a[1]));
                }
            }
        if (g > -INFINITY) return g + 1e-6 * side; /* float rounding of the drawn positions */
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++)
                if (in[j][i]) g = fmax(g, highest(&t[k].verts[(cj - 1 + j) * s + ci - 1 + i]));
        return g;
    }
    return NAN;
}

/* The lowest a line of samples h[0..cells] is drawn: the samples, where it morphs each odd one no
 * lower than the chord of its neighbours. */
static void lower_line(const float *h, int cells, bool morphs, float *out) {
    for (int i = 0; i <= cells; i++) out[i] = h[i];
    if (morphs)
        for (int i = 1; i < cells; i += 2) {
            const float chord = 0.5f * (out[i - 1] + out[i + 1]);
            out[i] = chord < out[i] ? chord : out[i];
        }
}

/* Raises a block's even line of B cells at `across` from `along0` (samples h, drawn morphed where
 * `morphs`), and where a neighbour block along it was drawn before (`prev` before it, `next` after it;
 * the line through the two morphing where mp, mn), the bins about their joint. */
static void raise_block_line(frame *f, const float *h, double across, double along0, double sp, int B, bool col, bool morphs,
                             bool prev, bool mp, bool next, bool mn) {
    float line[TERRA_GRID_MAX_CELLS + 1];
    lower_line(h, B, morphs, line);
    raise_line(f, across, along0, sp, B, line, col, -1);
    if (prev) {
        lower_line(h - B, 2 * B, mp, line);
        raise_line(f, across, along0 - B * sp, sp, 2 * B, line, col, B);
    }
    if (next) {
        lower_line(h, 2 * B, mn, line);
        raise_line(f, across, along0, sp, 2 * B, line, col, B);
    }
}

/* Whether a vertex of the block at (bx, bz) (relative to the foot, `bs` a side, its ground within dy
 * of the eye's height) morphs: the vertex stage's distance from the eye reaches the morph's start. */
static bool block_morphs(const occ_tile *t, double bx, double bz, double bs, double dy, bool may_morph) {
    if (!may_morph) return false;
    const double fx = fmax(fabs(bx), fabs(bx + bs)), fz = fmax(fabs(bz), fabs(bz + bs));
    return sqrt(fx * fx + dy * dy + fz * fz) * (1 + 1e-5) + PAD_M >= t->morph[0];
}

/* Draws what is not hidden of one grid tile with a summary, nearest block first, raising the horizon
 * along the lines of each block drawn. */
static void visit_grid(const occ_layout *L, frame *f, occ_tile *t, double x0, double z0, double side, bool no_morph) {
    const int nb = L->blocks, B = L->block, n = L->cells;
    const double spacing = side / n, bs = B * spacing;
    const float *rows = t->summary + nb * nb, *cols = rows + (n / 2 + 1) * (n + 1), *patch = cols + (n / 2 + 1) * (n + 1);
    /* how far below or above the eye its ground reaches, for whether a block of it morphs */
    const double dy = fmax(fabs(t->hi - f->ey), fabs(patch[(n / 2) * (n / 2)] - f->ey));
    const bool may_morph = !no_morph && t->morph[1] > t->morph[0];
    /* blocks by Manhattan distance from the eye's block (clamped next to the tile: same order) */
    int ebi = (int)fmax(-1, fmin(nb, floor((f->ex - x0) / bs))), ebj = (int)fmax(-1, fmin(nb, floor((f->ez - z0) / bs)));
    for (int d = 0; d <= 2 * (nb + 1); d++)
        for (int bi = 0; bi < nb; bi++) {
            const int dj = d - abs(bi - ebi);
            if (dj < 0) continue;
            for (int side_j = 0; side_j < (dj ? 2 : 1); side_j++) {
                const int bj = side_j ? ebj + dj : ebj - dj;
                if (bj < 0 || bj >= nb) continue;
                const int m = occ_block_index(bi, bj);
                const double bx = x0 + bi * bs - f->ex, bz = z0 + bj * bs - f->ez;
                double span;
                bool hide = hidden(f, bx, bx + bs, bz, bz + bs, t->summary[m], &span);
                /* else, hidden all the same where each of its two-cell patches is */
                if (!hide && span >= 1 && B > 2) {
                    hide = true;
                    for (int q = 0; hide && q < B * B / 4; q++) {
                        const int pi = q % (B / 2), pj = q / (B / 2);
                        const double px = bx + 2 * pi * spacing, pz = bz + 2 * pj * spacing;
                        double ps;
                        hide = hidden(f, px, px + 2 * spacing, pz, pz + 2 * spacing,
                                      patch[(bj * B / 2 + pj) * (n / 2) + bi * B / 2 + pi], &ps);
                    }
                }
                if (hide) continue;
                t->mask[m >> 6] |= (uint64_t)1 << (m & 63);
                if (span < 1) continue; /* no piece of it spans a whole bin */
                const bool morphs = block_morphs(t, bx, bz, bs, dy, may_morph);
                /* its even rows and columns, but a border line a neighbour block drawn before raised;
                 * along a line into a neighbour drawn before, the bins about the joint (neither side
                 * spans them whole) from the two sides together */
                const int h = B / 2;
                const bool west = bi > 0 && occ_drawn(t, occ_block_index(bi - 1, bj)),
                           east = bi < nb - 1 && occ_drawn(t, occ_block_index(bi + 1, bj)),
                           south = bj > 0 && occ_drawn(t, occ_block_index(bi, bj - 1)),
                           north = bj < nb - 1 && occ_drawn(t, occ_block_index(bi, bj + 1));
                /* a joint's line morphs where either side does */
                const bool mw = morphs || (west && block_morphs(t, bx - bs, bz, bs, dy, may_morph)),
                           me = morphs || (east && block_morphs(t, bx + bs, bz, bs, dy, may_morph)),
                           ms = morphs || (south && block_morphs(t, bx, bz - bs, bs, dy, may_morph)),
                           mn = morphs || (north && block_morphs(t, bx, bz + bs, bs, dy, may_morph));
                for (int k = 0; k <= h; k++) {
                    const float *row = rows + (bj * h + k) * (n + 1) + bi * B, *col = cols + (bi * h + k) * (n + 1) + bj * B;
                    if (!((k == 0 && south) || (k == h && north)))
                        raise_block_line(f, row, bz + 2 * k * spacing, bx, spacing, B, false, morphs, west, mw, east, me);
                    if (!((k == 0 && west) || (k == h && east)))
                        raise_block_line(f, col, bx + 2 * k * spacing, bz, spacing, B, true, morphs, south, ms, north, mn);
                }
                /* unmorphed, every sample stays where it was taken: its odd lines are drawn along
                 * their lines too, through their samples (the vertices while drawn) */
                float line[TERRA_GRID_MAX_CELLS + 1];
                if (!morphs && t->verts)
                    for (int k = 1; k < B; k += 2) {
                        const terra_grid_vertex *rv = t->verts + (bj * B + k) * (n + 1) + bi * B, *cv = t->verts + (bj * B) * (n + 1) + bi * B + k;
                        for (int i = 0; i <= B; i++) line[i] = rv[i].y;
                        raise_line(f, bz + k * spacing, bx, spacing, B, line, false, -1);
                        for (int i = 0; i <= B; i++) line[i] = cv[i * (n + 1)].y;
                        raise_line(f, bx + k * spacing, bz, spacing, B, line, true, -1);
                    }
            }
        }
}

bool occ_frame(const occ_layout *L, double tile0_size, double eye_x, double eye_y, double eye_z, bool cull, bool no_morph,
               occ_tile *tiles, int n, float *scratch) {
    /* every block of a tile with a summary; one (the whole tile) of one without */
    uint64_t all[OCC_MASK_WORDS] = {0};
    for (int m = 0; m < L->blocks * L->blocks; m++) all[m >> 6] |= (uint64_t)1 << (m & 63);
    for (int k = 0; k < n; k++)
        for (int w = 0; w < OCC_MASK_WORDS; w++) tiles[k].mask[w] = tiles[k].summary ? all[w] : w == 0;
    if (n == 0 || !order_keys(tiles, n, tile0_size, eye_x, eye_z)) return false;
    qsort(tiles, (size_t)n, sizeof *tiles, cmp_order);
    /* the eye above the drawn ground at its foot (where no tile of the frame is there, the ground under
     * the eye is out of view, below the rays from it), and no stand-in near the eye reaching its height:
     * one far coarser than the ground about it (the eye under it) leaves the drawn ground open */
    const double g = ground_at_foot(L, tiles, n, tile0_size, eye_x, eye_y, eye_z, no_morph);
    bool over_eye = false;
    for (int k = 0; k < n && !over_eye; k++) {
        if (!tiles[k].standin || !(tiles[k].hi + PAD_M >= eye_y)) continue;
        const double side = ldexp(tile0_size, terra_tile_key_level(tiles[k].key));
        const double x = eye_x - terra_tile_key_x(tiles[k].key) * side, z = eye_z - terra_tile_key_y(tiles[k].key) * side;
        over_eye = x > -2 * side && x < 3 * side && z > -2 * side && z < 3 * side;
    }
    if (!cull || over_eye || !(isnan(g) || eye_y > g + PAD_M)) return false;
    for (int b = 0; b < OCC_BINS; b++) scratch[b] = -INFINITY;
    frame f = {eye_x, eye_y, eye_z, scratch, scratch + OCC_BINS};
    for (int k = 0; k < n; k++) {
        occ_tile *t = &tiles[k];
        const double side = ldexp(tile0_size, terra_tile_key_level(t->key));
        const double x0 = terra_tile_key_x(t->key) * side, z0 = terra_tile_key_y(t->key) * side;
        for (int w = 0; w < OCC_MASK_WORDS; w++) t->mask[w] = 0;
        /* the whole tile first: hidden, so is each block of it */
        double span;
        if (hidden(&f, x0 - eye_x, x0 + side - eye_x, z0 - eye_z, z0 + side - eye_z, t->hi, &span)) continue;
        if (t->summary) visit_grid(L, &f, t, x0, z0, side, no_morph);
        else t->mask[0] = 1;
    }
    return true;
}
