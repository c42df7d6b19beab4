/* The cook's finest raster tiles and its tile encoder: random meshes through terra_cook_encode and
 * back through the quantized-mesh decoder; raster tiles that agree with their neighbours. */
#include "check.h"
#include "terra/cook_io.h"
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

static void random_grid(unsigned long long *s, terra_cook_grid *g, int *d, int32_t *tx, int32_t *ty) {
    memset(g, 0, sizeof *g);
    if (test_rand_u64(s) & 1) {
        g->frame = TERRA_FRAME_LOCAL;
        g->origin[0] = test_rand_range(s, -1e4, 1e4), g->origin[1] = test_rand_range(s, -1e4, 1e4);
        g->unit[0] = g->unit[1] = test_rand_range(s, 0.1, 100);
        g->tile_units = 1 + (double)(test_rand_u64(s) % 512);
        g->depth = (int)(test_rand_u64(s) % 6);
        *d = (int)(test_rand_u64(s) % (unsigned)(g->depth + 1));
        *tx = (int32_t)(test_rand_u64(s) % 64) - 32, *ty = (int32_t)(test_rand_u64(s) % 64) - 32;
    } else {
        g->frame = TERRA_FRAME_GEOGRAPHIC;
        g->origin[0] = -180, g->origin[1] = -90;
        g->tile_units = 256;
        g->depth = 1 + (int)(test_rand_u64(s) % 16);
        g->unit[0] = g->unit[1] = 180.0 / ldexp(256, g->depth);
        *d = (int)(test_rand_u64(s) % (unsigned)(g->depth + 1));
        int zoom = g->depth - *d;
        *tx = (int32_t)(test_rand_u64(s) % (2ull << zoom)), *ty = (int32_t)(test_rand_u64(s) % (1ull << zoom));
    }
}

/* The normal the encoder should write for plane normal n at plane point (x, y), in the frame's axes. */
static void frame_normal(const terra_cook_grid *g, double x, double y, const float *n, double out[3]) {
    if (g->frame == TERRA_FRAME_LOCAL) {
        out[0] = n[0], out[1] = n[2], out[2] = n[1];
        return;
    }
    double lon = (g->origin[0] + x * g->unit[0]) * DEG2RAD, lat = (g->origin[1] + y * g->unit[1]) * DEG2RAD, up[3];
    double e[3] = {-sin(lon), cos(lon), 0}, no[3] = {-sin(lat) * cos(lon), -sin(lat) * sin(lon), cos(lat)};
    terra_qmesh_geodetic_up(lon, lat, up);
    for (int k = 0; k < 3; k++) out[k] = n[0] * e[k] + n[1] * no[k] + n[2] * up[k];
}

static void test_encode_round_trip(void) {
    unsigned long long s = 13;
    for (int iter = 0; iter < 400; iter++) {
        terra_cook_grid g;
        int d;
        int32_t tx, ty;
        random_grid(&s, &g, &d, &tx, &ty);
        double rect[4];
        terra_cook_tile_rect(&g, d, tx, ty, rect);
        const uint32_t nv = 3 + (uint32_t)(test_rand_u64(&s) % 300);
        const uint32_t nt = nv + (uint32_t)(test_rand_u64(&s) % 200);
        const bool normals = test_rand_u64(&s) & 1, materials = test_rand_u64(&s) & 1;
        terra_cook_mesh m = {0};
        CHECK(terra_cook_mesh_reserve(&m, nv, nt, normals, materials) == TERRA_OK);
        const double zlo = test_rand_range(&s, -500, 3000), zr = iter % 7 ? test_rand_range(&s, 0, 2000) : 0;
        for (uint32_t i = 0; i < nv; i++) {
            double fx = test_rand_range(&s, 0.001, 0.999), fy = test_rand_range(&s, 0.001, 0.999);
            double x = rect[0] + fx * (rect[2] - rect[0]), y = rect[1] + fy * (rect[3] - rect[1]);
            switch (test_rand_u64(&s) % 10) { /* a fifth on the rect's sides, some on its corners */
            case 0: x = rect[0]; break;
            case 1: x = rect[2]; break;
            case 2: y = rect[1]; break;
            case 3: y = rect[3]; break;
            case 4:
                if (i % 3 == 0) x = rect[test_rand_u64(&s) & 1 ? 0 : 2], y = rect[test_rand_u64(&s) & 1 ? 1 : 3];
                break;
            default: break;
            }
            m.xy[2 * i] = x, m.xy[2 * i + 1] = y;
            m.z[i] = (float)(zlo + zr * test_rand_unit(&s));
            if (normals) {
                double a = test_rand_range(&s, -0.8, 0.8), b = test_rand_range(&s, -0.8, 0.8), l = sqrt(a * a + b * b + 1);
                m.normal[3 * i] = (float)(a / l), m.normal[3 * i + 1] = (float)(b / l), m.normal[3 * i + 2] = (float)(1 / l);
            }
            if (materials) m.material[i] = (uint16_t)(test_rand_u64(&s) % 40);
        }
        for (uint32_t t = 0; t < nt; t++) {
            uint32_t a = t < nv ? t : (uint32_t)(test_rand_u64(&s) % nv);
            uint32_t b = (a + 1 + (uint32_t)(test_rand_u64(&s) % (nv - 1))) % nv, c = (a + 1) % nv;
            if (c == b) c = (b + 1) % nv == a ? (a + nv - 1) % nv : (b + 1) % nv;
            m.tri[3 * t] = a, m.tri[3 * t + 1] = b, m.tri[3 * t + 2] = c;
        }
        m.vertex_count = nv, m.triangle_count = nt;
        float lo = INFINITY, hi = -INFINITY;
        for (uint32_t i = 0; i < nv; i++) lo = fminf(lo, m.z[i]), hi = fmaxf(hi, m.z[i]);
        terra_cook_tile tile = {.depth = d, .tx = tx, .ty = ty, .mesh = &m, .min_height = lo, .max_height = hi};
        uint8_t *bytes = NULL;
        size_t size = 0;
        terra_qmesh q;
        CHECK(terra_cook_encode(&g, &tile, &bytes, &size) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_qmesh_decode(bytes, size, NULL, &q) == TERRA_OK, "%s", terra_last_error());
        CHECK(q.vertex_count == nv && q.triangle_count == nt, "counts %u %u", q.vertex_count, q.triangle_count);
        const bool geo = g.frame == TERRA_FRAME_GEOGRAPHIC;
        /* each original vertex is the decoded one its triangles name (local tiles turn the other way) */
        uint32_t *map = malloc(nv * sizeof *map);
        memset(map, 0xff, nv * sizeof *map);
        int bad_map = 0;
        for (uint32_t t = 0; t < nt && q.triangle_count == nt; t++)
            for (int k = 0; k < 3; k++) {
                uint32_t o = m.tri[3 * t + k], dk = q.indices[3 * t + (geo || k == 0 ? k : 3 - k)];
                if (map[o] == UINT32_MAX) map[o] = dk;
                bad_map += map[o] != dk;
            }
        CHECK(bad_map == 0, "triangles name %d vertices inconsistently", bad_map);
        const double hs = (q.header.max_height - q.header.min_height) / 32767.0;
        CHECK(q.header.min_height == lo && q.header.max_height == hi, "header heights %g %g vs %g %g",
              q.header.min_height, q.header.max_height, lo, hi);
        int far = 0, inexact = 0, normal_off = 0, mat_off = 0;
        for (uint32_t i = 0; i < nv && !bad_map && q.vertex_count == nv; i++) {
            uint32_t k = map[i];
            const double x = m.xy[2 * i], y = m.xy[2 * i + 1];
            double dx = rect[0] + q.u[k] / 32767.0 * (rect[2] - rect[0]), dy = rect[1] + q.v[k] / 32767.0 * (rect[3] - rect[1]);
            double dz = q.header.min_height + q.h[k] * hs;
            far += fabs(dx - x) > 0.5 * (rect[2] - rect[0]) / 32767.0 * (1 + 1e-9) ||
                   fabs(dy - y) > 0.5 * (rect[3] - rect[1]) / 32767.0 * (1 + 1e-9) || fabs(dz - m.z[i]) > 0.5 * hs + 1e-3;
            inexact += (x == rect[0]) != (q.u[k] == 0) || (x == rect[2]) != (q.u[k] == 32767) ||
                       (y == rect[1]) != (q.v[k] == 0) || (y == rect[3]) != (q.v[k] == 32767);
            if (normals) {
                double want[3], got[3];
                frame_normal(&g, x, y, m.normal + 3 * i, want);
                terra_qmesh_oct_decode(q.normals + 2 * k, got);
                normal_off += want[0] * got[0] + want[1] * got[1] + want[2] * got[2] < 0.999;
            }
            if (materials) mat_off += !q.materials || q.materials[k] != m.material[i];
        }
        CHECK(far == 0, "%d vertices decode more than half a step away (iter %d)", far, iter);
        CHECK(inexact == 0, "%d vertices on / off the rect decode otherwise (iter %d)", inexact, iter);
        CHECK(normal_off == 0, "%d normals off (iter %d)", normal_off, iter);
        CHECK((q.extensions & TERRA_QMESH_HAS_NORMALS) && mat_off == 0 && !!materials == !!q.materials,
              "%d materials off (iter %d)", mat_off, iter);
        /* edge lists: exactly the vertices on each side, in increasing v (west, east) or u */
        for (int side = 0; side < 4 && !bad_map; side++) {
            uint32_t want = 0;
            for (uint32_t i = 0; i < nv; i++) {
                const double x = m.xy[2 * i], y = m.xy[2 * i + 1];
                want += side == TERRA_QMESH_WEST ? x == rect[0] : side == TERRA_QMESH_EAST ? x == rect[2]
                      : side == TERRA_QMESH_SOUTH ? y == rect[1] : y == rect[3];
            }
            CHECK(q.edge_count[side] == want, "side %d lists %u of %u", side, q.edge_count[side], want);
            int wrong = 0;
            for (uint32_t e = 0; e < q.edge_count[side]; e++) {
                uint32_t k = q.edges[side][e];
                bool vertical = side == TERRA_QMESH_WEST || side == TERRA_QMESH_EAST;
                uint16_t on = side == TERRA_QMESH_WEST ? q.u[k] : side == TERRA_QMESH_EAST ? 32767 - q.u[k]
                            : side == TERRA_QMESH_SOUTH ? q.v[k] : 32767 - q.v[k];
                wrong += on != 0;
                if (e) {
                    uint32_t p = q.edges[side][e - 1];
                    wrong += vertical ? q.v[p] > q.v[k] : q.u[p] > q.u[k];
                }
            }
            CHECK(wrong == 0, "side %d: %d entries off the side or out of order", side, wrong);
        }
        const terra_qmesh_header *H = &q.header;
        bool finite = isfinite(H->sphere_radius) && H->sphere_radius >= 0;
        for (int k = 0; k < 3; k++) finite &= isfinite(H->center[k]) && isfinite(H->sphere_center[k]) && isfinite(H->horizon[k]);
        CHECK(finite, "header not finite (iter %d)", iter);
        if (geo) {
            double r = sqrt(H->center[0] * H->center[0] + H->center[1] * H->center[1] + H->center[2] * H->center[2]);
            CHECK(r > TERRA_WGS84_B - 1e4 && r < TERRA_WGS84_A + 1e4, "geographic centre %g m from the Earth's", r);
        }
        free(map);
        terra_qmesh_free(&q);
        terra_free(bytes);
        terra_cook_mesh_free(&m);
    }
}

/* ---- finest tiles from a raster ------------------------------------------------------------------- */

/* Hills with a ridge and fine noise, a hole of no-data in the middle. */
static void hills(float *h, int w, int ht, unsigned long long seed) {
    unsigned long long s = seed;
    for (int y = 0; y < ht; y++)
        for (int x = 0; x < w; x++) {
            double v = 300 * sin(x * 0.013) * cos(y * 0.017) + 80 * sin(x * 0.071 + y * 0.05) + 2 * test_rand_unit(&s);
            if (abs(x - y) < 3) v += 40; /* a ridge */
            h[(size_t)y * w + x] = (float)v;
        }
    for (int y = ht / 2 - 20; y < ht / 2 + 15; y++)
        for (int x = w / 3; x < w / 3 + 30; x++) h[(size_t)y * w + x] = NAN;
}

static double signed_area(const terra_cook_mesh *m, uint32_t t) {
    const double *a = m->xy + 2 * m->tri[3 * t], *b = m->xy + 2 * m->tri[3 * t + 1], *c = m->xy + 2 * m->tri[3 * t + 2];
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/* The vertices of `m` on the line x = at (axis 0) or y = at (axis 1), sorted along it. */
static size_t on_line(const terra_cook_mesh *m, int axis, double at, uint32_t *out) {
    size_t n = 0;
    for (uint32_t i = 0; i < m->vertex_count; i++)
        if (m->xy[2 * i + axis] == at) out[n++] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort along the other axis */
        for (size_t j = i; j > 0 && m->xy[2 * out[j - 1] + 1 - axis] > m->xy[2 * out[j] + 1 - axis]; j--) {
            uint32_t t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

static void test_finest_tiles(void) {
    const int W = 301, H = 250, S = 64;
    terra_raster r = {.width = W, .height = H, .spacing_x = 5, .spacing_y = 5};
    r.heights = malloc((size_t)W * H * sizeof(float));
    hills(r.heights, W, H, 5);
    terra_cook_raster_window win = {&r};
    terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {5, 5}, .tile_units = S, .depth = 3};
    const int nx = (W - 2) / S + 1, ny = (H - 2) / S + 1;
    const double bound = 0.75;
    terra_cook_raster_tiles rt = {.grid = &g, .max_error = bound, .window = terra_cook_raster_window_read, .window_user = &win};
    terra_cook_mesh *m = calloc((size_t)nx * ny, sizeof *m);
    float *samples = malloc((size_t)(S + 1) * (S + 1) * sizeof(float));
    for (int ty = 0; ty < ny; ty++)
        for (int tx = 0; tx < nx; tx++) {
            terra_cook_mesh *t = &m[ty * nx + tx];
            double err = -1;
            CHECK(terra_cook_raster_finest(&rt, tx, ty, t, &err) == TERRA_OK, "%s", terra_last_error());
            double rect[4];
            terra_cook_tile_rect(&g, 0, tx, ty, rect);
            int cw = 0, outside = 0, nonint = 0;
            for (uint32_t k = 0; k < t->triangle_count; k++) cw += !(signed_area(t, k) > 0);
            for (uint32_t i = 0; i < t->vertex_count; i++) {
                double x = t->xy[2 * i], y = t->xy[2 * i + 1];
                outside += x < rect[0] || x > rect[2] || y < rect[1] || y > rect[3];
                nonint += x != floor(x) || y != floor(y) || !(t->z[i] == t->z[i]);
            }
            CHECK(cw == 0 && outside == 0 && nonint == 0, "tile %d,%d: %d triangles not counter-clockwise, %d vertices "
                  "outside, %d off the samples", tx, ty, cw, outside, nonint);
            /* every sample within the bound, no hole covered: the mesher's own check on the samples */
            const terra_cook_raster_window *wp = &win;
            CHECK(terra_cook_raster_window_read((void *)wp, &g, (int64_t)tx * S, (int64_t)ty * S, S + 1, S + 1, samples) == TERRA_OK);
            int32_t *xy = malloc(2 * (size_t)t->vertex_count * sizeof *xy + 8);
            for (uint32_t i = 0; i < t->vertex_count; i++)
                xy[2 * i] = (int32_t)(t->xy[2 * i] - rect[0]), xy[2 * i + 1] = (int32_t)(t->xy[2 * i + 1] - rect[1]);
            /* the checker expects the mesher's turn (counter-clockwise with rows flipped): turn back */
            uint32_t *tri = malloc(3 * (size_t)t->triangle_count * sizeof *tri + 8);
            for (uint32_t k = 0; k < t->triangle_count; k++)
                tri[3 * k] = t->tri[3 * k], tri[3 * k + 1] = t->tri[3 * k + 2], tri[3 * k + 2] = t->tri[3 * k + 1];
            terra_tin_check_result cr;
            CHECK(terra_tin_check(samples, S + 1, S + 1, xy, t->z, t->vertex_count, tri, t->triangle_count, NULL, &cr) == TERRA_OK);
            CHECK(cr.max_error <= bound && cr.holes_covered == 0 && cr.degenerate == 0 && cr.flipped == 0,
                  "tile %d,%d: error %g (bound %g), %zu holes covered, %zu degenerate, %zu flipped", tx, ty, cr.max_error,
                  bound, cr.holes_covered, cr.degenerate, cr.flipped);
            CHECK(err >= cr.max_error - 1e-6 && err <= bound, "tile %d,%d: stated %g, measured %g", tx, ty, err, cr.max_error);
            free(xy);
            free(tri);
        }
    /* neighbours share their edge's vertices: same places, heights and normals */
    uint32_t *a = malloc(4096 * sizeof *a), *b = malloc(4096 * sizeof *b);
    int pairs = 0;
    for (int ty = 0; ty < ny; ty++)
        for (int tx = 0; tx < nx; tx++)
            for (int axis = 0; axis < 2; axis++) {
                int ux = tx + (axis == 0), uy = ty + (axis == 1);
                if (ux >= nx || uy >= ny) continue;
                const terra_cook_mesh *p = &m[ty * nx + tx], *q = &m[uy * nx + ux];
                double at = axis == 0 ? (double)(tx + 1) * S : (double)(ty + 1) * S;
                size_t na = on_line(p, axis, at, a), nb = on_line(q, axis, at, b);
                int differ = na != nb;
                for (size_t i = 0; i < na && !differ; i++)
                    differ += p->xy[2 * a[i] + 1 - axis] != q->xy[2 * b[i] + 1 - axis] || p->z[a[i]] != q->z[b[i]] ||
                              memcmp(p->normal + 3 * a[i], q->normal + 3 * b[i], 3 * sizeof(float)) != 0;
                CHECK(!differ, "tiles %d,%d and %d,%d: %zu and %zu vertices on their edge, or they differ", tx, ty, ux,
                      uy, na, nb);
                pairs++;
            }
    CHECK(pairs == (nx - 1) * ny + nx * (ny - 1));
    /* encoded: normals face up (scenery +y), west / east and south / north edge lists agree */
    for (int i = 0; i < nx * ny; i++) {
        terra_cook_tile tile = {.depth = 0, .tx = i % nx, .ty = i / nx, .mesh = &m[i], .min_height = 0, .max_height = 0};
        if (!m[i].triangle_count) continue;
        tile.min_height = tile.max_height = m[i].z[0];
        for (uint32_t k = 0; k < m[i].vertex_count; k++)
            tile.min_height = fmin(tile.min_height, m[i].z[k]), tile.max_height = fmax(tile.max_height, m[i].z[k]);
        uint8_t *bytes;
        size_t size;
        terra_qmesh q;
        CHECK(terra_cook_encode(&g, &tile, &bytes, &size) == TERRA_OK);
        CHECK(terra_qmesh_decode(bytes, size, NULL, &q) == TERRA_OK);
        int down = 0;
        for (uint32_t k = 0; k < q.vertex_count; k++) {
            double n[3];
            terra_qmesh_oct_decode(q.normals + 2 * k, n);
            down += !(n[1] > 0);
        }
        /* triangles as written face up too: (b - a) x (c - a) has +y in scenery axes */
        int faces_down = 0;
        for (uint32_t t = 0; t < q.triangle_count; t++) {
            const uint32_t *ix = q.indices + 3 * t;
            double ax = q.u[ix[0]], az = q.v[ix[0]], bx = q.u[ix[1]], bz = q.v[ix[1]], cx = q.u[ix[2]], cz = q.v[ix[2]];
            faces_down += !((bz - az) * (cx - ax) - (bx - ax) * (cz - az) > 0);
        }
        CHECK(down == 0 && faces_down == 0, "tile %d: %d normals and %d triangles face down", i, down, faces_down);
        terra_qmesh_free(&q);
        terra_free(bytes);
    }
    for (int i = 0; i < nx * ny; i++) terra_cook_mesh_free(&m[i]);
    free(m), free(a), free(b), free(samples), free(r.heights);
}

/* A raster on EPSG:4326 resampled onto the plane: samples on its own centres come back exactly,
 * halfway points are the mean, points outside are no-data. */
static void test_geographic_window(void) {
    const int W = 120, H = 90;
    terra_raster r = {.width = W, .height = H, .georeferenced = true};
    r.heights = malloc((size_t)W * H * sizeof(float));
    unsigned long long s = 3;
    for (int i = 0; i < W * H; i++) r.heights[i] = (float)test_rand_range(&s, 0, 1000);
    r.heights[40 * W + 50] = NAN;
    const double step = 1.0 / 1024; /* binary: the plane's points are exact */
    r.geo[0] = -72 - 0.5 * step, r.geo[1] = step, r.geo[3] = 45 + 0.5 * step, r.geo[5] = -step;
    terra_cook_raster_window win = {&r};
    terra_cook_grid g = {.frame = TERRA_FRAME_GEOGRAPHIC, .origin = {-180, -90}, .unit = {step, step}, .tile_units = 256};
    const int64_t X0 = (int64_t)((-72 + 180) * 1024), Y1 = (int64_t)((45 + 90) * 1024); /* the first sample: north-west */
    float *out = malloc(200 * 200 * sizeof(float));
    CHECK(terra_cook_raster_window_read(&win, &g, X0 - 3, Y1 - H - 2, W + 6, H + 6, out) == TERRA_OK);
    int wrong = 0;
    for (int j = 0; j < H + 6; j++)
        for (int i = 0; i < W + 6; i++) {
            int col = i - 3, row = (int)(Y1 - (Y1 - H - 2 + j)); /* rows go south, the plane's y north */
            float v = out[(size_t)j * (W + 6) + i];
            bool inside = col >= 0 && col < W && row >= 0 && row < H;
            float want = inside ? r.heights[(size_t)row * W + col] : NAN;
            wrong += inside ? !(v == want || (v != v && want != want)) : v == v;
        }
    CHECK(wrong == 0, "%d samples off on the raster's own grid", wrong);
    /* half the step: the points between sample centres average their neighbours */
    terra_cook_grid g2 = g;
    g2.unit[0] = g2.unit[1] = step / 2;
    CHECK(terra_cook_raster_window_read(&win, &g2, 2 * X0 + 1, 2 * (Y1 - 10), 1, 1, out) == TERRA_OK);
    float want = 0.5f * (r.heights[10 * W] + r.heights[10 * W + 1]);
    CHECK(fabsf(out[0] - want) < 1e-3f, "midpoint %g, want %g", out[0], want);
    CHECK(terra_cook_raster_window_read(&win, &g2, 2 * (X0 + 50) - 1, 2 * (Y1 - 40), 3, 1, out) == TERRA_OK);
    CHECK(out[0] != out[0] && out[1] != out[1] && out[2] != out[2], "next to a no-data sample: %g %g %g", out[0], out[1], out[2]);
    free(out), free(r.heights);
}

int main(void) {
    RUN(test_encode_round_trip);
    RUN(test_finest_tiles);
    RUN(test_geographic_window);
    return finish();
}
