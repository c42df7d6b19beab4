/* Drawing a baked archive (terra render --archive): the default world baked by terra_bake, read
 * back as a source, must give the world's heights and surfaces at every level's lattice points
 * (to the tiles' quantization), the same height at a point whatever level asks (the lattice rule
 * the renderer's crack-freedom rests on), conservative height ranges, and a picture that matches
 * the world it was baked from. */
#include "check.h"
#include "test_gl_util.h"
#include "terra/archive_io.h"
#include "terra/bake.h"

#include <unistd.h>

#define AREA 512.0
#define LEVELS 4 /* levels 0..3 */

static char dir[64] = "/tmp/terra_test_gl_archive_XXXXXX", path[128];
static terra_source *world;

static bool bake_once(void) {
    if (path[0]) return true;
    if (!mkdtemp(dir)) return false;
    snprintf(path, sizeof path, "%s/w.terra", dir);
    terra_bake_desc d = {.frame = TERRA_FRAME_LOCAL, .levels = LEVELS, .cells = 32, .tile0_size = 64,
                         .area = {0, 0, AREA, AREA}, .compression = TERRA_COMPRESS_GZIP};
    terra_status st = terra_bake(world, path, &d, NULL);
    CHECK(st == TERRA_OK, "bake: %s", terra_last_error());
    return st == TERRA_OK;
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static void heights_match_the_world_on_every_level(void) {
    if (!bake_once()) return;
    terra_source *src;
    terra_archive_source_info info;
    CHECK(terra_archive_source_create(path, &src, &info) == TERRA_OK, "%s", terra_last_error());
    CHECK(info.grid.cells == 32 && info.grid.tile0_size == 64 && info.levels == LEVELS, "info: %d cells, %g m, %d levels",
          info.grid.cells, info.grid.tile0_size, info.levels);
    CHECK(info.bounds[0] == 0 && info.bounds[2] == AREA && info.bounds[1] == 0 && info.bounds[3] == AREA);
    /* a tile's heights are quantized to 1/32767 of its range: at most half a step from the world */
    const double tol = (info.max_height - info.min_height) / 32767.0 * 0.5 + 1e-3;
    const double s0 = 64.0 / 32;
    unsigned long long rng = 7;
    double worst = 0;
    long points = 0, lattice_breaks = 0, surface_breaks = 0;
    float h[40 * 40], hw[40 * 40], h0[1];
    terra_surface sf[40 * 40], sw[40 * 40], s1[1];
    for (int trial = 0; trial < 300; trial++) {
        const int L = (int)(test_rand_u64(&rng) % (LEVELS + 2)); /* past the top level too */
        const double sp = s0 * (double)(1 << L);
        const int nx = 1 + (int)(test_rand_u64(&rng) % 40), nz = 1 + (int)(test_rand_u64(&rng) % 40);
        const int64_t span = (int64_t)(AREA / sp);
        terra_grid_request rq = {.ix0 = (int64_t)(test_rand_u64(&rng) % (uint64_t)(span + 20)) - 10 - nx / 2,
                                 .iz0 = (int64_t)(test_rand_u64(&rng) % (uint64_t)(span + 20)) - 10 - nz / 2,
                                 .spacing = sp, .nx = nx, .nz = nz};
        CHECK(terra_source_sample(src, &rq, h, sf) == TERRA_OK, "level %d: %s", L, terra_last_error());
        /* the world at the same points, clamped into the area as the archive clamps them */
        for (int j = 0; j < nz; j++)
            for (int i = 0; i < nx; i++) {
                const int k = j * nx + i;
                const double x = clampd((double)(rq.ix0 + i) * sp, 0, AREA), z = clampd((double)(rq.iz0 + j) * sp, 0, AREA);
                terra_grid_request one = {.ix0 = (int64_t)(x / s0), .iz0 = (int64_t)(z / s0), .spacing = s0, .nx = 1, .nz = 1};
                CHECK(terra_source_sample(world, &one, &hw[k], &sw[k]) == TERRA_OK);
                const double e = fabs((double)h[k] - hw[k]);
                if (e > worst) worst = e;
                surface_breaks += sf[k] != sw[k];
                /* the lattice rule: level 0 asked for the same point answers the same bits */
                CHECK(terra_source_sample(src, &one, h0, s1) == TERRA_OK);
                lattice_breaks += h0[0] != h[k] || s1[0] != sf[k];
                points++;
            }
    }
    CHECK(worst <= tol, "a height departs %.4f m from the world's (quantization allows %.4f)", worst, tol);
    CHECK(lattice_breaks == 0, "%ld of %ld points differ between levels", lattice_breaks, points);
    CHECK(surface_breaks == 0, "%ld of %ld surfaces differ from the world's", surface_breaks, points);
    printf("  %ld points on levels 0..%d and beyond the edge: worst %.4f m from the world (step/2 %.4f), lattice rule "
           "held\n", points, LEVELS + 1, worst, tol);
    /* a spacing that is not one of the archive's levels is refused by name */
    terra_grid_request bad = {.spacing = 3.0, .nx = 1, .nz = 1};
    CHECK(terra_source_sample(src, &bad, h, NULL) == TERRA_E_UNSUPPORTED);
    CHECK(strstr(terra_last_error(), path) != NULL, "error does not name the archive: %s", terra_last_error());
    terra_source_destroy(src);
}

static void ranges_are_conservative(void) {
    if (!bake_once()) return;
    terra_source *src;
    CHECK(terra_archive_source_create(path, &src, NULL) == TERRA_OK, "%s", terra_last_error());
    unsigned long long rng = 11;
    long rects = 0, outside = 0;
    float h[65 * 65];
    for (int trial = 0; trial < 200; trial++) {
        const int L = (int)(test_rand_u64(&rng) % LEVELS);
        const double sp = 2.0 * (1 << L);
        const int n = 2 + (int)(test_rand_u64(&rng) % 64);
        const int64_t ix0 = (int64_t)(test_rand_u64(&rng) % (uint64_t)(AREA / sp)) - 4;
        const int64_t iz0 = (int64_t)(test_rand_u64(&rng) % (uint64_t)(AREA / sp)) - 4;
        float lo, hi;
        CHECK(terra_source_height_range(src, (double)ix0 * sp, (double)iz0 * sp, (double)(ix0 + n - 1) * sp,
                                        (double)(iz0 + n - 1) * sp, &lo, &hi) == TERRA_OK);
        terra_grid_request rq = {.ix0 = ix0, .iz0 = iz0, .spacing = sp, .nx = n, .nz = n};
        CHECK(terra_source_sample(src, &rq, h, NULL) == TERRA_OK);
        for (int k = 0; k < n * n; k++) outside += h[k] < lo || h[k] > hi;
        rects++;
    }
    CHECK(outside == 0, "%ld samples outside their rectangle's range", outside);
    printf("  %ld rectangles: every sample inside its range\n", rects);
    terra_source_destroy(src);
}

/* The same camera over the archive and over the world (both bounded to the baked area): the
 * ground covers the same pixels and has the same colours, bar quantization. */
static void draws_the_world_it_was_baked_from(void) {
    if (!bake_once()) return;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    terra_source *arc;
    terra_archive_source_info info;
    CHECK(terra_archive_source_create(path, &arc, &info) == TERRA_OK, "%s", terra_last_error());
    terra_source *srcs[2] = {arc, world};
    uint8_t *rgb[2] = {malloc((size_t)TW * TH * 3), malloc((size_t)TW * TH * 3)};
    float g = 0;
    CHECK(terra_source_height(arc, 256, -60, &g) == TERRA_OK);
    terra_camera cam = {.eye = {256, g + 180, -60}, .yaw_rad = 3.14159265358979 * 0.97, .pitch_rad = -0.35,
                        .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    for (int k = 0; k < 2; k++) {
        terra_gl_scene_desc d = {.source = srcs[k], .width = TW, .height = TH, .threads = 2};
        d.select.grid = info.grid;
        d.select.levels = info.levels;
        memcpy(d.select.bounds, info.bounds, sizeof d.select.bounds);
        terra_gl_scene *scene = NULL;
        CHECK(terra_gl_scene_create(&d, &scene) == TERRA_OK, "%s", terra_last_error());
        if (!scene) continue;
        terra_gl_style style = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        CHECK(fs.settled && fs.draw_calls == 1, "source %d: settled %d, %d draw calls", k, fs.settled, fs.draw_calls);
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb[k]) == TERRA_OK);
        terra_gl_scene_destroy(scene);
    }
    long ground = 0, coverage_diff = 0, colour_sum = 0;
    for (int p = 0; p < TW * TH; p++) {
        const uint8_t *a = rgb[0] + (size_t)p * 3, *b = rgb[1] + (size_t)p * 3;
        const bool ga = memcmp(a, SKY, 3) != 0, gb = memcmp(b, SKY, 3) != 0;
        coverage_diff += ga != gb;
        if (ga && gb) {
            ground++;
            colour_sum += abs(a[0] - b[0]) + abs(a[1] - b[1]) + abs(a[2] - b[2]);
        }
    }
    const double mean = ground ? (double)colour_sum / (3.0 * ground) : 999;
    CHECK(ground > TW * TH / 3, "the archive's ground covers only %ld of %d pixels", ground, TW * TH);
    CHECK(coverage_diff <= TW * TH / 500, "%ld pixels are ground in one picture and sky in the other", coverage_diff);
    CHECK(mean < 2.0, "ground colours differ by %.2f levels on average", mean);
    printf("  archive vs world: %ld ground pixels, %ld differ in coverage, mean colour difference %.2f\n", ground,
           coverage_diff, mean);
    if (coverage_diff > TW * TH / 500 || mean >= 2.0) {
        save_png("archive_frame.png", rgb[0], TW, TH);
        save_png("archive_world_frame.png", rgb[1], TW, TH);
    }
    free(rgb[0]);
    free(rgb[1]);
    terra_source_destroy(arc);
    terra_gl_context_destroy(ctx);
}

static void refuses_what_it_cannot_draw(void) {
    if (!bake_once()) return;
    char geo[160], junk[160];
    snprintf(geo, sizeof geo, "%s/geo.terra", dir);
    snprintf(junk, sizeof junk, "%s/junk.terra", dir);
    terra_bake_desc d = {.frame = TERRA_FRAME_GEOGRAPHIC, .levels = 2, .cells = 16, .bounds = {7, 45, 7.01, 45.01}};
    CHECK(terra_bake(world, geo, &d, NULL) == TERRA_OK, "%s", terra_last_error());
    terra_source *src = NULL;
    CHECK(terra_archive_source_create(geo, &src, NULL) == TERRA_E_UNSUPPORTED && !src);
    CHECK(strstr(terra_last_error(), geo) && strstr(terra_last_error(), "geographic"), "%s", terra_last_error());
    FILE *f = fopen(junk, "wb");
    if (f) fputs("not an archive at all, just some words that run past the header's size......", f), fclose(f);
    CHECK(terra_archive_source_create(junk, &src, NULL) != TERRA_OK && !src);
    remove(geo);
    remove(junk);
}

int main(void) {
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &world) == TERRA_OK);
    RUN(heights_match_the_world_on_every_level);
    RUN(ranges_are_conservative);
    RUN(draws_the_world_it_was_baked_from);
    RUN(refuses_what_it_cannot_draw);
    if (path[0]) remove(path), rmdir(dir);
    terra_source_destroy(world);
    return finish();
}
