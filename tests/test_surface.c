/* Surface tables, tile palettes, and a road that is drawn where it collides at every level. */
#include "check.h"
#include "terra/ground.h"
#include "terra/surface.h"

#include <math.h>
#include <string.h>

static void table_describes_and_falls_back(void) {
    terra_surface_table *t;
    CHECK(terra_surface_table_create(&t) == TERRA_OK);
    terra_surface_look road = {.tint = {0.06f, 0.06f, 0.07f}, .albedo = "asphalt.png", .tiling_m = 2};
    CHECK(terra_surface_table_set(t, 20, &road) == TERRA_OK);
    terra_surface_look got;
    CHECK(terra_surface_table_get(t, 20, &got) && got.tiling_m == 2 && strcmp(got.albedo, "asphalt.png") == 0);
    CHECK(got.albedo != road.albedo, "the table keeps its own copy of the texture name");
    /* undescribed ids get distinct colours of their own; "no surface" gets none */
    terra_surface_look a, b, none;
    CHECK(!terra_surface_table_get(t, 40, &a) && !terra_surface_table_get(t, 41, &b));
    CHECK(memcmp(a.tint, b.tint, sizeof a.tint) != 0 && a.tint[0] + a.tint[1] + a.tint[2] > 0.5f);
    CHECK(!terra_surface_table_get(t, TERRA_SURFACE_NONE, &none) && none.tint[0] == 0 && none.tint[2] == 0);
    CHECK(!terra_surface_table_get(NULL, TERRA_SURFACE_GRASS, &a) && a.tint[1] > a.tint[0], "built-in grass is green");
    /* bad descriptions */
    CHECK(terra_surface_table_set(t, 0, &road) == TERRA_E_INVALID);
    CHECK(terra_surface_table_set(t, 5, &(terra_surface_look){.tint = {2, 0, 0}}) == TERRA_E_INVALID);
    CHECK(terra_surface_table_set(t, 5, &(terra_surface_look){.tint = {NAN, 0, 0}}) == TERRA_E_INVALID);
    terra_surface_table_destroy(t);
}

static int warnings;
static void count_warnings(terra_log_level l, const char *msg, void *u) {
    (void)u;
    if (l == TERRA_LOG_WARN && strstr(msg, "names 10 surfaces")) warnings++;
}

static void palette_keeps_the_eight_covering_most(void) {
    terra_surface ids[1000];
    /* id k covers 10 * (k + 1) samples for k = 0..9 (550 samples), the rest is id 3 */
    size_t n = 0;
    for (int k = 0; k < 10; k++)
        for (int c = 0; c < 10 * (k + 1); c++) ids[n++] = (terra_surface)(k + 30);
    terra_surface out[TERRA_TILE_SURFACES];
    int kept;
    terra_set_log(count_warnings, NULL);
    int distinct = terra_surface_palette(ids, n, 1, terra_tile_key_make(0, 2, 5, -7), out, &kept);
    terra_set_log(NULL, NULL);
    CHECK(distinct == 10 && kept == 8 && warnings == 1, "distinct %d kept %d warnings %d", distinct, kept, warnings);
    for (int k = 0; k < 8; k++) CHECK(out[k] == 39 - k, "rank %d is %d", k, out[k]);
    /* ties go to the smaller id; fewer than eight keeps them all */
    terra_surface two[6] = {7, 5, 7, 5, 9, 9};
    CHECK(terra_surface_palette(two, 6, 1, 0, out, &kept) == 3 && kept == 3 && out[0] == 5 && out[1] == 7 && out[2] == 9);
}

/* A road painted into the surface function: |z| < 4 m is road (id 20). */
static float gentle(void *u, double x, double z) {
    (void)u;
    return (float)(5 * sin(x / 50) + 3 * cos(z / 70));
}
static terra_surface road_at(void *u, double x, double z) {
    (void)u, (void)x;
    return fabs(z) < 4 ? 20 : TERRA_SURFACE_NONE;
}

/* At every level, what a tile draws at a point is the surface of its nearest sample; where the
 * ground collides as road, the drawn road agrees except within one sample spacing of its edge. */
static void road_drawn_where_it_collides(void) {
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = gentle, .surface_at = road_at, .min_height = -8,
                                             .max_height = 8, .name = "road"},
                        &src);
    terra_grid_desc grid = {.tile0_size = 32, .cells = 32};
    terra_ground *g;
    CHECK(terra_ground_create(&(terra_ground_desc){.source = src, .grid = grid}, &g) == TERRA_OK);
    terra_grid_vertex v[33 * 33];
    float scratch[2048];
    unsigned long long s = 3;
    int disagree = 0, road_points = 0;
    for (int level = 0; level < 8; level++) {
        double side = 32.0 * (1 << level), spacing = side / 32;
        for (int t = 0; t < 20; t++) {
            int32_t tx = (int32_t)test_rand_range(&s, -50, 50), ty = test_rand_u64(&s) % 2 ? 0 : -1;
            terra_grid_info info;
            CHECK(terra_grid_build(src, &grid, terra_tile_key_make(0, level, tx, ty), v, scratch, &info) == TERRA_OK);
            for (int q = 0; q < 200; q++) {
                double x = info.origin_x + test_rand_range(&s, 0, side), z = info.origin_z + test_rand_range(&s, 0, side);
                int i = (int)floor((x - info.origin_x) / spacing + 0.5), j = (int)floor((z - info.origin_z) / spacing + 0.5);
                terra_surface drawn = v[j * 33 + i].surface, collides;
                CHECK(terra_ground_surface_at(g, x, z, &collides) == TERRA_OK);
                road_points += collides == 20;
                if (drawn != collides && fabs(fabs(z) - 4.0) > spacing) disagree++;
            }
        }
    }
    CHECK(road_points > 100, "the road was hardly sampled (%d)", road_points);
    CHECK(disagree == 0, "%d points drawn otherwise than they collide, beyond one sample spacing", disagree);
    terra_ground_destroy(g);
    terra_source_destroy(src);
}

int main(void) {
    RUN(table_describes_and_falls_back);
    RUN(palette_keeps_the_eight_covering_most);
    RUN(road_drawn_where_it_collides);
    return finish();
}
