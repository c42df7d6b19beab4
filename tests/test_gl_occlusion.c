/* Occlusion culling hides only what nothing shows: every frame is drawn twice from the same draw
 * list, culled and whole (style.no_occlusion), and the two pictures and depth buffers must be equal
 * pixel for pixel. Views: the built-in path as `terra fly` flies it, random cameras from 2 m to
 * 3 km above the default world (every heading, pitch from -60 to +20 degrees), and real-time frames
 * with stand-ins still coming. And the culling must cull: low views over the hills hide much of
 * the ground they select. */
#include "check.h"
#include "test_gl_util.h"

typedef struct tally {
    int frames, active;
    long drawn, hidden; /* ground triangles drawn and left out as hidden */
} tally;

/* Draws the scene's current draws culled and whole and compares. */
static void compare_at(terra_gl_scene *scene, const terra_camera *cam, const terra_gl_style *style, int w, int h,
                       uint8_t *rgb[2], float *z[2], tally *t, const char *name) {
    terra_gl *gl = terra_gl_scene_renderer(scene);
    const terra_stream_draw *draws;
    int n;
    CHECK(terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
    int drawn[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        terra_gl_style s = *style;
        s.no_occlusion = pass == 1;
        CHECK(terra_gl_draw(gl, cam, draws, n, &s) == TERRA_OK, "%s: %s", name, terra_last_error());
        CHECK(terra_gl_read_rgb(gl, rgb[pass]) == TERRA_OK && terra_gl_read_depth(gl, z[pass]) == TERRA_OK);
        const terra_gl_stats *gs = terra_gl_get_stats(gl);
        drawn[pass] = gs->triangles - gs->skirt_triangles;
        if (pass == 0) {
            t->active += gs->occlusion;
            t->hidden += gs->occluded_triangles;
        } else {
            CHECK(gs->occluded_triangles == 0 && !gs->occlusion, "%s: whole frame culled", name);
        }
    }
    t->frames++;
    t->drawn += drawn[0];
    long differ = 0;
    int where = -1;
    for (size_t i = 0; i < (size_t)w * h; i++)
        if (memcmp(rgb[0] + 3 * i, rgb[1] + 3 * i, 3) || z[0][i] != z[1][i]) {
            if (where < 0) where = (int)i;
            differ++;
        }
    CHECK(differ == 0, "%s: %ld pixels differ culled and whole (first at column %d, row %d)", name, differ,
          where % w, where / w);
    if (differ) {
        char path[256];
        snprintf(path, sizeof path, "occlusion_%s_culled.png", name);
        save_png(path, rgb[0], w, h);
        snprintf(path, sizeof path, "occlusion_%s_whole.png", name);
        save_png(path, rgb[1], w, h);
    }
}

static void compare(terra_gl_scene *scene, const terra_camera *cam, const terra_gl_style *style, uint8_t *rgb[2],
                    float *z[2], tally *t, const char *name) {
    compare_at(scene, cam, style, TW, TH, rgb, z, t, name);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

static void report(const char *what, const tally *t) {
    printf("  %-28s %3d frames (%d culled), ground triangles drawn %ld, hidden %ld (%.0f%%)\n", what, t->frames,
           t->active, t->drawn, t->hidden, 100.0 * (double)t->hidden / (double)(t->drawn + t->hidden + (t->drawn + t->hidden == 0)));
}

static void same_pictures(int cells, bool flat) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, cells, TW, TH);
    CHECK(scene != NULL);
    if (!scene) return;
    uint8_t *rgb[2] = {malloc((size_t)TW * TH * 3), malloc((size_t)TW * TH * 3)};
    float *z[2] = {malloc(sizeof(float) * TW * TH), malloc(sizeof(float) * TW * TH)};
    const terra_gl_style style = {.flat = flat, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    const double pi = 3.14159265358979323846;
    char name[96];

    tally path = {0};
    for (int f = 0; f < 12; f++) { /* the built-in path, settled */
        terra_camera cam = terra_fly_path_camera(src, f / 11.0);
        cam.aspect = (double)TW / TH;
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        snprintf(name, sizeof name, "cells%d_path%02d", cells, f);
        compare(scene, &cam, &style, rgb, z, &path, name);
    }
    tally random = {0}, low = {0};
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)cells;
    for (int k = 0; k < 24; k++) { /* random views, half of them 2-20 m above the ground */
        const double x = -12000 + 24000 * rng_unit(&seed), zz = -12000 + 24000 * rng_unit(&seed);
        const double above = k % 2 ? 2 + 18 * rng_unit(&seed) : 20 + 3000 * rng_unit(&seed);
        float g = 0;
        terra_source_height(src, x, zz, &g);
        terra_camera cam = {.eye = {x, g + above, zz}, .yaw_rad = 2 * pi * rng_unit(&seed),
                            .pitch_rad = (-60 + 80 * rng_unit(&seed)) * pi / 180, .fov_y_rad = 60 * pi / 180,
                            .aspect = (double)TW / TH};
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        snprintf(name, sizeof name, "cells%d_random%02d", cells, k);
        compare(scene, &cam, &style, rgb, z, k % 2 ? &low : &random, name);
    }
    tally live = {0};
    for (int f = 0; f < 16; f++) { /* real time: stand-ins drawn while tiles still come */
        terra_camera cam = terra_fly_path_camera(src, 0.5 + 0.2 * f / 15.0);
        cam.aspect = (double)TW / TH;
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, false, 0, &fs) == TERRA_OK, "%s", terra_last_error());
        snprintf(name, sizeof name, "cells%d_live%02d", cells, f);
        compare(scene, &cam, &style, rgb, z, &live, name);
    }
    printf("cells %d, %s:\n", cells, flat ? "flat" : "lit");
    report("built-in path", &path);
    report("random, 20 m to 3 km up", &random);
    report("random, 2 to 20 m up", &low);
    report("real-time frames", &live);
    /* the path and the low views look along valleys: hills hide a good part of the ground */
    CHECK(path.active == path.frames, "the path's frames were not all culled (%d of %d)", path.active, path.frames);
    CHECK(path.hidden > path.drawn / 4, "the path hid only %ld of %ld triangles", path.hidden, path.drawn + path.hidden);
    CHECK(low.hidden > low.drawn / 4, "low views hid only %ld of %ld triangles", low.hidden, low.drawn + low.hidden);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb[0]), free(rgb[1]), free(z[0]), free(z[1]);
}

/* As `terra fly` draws (32-cell tiles of 64 m, ranges from tau and the measured level errors), at
 * 960x540: far ridges a pixel high at the horizon, where a wrong horizon shows first. */
static void fly_960x540(void) {
    enum { W = 960, H = 540 };
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene_desc d = {.source = src, .width = W, .height = H, .threads = 2};
    d.select.grid.cells = 32, d.select.grid.tile0_size = 64, d.select.levels = 12;
    CHECK(terra_grid_level_errors(src, &d.select.grid, d.select.levels, 0, 0, d.select.level_error) == TERRA_OK);
    terra_gl_scene *scene = NULL;
    CHECK(terra_gl_scene_create(&d, &scene) == TERRA_OK, "%s", terra_last_error());
    uint8_t *rgb[2] = {malloc((size_t)W * H * 3), malloc((size_t)W * H * 3)};
    float *z[2] = {malloc(sizeof(float) * W * H), malloc(sizeof(float) * W * H)};
    const terra_gl_style style = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    tally path = {0};
    for (int f = 0; scene && f < 12; f++) {
        terra_camera cam = terra_fly_path_camera(src, f / 11.0);
        cam.aspect = (double)W / H;
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        char name[64];
        snprintf(name, sizeof name, "fly_path%02d", f);
        compare_at(scene, &cam, &style, W, H, rgb, z, &path, name);
    }
    printf("960x540, 32 cells, derived ranges:\n");
    report("built-in path", &path);
    CHECK(path.hidden > path.drawn, "the path hid only %ld of %ld triangles", path.hidden, path.drawn + path.hidden);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb[0]), free(rgb[1]), free(z[0]), free(z[1]);
}

static void lit_64_cells(void) { same_pictures(64, false); }
static void flat_16_cells(void) { same_pictures(16, true); }

int main(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "no headless OpenGL 4.5: %s\n", terra_last_error());
        return 1;
    }
    printf("  renderer: %s\n", terra_gl_renderer_name());
    RUN(lit_64_cells);
    RUN(flat_16_cells);
    RUN(fly_960x540);
    terra_gl_context_destroy(ctx);
    return finish();
}
