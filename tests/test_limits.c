/* Descriptions and coordinates past what the arithmetic holds: refused with TERRA_E_INVALID naming
 * the rule (or answered conservatively), never a hang or an overflow. The default world's height
 * range over any rectangle, the selection's size rules, the bake's, the streamer's. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/bake.h"
#include "terra/select.h"
#include "terra/stream.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static terra_source *world(double scale) {
    terra_source *src = NULL;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 7, .scale = scale}, &src) == TERRA_OK, "%s",
          terra_last_error());
    return src;
}

/* Any rectangle, however wide or far: a range inside [MIN, MAX], at once. (A wide one used to
 * overflow the lake-cell count and loop for ever; a far one to overflow float -> int64.) */
static void world_height_range_of_any_rectangle(void) {
    terra_source *w = world(0);
    static const double rects[][4] = {
        {-1e300, -1e300, 1e300, 1e300}, {1e15, 1e15, 1e15 + 64, 1e15 + 64}, {-1e14, -1e14, 1e14, 1e14},
        {-1e18, 0, 1e18, 100},          {0, -INFINITY, 10, INFINITY},     {3e13, 0, 3e13 + 1e6, 1e6},
        {1e12, 1e12, 1e12 + 64, 1e12 + 64}, {0, 0, 1.1e15, 1.1e15},       {0, 0, 2e15, 2e15},
    };
    for (size_t i = 0; i < sizeof rects / sizeof rects[0]; i++) {
        float lo = 0, hi = 0;
        const double *r = rects[i];
        terra_status st = terra_source_height_range(w, r[0], r[1], r[2], r[3], &lo, &hi);
        CHECK(st == TERRA_OK, "rectangle %zu: %s", i, terra_last_error());
        CHECK(lo >= TERRA_WORLD_MIN_HEIGHT && hi <= TERRA_WORLD_MAX_HEIGHT && lo <= hi, "rectangle %zu: [%g, %g]", i,
              lo, hi);
    }
    /* far inside the extent the range is still a bound: heights sampled there lie within it */
    const double x0 = 1e12, z0 = -3e11;
    float lo, hi;
    CHECK(terra_source_height_range(w, x0, z0, x0 + 256, z0 + 256, &lo, &hi) == TERRA_OK);
    float h[17 * 17];
    terra_grid_request req = {.ix0 = (int64_t)(x0 / 16), .iz0 = (int64_t)(z0 / 16), .spacing = 16, .nx = 17, .nz = 17};
    CHECK(terra_source_sample(w, &req, h, NULL) == TERRA_OK, "%s", terra_last_error());
    int outside = 0;
    for (int i = 0; i < 17 * 17; i++) outside += h[i] < lo || h[i] > hi;
    CHECK(outside == 0, "%d samples outside [%g, %g]", outside, lo, hi);
    terra_source_destroy(w);
}

/* Past the extent there are no heights: samples fail naming the extent, single points fail, surfaces
 * are none. */
static void world_refuses_points_past_its_extent(void) {
    terra_source *w = world(0);
    float h[9];
    terra_grid_request req = {.ix0 = (int64_t)1 << 52, .iz0 = 0, .spacing = 1, .nx = 3, .nz = 3};
    CHECK(terra_source_sample(w, &req, h, NULL) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "extent") != NULL, "%s", terra_last_error());
    CHECK(strlen(terra_last_error()) < 300, "a message of %zu characters", strlen(terra_last_error()));
    req = (terra_grid_request){.ix0 = 0, .iz0 = 0, .spacing = 1e300, .nx = 3, .nz = 3};
    CHECK(terra_source_sample(w, &req, h, NULL) == TERRA_E_INVALID);
    float one;
    CHECK(terra_source_height(w, 1e300, 0, &one) != TERRA_OK);
    CHECK(strlen(terra_last_error()) < 300, "a message of %zu characters: %s", strlen(terra_last_error()),
          terra_last_error());
    CHECK(terra_source_height(w, 1000, -2000, &one) == TERRA_OK && isfinite(one));
    terra_source_destroy(w);
    /* a smaller scale stretches the world: its extent, in metres asked, grows with it */
    terra_source *big = world(1000);
    req = (terra_grid_request){.ix0 = (int64_t)1 << 52, .iz0 = 0, .spacing = 1, .nx = 3, .nz = 3};
    CHECK(terra_source_sample(big, &req, h, NULL) == TERRA_OK, "%s", terra_last_error());
    terra_source_destroy(big);
}

static void world_scale_has_a_range(void) {
    terra_source *w = NULL;
    const double bad[] = {1e-300, 1e-7, 1e7, 1e300, -1, INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(terra_world_create(&(terra_world_desc){.scale = bad[i]}, &w) == TERRA_E_INVALID, "scale %g", bad[i]);
        CHECK(strstr(terra_last_error(), "scale must be from") != NULL, "%s", terra_last_error());
    }
    const double good[] = {0, TERRA_WORLD_MIN_SCALE, 1, TERRA_WORLD_MAX_SCALE};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK(terra_world_create(&(terra_world_desc){.scale = good[i]}, &w) == TERRA_OK, "scale %g", good[i]);
        terra_source_destroy(w);
    }
}

/* The selection's size rules: the coarsest tiles at most 2^44 m, its range at most 64 of them. */
static void select_refuses_sizes_past_its_rules(void) {
    terra_select_desc out;
    terra_select_desc d = {.grid = {.tile0_size = 1e15, .cells = 32}};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "coarsest tiles") != NULL, "%s", terra_last_error());
    d = (terra_select_desc){.grid = {.tile0_size = 1e300, .cells = 32}, .levels = 1};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID, "tile0 1e300");
    d = (terra_select_desc){.grid = {.tile0_size = 64, .cells = 32}, .range0 = 1e9};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "coarsest level's range") != NULL, "%s", terra_last_error());
    d = (terra_select_desc){.grid = {.tile0_size = 64, .cells = 32}, .range_ratio = 3, .levels = 24};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID, "ratio 3 over 24 levels");
    d = (terra_select_desc){.max_tiles = (1 << 20) + 1};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID, "max_tiles 2^20 + 1");
    d = (terra_select_desc){.range_cache_size = 1 << 30};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_E_INVALID, "range_cache_size 2^30");
    /* at the edges of the rules: accepted */
    d = (terra_select_desc){.grid = {.tile0_size = 1e5, .cells = 32}, .levels = 24};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_OK, "%s", terra_last_error());
    d = (terra_select_desc){.grid = {.tile0_size = 64, .cells = 32}, .levels = 12, .range0 = 64.0 * 64};
    CHECK(terra_select_desc_resolve(&d, &out) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_select_desc_resolve(&(terra_select_desc){0}, &out) == TERRA_OK);
}

/* The largest tiles the rules allow, over the default world: a selection and a streamer frame come
 * back (at once), with every coordinate finite. */
static void largest_allowed_tiles_select_and_stream(void) {
    terra_source *w = world(0);
    terra_stream_desc d = {.source = w, .capacity_tiles = 64, .max_in_flight = 4, .load_radius = 1e300};
    d.select.grid = (terra_grid_desc){.tile0_size = 1e5, .cells = 16};
    d.select.levels = 24;
    terra_stream *s;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    terra_focus f;
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {0, 500, 0}}},
                                 &f) == TERRA_OK);
    for (int i = 0; i < 3; i++) CHECK(terra_stream_update(s) == TERRA_OK, "%s", terra_last_error());
    const terra_selected_tile *t;
    int n;
    CHECK(terra_stream_wanted(s, f, &t, &n) == TERRA_OK && n > 0);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !isfinite(t[i].box.min.y) || !isfinite(t[i].box.max.x);
    CHECK(bad == 0);
    terra_stream_destroy(s);
    /* too many foci for the wanted list: refused, not an int overflow */
    d.load_radius = 0;
    d.max_foci = 1 << 20;
    d.select = (terra_select_desc){0};
    CHECK(terra_stream_create(&d, &s) == TERRA_E_INVALID, "max_foci 2^20");
    CHECK(strstr(terra_last_error(), "max_foci") != NULL, "%s", terra_last_error());
    terra_source_destroy(w);
}

static void bake_refuses_sizes_past_its_rules(void) {
    terra_bake_desc r;
    terra_bake_desc d = {.tile0_size = 1e300};
    CHECK(terra_bake_desc_resolve(&d, &r) == TERRA_E_INVALID, "tile size 1e300");
    CHECK(strlen(terra_last_error()) < 200, "%s", terra_last_error());
    d = (terra_bake_desc){.tile0_size = 1e12, .levels = 25};
    CHECK(terra_bake_desc_resolve(&d, &r) == TERRA_E_INVALID, "tile size 1e12 x 2^24");
    CHECK(strstr(terra_last_error(), "coarsest tiles") != NULL, "%s", terra_last_error());
    d = (terra_bake_desc){.area = {-1e300, 0, 1e300, 10}, .tile0_size = 1e5};
    CHECK(terra_bake_desc_resolve(&d, &r) == TERRA_E_INVALID, "area 1e300");
    d = (terra_bake_desc){.frame = TERRA_FRAME_GEOGRAPHIC, .metres_per_degree = 1e300};
    CHECK(terra_bake_desc_resolve(&d, &r) == TERRA_E_INVALID, "metres per degree 1e300");
    d = (terra_bake_desc){.tile0_size = 1e5, .levels = 25, .area = {0, 0, 1e5, 1e5}};
    CHECK(terra_bake_desc_resolve(&d, &r) == TERRA_OK, "%s", terra_last_error());
}

/* A NULL description is the defaults in every create and resolve call, as a zeroed one is. */
static void null_desc_is_the_defaults(void) {
    terra_bake_desc b0, b1;
    CHECK(terra_bake_desc_resolve(NULL, &b0) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_bake_desc_resolve(&(terra_bake_desc){0}, &b1) == TERRA_OK && !memcmp(&b0, &b1, sizeof b0));
    CHECK(b0.levels == 5, "bake levels count %d", b0.levels);
    terra_grid_desc g0, g1;
    CHECK(terra_grid_desc_resolve(NULL, &g0) == TERRA_OK && terra_grid_desc_resolve(&(terra_grid_desc){0}, &g1) == TERRA_OK);
    CHECK(g0.cells == g1.cells && g0.tile0_size == g1.tile0_size && terra_grid_tile_side(NULL, 2) == 4 * g0.tile0_size,
          "%d %g %g", g0.cells, g0.tile0_size, terra_grid_tile_side(NULL, 2));
    terra_select_desc s0, s1;
    CHECK(terra_select_desc_resolve(NULL, &s0) == TERRA_OK && terra_select_desc_resolve(&(terra_select_desc){0}, &s1) == TERRA_OK);
    CHECK(s0.levels == s1.levels && s0.grid.cells == s1.grid.cells);
    terra_source *w = NULL;
    CHECK(terra_world_create(NULL, &w) == TERRA_OK, "%s", terra_last_error());
    terra_select *sel = NULL;
    CHECK(terra_select_create(NULL, w, &sel) == TERRA_OK, "%s", terra_last_error());
    terra_select_destroy(sel);
    terra_pool *pool = NULL;
    CHECK(terra_pool_create(NULL, &pool) == TERRA_OK, "%s", terra_last_error());
    terra_pool_destroy(pool);
    terra_archive_writer *aw = NULL;
    char path[64];
    snprintf(path, sizeof path, "null_desc_%d.terra", (int)getpid());
    CHECK(terra_archive_writer_create(path, NULL, &aw) == TERRA_OK && aw, "%s", terra_last_error());
    terra_archive_writer_abort(aw);
    const int threads = terra_default_threads();
    CHECK(threads >= 1 && threads <= 64, "default threads %d", threads);
    /* where a description must name something, NULL is refused with the reason, never a crash */
    terra_stream *st = NULL;
    CHECK(terra_stream_create(NULL, &st) == TERRA_E_INVALID && strstr(terra_last_error(), "source"));
    terra_source_destroy(w);
}

int main(void) {
    RUN(null_desc_is_the_defaults);
    RUN(world_height_range_of_any_rectangle);
    RUN(world_refuses_points_past_its_extent);
    RUN(world_scale_has_a_range);
    RUN(select_refuses_sizes_past_its_rules);
    RUN(largest_allowed_tiles_select_and_stream);
    RUN(bake_refuses_sizes_past_its_rules);
    return finish();
}
