/* terra grid: CDLOD grid tiles from a source, and the shared index buffer. */
#include "terra/grid.h"

#include <math.h>
#include <string.h>

terra_status terra_grid_desc_resolve(const terra_grid_desc *in, terra_grid_desc *out) {
    terra_grid_desc d = in ? *in : (terra_grid_desc){0};
    if (d.tile0_size == 0) d.tile0_size = 64.0;
    if (d.cells == 0) d.cells = 64;
    if (!(d.tile0_size > 0) || !isfinite(d.tile0_size))
        return terra_fail(TERRA_E_INVALID, "grid: tile0_size must be a positive number of metres (got %g)",
                          d.tile0_size);
    if (d.cells < TERRA_GRID_MIN_CELLS || d.cells > TERRA_GRID_MAX_CELLS || (d.cells & (d.cells - 1)))
        return terra_fail(TERRA_E_INVALID, "grid: cells must be a power of two from %d to %d (got %d)",
                          TERRA_GRID_MIN_CELLS, TERRA_GRID_MAX_CELLS, d.cells);
    *out = d;
    return TERRA_OK;
}

double terra_grid_tile_side(const terra_grid_desc *d, int level) {
    terra_grid_desc defaults;
    if (!d && terra_grid_desc_resolve(NULL, &defaults) == TERRA_OK) d = &defaults;
    return ldexp(d->tile0_size, level);
}

terra_status terra_grid_build(const terra_source *src, const terra_grid_desc *d, terra_tile_key key,
                              terra_grid_vertex *out, float *scratch, terra_grid_info *info) {
    const int n = d->cells, level = terra_tile_key_level(key), w = n + 5;
    const double side = terra_grid_tile_side(d, level), spacing = side / n;
    const int64_t tx = terra_tile_key_x(key), ty = terra_tile_key_y(key);
    /* heights and surfaces two samples wider on every side: [(j + 2) * w + (i + 2)] is vertex (i, j) */
    float *h = scratch;
    terra_surface *surf = (terra_surface *)(scratch + w * w);
    terra_grid_request req = {.ix0 = tx * n - 2, .iz0 = ty * n - 2, .spacing = spacing, .nx = w, .nz = w};
    terra_status st = terra_source_sample(src, &req, h, surf);
    if (st != TERRA_OK) return st;

    /* inv2s: this level's central differences; inv4s: the parent's, over the samples two apart,
     * which are the parent's neighbours (the same numbers the parent tile computes with) */
    const float fs = (float)spacing, inv2s = (float)(0.5 / spacing), inv4s = (float)(0.5 / (2 * spacing));
    float col[TERRA_GRID_MAX_CELLS + 1]; /* i * spacing, exact as the lattice asks */
    for (int i = 0; i <= n; i++) col[i] = (float)i * fs;
    float hmin = INFINITY, hmax = -INFINITY;
    for (int j = 0; j <= n; j++) {
        const float *row = h + (size_t)(j + 2) * w + 2;
        const terra_surface *srow = surf + (size_t)(j + 2) * w + 2;
        const int mj = j & ~1; /* odd indices collapse onto the even vertex below */
        const float *mrow = h + (size_t)(mj + 2) * w + 2;
        const float z = col[j], mz = col[mj];
        terra_grid_vertex *v = out + (size_t)j * (n + 1);
        for (int i = 0; i <= n; i++, v++) {
            const float y = row[i];
            const int mi = i & ~1;
            /* Normal from central differences: (-dh/dx, 1, -dh/dz), octahedron-encoded with +y as
             * the pole. The encoding divides by the L1 norm itself (no normalisation needed), and
             * with y > 0 there is no fold: the same as terra_oct_encode on (nx, nz, 1), branch-free. */
            const float nx = (row[i - 1] - row[i + 1]) * inv2s, nz = (row[i - w] - row[i + w]) * inv2s;
            const float l1 = 127.0f / (fabsf(nx) + fabsf(nz) + 1.0f);
            /* the parent's normal at the target (mi, mj), from its neighbours two samples away */
            const float px = (mrow[mi - 2] - mrow[mi + 2]) * inv4s, pz = (mrow[mi - 2 * w] - mrow[mi + 2 * w]) * inv4s;
            const float pl1 = 127.0f / (fabsf(px) + fabsf(pz) + 1.0f);
            *v = (terra_grid_vertex){.x = col[i], .y = y, .z = z, .mx = col[mi], .my = mrow[mi], .mz = mz,
                                     .normal = {(int8_t)lrintf(nx * l1), (int8_t)lrintf(nz * l1)},
                                     .surface = srow[i], .level = (uint8_t)level,
                                     .morph_normal = {(int8_t)lrintf(px * pl1), (int8_t)lrintf(pz * pl1)}};
            hmin = y < hmin ? y : hmin;
            hmax = y > hmax ? y : hmax;
        }
    }
    if (info) {
        info->min_height = hmin;
        info->max_height = hmax;
        info->origin_x = (double)tx * side;
        info->origin_z = (double)ty * side;
        info->side = side;
        info->spacing = spacing;
    }
    return TERRA_OK;
}

/* Cells in column strips of STRIP cells: each row of a strip reuses the row before it, which fits
 * in a post-transform vertex cache of 2 × (STRIP + 1) entries or more: 0.57 vertices transformed
 * per triangle with a 32-entry FIFO (a cache-less order costs 3; the ideal grid order 0.5). */
#define STRIP 8

void terra_grid_indices(int cells, uint32_t *out) {
    const uint32_t stride = (uint32_t)cells + 1;
    size_t k = 0;
    for (int c0 = 0; c0 < cells; c0 += STRIP) {
        int c1 = c0 + STRIP < cells ? c0 + STRIP : cells;
        for (int j = 0; j < cells; j++)
            for (int i = c0; i < c1; i++) {
                uint32_t v00 = (uint32_t)j * stride + (uint32_t)i, v10 = v00 + 1;
                uint32_t v01 = v00 + stride, v11 = v01 + 1;
                /* diagonal v00-v11 in every cell; counter-clockwise seen from +y */
                out[k++] = v00, out[k++] = v01, out[k++] = v11;
                out[k++] = v00, out[k++] = v11, out[k++] = v10;
            }
    }
}

terra_status terra_grid_level_errors(const terra_source *src, const terra_grid_desc *desc, int levels, double x, double z,
                                     float *out) {
    enum { W = 16, F = 4, NF = W * F + 1 }; /* a window of W x W cells, sampled F times finer */
    terra_grid_desc d;
    terra_status st = terra_grid_desc_resolve(desc, &d);
    if (st != TERRA_OK) return st;
    if (levels < 1 || levels > TERRA_TILE_MAX_LEVEL + 1)
        return terra_fail(TERRA_E_INVALID, "grid: levels must be from 1 to %d (got %d)", TERRA_TILE_MAX_LEVEL + 1, levels);
    float *coarse = terra_alloc(sizeof(float) * ((W + 1) * (W + 1) + NF * NF));
    if (!coarse) return terra_fail(TERRA_E_NOMEM, "grid: out of memory");
    float *fine = coarse + (W + 1) * (W + 1);
    for (int L = 0; L < levels && st == TERRA_OK; L++) {
        const double side = terra_grid_tile_side(&d, L), s = side / d.cells;
        double worst = 0;
        for (int w = 0; w < 9 && st == TERRA_OK; w++) {
            /* the window at the lower corner of a tile near (x, z) */
            const int64_t tx = (int64_t)floor(x / side) + 3 * (w % 3 - 1), tz = (int64_t)floor(z / side) + 3 * (w / 3 - 1);
            const terra_grid_request c = {tx * d.cells, tz * d.cells, s, W + 1, W + 1};
            const terra_grid_request f = {c.ix0 * F, c.iz0 * F, s / F, NF, NF};
            st = terra_source_sample(src, &c, coarse, NULL);
            if (st == TERRA_OK) st = terra_source_sample(src, &f, fine, NULL);
            for (int j = 0; j < NF && st == TERRA_OK; j++)
                for (int i = 0; i < NF; i++) {
                    const int ci = i / F < W ? i / F : W - 1, cj = j / F < W ? j / F : W - 1;
                    const double fx = (double)(i - ci * F) / F, fz = (double)(j - cj * F) / F;
                    const float *h = coarse + cj * (W + 1) + ci; /* h[0] v00, h[1] v10, h[W+1] v01, h[W+2] v11 */
                    const double g = fx >= fz ? h[0] + fx * (h[1] - h[0]) + fz * (h[W + 2] - h[1])
                                              : h[0] + fz * (h[W + 1] - h[0]) + fx * (h[W + 2] - h[W + 1]);
                    worst = fmax(worst, fabs(g - fine[j * NF + i]));
                }
        }
        out[L] = (float)worst;
    }
    terra_free(coarse);
    return st;
}
