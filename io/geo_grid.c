/* libterra-io: a geographic archive's ground sampled into a terra_geo_grid (planet.h), to lay over
 * a planet where it belongs. */
#include "terra/archive_io.h"
#include "terra/planet.h"
#include "terra/qmesh.h"

#include "archive_rules.h"
#include "json.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Writes every sample of the grid inside the triangle (barycentric, edges included) whose mark is
 * 0 or this pass's. */
static void raster_triangle(double v[3][3], float *heights, uint8_t *mark, uint8_t pass, int W, int H, const double *b) {
    const double dx = (b[2] - b[0]) / (W - 1), dy = (b[3] - b[1]) / (H - 1);
    const double area = (v[1][0] - v[0][0]) * (v[2][1] - v[0][1]) - (v[2][0] - v[0][0]) * (v[1][1] - v[0][1]);
    if (!(fabs(area) > 0)) return;
    double lo_x = fmin(v[0][0], fmin(v[1][0], v[2][0])), hi_x = fmax(v[0][0], fmax(v[1][0], v[2][0]));
    double lo_y = fmin(v[0][1], fmin(v[1][1], v[2][1])), hi_y = fmax(v[0][1], fmax(v[1][1], v[2][1]));
    const int i0 = (int)fmax(ceil((lo_x - b[0]) / dx - 1e-9), 0), i1 = (int)fmin(floor((hi_x - b[0]) / dx + 1e-9), W - 1);
    const int j0 = (int)fmax(ceil((lo_y - b[1]) / dy - 1e-9), 0), j1 = (int)fmin(floor((hi_y - b[1]) / dy + 1e-9), H - 1);
    const double eps = -1e-9;
    for (int j = j0; j <= j1; j++)
        for (int i = i0; i <= i1; i++) {
            const size_t k = (size_t)j * W + i;
            if (mark[k] && mark[k] != pass) continue;
            const double x = b[0] + i * dx, y = b[1] + j * dy;
            const double l1 = ((x - v[0][0]) * (v[2][1] - v[0][1]) - (v[2][0] - v[0][0]) * (y - v[0][1])) / area;
            const double l2 = ((v[1][0] - v[0][0]) * (y - v[0][1]) - (x - v[0][0]) * (v[1][1] - v[0][1])) / area;
            const double l0 = 1 - l1 - l2;
            if (l0 < eps || l1 < eps || l2 < eps) continue;
            heights[k] = (float)(l0 * v[0][2] + l1 * v[1][2] + l2 * v[2][2]);
            mark[k] = pass;
        }
}

/* The cook's samples along a finest tile's side (256 when unsaid). */
static int tile_units_of(const terra_archive *a) {
    cJSON *m = terra_json_parse(terra_archive_get_info(a)->metadata);
    const cJSON *u = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "source"), "cook"), "tile_units");
    const int units = cJSON_IsNumber(u) && u->valuedouble >= 2 && u->valuedouble <= 65536 ? (int)u->valuedouble : 256;
    cJSON_Delete(m);
    return units;
}

terra_status terra_geo_grid_from_archive(const terra_archive *a, int max_side, terra_geo_grid **out, int *level_out) {
    *out = NULL;
    const char *path = terra_archive_path(a);
    const terra_archive_info *info = terra_archive_get_info(a);
    if (info->frame != TERRA_FRAME_GEOGRAPHIC)
        return terra_fail(TERRA_E_INVALID, "%s: a %s-frame archive; only geographic archives (terra cook's or terra bake --frame "
                          "geographic) lie on a planet", path, terra_frame_name(info->frame));
    if (max_side == 0) max_side = 2048;
    if (max_side < 2 || max_side > 16384) return terra_fail(TERRA_E_INVALID, "geo grid: max_side must be from 2 to 16384 (got %d)", max_side);
    terra_archive_layout layout; /* the rules every reader applies: it holds tiles, each decoded by them */
    terra_status vst = terra_archive_validate(a, NULL, NULL, &layout);
    if (vst) return vst;
    /* the deepest level, and its tiles' union (the corners of its smallest and largest x, y) */
    const int deepest = layout.max_level;
    const terra_archive_level *d = &layout.levels[deepest];
    double tiles_b[4], ignore;
    terra_qmesh_geographic_tile_bounds(deepest, d->x0, d->y0, &tiles_b[0], &tiles_b[1], &ignore, &ignore);
    terra_qmesh_geographic_tile_bounds(deepest, d->x1, d->y1, &ignore, &ignore, &tiles_b[2], &tiles_b[3]);
    double b[4];
    const int units = tile_units_of(a);
    memcpy(b, layout.has_bounds ? layout.bounds : tiles_b, sizeof b);
    b[0] = fmax(b[0], -180), b[1] = fmax(b[1], -90), b[2] = fmin(b[2], 180), b[3] = fmin(b[3], 90);
    const double step = fmax(180.0 / ldexp(1, deepest) / units, fmax(b[2] - b[0], b[3] - b[1]) / (max_side - 1));
    const int W = (int)ceil((b[2] - b[0]) / step - 1e-9) + 1, H = (int)ceil((b[3] - b[1]) / step - 1e-9) + 1;
    const size_t n = (size_t)W * (size_t)H;
    float *heights = terra_alloc(n * sizeof *heights);
    uint8_t *mark = terra_calloc(n, 1);
    if (!heights || !mark) {
        terra_free(heights);
        terra_free(mark);
        return terra_fail(TERRA_E_NOMEM, "geo grid: out of memory for %d x %d samples", W, H);
    }
    for (size_t k = 0; k < n; k++) heights[k] = NAN;
    /* the deepest level first; coarser ones fill only what it left */
    terra_status st = TERRA_OK;
    size_t filled = 0;
    for (int l = deepest; l >= 0 && st == TERRA_OK && filled < n; l--) {
        const uint8_t pass = (uint8_t)(deepest - l + 1);
        arc_block blk = {0};
        for (uint64_t i = 0; i < info->tile_count && st == TERRA_OK; i++) {
            terra_archive_entry e;
            st = arc_block_entry(a, &blk, i, &e);
            if (st != TERRA_OK || terra_tile_key_level(e.key) != l) continue;
            double tw, ts, te, tn;
            terra_qmesh_geographic_tile_bounds(l, terra_tile_key_x(e.key), terra_tile_key_y(e.key), &tw, &ts, &te, &tn);
            if (te < b[0] || tw > b[2] || tn < b[1] || ts > b[3]) continue;
            terra_qmesh q;
            if ((st = terra_archive_check_tile(a, &e, &layout.rules, &q, NULL)) != TERRA_OK) break;
            const double hl = q.header.min_height, hs = (q.header.max_height - q.header.min_height) / 32767.0;
            for (uint32_t t = 0; t < q.triangle_count; t++) {
                double v[3][3];
                for (int c = 0; c < 3; c++) {
                    const uint32_t k = q.indices[3 * t + c];
                    v[c][0] = tw + (te - tw) * q.u[k] / 32767.0;
                    v[c][1] = ts + (tn - ts) * q.v[k] / 32767.0;
                    v[c][2] = hl + hs * q.h[k];
                }
                raster_triangle(v, heights, mark, pass, W, H, b);
            }
            terra_qmesh_free(&q);
        }
        filled = 0;
        for (size_t k = 0; k < n; k++) filled += mark[k] != 0;
    }
    /* a sample no tile holds beside ones that are takes their mean, four times over: the tiles'
     * lattice can start a fraction of a step inside the bounds (the cook's samples lie on its own
     * lattice, not on the input's edge), and the blend into the planet starts from the border */
    for (int round = 0; round < 4 && st == TERRA_OK && filled < n; round++) {
        memset(mark, 0, n);
        for (int j = 0; j < H; j++)
            for (int i = 0; i < W; i++) {
                const size_t k = (size_t)j * W + i;
                if (heights[k] == heights[k]) continue;
                double sum = 0;
                int c = 0;
                const int nb[4][2] = {{i - 1, j}, {i + 1, j}, {i, j - 1}, {i, j + 1}};
                for (int q = 0; q < 4; q++) {
                    if (nb[q][0] < 0 || nb[q][0] >= W || nb[q][1] < 0 || nb[q][1] >= H) continue;
                    const size_t m = (size_t)nb[q][1] * W + nb[q][0];
                    if (heights[m] == heights[m] && !mark[m]) sum += heights[m], c++;
                }
                if (c) heights[k] = (float)(sum / c), mark[k] = 1, filled++;
            }
    }
    terra_free(mark);
    if (st == TERRA_OK)
        st = terra_geo_grid_create(&(terra_geo_grid_desc){.bounds = {b[0], b[1], b[2], b[3]}, .width = W, .height = H,
                                                          .heights = heights},
                                   out);
    terra_free(heights);
    if (st == TERRA_OK && level_out) *level_out = deepest;
    return st;
}
