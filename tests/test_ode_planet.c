/* The proof on a planet: ODE drops 100 bodies on the built-in planet's highest range and drives
 * four along great circles (30 to 300 m/s) for 20 simulated seconds, each pulled toward the centre,
 * while terra stands the finest tiles around each as colliders in their own local frames, 6,371 km
 * from the origin; no body falls through, and every block a body enters stood before it arrived.
 * The colliders alone: every body has its tile and eight neighbours, across face edges and at a
 * cube corner too, and blocks no body needs are let go. */
#include "check.h"
#include "terra/ode.h"

#include <math.h>

static void progress(void *user, double t, const char *line) {
    (void)user;
    if (fmod(t, 5.0) < 1e-9) printf("  %s\n", line);
}

static void nothing_falls_through_on_curved_ground(void) {
    terra_drop_result r;
#ifdef TERRA_SANITIZED
    const double seconds = 6;
#else
    const double seconds = 20;
#endif
    terra_status st = terra_ode_planet_drop_test(&(terra_planet_drop_desc){.seconds = seconds, .progress = progress}, &r);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    printf("  %ld steps: fell through %ld (worst depth %.3f m, %.2f of a radius), block entries %ld (unready %ld), min lead "
           "%.1f ms, blocks max %d, built per frame max %.0f, %.2f ms per block, vehicle top speed %.0f m/s, max height %.1f m\n",
           r.steps, r.fell_through, r.worst_depth_m, r.worst_depth_fraction, r.block_entries, r.entries_unready, r.min_lead_ms,
           r.max_blocks, r.max_built_per_frame, r.mean_build_ms, r.vehicle_top_speed, r.vehicle_max_height);
    CHECK(r.steps == (long)(seconds * 240));
    CHECK(r.fell_through == 0, "%ld body-steps below the ground", r.fell_through);
    CHECK(r.entries_unready == 0 && r.min_lead_ms > 0, "%ld blocks entered before they stood", r.entries_unready);
    CHECK(r.worst_depth_fraction < 0.5, "a body sank %.2f of its radius into the ground", r.worst_depth_fraction);
    CHECK(r.block_entries > seconds * 20, "too few block entries to mean anything (%ld)", r.block_entries);
    CHECK(r.vehicle_top_speed >= 295, "the fastest vehicle reached only %.0f m/s", r.vehicle_top_speed);
}

static void colliders_around_every_body(void) {
    terra_planet *p;
    CHECK(terra_planet_create(&(terra_planet_desc){.cells = 16}, &p) == TERRA_OK);
    terra_planet_colliders *c;
    CHECK(terra_planet_colliders_create(&(terra_planet_colliders_desc){.planet = p}, &c) == TERRA_OK);
    /* a body on a face's middle, one on an edge, one at a cube's corner, one at a pole */
    const double where[4][2] = {{10, 20}, {0, 45}, {35.26438968, 45}, {90, 0}};
    terra_vec3 pos[4];
    for (int k = 0; k < 4; k++) {
        const terra_vec3 d = terra_planet_latlon_dir(where[k][0], where[k][1]);
        const double r = terra_planet_get_desc(p)->radius_m + terra_planet_height(p, d) + 1;
        pos[k] = (terra_vec3){d.x * r, d.y * r, d.z * r};
    }
    CHECK(terra_planet_colliders_update(c, pos, NULL, 4) == TERRA_OK, "%s", terra_last_error());
    const terra_planet_block *blocks;
    const int n = terra_planet_colliders_blocks(c, &blocks);
    CHECK(n >= 4 * 7 && n <= 36, "%d blocks for 4 bodies", n);
    /* every point of the ground within 0.3 of a tile of the body's tile lies on a standing block (at a
     * cube's corner too, where the lattice's diagonal falls on another face), and each block is its tile */
    const int N = terra_planet_get_desc(p)->cells;
    for (int k = 0; k < 4; k++) {
        const terra_tile_key key = terra_planet_key_at(p, pos[k], 0);
        for (int j = 0; j <= 8; j++)
            for (int i = 0; i <= 8; i++) {
                const terra_vec3 d = terra_planet_tile_dir(p, key, (int)((-0.3 + 1.6 * i / 8) * N), (int)((-0.3 + 1.6 * j / 8) * N));
                const terra_planet_block *b = terra_planet_colliders_block_at(c, d);
                CHECK(b != NULL, "body %d: no block at (%d, %d)", k, i, j);
                if (b) CHECK(b->key == terra_planet_key_at(p, d, 0));
            }
        /* the block's vertices are the ground's points */
        const terra_planet_block *b = terra_planet_colliders_block_at(c, pos[k]);
        if (!b) continue;
        const terra_vec3 g = terra_planet_ground_point(p, terra_planet_tile_dir(p, b->key, 3, 5));
        const terra_grid_vertex *v = &b->verts[5 * (N + 1) + 3];
        const double dx = b->origin.x + v->x - g.x, dy = b->origin.y + v->y - g.y, dz = b->origin.z + v->z - g.z;
        CHECK(sqrt(dx * dx + dy * dy + dz * dz) < 1e-3, "a block's vertex is off its ground point");
    }
    /* the bodies leave: their blocks go */
    CHECK(terra_planet_colliders_update(c, pos, NULL, 1) == TERRA_OK);
    CHECK(terra_planet_colliders_blocks(c, &blocks) == 9, "one body on a face's middle keeps 9 blocks");
    CHECK(terra_planet_colliders_block_at(c, pos[3]) == NULL, "the pole's blocks were let go");
    CHECK(terra_planet_colliders_update(c, &(terra_vec3){0, 0, 0}, NULL, 1) == TERRA_E_INVALID, "a body at the centre is refused");
    CHECK(terra_planet_colliders_blocks(c, &blocks) == 9, "a refused update changes nothing");
    terra_planet_colliders_destroy(c);
    /* too many blocks wanted: refused, and what stands stays whole; then one body fits again */
    CHECK(terra_planet_colliders_create(&(terra_planet_colliders_desc){.planet = p, .max_blocks = 12}, &c) == TERRA_OK);
    CHECK(terra_planet_colliders_update(c, pos, NULL, 2) == TERRA_E_CAPACITY, "18 blocks in 12");
    const int held = terra_planet_colliders_blocks(c, &blocks);
    CHECK(held <= 12, "%d blocks stand in 12", held);
    for (int k = 0; k < held; k++) CHECK(blocks[k].verts && terra_planet_key_valid(p, blocks[k].key), "block %d is whole", k);
    CHECK(terra_planet_colliders_update(c, pos + 1, NULL, 1) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_planet_colliders_blocks(c, &blocks) <= 9 && terra_planet_colliders_block_at(c, pos[1]) != NULL);
    terra_planet_colliders_destroy(c);
    terra_planet_destroy(p);
}

int main(void) {
    RUN(colliders_around_every_body);
    RUN(nothing_falls_through_on_curved_ground);
    return finish();
}
