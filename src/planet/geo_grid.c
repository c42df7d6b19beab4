/* terra planet: a geographic grid of heights (a geographic archive's ground, io/geo_grid.c) to lay
 * over a planet: bilinear heights, and conservative ranges from a pyramid of block bounds. */
#include "terra/planet.h"

#include <math.h>
#include <string.h>

#define BLOCK 16 /* samples a block's side */

struct terra_geo_grid {
    terra_geo_grid_desc d; /* heights: ours */
    float *heights;
    int bw, bh;            /* blocks across and up */
    float *block_lo, *block_hi;
    float lo, hi;          /* every height (NaN samples aside) */
    bool holes;            /* some sample is NaN */
};

terra_status terra_geo_grid_create(const terra_geo_grid_desc *desc, terra_geo_grid **out) {
    *out = NULL;
    const terra_geo_grid_desc d = *desc;
    if (d.width < 2 || d.height < 2 || d.width > 65536 || d.height > 65536 || !d.heights)
        return terra_fail(TERRA_E_INVALID, "geo grid: needs 2 to 65536 samples each way and their heights (got %d x %d)", d.width,
                          d.height);
    if (!(d.bounds[0] >= -180 && d.bounds[2] <= 180 && d.bounds[0] < d.bounds[2] && d.bounds[1] >= -90 && d.bounds[3] <= 90 &&
          d.bounds[1] < d.bounds[3]))
        return terra_fail(TERRA_E_INVALID, "geo grid: bounds %g, %g .. %g, %g are not west < east, south < north degrees",
                          d.bounds[0], d.bounds[1], d.bounds[2], d.bounds[3]);
    terra_geo_grid *g = terra_calloc(1, sizeof *g);
    const size_t n = (size_t)d.width * (size_t)d.height;
    if (g) {
        g->bw = (d.width - 1 + BLOCK - 1) / BLOCK, g->bh = (d.height - 1 + BLOCK - 1) / BLOCK;
        g->heights = terra_alloc(n * sizeof *g->heights);
        g->block_lo = terra_alloc((size_t)g->bw * (size_t)g->bh * sizeof(float));
        g->block_hi = terra_alloc((size_t)g->bw * (size_t)g->bh * sizeof(float));
    }
    if (!g || !g->heights || !g->block_lo || !g->block_hi) {
        terra_geo_grid_destroy(g);
        return terra_fail(TERRA_E_NOMEM, "geo grid: out of memory for %d x %d samples", d.width, d.height);
    }
    memcpy(g->heights, d.heights, n * sizeof *g->heights);
    g->d = d;
    g->d.heights = g->heights;
    g->lo = INFINITY, g->hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const float h = g->heights[i];
        if (isinf(h)) {
            terra_geo_grid_destroy(g);
            return terra_fail(TERRA_E_INVALID, "geo grid: sample %zu is infinite", i);
        }
        if (h == h) g->lo = fminf(g->lo, h), g->hi = fmaxf(g->hi, h);
        else g->holes = true;
    }
    if (!(g->lo <= g->hi)) g->lo = g->hi = 0;
    /* block (bx, by) covers the cells from sample (16 bx, 16 by) to (16 bx + 16, 16 by + 16): its
     * samples' hull bounds every bilinear height inside */
    for (int by = 0; by < g->bh; by++)
        for (int bx = 0; bx < g->bw; bx++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int y = by * BLOCK; y <= by * BLOCK + BLOCK && y < d.height; y++)
                for (int x = bx * BLOCK; x <= bx * BLOCK + BLOCK && x < d.width; x++) {
                    const float h = g->heights[(size_t)y * d.width + x];
                    if (h == h) lo = fminf(lo, h), hi = fmaxf(hi, h);
                }
            g->block_lo[by * g->bw + bx] = lo, g->block_hi[by * g->bw + bx] = hi;
        }
    *out = g;
    return TERRA_OK;
}

void terra_geo_grid_destroy(terra_geo_grid *g) {
    if (!g) return;
    terra_free(g->heights);
    terra_free(g->block_lo);
    terra_free(g->block_hi);
    terra_free(g);
}

const terra_geo_grid_desc *terra_geo_grid_get_desc(const terra_geo_grid *g) { return &g->d; }

void terra_geo_grid_height_bounds(const terra_geo_grid *g, float *lo, float *hi, bool *holes) {
    *lo = g->lo;
    *hi = g->hi;
    if (holes) *holes = g->holes;
}

float terra_geo_grid_height(const terra_geo_grid *g, double lat, double lon) {
    const double *b = g->d.bounds;
    const double fx = (lon - b[0]) / (b[2] - b[0]) * (g->d.width - 1), fy = (lat - b[1]) / (b[3] - b[1]) * (g->d.height - 1);
    if (!(fx >= 0 && fy >= 0 && fx <= g->d.width - 1 && fy <= g->d.height - 1)) return NAN;
    const int x = fx >= g->d.width - 1 ? g->d.width - 2 : (int)fx, y = fy >= g->d.height - 1 ? g->d.height - 2 : (int)fy;
    const double u = fx - x, v = fy - y;
    const float *r0 = g->heights + (size_t)y * g->d.width + x, *r1 = r0 + g->d.width;
    return (float)((r0[0] * (1 - u) + r0[1] * u) * (1 - v) + (r1[0] * (1 - u) + r1[1] * u) * v);
}

/* A range of the heights over the box (degrees, clamped to the bounds): the samples of the cells it
 * touches when they are few, else the blocks it touches; boxes of more than 4096 blocks take the
 * whole grid's. False when the box misses the grid. */
bool terra_geo_grid_range(const terra_geo_grid *g, double west, double south, double east, double north, float *lo, float *hi) {
    const double *b = g->d.bounds;
    if (east < b[0] || west > b[2] || north < b[1] || south > b[3]) return false;
    const double sx = (g->d.width - 1) / (b[2] - b[0]), sy = (g->d.height - 1) / (b[3] - b[1]);
    /* a small box: the samples of the cells it touches, exactly (a bilinear height lies within its
     * cell's four) */
    const double fx0 = fmax((west - b[0]) * sx, 0), fx1 = fmin((east - b[0]) * sx, g->d.width - 1);
    const double fy0 = fmax((south - b[1]) * sy, 0), fy1 = fmin((north - b[1]) * sy, g->d.height - 1);
    const int i0 = (int)floor(fx0), i1 = (int)ceil(fx1), j0 = (int)floor(fy0), j1 = (int)ceil(fy1);
    if (i1 - i0 <= 4 && j1 - j0 <= 4) {
        /* on each cell the bilinear height is linear along each axis, so its ends over the box lie at
         * the corners of the box's pieces: the box's ends and the sample lines between, each way */
        double xs[6], ys[6];
        int nx = 0, ny = 0;
        xs[nx++] = fx0, ys[ny++] = fy0;
        for (int i = i0 + 1; i < i1; i++) xs[nx++] = i;
        for (int j = j0 + 1; j < j1; j++) ys[ny++] = j;
        xs[nx++] = fx1, ys[ny++] = fy1;
        float l = INFINITY, h = -INFINITY;
        bool whole = true;
        for (int y = 0; y < ny && whole; y++)
            for (int x = 0; x < nx && whole; x++) {
                const float v = terra_geo_grid_height(g, b[1] + ys[y] / sy, b[0] + xs[x] / sx);
                whole = v == v;
                l = fminf(l, v), h = fmaxf(h, v);
            }
        if (whole) {
            const float m = 1e-3f + 1e-6f * fmaxf(fabsf(l), fabsf(h)); /* the rounding of the points between */
            *lo = l - m, *hi = h + m;
            return true;
        }
    }
    if ((double)(i1 - i0 + 1) * (j1 - j0 + 1) <= 1024) {
        float l = INFINITY, h = -INFINITY;
        for (int j = j0; j <= j1; j++)
            for (int i = i0; i <= i1; i++) {
                const float v = g->heights[(size_t)j * g->d.width + i];
                if (v == v) l = fminf(l, v), h = fmaxf(h, v);
            }
        if (!(l <= h)) return false;
        *lo = l, *hi = h;
        return true;
    }
    /* a box on the east or north edge falls in the last block (its samples include the edge's) */
    const int x0 = (int)fmin(fmax(floor((west - b[0]) * sx / BLOCK), 0), g->bw - 1);
    const int x1 = (int)fmin(fmax(floor((east - b[0]) * sx / BLOCK), 0), g->bw - 1);
    const int y0 = (int)fmin(fmax(floor((south - b[1]) * sy / BLOCK), 0), g->bh - 1);
    const int y1 = (int)fmin(fmax(floor((north - b[1]) * sy / BLOCK), 0), g->bh - 1);
    if ((double)(x1 - x0 + 1) * (y1 - y0 + 1) > 4096) {
        *lo = g->lo, *hi = g->hi;
        return true;
    }
    float l = INFINITY, h = -INFINITY;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) l = fminf(l, g->block_lo[y * g->bw + x]), h = fmaxf(h, g->block_hi[y * g->bw + x]);
    if (!(l <= h)) return false; /* only holes there */
    *lo = l, *hi = h;
    return true;
}
