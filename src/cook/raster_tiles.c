/* The cook's finest tiles from raster samples (terra/cook_io.h, terra_cook_raster_finest).
 *
 * Each tile reads its own window of samples, a ring of one sample wider than the tile, and
 * nothing else: its four edges get their vertices from the 1-D insertion the tiled mesher uses
 * (src/tin_edge.h), run over the same samples in the same direction as the tile across the edge
 * runs it, so the two pick the same vertices without seeing each other; the normals come from
 * central differences that reach into the ring, so a vertex on an edge gets the same normal in both
 * tiles. Tiles are therefore independent and can be made in any order, on any thread. */
#include "terra/cook_io.h"
#include "terra/tin.h"
#include "../tin_edge.h"
#include "scan.h"

#include <math.h>
#include <string.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

static bool valid(float h) { return h == h; }

/* The slope dz/dplane along one axis from the samples before (m) and after (p) the vertex (0: its
 * own), one-sided where a neighbour is no-data; `step` metres between samples. */
static double slope(float m, float o, float p, double step) {
    if (valid(m) && valid(p)) return ((double)p - (double)m) / (2 * step);
    if (valid(p)) return ((double)p - (double)o) / step;
    if (valid(m)) return ((double)o - (double)m) / step;
    return 0;
}

typedef struct edges {
    int32_t *pos[4];
    size_t n[4];
} edges;

static void edges_free(edges *e) {
    for (int k = 0; k < 4; k++) terra_free(e->pos[k]);
}

/* The spacing a tile line's vertices need: the line at plane coordinate `at` is a side of tiles up
 * to some depth, and there 16-bit quantization (32767 steps a side) tells vertices apart only one
 * step or more apart (a geographic tile 45 degrees wide steps 2.0001 plane units). */
static int32_t line_spacing(const terra_cook_grid *g, int64_t at) {
    const int64_t T = (int64_t)g->tile_units;
    int d = 0;
    while (d < g->depth && d < 40 && at % (T << (d + 1)) == 0) d++;
    return (int32_t)ceil(ldexp((double)T, d) / 32767.0);
}

/* The four edges of the (T + 1)^2 samples `in` (row-major, row = plane y) of tile (tx, ty): rows 0
 * and T run along x, columns 0 and T along y, each in increasing plane coordinate, as the neighbour
 * runs them too. On a line that wider tiles quantize coarser than a sample, vertices go only where
 * every depth tells them apart (every `spacing` units of the plane, from its origin) and the samples
 * between are set on the line's segments, so the 2-D mesher adds none there; `in` is changed then. */
static terra_status edge_vertices(const terra_cook_grid *g, float *in, int T, int32_t tx, int32_t ty, double bound,
                                  edges *e) {
    const size_t W = (size_t)T + 1;
    float *start[4] = {in, in + (size_t)T * W, in, in + T};
    const size_t stride[4] = {1, 1, W, W};
    const int64_t line[4] = {(int64_t)ty * T, ((int64_t)ty + 1) * T, (int64_t)tx * T, ((int64_t)tx + 1) * T};
    const int64_t along[4] = {(int64_t)tx * T, (int64_t)tx * T, (int64_t)ty * T, (int64_t)ty * T};
    for (int k = 0; k < 4; k++) {
        const int32_t every = line_spacing(g, line[k]);
        const int32_t phase = (int32_t)(((-along[k]) % every + every) % every);
        terra_status st = terra_tin_edge_profile_spaced(start[k], stride[k], T + 1, bound, every, phase, &e->pos[k], &e->n[k]);
        if (st != TERRA_OK) return st;
        if (every == 1) continue;
        /* samples between the kept vertices onto the segments (none across no-data) */
        float *p = start[k];
        const size_t sk = stride[k];
        int32_t a = 0;
        for (size_t j = 0; j <= e->n[k]; j++) {
            const int32_t b = j < e->n[k] ? e->pos[k][j] : T;
            bool ground = true;
            for (int32_t i = a; i <= b && ground; i++) ground = valid(p[(size_t)i * sk]);
            for (int32_t i = a + 1; ground && i < b; i++)
                p[(size_t)i * sk] = (float)(p[(size_t)a * sk] + ((double)p[(size_t)b * sk] - p[(size_t)a * sk]) * (i - a) / (b - a));
            a = b;
        }
    }
    return TERRA_OK;
}

/* Copies the tin mesh's finest level into `out` in plane units: only the vertices its triangles use,
 * triangles turned counter-clockwise in the plane (the mesher's turn that way with rows flipped;
 * here rows are plane y), normals from the ring window `ring` ((T + 3)^2 samples). */
static terra_status to_cook_mesh(const terra_cook_raster_tiles *rt, const terra_tin_mesh *tm, const float *ring, int T,
                                 int32_t tx, int32_t ty, terra_cook_mesh *out) {
    const terra_cook_grid *g = rt->grid;
    const terra_tin_level *L = &tm->levels[tm->level_count - 1];
    uint32_t *remap = terra_alloc(tm->vertex_count * sizeof *remap + 1);
    if (!remap) return terra_fail(TERRA_E_NOMEM, "cook: out of memory for tile %d,%d", (int)tx, (int)ty);
    memset(remap, 0xff, tm->vertex_count * sizeof *remap);
    uint32_t nv = 0;
    for (size_t i = 0; i < 3 * L->triangle_count; i++)
        if (remap[L->triangles[i]] == UINT32_MAX) remap[L->triangles[i]] = nv++;
    terra_status st = terra_cook_mesh_reserve(out, nv, (uint32_t)L->triangle_count, true, false);
    if (st != TERRA_OK) {
        terra_free(remap);
        return st;
    }
    const double x0 = (double)tx * T, y0 = (double)ty * T;
    const size_t R = (size_t)T + 3;
    for (size_t i = 0; i < tm->vertex_count; i++) {
        uint32_t k = remap[i];
        if (k == UINT32_MAX) continue;
        const int32_t c = tm->xy[2 * i], r = tm->xy[2 * i + 1];
        out->xy[2 * k] = x0 + c;
        out->xy[2 * k + 1] = y0 + r;
        out->z[k] = tm->z[i];
        /* metres between samples along x and y: the grid's unit, or degrees on the ellipsoid */
        double sx = g->unit[0], sy = g->unit[1];
        if (g->frame == TERRA_FRAME_GEOGRAPHIC) {
            double lat = (g->origin[1] + (y0 + r) * g->unit[1]) * DEG2RAD;
            sx = g->unit[0] * DEG2RAD * TERRA_WGS84_A * fmax(cos(lat), 1e-6);
            sy = g->unit[1] * DEG2RAD * TERRA_WGS84_A;
        }
        const float *o = ring + (size_t)(r + 1) * R + (size_t)(c + 1);
        double nx = -slope(o[-1], o[0], o[1], sx), ny = -slope(o[-(ptrdiff_t)R], o[0], o[R], sy);
        double len = sqrt(nx * nx + ny * ny + 1);
        out->normal[3 * k] = (float)(nx / len);
        out->normal[3 * k + 1] = (float)(ny / len);
        out->normal[3 * k + 2] = (float)(1 / len);
    }
    for (size_t t = 0; t < L->triangle_count; t++) {
        out->tri[3 * t] = remap[L->triangles[3 * t]];
        out->tri[3 * t + 1] = remap[L->triangles[3 * t + 2]];
        out->tri[3 * t + 2] = remap[L->triangles[3 * t + 1]];
    }
    out->vertex_count = nv;
    out->triangle_count = (uint32_t)L->triangle_count;
    terra_free(remap);
    return TERRA_OK;
}

terra_status terra_cook_raster_finest(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error) {
    const terra_cook_raster_tiles *rt = user;
    const double S = rt->grid->tile_units;
    *error = 0;
    out->vertex_count = out->triangle_count = 0;
    if (!(S >= 2 && S + 1 < TERRA_TIN_MAX_SIDE && S == floor(S)))
        return terra_fail(TERRA_E_INVALID, "cook: a raster tile's side must be 2..%d samples, not %g",
                          TERRA_TIN_MAX_SIDE - 2, S);
    const int T = (int)S;
    const size_t R = (size_t)T + 3, W = (size_t)T + 1;
    float *ring = terra_alloc(R * R * sizeof *ring), *in = terra_alloc(W * W * sizeof *in);
    int32_t *seeds = NULL;
    edges e = {0};
    terra_tin_mesh tm = {0};
    terra_status st = ring && in ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "cook: out of memory for tile %d,%d", (int)tx, (int)ty);
    if (st == TERRA_OK)
        st = rt->window(rt->window_user, rt->grid, (int64_t)tx * T - 1, (int64_t)ty * T - 1, (int)R, (int)R, ring);
    size_t valid_count = 0;
    if (st == TERRA_OK) {
        for (size_t j = 0; j < W; j++) {
            memcpy(in + j * W, ring + (j + 1) * R + 1, W * sizeof *in);
            for (size_t i = 0; i < W; i++) valid_count += valid(in[j * W + i]);
        }
        if (valid_count < 3) goto done; /* no ground: not a triangle to make */
        st = edge_vertices(rt->grid, in, T, tx, ty, rt->max_error * TERRA_TIN_BORDER_MARGIN, &e);
    }
    if (st == TERRA_OK) {
        size_t ns = e.n[0] + e.n[1] + e.n[2] + e.n[3], k = 0;
        seeds = terra_alloc(2 * ns * sizeof *seeds + 1);
        if (!seeds) st = terra_fail(TERRA_E_NOMEM, "cook: out of memory for tile %d,%d", (int)tx, (int)ty);
        for (size_t i = 0; seeds && i < e.n[0]; i++) seeds[2 * k] = e.pos[0][i], seeds[2 * k + 1] = 0, k++;
        for (size_t i = 0; seeds && i < e.n[1]; i++) seeds[2 * k] = e.pos[1][i], seeds[2 * k + 1] = T, k++;
        for (size_t i = 0; seeds && i < e.n[2]; i++) seeds[2 * k] = 0, seeds[2 * k + 1] = e.pos[2][i], k++;
        for (size_t i = 0; seeds && i < e.n[3]; i++) seeds[2 * k] = T, seeds[2 * k + 1] = e.pos[3][i], k++;
        if (seeds) {
            terra_tin_desc td = {.width = T + 1, .height = T + 1, .heights = in, .max_error = rt->max_error,
                                 .seed_xy = seeds, .seed_count = ns};
            st = terra_tin_build(&td, &tm);
        }
    }
    if (st == TERRA_OK) st = to_cook_mesh(rt, &tm, ring, T, tx, ty, out);
    if (st == TERRA_OK) {
        /* The mesher keeps every sample within the bound but does not say how far within: measure. */
        const terra_tin_level *L = &tm.levels[tm.level_count - 1];
        terra_tin_check_result cr;
        /* against the samples as read (edge_vertices may have moved some on a side onto it) */
        for (size_t j = 0; j < W; j++) memcpy(in + j * W, ring + (j + 1) * R + 1, W * sizeof *in);
        st = terra_tin_check(in, T + 1, T + 1, tm.xy, tm.z, tm.vertex_count, L->triangles, L->triangle_count, NULL, &cr);
        *error = cr.max_error;
    }
done:
    terra_tin_mesh_free(&tm);
    edges_free(&e);
    terra_free(seeds);
    terra_free(ring);
    terra_free(in);
    return st;
}

/* ---- distance to the samples ------------------------------------------------------------------- */

/* Where (tx, ty) sits in the list of finest tiles, through an open-addressed table of `mask` + 1
 * slots (-1: not listed). */
static int64_t leaf_slot(const int32_t *finest, const int64_t *table, size_t mask, int32_t tx, int32_t ty, bool *found) {
    uint64_t h = ((uint64_t)(uint32_t)tx * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)ty * 0xC2B2AE3D27D4EB4Full);
    for (size_t i = (size_t)(h >> 17) & mask;; i = (i + 1) & mask) {
        int64_t e = table[i];
        if (e < 0 || (finest[2 * e] == tx && finest[2 * e + 1] == ty)) {
            *found = e >= 0;
            return (int64_t)i;
        }
    }
}

terra_status terra_cook_leaf_triangles(const terra_cook_mesh *mesh, double S, const int32_t *finest, size_t n,
                                       double slack, size_t **start_out, uint32_t **list_out) {
    const size_t tn = mesh->triangle_count;
    size_t slots = 16;
    while (slots < 2 * n) slots *= 2;
    int64_t *table = terra_alloc(slots * sizeof *table);
    size_t *start = terra_calloc(n + 1, sizeof *start);
    uint32_t *list = NULL;
    terra_status st = table && start ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "cook: out of memory measuring a tile");
    if (st == TERRA_OK) {
        memset(table, 0xff, slots * sizeof *table);
        for (size_t i = 0; i < n; i++) {
            bool found;
            int64_t s = leaf_slot(finest, table, slots - 1, finest[2 * i], finest[2 * i + 1], &found);
            if (!found) table[s] = (int64_t)i;
        }
    }
    /* Counted, then placed. */
    for (int pass = 0; st == TERRA_OK && pass < 2; pass++) {
        for (size_t t = 0; t < tn; t++) {
            const uint32_t *c = mesh->tri + 3 * t;
            double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
            for (int k = 0; k < 3; k++)
                for (int j = 0; j < 2; j++) {
                    const double p = mesh->xy[2 * (size_t)c[k] + j];
                    lo[j] = fmin(lo[j], p - slack), hi[j] = fmax(hi[j], p + slack);
                }
            const int64_t i0 = (int64_t)ceil(lo[0] / S - 1), i1 = (int64_t)floor(hi[0] / S);
            const int64_t j0 = (int64_t)ceil(lo[1] / S - 1), j1 = (int64_t)floor(hi[1] / S);
            for (int64_t j = j0; j <= j1; j++)
                for (int64_t i = i0; i <= i1; i++) {
                    bool found;
                    int64_t s = leaf_slot(finest, table, slots - 1, (int32_t)i, (int32_t)j, &found);
                    if (!found) continue;
                    size_t leaf = (size_t)table[s];
                    if (pass == 0) start[leaf + 1]++;
                    else list[start[leaf]++] = (uint32_t)t;
                }
        }
        if (pass == 0) {
            for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
            if (!(list = terra_alloc(start[n] * sizeof *list + 1)))
                st = terra_fail(TERRA_E_NOMEM, "cook: out of memory measuring a tile");
        }
    }
    /* Placing moved start[i] to where leaf i's list ends: shift so that start[i] is its beginning. */
    if (st == TERRA_OK) {
        memmove(start + 1, start, n * sizeof *start);
        start[0] = 0;
        *start_out = start, *list_out = list;
    } else {
        terra_free(start);
        terra_free(list);
    }
    terra_free(table);
    return st;
}

/* terra_cook_raster_distance, or with `rim` the measure of a decoded tile: samples under its
 * triangles (slack 0), then those within `slack` of them that none covers (cook_scan_rim). */
static terra_status plane_distance(const terra_cook_raster_tiles *rt, const terra_cook_mesh *mesh, const int32_t *finest,
                                   size_t n, double slack, double limit, bool rim, double *out) {
    const double S = rt->grid->tile_units;
    const int W = (int)S + 1;
    *out = 0;
    if (!n || !mesh->triangle_count) return TERRA_OK;
    size_t *start = NULL;
    uint32_t *list = NULL;
    float *win = terra_alloc((size_t)W * (size_t)W * sizeof *win);
    uint8_t *mark = rim ? terra_alloc((size_t)W * (size_t)W) : NULL;
    terra_status st = win && (mark || !rim) ? terra_cook_leaf_triangles(mesh, S, finest, n, slack, &start, &list)
                                            : terra_fail(TERRA_E_NOMEM, "cook: out of memory measuring a tile");
    double worst = 0;
    for (size_t i = 0; st == TERRA_OK && i < n && worst <= limit; i++) {
        if (start[i] == start[i + 1]) continue;
        const int64_t x0 = (int64_t)finest[2 * i] * (int64_t)S, y0 = (int64_t)finest[2 * i + 1] * (int64_t)S;
        if ((st = rt->window(rt->window_user, rt->grid, x0, y0, W, W, win)) != TERRA_OK) break;
        if (rim) memset(mark, 0, (size_t)W * (size_t)W);
        for (size_t k = start[i]; k < start[i + 1]; k++) {
            const uint32_t *c = mesh->tri + 3 * (size_t)list[k];
            const float z[3] = {mesh->z[c[0]], mesh->z[c[1]], mesh->z[c[2]]};
            worst = cook_scan_triangle(mesh->xy + 2 * (size_t)c[0], mesh->xy + 2 * (size_t)c[1],
                                       mesh->xy + 2 * (size_t)c[2], z, win, x0, y0, W, W, rim ? 0 : slack, worst, limit,
                                       mark);
        }
        for (size_t k = start[i]; rim && k < start[i + 1]; k++) {
            const uint32_t *c = mesh->tri + 3 * (size_t)list[k];
            const float z[3] = {mesh->z[c[0]], mesh->z[c[1]], mesh->z[c[2]]};
            worst = cook_scan_rim(mesh->xy + 2 * (size_t)c[0], mesh->xy + 2 * (size_t)c[1], mesh->xy + 2 * (size_t)c[2], z,
                                  win, mark, x0, y0, W, W, slack, worst);
        }
    }
    *out = worst;
    terra_free(start);
    terra_free(win);
    terra_free(mark);
    terra_free(list);
    return st;
}

terra_status terra_cook_raster_distance(void *user, const terra_cook_mesh *mesh, const int32_t *finest, size_t n,
                                        double slack, double limit, double *out) {
    return plane_distance(user, mesh, finest, n, slack, limit, false, out);
}

terra_status terra_cook_decoded_distance(const terra_cook_raster_tiles *rt, const terra_cook_mesh *mesh,
                                         const int32_t *finest, size_t n, double slack, double *out) {
    return plane_distance(rt, mesh, finest, n, slack, INFINITY, true, out);
}
