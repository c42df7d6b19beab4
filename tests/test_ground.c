/* Ground queries agree with the drawn finest triangles; collider blocks stand where bodies are and
 * answer what the queries answer; transforms, source replacement and bad input. */
#include "check.h"
#include "terra/ground.h"

#include <math.h>
#include <string.h>

static const terra_grid_desc GRID = {.tile0_size = 64, .cells = 64}; /* 1 m lattice */

static terra_ground *make(const terra_source *src, const terra_transform *t) {
    terra_ground_desc d = {.source = src, .grid = GRID};
    if (t) d.transform = *t;
    terra_ground *g = NULL;
    CHECK(terra_ground_create(&d, &g) == TERRA_OK, "%s", terra_last_error());
    return g;
}

/* Height of a level-0 tile mesh at world (x, z): the triangle that covers it. */
static double tile_mesh_height(const terra_grid_vertex *v, int n, const terra_grid_info *info, double x, double z,
                               double *nx, double *nz) {
    double fx = (x - info->origin_x) / info->spacing, fz = (z - info->origin_z) / info->spacing;
    int i = (int)floor(fx), j = (int)floor(fz);
    double u = fx - i, w = fz - j;
    double h00 = v[j * (n + 1) + i].y, h10 = v[j * (n + 1) + i + 1].y;
    double h01 = v[(j + 1) * (n + 1) + i].y, h11 = v[(j + 1) * (n + 1) + i + 1].y;
    double b, c;
    if (w >= u) b = h11 - h01, c = h01 - h00;
    else b = h10 - h00, c = h11 - h10;
    *nx = -b / info->spacing, *nz = -c / info->spacing;
    return h00 + b * u + c * w;
}

static void queries_match_the_drawn_mesh(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 8}, &src);
    terra_ground *g = make(src, NULL);
    const int n = GRID.cells, nv = terra_grid_vertex_count(n);
    terra_grid_vertex *v = terra_alloc(sizeof *v * (size_t)nv);
    float *scratch = terra_alloc(sizeof(float) * (size_t)terra_grid_scratch_floats(n));
    unsigned long long s = 21;
    int bad_h = 0, bad_n = 0, bad_s = 0;
    for (int t = 0; t < 30; t++) {
        int32_t tx = (int32_t)test_rand_range(&s, -20000, 20000), ty = (int32_t)test_rand_range(&s, -20000, 20000);
        terra_grid_info info;
        CHECK(terra_grid_build(src, &GRID, terra_tile_key_make(0, 0, tx, ty), v, scratch, &info) == TERRA_OK);
        for (int q = 0; q < 200; q++) {
            double x = info.origin_x + test_rand_range(&s, 0, info.side - 1e-6);
            double z = info.origin_z + test_rand_range(&s, 0, info.side - 1e-6);
            double nx, nz, y;
            double want = tile_mesh_height(v, n, &info, x, z, &nx, &nz);
            CHECK(terra_ground_height_at(g, x, z, &y) == TERRA_OK);
            if (fabs(y - want) > 1e-4) bad_h++;
            terra_vec3 nrm;
            CHECK(terra_ground_normal_at(g, x, z, &nrm) == TERRA_OK);
            double len = sqrt(nx * nx + 1 + nz * nz);
            if (fabs(nrm.x - nx / len) > 1e-6 || fabs(nrm.y - 1 / len) > 1e-6 || fabs(nrm.z - nz / len) > 1e-6) bad_n++;
            /* the surface of the nearest sample: edges run midway between samples */
            terra_surface sf;
            CHECK(terra_ground_surface_at(g, x, z, &sf) == TERRA_OK);
            int i = (int)floor((x - info.origin_x) / info.spacing + 0.5), j = (int)floor((z - info.origin_z) / info.spacing + 0.5);
            if (sf != v[j * (n + 1) + i].surface) bad_s++;
        }
    }
    CHECK(bad_h == 0 && bad_n == 0 && bad_s == 0, "%d heights, %d normals, %d surfaces off the mesh", bad_h, bad_n, bad_s);
    /* the batched form answers the same */
    double xz[2 * 64];
    terra_ground_hit hits[64];
    for (int k = 0; k < 64; k++) xz[2 * k] = test_rand_range(&s, -1e5, 1e5), xz[2 * k + 1] = test_rand_range(&s, -1e5, 1e5);
    CHECK(terra_ground_query(g, xz, 64, hits) == TERRA_OK);
    for (int k = 0; k < 64; k++) {
        double y;
        terra_ground_height_at(g, xz[2 * k], xz[2 * k + 1], &y);
        CHECK(hits[k].status == TERRA_OK && hits[k].y == y);
    }
    terra_free(v);
    terra_free(scratch);
    terra_ground_destroy(g);
    terra_source_destroy(src);
}

/* Height of a block's triangles at world (x, z), with no transform. */
static bool block_height(const terra_collider_block *b, double x, double z, double *y) {
    double fx = x / b->spacing - (double)b->ix0, fz = z / b->spacing - (double)b->iz0;
    if (fx < 0 || fz < 0 || fx >= b->cells || fz >= b->cells) return false;
    int i = (int)floor(fx), j = (int)floor(fz), n = b->cells + 1;
    double u = fx - i, w = fz - j;
    const float *h = b->heights;
    double h00 = h[j * n + i], h10 = h[j * n + i + 1], h01 = h[(j + 1) * n + i], h11 = h[(j + 1) * n + i + 1];
    *y = w >= u ? h00 + (h11 - h01) * u + (h01 - h00) * w : h00 + (h10 - h00) * u + (h11 - h10) * w;
    return true;
}

/* Blocks of side `span` whose rectangle lies within `radius` of p, counted by brute force. */
static int blocks_within(terra_vec3 p, double radius, double span) {
    int n = 0;
    for (int bz = -20; bz <= 20; bz++)
        for (int bx = -20; bx <= 20; bx++) {
            double cx = floor(p.x / span) + bx, cz = floor(p.z / span) + bz;
            double dx = fmax(0, fmax(cx * span - p.x, p.x - (cx + 1) * span));
            double dz = fmax(0, fmax(cz * span - p.z, p.z - (cz + 1) * span));
            n += sqrt(dx * dx + dz * dz) <= radius;
        }
    return n;
}

static void blocks_stand_around_bodies_and_match_queries(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 4}, &src);
    terra_ground_desc d = {.source = src, .grid = GRID, .budget_ms = 1e9};
    terra_ground *g;
    CHECK(terra_ground_create(&d, &g) == TERRA_OK);
    terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {1234.5, 0, -777.25}, .collision = true};
    terra_focus_info camera = {.handle = 2, .kind = TERRA_FOCUS_CAMERA, .position = {-5000, 0, 5000}};
    terra_focus_info foci[2] = {body, camera};
    CHECK(terra_ground_update(g, foci, 2) == TERRA_OK);
    const terra_collider_block *blocks;
    int nb = terra_ground_blocks(g, &blocks);
    /* every block within 160 m of the body stands; none near the camera (it does not collide) */
    int expected = blocks_within(body.position, 160, 32);
    CHECK(nb == expected, "%d blocks, expected %d", nb, expected);
    CHECK(terra_ground_is_ready_at(g, body.position.x, body.position.z));
    CHECK(!terra_ground_is_ready_at(g, camera.position.x, camera.position.z));
    /* the collider surface is what height_at answers, at random points */
    unsigned long long s = 5;
    int off = 0, shared = 0, edge_diff = 0;
    for (int q = 0; q < 4000; q++) {
        const terra_collider_block *b = &blocks[test_rand_u64(&s) % (unsigned)nb];
        double x = (b->ix0 + test_rand_range(&s, 0, b->cells)) * b->spacing;
        double z = (b->iz0 + test_rand_range(&s, 0, b->cells)) * b->spacing;
        double yb, yq;
        if (!block_height(b, x, z, &yb)) continue;
        CHECK(terra_ground_height_at(g, x, z, &yq) == TERRA_OK);
        if (fabs(yb - yq) > 1e-4) off++;
    }
    /* neighbouring blocks share their edge rows bit for bit */
    for (int a = 0; a < nb; a++)
        for (int c = 0; c < nb; c++) {
            if (blocks[c].bx != blocks[a].bx + 1 || blocks[c].bz != blocks[a].bz) continue;
            shared++;
            int n = blocks[a].cells + 1;
            for (int j = 0; j < n; j++)
                if (memcmp(&blocks[a].heights[j * n + n - 1], &blocks[c].heights[j * n], sizeof(float))) edge_diff++;
        }
    CHECK(off == 0, "%d points where the collider and height_at differ", off);
    CHECK(shared > 10 && edge_diff == 0, "%d shared edges, %d differing samples", shared, edge_diff);
    /* moving away lets blocks go once they are a block's span past the radius */
    foci[0].position.x += 1000;
    CHECK(terra_ground_update(g, foci, 2) == TERRA_OK);
    CHECK(terra_ground_get_stats(g)->blocks_released == expected, "released %d", terra_ground_get_stats(g)->blocks_released);
    CHECK(terra_ground_is_ready_at(g, foci[0].position.x, foci[0].position.z));
    terra_ground_destroy(g);
    terra_source_destroy(src);
}

static double fake_ms;
static double fake_clock(void *u) {
    (void)u;
    fake_ms += 0.5; /* every clock reading costs half a millisecond of "work" */
    return fake_ms * 1e-3;
}

static void block_under_body_stands_whatever_the_budget(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 4}, &src);
    terra_ground_desc d = {.source = src, .grid = GRID, .budget_ms = 0.1, .clock = fake_clock};
    terra_ground *g;
    CHECK(terra_ground_create(&d, &g) == TERRA_OK);
    terra_focus_info bodies[3];
    for (int b = 0; b < 3; b++)
        bodies[b] = (terra_focus_info){.handle = (terra_focus)(b + 1), .kind = TERRA_FOCUS_ENTITY,
                                       .position = {b * 5000.0, 0, 0}, .collision = true};
    CHECK(terra_ground_update(g, bodies, 3) == TERRA_OK);
    const terra_ground_stats *st = terra_ground_get_stats(g);
    CHECK(st->blocks_forced == 3, "forced %d", st->blocks_forced);
    for (int b = 0; b < 3; b++) CHECK(terra_ground_is_ready_at(g, bodies[b].position.x, bodies[b].position.z));
    /* over a budget far too small, the rest still arrives: a frame after one that built nothing
     * for want of budget builds one anyway */
    int expected = 0;
    for (int b = 0; b < 3; b++) expected += blocks_within(bodies[b].position, 160, 32);
    int frames = 0, last = 3;
    while (frames < 3000 && terra_ground_get_stats(g)->blocks_standing < expected) {
        CHECK(terra_ground_update(g, bodies, 3) == TERRA_OK);
        frames++;
        int built = terra_ground_get_stats(g)->blocks_built;
        CHECK(built <= 1, "budget ignored: %d built", built);
        CHECK(built == 1 || last == 1, "two frames in a row built nothing");
        last = built;
    }
    CHECK(terra_ground_get_stats(g)->blocks_standing == expected && frames > expected,
          "%d of %d blocks after %d frames", terra_ground_get_stats(g)->blocks_standing, expected, frames);
    terra_ground_destroy(g);
    terra_source_destroy(src);
}

static void transforms_answer_in_world_space(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 12}, &src);
    terra_ground *plain = make(src, NULL);
    unsigned long long s = 77;
    int bad_yaw = 0, bad_tilt = 0, bad_normal = 0;
    for (int t = 0; t < 40; t++) {
        /* translate, turn about y, scale */
        double a = test_rand_range(&s, -3, 3), sc = test_rand_range(&s, 0.5, 2);
        terra_transform tr = {.translation = {test_rand_range(&s, -1e4, 1e4), test_rand_range(&s, -500, 500),
                                              test_rand_range(&s, -1e4, 1e4)},
                              .rotation = {cos(a / 2), 0, sin(a / 2), 0},
                              .scale = sc};
        terra_ground *g = make(src, &tr);
        for (int q = 0; q < 20; q++) {
            double lx = test_rand_range(&s, -3000, 3000), lz = test_rand_range(&s, -3000, 3000), lh;
            terra_ground_height_at(plain, lx, lz, &lh);
            /* world = T + R (s p); R about y by a: x' = x cos a + z sin a, z' = -x sin a + z cos a */
            double wx = tr.translation.x + sc * (lx * cos(a) + lz * sin(a));
            double wz = tr.translation.z + sc * (-lx * sin(a) + lz * cos(a));
            double wy = tr.translation.y + sc * lh, y;
            CHECK(terra_ground_height_at(g, wx, wz, &y) == TERRA_OK);
            if (fabs(y - wy) > 1e-6 * (1 + fabs(wy))) bad_yaw++;
            terra_vec3 n;
            terra_ground_normal_at(g, wx, wz, &n);
            if (fabs(sqrt(n.x * n.x + n.y * n.y + n.z * n.z) - 1) > 1e-9 || n.y <= 0) bad_normal++;
        }
        terra_ground_destroy(g);
        /* tilted about x by up to 15 degrees: the answer lies on the landscape, and nothing of it is
         * higher on the same vertical line (checked by sampling the line above) */
        double b = test_rand_range(&s, -0.26, 0.26);
        terra_transform tilt = {.translation = {0, 100, 0}, .rotation = {cos(b / 2), sin(b / 2), 0, 0}, .scale = 1};
        g = make(src, &tilt);
        for (int q = 0; q < 10; q++) {
            double wx = test_rand_range(&s, -2000, 2000), wz = test_rand_range(&s, -2000, 2000), y;
            terra_status st = terra_ground_height_at(g, wx, wz, &y);
            CHECK(st == TERRA_OK, "%s", terra_last_error());
            if (st != TERRA_OK) continue;
            /* into local: rotate back about x */
            /* local = R^T (world - T): for a turn by b about x, y = y' cos b + z' sin b, z = z' cos b - y' sin b */
            double py = y - 100, lz = wz * cos(b) - py * sin(b), ly = py * cos(b) + wz * sin(b), lh;
            terra_ground_height_at(plain, wx, lz, &lh);
            if (fabs(lh - ly) > 1e-3) bad_tilt++;
            for (int k = 1; k <= 40; k++) { /* points above the answer are above the ground */
                double qy = y + k * 5.0 - 100, qz = wz * cos(b) - qy * sin(b), qly = qy * cos(b) + wz * sin(b), qh;
                terra_ground_height_at(plain, wx, qz, &qh);
                if (qly < qh - 1e-3) {
                    bad_tilt++;
                    break;
                }
            }
        }
        terra_ground_destroy(g);
    }
    CHECK(bad_yaw == 0 && bad_tilt == 0 && bad_normal == 0, "%d turned, %d tilted, %d normals wrong", bad_yaw, bad_tilt,
          bad_normal);
    terra_ground_destroy(plain);
    terra_source_destroy(src);
}

static float flat_a(void *u, double x, double z) { (void)u, (void)x, (void)z; return 10; }
static float flat_b(void *u, double x, double z) { (void)u, (void)x, (void)z; return 25; }
static float nan_above(void *u, double x, double z) { (void)u, (void)z; return x > 100 ? NAN : 0; }

static void replacing_the_source_stands_the_ground_again(void) {
    terra_source *a, *b;
    terra_source_create(&(terra_source_desc){.height_at = flat_a, .min_height = 10, .max_height = 10}, &a);
    terra_source_create(&(terra_source_desc){.height_at = flat_b, .min_height = 25, .max_height = 25}, &b);
    terra_ground_desc d = {.source = a, .grid = GRID, .budget_ms = 1e9};
    terra_ground *g;
    terra_ground_create(&d, &g);
    terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {0, 0, 0}, .collision = true};
    terra_ground_update(g, &body, 1);
    double y;
    terra_ground_height_at(g, 3, 3, &y);
    CHECK(y == 10);
    int before = terra_ground_get_stats(g)->blocks_standing;
    CHECK(terra_ground_set_source(g, b) == TERRA_OK);
    terra_ground_height_at(g, 3, 3, &y);
    CHECK(y == 25, "queries answer from the new source at once (%g)", y);
    CHECK(terra_ground_update(g, &body, 1) == TERRA_OK);
    CHECK(terra_ground_get_stats(g)->blocks_built == before, "rebuilt %d of %d", terra_ground_get_stats(g)->blocks_built,
          before);
    const terra_collider_block *blocks;
    int nb = terra_ground_blocks(g, &blocks);
    int wrong = 0;
    for (int k = 0; k < nb; k++) wrong += blocks[k].heights[0] != 25;
    CHECK(wrong == 0 && nb == before);
    terra_ground_destroy(g);
    terra_source_destroy(a);
    terra_source_destroy(b);
}

static void bad_input_is_refused(void) {
    terra_source *src;
    terra_world_create(NULL, &src);
    terra_ground *g = make(src, NULL);
    double y;
    CHECK(terra_ground_height_at(g, NAN, 0, &y) == TERRA_E_INVALID);
    CHECK(terra_ground_height_at(g, 1e300, 0, &y) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "outside the supported range"), "%s", terra_last_error());
    CHECK(!terra_ground_is_ready_at(g, NAN, 0) && !terra_ground_is_ready_at(g, 1e300, 1e300));
    terra_focus_info weird = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {NAN, 0, 0}, .collision = true};
    CHECK(terra_ground_update(g, &weird, 1) == TERRA_OK); /* ignored, not a crash */
    terra_ground_destroy(g);
    terra_ground *bad;
    CHECK(terra_ground_create(&(terra_ground_desc){.source = src, .transform = {.rotation = {2, 0, 0, 0}}}, &bad) ==
          TERRA_E_INVALID);
    CHECK(terra_ground_create(&(terra_ground_desc){.source = src, .transform = {.scale = -1}}, &bad) == TERRA_E_INVALID);
    CHECK(terra_ground_create(&(terra_ground_desc){.source = src, .collider_cells = 1}, &bad) == TERRA_E_INVALID);
    CHECK(terra_ground_create(&(terra_ground_desc){0}, &bad) == TERRA_E_INVALID);
    terra_source_destroy(src);
    /* a user source answering NaN: a clear error naming the point */
    terra_source_create(&(terra_source_desc){.height_at = nan_above, .min_height = -1, .max_height = 1, .name = "nan"}, &src);
    g = make(src, NULL);
    CHECK(terra_ground_height_at(g, 200.5, 0.5, &y) == TERRA_E_SOURCE);
    CHECK(strstr(terra_last_error(), "nan") && strstr(terra_last_error(), "x=200"), "%s", terra_last_error());
    terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {200, 0, 0}, .collision = true};
    CHECK(terra_ground_update(g, &body, 1) == TERRA_E_SOURCE);
    CHECK(!terra_ground_is_ready_at(g, 200, 0));
    /* physics defaults and overrides */
    CHECK(terra_ground_physics(g, 3).friction == 0.8);
    terra_ground_set_physics(g, 20, (terra_surface_physics){0.3, 0.5});
    CHECK(terra_ground_physics(g, 20).restitution == 0.5);
    terra_ground_destroy(g);
    terra_source_destroy(src);
}

int main(void) {
    RUN(queries_match_the_drawn_mesh);
    RUN(blocks_stand_around_bodies_and_match_queries);
    RUN(block_under_body_stands_whatever_the_budget);
    RUN(transforms_answer_in_world_space);
    RUN(replacing_the_source_stands_the_ground_again);
    RUN(bad_input_is_refused);
    return finish();
}
