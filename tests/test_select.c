/* Property tests of CDLOD selection and grid tiles over many random cameras, seeds and options. */
#include "check.h"
#include "terra/select.h"

#include <math.h>
#include <string.h>

/* A random camera over the default world: somewhere within `spread` metres of the origin, from
 * 1 m to 3 km above the ground, looking anywhere. */
static terra_camera random_camera(unsigned long long *s, const terra_source *src, double spread) {
    terra_camera c = {0};
    c.eye.x = test_rand_range(s, -spread, spread);
    c.eye.z = test_rand_range(s, -spread, spread);
    float g;
    terra_source_height(src, c.eye.x, c.eye.z, &g);
    double above = exp(test_rand_range(s, 0, log(3000.0)));
    c.eye.y = g + above;
    c.yaw_rad = test_rand_range(s, -3.2, 3.2);
    c.pitch_rad = test_rand_range(s, -1.2, 0.5);
    c.fov_y_rad = test_rand_range(s, 0.5, 1.4);
    c.aspect = test_rand_range(s, 1.0, 2.0);
    return c;
}

static terra_select_desc random_desc(unsigned long long *s) {
    terra_select_desc d = {0};
    static const double tile0[] = {16, 32, 64, 128};
    static const int cells[] = {16, 32, 64};
    d.grid.tile0_size = tile0[test_rand_u64(s) % 4];
    d.grid.cells = cells[test_rand_u64(s) % 3];
    d.levels = 4 + (int)(test_rand_u64(s) % 3); /* 4..6 */
    d.morph_start_ratio = test_rand_range(s, 0.3, 0.8);
    double min_range0 = 2.0 * d.grid.tile0_size * sqrt(2.0) / d.morph_start_ratio;
    d.range0 = min_range0 * test_rand_range(s, 1.5, 2.0);
    return d;
}

/* ---- coverage and neighbour levels ------------------------------------------------------------- */

/* Rasterises each tile's footprint on a grid of half-tile0 cells around the eye. */
typedef struct raster {
    int n;            /* cells per side */
    double x0, z0, c; /* origin and cell size */
    int *owner;       /* tile index + 1, or 0; -1 when covered twice */
} raster;

static void coverage_and_levels(void) {
    unsigned long long s = 42;
    static int owner[1400 * 1400];
    int cameras = 0, overlaps = 0, gaps = 0, level_jumps = 0;
    for (int t = 0; t < 24; t++) {
        terra_source *src;
        CHECK(terra_world_create(&(terra_world_desc){.seed = test_rand_u64(&s)}, &src) == TERRA_OK);
        terra_select_desc d = random_desc(&s);
        terra_select *sel;
        CHECK(terra_select_create(&d, src, &sel) == TERRA_OK, "%s", terra_last_error());
        if (!sel) continue;
        const terra_select_desc *rd = terra_select_get_desc(sel);
        double rtop = terra_select_range(sel, rd->levels - 1);
        raster r;
        r.c = rd->grid.tile0_size / 2;
        r.n = (int)(2 * rtop / r.c) + 4;
        if (r.n > 1400) {
            terra_select_destroy(sel);
            terra_source_destroy(src);
            continue;
        }
        terra_camera cam = random_camera(&s, src, 2e5);
        r.x0 = floor((cam.eye.x - rtop) / rd->grid.tile0_size) * rd->grid.tile0_size - r.c;
        r.z0 = floor((cam.eye.z - rtop) / rd->grid.tile0_size) * rd->grid.tile0_size - r.c;
        const terra_selected_tile *tiles;
        int count;
        CHECK(terra_select_run(sel, cam.eye, NULL, &tiles, &count) == TERRA_OK, "%s", terra_last_error());
        memset(owner, 0, sizeof(int) * (size_t)r.n * (size_t)r.n);
        for (int k = 0; k < count; k++) {
            const terra_selected_tile *tl = &tiles[k];
            int i0 = (int)lround((tl->box.min.x - r.x0) / r.c), i1 = (int)lround((tl->box.max.x - r.x0) / r.c);
            int j0 = (int)lround((tl->box.min.z - r.z0) / r.c), j1 = (int)lround((tl->box.max.z - r.z0) / r.c);
            for (int j = j0 < 0 ? 0 : j0; j < j1 && j < r.n; j++)
                for (int i = i0 < 0 ? 0 : i0; i < i1 && i < r.n; i++) {
                    int *o = &owner[j * r.n + i];
                    if (*o != 0) {
                        overlaps++;
                        *o = -1;
                    } else {
                        *o = k + 1;
                    }
                }
        }
        /* every ground point within the view range is covered; sample every 4th cell's centre */
        for (int j = 0; j < r.n; j += 2)
            for (int i = 0; i < r.n; i += 2) {
                double x = r.x0 + (i + 0.5) * r.c, z = r.z0 + (j + 0.5) * r.c;
                double dx = x - cam.eye.x, dz = z - cam.eye.z;
                if (dx * dx + dz * dz > rtop * rtop) continue; /* cheap reject before sampling */
                float h;
                terra_source_height(src, x, z, &h);
                double dy = h - cam.eye.y;
                if (dx * dx + dy * dy + dz * dz < rtop * rtop && owner[j * r.n + i] == 0) gaps++;
            }
        /* neighbours across every raster edge differ by at most one level */
        for (int j = 0; j + 1 < r.n; j++)
            for (int i = 0; i + 1 < r.n; i++) {
                int a = owner[j * r.n + i];
                if (a <= 0) continue;
                int nb[2] = {owner[j * r.n + i + 1], owner[(j + 1) * r.n + i]};
                for (int q = 0; q < 2; q++)
                    if (nb[q] > 0 && abs(tiles[a - 1].level - tiles[nb[q] - 1].level) > 1) level_jumps++;
            }
        cameras++;
        terra_select_destroy(sel);
        terra_source_destroy(src);
    }
    CHECK(cameras >= 15, "only %d cameras tested", cameras);
    CHECK(overlaps == 0, "%d raster cells covered twice", overlaps);
    CHECK(gaps == 0, "%d ground points in range not covered", gaps);
    CHECK(level_jumps == 0, "%d neighbour pairs differ by more than one level", level_jumps);
    printf("  %d cameras: no overlap, no gap, neighbours within one level\n", cameras);
}

/* ---- cracks: morphed edges of neighbours coincide -------------------------------------------------- */

typedef struct built_tile {
    terra_grid_vertex *v;
    terra_grid_info info;
} built_tile;

/* World position of a vertex after the CDLOD morph for this eye. */
static void morphed(const built_tile *t, int idx, terra_vec3 eye, float ms, float me, double out[3]) {
    const terra_grid_vertex *v = &t->v[idx];
    double px = t->info.origin_x + v->x, py = v->y, pz = t->info.origin_z + v->z;
    double dx = px - eye.x, dy = py - eye.y, dz = pz - eye.z;
    double k = terra_morph_factor(sqrt(dx * dx + dy * dy + dz * dz), ms, me);
    out[0] = px + ((t->info.origin_x + v->mx) - px) * k;
    out[1] = py + (v->my - py) * k;
    out[2] = pz + ((t->info.origin_z + v->mz) - pz) * k;
}

/* Height of a morphed edge polyline at coordinate `s` along the edge (axis 0: x, 2: z). */
static bool polyline_height(const double (*pts)[3], int n, int axis, double s, double *h) {
    for (int k = 0; k + 1 < n; k++) {
        double a = pts[k][axis], b = pts[k + 1][axis];
        if (s >= fmin(a, b) - 1e-9 && s <= fmax(a, b) + 1e-9) {
            if (fabs(b - a) < 1e-12) {
                *h = pts[k][1];
            } else {
                double t = (s - a) / (b - a);
                *h = pts[k][1] + (pts[k + 1][1] - pts[k][1]) * t;
            }
            return true;
        }
    }
    return false;
}

static void no_cracks_between_neighbours(void) {
    unsigned long long s = 99;
    static double ea[257][3], eb[257][3];
    int pairs = 0, cracks = 0, mixed = 0;
    double worst = 0;
    for (int t = 0; t < 20; t++) {
        terra_source *src;
        CHECK(terra_world_create(&(terra_world_desc){.seed = test_rand_u64(&s)}, &src) == TERRA_OK);
        terra_select_desc d = random_desc(&s);
        terra_select *sel;
        CHECK(terra_select_create(&d, src, &sel) == TERRA_OK, "%s", terra_last_error());
        const terra_select_desc *rd = terra_select_get_desc(sel);
        const int n = rd->grid.cells, nv = terra_grid_vertex_count(n);
        terra_grid_vertex *va = terra_alloc(sizeof *va * (size_t)nv), *vb = terra_alloc(sizeof *vb * (size_t)nv);
        float *scratch = terra_alloc(sizeof(float) * (size_t)terra_grid_scratch_floats(n));
        terra_camera cam = random_camera(&s, src, 1e5);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *tiles;
        int count;
        CHECK(terra_select_run(sel, cam.eye, &fr, &tiles, &count) == TERRA_OK, "%s", terra_last_error());
        /* every pair of tiles sharing part of an edge */
        int pairs_here = 0;
        for (int a = 0; a < count && pairs_here < 150; a++)
            for (int b = 0; b < count; b++) {
                const terra_box3 *A = &tiles[a].box, *B = &tiles[b].box;
                int axis; /* coordinate that runs along the shared edge */
                if (A->max.x == B->min.x && A->min.z < B->max.z && B->min.z < A->max.z) axis = 2;
                else if (A->max.z == B->min.z && A->min.x < B->max.x && B->min.x < A->max.x) axis = 0;
                else continue;
                built_tile ta = {.v = va}, tb = {.v = vb};
                CHECK(terra_grid_build(src, &rd->grid, tiles[a].key, va, scratch, &ta.info) == TERRA_OK);
                CHECK(terra_grid_build(src, &rd->grid, tiles[b].key, vb, scratch, &tb.info) == TERRA_OK);
                /* A's edge is its last column (axis z) or last row (axis x); B's its first */
                for (int k = 0; k <= n; k++) {
                    int ia = axis == 2 ? k * (n + 1) + n : n * (n + 1) + k;
                    int ib = axis == 2 ? k * (n + 1) : k;
                    morphed(&ta, ia, cam.eye, tiles[a].morph_start, tiles[a].morph_end, ea[k]);
                    morphed(&tb, ib, cam.eye, tiles[b].morph_start, tiles[b].morph_end, eb[k]);
                }
                double lo = fmax(axis == 2 ? A->min.z : A->min.x, axis == 2 ? B->min.z : B->min.x);
                double hi = fmin(axis == 2 ? A->max.z : A->max.x, axis == 2 ? B->max.z : B->max.x);
                for (int side = 0; side < 2; side++) {
                    double(*p)[3] = side ? eb : ea, (*q)[3] = side ? ea : eb;
                    for (int k = 0; k <= n; k++) {
                        double sv = p[k][axis];
                        if (sv < lo || sv > hi) continue;
                        double h;
                        if (!polyline_height((const double(*)[3])q, n + 1, axis, sv, &h)) {
                            cracks++;
                            continue;
                        }
                        double gap = fabs(h - p[k][1]);
                        worst = fmax(worst, gap);
                        if (gap > 1e-3) {
                            if (cracks < 3)
                                fprintf(stderr, "  crack %g m: levels %d|%d at s=%.3f, eye y %.1f, tile0 %g, m %.2f, range0 %.1f (min %.1f), box dy %.1f/%.1f\n", gap,
                                        tiles[a].level, tiles[b].level, sv, cam.eye.y, rd->grid.tile0_size,
                                        rd->morph_start_ratio, rd->range0, 2 * rd->grid.tile0_size * sqrt(2.0) / rd->morph_start_ratio,
                                        A->max.y - A->min.y, B->max.y - B->min.y);
                            cracks++;
                        }
                    }
                }
                if (tiles[a].level != tiles[b].level) mixed++;
                pairs++;
                pairs_here++;
            }
        terra_free(va);
        terra_free(vb);
        terra_free(scratch);
        terra_select_destroy(sel);
        terra_source_destroy(src);
    }
    CHECK(pairs > 1000 && mixed > 100, "too few neighbour pairs tested (%d, %d across levels)", pairs, mixed);
    CHECK(cracks == 0, "%d edge vertices off their neighbour's edge (worst gap %g m)", cracks, worst);
    printf("  %d neighbour pairs (%d across levels): worst gap %g m\n", pairs, mixed, worst);
}

/* ---- grid tiles ------------------------------------------------------------------------------------ */

/* Height of a tile's mesh (after morphing every vertex fully) at local (x, z), from the triangle
 * that covers it; degenerate triangles are skipped. */
static bool mesh_height(const terra_grid_vertex *v, const uint32_t *idx, int ni, bool morph, double x, double z,
                        double *h) {
    for (int t = 0; t < ni; t += 3) {
        double px[3], py[3], pz[3];
        for (int k = 0; k < 3; k++) {
            const terra_grid_vertex *q = &v[idx[t + k]];
            px[k] = morph ? q->mx : q->x, py[k] = morph ? q->my : q->y, pz[k] = morph ? q->mz : q->z;
        }
        double det = (pz[1] - pz[2]) * (px[0] - px[2]) + (px[2] - px[1]) * (pz[0] - pz[2]);
        if (fabs(det) < 1e-9) continue;
        double l0 = ((pz[1] - pz[2]) * (x - px[2]) + (px[2] - px[1]) * (z - pz[2])) / det;
        double l1 = ((pz[2] - pz[0]) * (x - px[2]) + (px[0] - px[2]) * (z - pz[2])) / det;
        double l2 = 1 - l0 - l1;
        if (l0 < -1e-9 || l1 < -1e-9 || l2 < -1e-9) continue;
        *h = l0 * py[0] + l1 * py[1] + l2 * py[2];
        return true;
    }
    return false;
}

static void morphed_tile_is_parent_surface(void) {
    unsigned long long s = 7;
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 5}, &src) == TERRA_OK);
    int worst_points = 0;
    for (int t = 0; t < 12; t++) {
        terra_grid_desc g = {.tile0_size = 32, .cells = t % 2 ? 16 : 32};
        const int n = g.cells, nv = terra_grid_vertex_count(n), ni = terra_grid_index_count(n);
        terra_grid_vertex *c = terra_alloc(sizeof *c * (size_t)nv), *p = terra_alloc(sizeof *p * (size_t)nv);
        uint32_t *idx = terra_alloc(sizeof *idx * (size_t)ni);
        float *scratch = terra_alloc(sizeof(float) * (size_t)terra_grid_scratch_floats(n));
        terra_grid_indices(n, idx);
        int level = (int)(test_rand_u64(&s) % 8);
        terra_tile_key key = terra_tile_key_make(0, level, (int32_t)test_rand_range(&s, -5000, 5000),
                                                 (int32_t)test_rand_range(&s, -5000, 5000));
        terra_tile_key pk = terra_tile_key_parent(key);
        terra_grid_info ci, pi;
        CHECK(terra_grid_build(src, &g, key, c, scratch, &ci) == TERRA_OK);
        CHECK(terra_grid_build(src, &g, pk, p, scratch, &pi) == TERRA_OK);
        /* every morph target is a parent vertex, with the parent's height bit for bit */
        for (int k = 0; k < nv; k++) {
            double wx = ci.origin_x + c[k].mx, wz = ci.origin_z + c[k].mz;
            double fi = (wx - pi.origin_x) / pi.spacing, fj = (wz - pi.origin_z) / pi.spacing;
            int i = (int)lround(fi), j = (int)lround(fj);
            CHECK(fabs(fi - i) < 1e-9 && fabs(fj - j) < 1e-9, "morph target off the parent grid");
            CHECK(c[k].my == p[j * (n + 1) + i].y, "morph height %f vs parent %f", c[k].my, p[j * (n + 1) + i].y);
            /* and the parent's normal there, so the light morphs with the shape */
            CHECK(memcmp(c[k].morph_normal, p[j * (n + 1) + i].normal, 2) == 0, "morph normal (%d, %d) vs parent (%d, %d)",
                  c[k].morph_normal[0], c[k].morph_normal[1], p[j * (n + 1) + i].normal[0], p[j * (n + 1) + i].normal[1]);
        }
        /* the fully morphed mesh is the parent's mesh over the child's footprint */
        for (int q = 0; q < 200; q++) {
            double lx = test_rand_range(&s, 0, ci.side), lz = test_rand_range(&s, 0, ci.side);
            double hc, hp;
            bool a = mesh_height(c, idx, ni, true, lx, lz, &hc);
            bool b = mesh_height(p, idx, ni, false, lx + ci.origin_x - pi.origin_x, lz + ci.origin_z - pi.origin_z, &hp);
            CHECK(a && b);
            if (a && b && fabs(hc - hp) > 1e-3 * fmax(1.0, fabs(hp))) worst_points++;
        }
        terra_free(c);
        terra_free(p);
        terra_free(idx);
        terra_free(scratch);
    }
    CHECK(worst_points == 0, "%d points where the morphed child leaves the parent's surface", worst_points);
    terra_source_destroy(src);
}

static void neighbour_edges_identical(void) {
    unsigned long long s = 11;
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 9}, &src) == TERRA_OK);
    terra_grid_desc g = {.tile0_size = 64, .cells = 64};
    const int n = 64, nv = terra_grid_vertex_count(n);
    terra_grid_vertex *a = terra_alloc(sizeof *a * (size_t)nv), *b = terra_alloc(sizeof *b * (size_t)nv);
    float *scratch = terra_alloc(sizeof(float) * (size_t)terra_grid_scratch_floats(n));
    int diffs = 0;
    for (int t = 0; t < 40; t++) {
        int level = (int)(test_rand_u64(&s) % 12);
        int32_t x = (int32_t)test_rand_range(&s, -100000, 100000) >> level;
        int32_t y = (int32_t)test_rand_range(&s, -100000, 100000) >> level;
        bool right = t % 2;
        terra_tile_key ka = terra_tile_key_make(0, level, x, y);
        terra_tile_key kb = terra_tile_key_make(0, level, x + right, y + !right);
        CHECK(terra_grid_build(src, &g, ka, a, scratch, NULL) == TERRA_OK);
        CHECK(terra_grid_build(src, &g, kb, b, scratch, NULL) == TERRA_OK);
        for (int k = 0; k <= n; k++) {
            const terra_grid_vertex *va = right ? &a[k * (n + 1) + n] : &a[n * (n + 1) + k];
            const terra_grid_vertex *vb = right ? &b[k * (n + 1)] : &b[k];
            if (memcmp(&va->y, &vb->y, sizeof(float)) != 0) diffs++;
            if (memcmp(&va->my, &vb->my, sizeof(float)) != 0) diffs++;
            if (memcmp(va->normal, vb->normal, 2) != 0) diffs++;
            if (memcmp(va->morph_normal, vb->morph_normal, 2) != 0) diffs++;
            if (va->surface != vb->surface) diffs++;
        }
    }
    CHECK(diffs == 0, "%d differences along shared edges", diffs);
    /* normals point up and match the central differences of the heights; surfaces are set */
    int off = 0;
    for (int k = 0; k < nv; k++) {
        float nn[3];
        terra_oct_decode(a[k].normal, nn);
        CHECK(nn[2] > 0, "normal points down"); /* decoded as (x, z, y) */
        CHECK(a[k].surface >= TERRA_SURFACE_GRASS && a[k].surface <= TERRA_SURFACE_SAND);
        int i = k % (n + 1), j = k / (n + 1);
        if (i == 0 || j == 0 || i == n || j == n) continue;
        double s2 = 2.0 * (a[1].x - a[0].x);
        double gx = (a[k - 1].y - a[k + 1].y) / s2, gz = (a[k - n - 1].y - a[k + n + 1].y) / s2;
        double len = sqrt(gx * gx + 1 + gz * gz);
        double dot = (gx * nn[0] + gz * nn[1] + nn[2]) / len;
        if (dot < 0.9995) off++;
    }
    CHECK(off == 0, "%d normals off their central difference by more than 1.8 degrees", off);
    terra_free(a);
    terra_free(b);
    terra_free(scratch);
    terra_source_destroy(src);
}

static void index_buffer_is_a_grid(void) {
    for (int n = 16; n <= 256; n *= 2) {
        int ni = terra_grid_index_count(n);
        uint32_t *idx = terra_alloc(sizeof *idx * (size_t)ni);
        terra_grid_indices(n, idx);
        /* every cell appears once with both its triangles; all triangles face up */
        unsigned char *seen = terra_calloc((size_t)n * n, 1);
        int bad = 0;
        for (int t = 0; t < ni; t += 6) {
            uint32_t v00 = idx[t];
            int i = (int)(v00 % (uint32_t)(n + 1)), j = (int)(v00 / (uint32_t)(n + 1));
            if (i >= n || j >= n || seen[j * n + i]++) bad++;
            for (int k = 0; k < 6; k += 3) {
                int x[3], z[3];
                for (int q = 0; q < 3; q++) x[q] = (int)(idx[t + k + q] % (uint32_t)(n + 1)), z[q] = (int)(idx[t + k + q] / (uint32_t)(n + 1));
                /* y of (b - a) x (c - a) */
                int cy = (z[1] - z[0]) * (x[2] - x[0]) - (x[1] - x[0]) * (z[2] - z[0]);
                if (cy <= 0) bad++;
            }
        }
        CHECK(bad == 0, "cells=%d: %d bad cells or triangles", n, bad);
        /* ordered for the post-transform vertex cache: vertices transformed per triangle with a
         * 32-entry FIFO cache, against 0.5 for a perfect grid order and 3 for none */
        uint32_t fifo[32];
        int head = 0, filled = 0;
        long misses = 0;
        for (int t = 0; t < ni; t++) {
            bool hit = false;
            for (int q = 0; q < filled && !hit; q++) hit = fifo[q] == idx[t];
            if (hit) continue;
            misses++;
            fifo[head] = idx[t];
            head = (head + 1) % 32;
            if (filled < 32) filled++;
        }
        double acmr = (double)misses / (ni / 3);
        CHECK(acmr < 0.6, "cells=%d: %.3f vertices transformed per triangle", n, acmr);
        if (n == 64) printf("  ACMR with a 32-entry FIFO: %.3f (cells 64)\n", acmr);
        terra_free(seen);
        terra_free(idx);
    }
}

/* ---- frustum ------------------------------------------------------------------------------------------ */

static bool brute_visible(const terra_frustum *f, const terra_box3 *b) {
    for (int i = 0; i <= 6; i++)
        for (int j = 0; j <= 6; j++)
            for (int k = 0; k <= 6; k++) {
                terra_vec3 p = {b->min.x + (b->max.x - b->min.x) * i / 6, b->min.y + (b->max.y - b->min.y) * j / 6,
                                b->min.z + (b->max.z - b->min.z) * k / 6};
                if (terra_frustum_contains_point(f, p)) return true;
            }
    return false;
}

static int cmp_key(const void *a, const void *b) {
    terra_tile_key x = *(const terra_tile_key *)a, y = *(const terra_tile_key *)b;
    return (x > y) - (x < y);
}

static void frustum_never_drops_visible_tiles(void) {
    unsigned long long s = 1234;
    static terra_tile_key culled_keys[8192];
    int dropped = 0, extra = 0, total_visible = 0, total_all = 0;
    for (int t = 0; t < 30; t++) {
        terra_source *src;
        CHECK(terra_world_create(&(terra_world_desc){.seed = test_rand_u64(&s)}, &src) == TERRA_OK);
        terra_select_desc d = random_desc(&s);
        d.max_tiles = 8192;
        terra_select *sel;
        CHECK(terra_select_create(&d, src, &sel) == TERRA_OK);
        terra_camera cam = random_camera(&s, src, 1e6);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *tiles;
        int nc, na;
        CHECK(terra_select_run(sel, cam.eye, &fr, &tiles, &nc) == TERRA_OK);
        for (int k = 0; k < nc; k++) culled_keys[k] = tiles[k].key;
        qsort(culled_keys, (size_t)nc, sizeof *culled_keys, cmp_key);
        CHECK(terra_select_run(sel, cam.eye, NULL, &tiles, &na) == TERRA_OK);
        for (int k = 0; k < na; k++) {
            bool in = bsearch(&tiles[k].key, culled_keys, (size_t)nc, sizeof *culled_keys, cmp_key) != NULL;
            if (brute_visible(&fr, &tiles[k].box)) {
                total_visible++;
                if (!in) dropped++;
            }
        }
        /* the culled selection is a subset of the full one (culling never changes a level) */
        static terra_tile_key all_keys[8192];
        for (int k = 0; k < na; k++) all_keys[k] = tiles[k].key;
        qsort(all_keys, (size_t)na, sizeof *all_keys, cmp_key);
        for (int k = 0; k < nc; k++)
            if (!bsearch(&culled_keys[k], all_keys, (size_t)na, sizeof *all_keys, cmp_key)) extra++;
        total_all += na;
        terra_select_destroy(sel);
        terra_source_destroy(src);
    }
    CHECK(dropped == 0, "%d visible tiles dropped by culling", dropped);
    CHECK(extra == 0, "%d culled-selection tiles not in the full selection", extra);
    CHECK(total_visible > 100 && total_visible < total_all, "culling tested nothing (%d of %d)", total_visible,
          total_all);
}

/* ---- allocations, floating origin, bad input ---------------------------------------------------------- */

static long alloc_count;
static void *count_alloc(size_t n, void *u) {
    (void)u;
    alloc_count++;
    return malloc(n);
}
static void *count_realloc(void *p, size_t n, void *u) {
    (void)u;
    alloc_count++;
    return realloc(p, n);
}
static void count_free(void *p, void *u) {
    (void)u;
    free(p);
}

/* An archive's index answers a tile's error from an array: a formula stands in for it here. */
static float doubling_error(void *u, terra_tile_key k) {
    (void)u;
    return terra_tile_key_x(k) % 17 == 5 ? -1.0f : 0.4f * (float)(1u << terra_tile_key_level(k));
}

/* Both walks: CDLOD by ranges, and by screen-space error with some tiles absent. */
static void selection_allocates_nothing_per_frame(void) {
    terra_set_allocator(&(terra_allocator){count_alloc, count_realloc, count_free, NULL});
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    static const terra_select_desc descs[2] = {{.levels = 12}, {.levels = 8, .tile_error = doubling_error}};
    for (int k = 0; k < 2; k++) {
        terra_select *sel;
        CHECK(terra_select_create(&descs[k], src, &sel) == TERRA_OK, "%s", terra_last_error());
        terra_camera cam = {.eye = {100, 900, 200}, .pitch_rad = -0.3};
        terra_frustum fr;
        const terra_selected_tile *tiles;
        int count;
        terra_camera_frustum(&cam, &fr);
        CHECK(terra_select_run(sel, cam.eye, &fr, &tiles, &count) == TERRA_OK);
        long before = alloc_count;
        for (int f = 0; f < 200; f++) {
            cam.eye.x += 5.0; /* flying: new tiles, new cache entries, still no allocation */
            cam.yaw_rad += 0.01;
            terra_camera_frustum(&cam, &fr);
            CHECK(terra_select_run(sel, cam.eye, &fr, &tiles, &count) == TERRA_OK);
        }
        CHECK(alloc_count == before, "walk %d: %ld allocations in 200 frames", k, alloc_count - before);
        CHECK(before > 0, "the counting hooks saw nothing");
        CHECK(count > 10, "walk %d: only %d tiles", k, count);
        terra_select_destroy(sel);
    }
    terra_source_destroy(src);
    terra_set_allocator(NULL);
}

static void floating_origin_changes_nothing(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 2}, &src) == TERRA_OK);
    terra_select *sel;
    CHECK(terra_select_create(&(terra_select_desc){.levels = 8}, src, &sel) == TERRA_OK);
    static terra_tile_key ref[4096];
    terra_vec3 origin = {0, 0, 0}, world = {-500, 400, 300};
    int shifts = 0, mismatches = 0;
    for (int f = 0; f < 300; f++) {
        world.x += 37.5;
        world.z -= 21.25;
        terra_vec3 local = {world.x - origin.x, world.y, world.z - origin.z};
        terra_vec3 shift;
        if (terra_select_origin_shift(sel, local, 1000, &shift)) {
            shifts++;
            origin.x += shift.x, origin.z += shift.z;
            local.x -= shift.x, local.z -= shift.z;
            CHECK(fabs(local.x) <= 1000 && fabs(local.z) <= 1000, "still far after a shift");
            CHECK(fmod(shift.x, terra_select_tile_side(sel, 0)) == 0, "shift not on a tile edge");
        }
        const terra_selected_tile *tiles;
        int nw, nl;
        CHECK(terra_select_run(sel, world, NULL, &tiles, &nw) == TERRA_OK);
        for (int k = 0; k < nw; k++) ref[k] = tiles[k].key;
        terra_vec3 back = {local.x + origin.x, local.y, local.z + origin.z};
        CHECK(terra_select_run(sel, back, NULL, &tiles, &nl) == TERRA_OK);
        if (nl != nw) mismatches++;
        else
            for (int k = 0; k < nw; k++) mismatches += tiles[k].key != ref[k];
    }
    CHECK(shifts >= 5, "only %d shifts", shifts);
    CHECK(mismatches == 0, "%d differences after shifts", mismatches);
    terra_select_destroy(sel);
    terra_source_destroy(src);
}

static void bad_options_refused(void) {
    terra_select_desc out;
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.grid.cells = 48}, &out) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "power of two"), "%s", terra_last_error());
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.grid.cells = 512}, &out) == TERRA_E_INVALID);
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.grid.tile0_size = -1}, &out) == TERRA_E_INVALID);
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.range0 = 100}, &out) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "crack") && strstr(terra_last_error(), "diagonal"), "%s", terra_last_error());
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.range_ratio = 1.0}, &out) == TERRA_E_INVALID);
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.morph_start_ratio = 1.0}, &out) == TERRA_E_INVALID);
    CHECK(terra_select_desc_resolve(&(terra_select_desc){.levels = 40}, &out) == TERRA_E_INVALID);
    CHECK(terra_select_desc_resolve(&(terra_select_desc){0}, &out) == TERRA_OK);
    CHECK(out.range0 >= 2 * 64 * sqrt(2.0));
    /* NaN eye, eye past the key range, a source whose range is NaN */
    terra_source *src;
    CHECK(terra_world_create(NULL, &src) == TERRA_OK);
    terra_select *sel;
    CHECK(terra_select_create(&(terra_select_desc){0}, src, &sel) == TERRA_OK);
    const terra_selected_tile *tiles;
    int count;
    CHECK(terra_select_run(sel, (terra_vec3){NAN, 0, 0}, NULL, &tiles, &count) == TERRA_E_INVALID);
    CHECK(terra_select_run(sel, (terra_vec3){1e300, 0, 0}, NULL, &tiles, &count) == TERRA_E_INVALID);
    terra_select *none;
    CHECK(terra_select_create(&(terra_select_desc){0}, NULL, &none) == TERRA_E_INVALID && none == NULL);
    terra_select_destroy(sel);
    terra_source_destroy(src);
}

static float flat(void *u, double x, double z) {
    (void)u, (void)x, (void)z;
    return 0;
}
static terra_status nan_range(void *u, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    (void)u, (void)x0, (void)z0, (void)x1, (void)z1;
    *lo = NAN, *hi = 0;
    return TERRA_OK;
}

static void bad_source_refused(void) {
    terra_source *src;
    CHECK(terra_source_create(&(terra_source_desc){.height_at = flat, .height_range = nan_range, .name = "bad range"},
                              &src) == TERRA_OK);
    terra_select *sel;
    CHECK(terra_select_create(&(terra_select_desc){0}, src, &sel) == TERRA_OK);
    const terra_selected_tile *tiles;
    int count;
    CHECK(terra_select_run(sel, (terra_vec3){0, 10, 0}, NULL, &tiles, &count) == TERRA_E_SOURCE);
    CHECK(strstr(terra_last_error(), "bad range"), "%s", terra_last_error());
    terra_select_destroy(sel);
    terra_source_destroy(src);
}

int main(void) {
    RUN(index_buffer_is_a_grid);
    RUN(neighbour_edges_identical);
    RUN(morphed_tile_is_parent_surface);
    RUN(coverage_and_levels);
    RUN(no_cracks_between_neighbours);
    RUN(frustum_never_drops_visible_tiles);
    RUN(selection_allocates_nothing_per_frame);
    RUN(floating_origin_changes_nothing);
    RUN(bad_options_refused);
    RUN(bad_source_refused);
    return finish();
}
