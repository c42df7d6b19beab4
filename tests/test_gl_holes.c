/* No holes and no cracks: the ground is drawn against a sky colour it never has, and no sky pixel
 * may show more than one pixel below the ground's silhouette, which is computed on the CPU from
 * the source alone. Every frame of the built-in path (as `terra fly` flies it), a camera 2 m above
 * the ground and one 20 km up. A negative control checks that the test sees a missing tile. */
#include "check.h"
#include "test_gl_util.h"

#define PATH_FRAMES 48 /* the path sampled as `terra fly --frames 48` flies it */
#define CELLS 16       /* a quarter of the triangles of fly's default: llvmpipe shades them on the CPU */

typedef struct holes_result {
    long holes;
    int ground_columns, where, tiles;
} holes_result;

static holes_result check_frame(terra_gl_scene *scene, const terra_source *src, terra_camera cam, uint8_t *rgb,
                                int *top, const char *name) {
    holes_result r = {0};
    terra_gl_style style = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    terra_gl_frame_stats fs;
    cam.aspect = (double)TW / TH;
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s: %s", name, terra_last_error());
    CHECK(fs.settled, "%s: the streamer did not settle", name);
    CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
    cpu_silhouette(src, terra_gl_scene_select(scene), &cam, TW, TH, top);
    r.holes = holes_below(rgb, TW, TH, top, 1, &r.where);
    r.ground_columns = columns_with_ground(top, TW, TH);
    r.tiles = fs.tiles;
    if (r.holes) {
        char path[256];
        snprintf(path, sizeof path, "holes_%s.png", name);
        for (int i = 0; i < TW; i++) /* mark the silhouette in the saved picture */
            if (top[i] < TH) rgb[((size_t)top[i] * TW + i) * 3 + 1] = 255;
        save_png(path, rgb, TW, TH);
    }
    return r;
}

static void no_holes_along_the_path(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, CELLS, TW, TH);
    CHECK(scene != NULL);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    int top[TW];
    long worst = 0, total = 0;
    int min_ground = TW, max_tiles = 0;
    double t0 = terra_now_s();
    for (int f = 0; scene && f < PATH_FRAMES; f++) {
        char name[32];
        snprintf(name, sizeof name, "path_%02d", f);
        holes_result r = check_frame(scene, src, terra_fly_path_camera(src, (double)f / (PATH_FRAMES - 1)), rgb, top, name);
        CHECK(r.holes == 0, "frame %d: %ld sky pixels below the silhouette (e.g. column %d)", f, r.holes, r.where);
        if (r.holes > worst) worst = r.holes;
        total += r.holes;
        if (r.ground_columns < min_ground) min_ground = r.ground_columns;
        if (r.tiles > max_tiles) max_tiles = r.tiles;
    }
    /* the check means something only if the ground fills the view's columns */
    CHECK(min_ground >= TW - 2, "ground found in only %d of %d columns", min_ground, TW);
    printf("  path: %d frames of %dx%d, hole pixels max %ld (total %ld), up to %d tiles, %.1f s\n", PATH_FRAMES, TW, TH,
           worst, total, max_tiles, terra_now_s() - t0);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb);
}

static void no_holes_near_and_far(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, CELLS, TW, TH);
    CHECK(scene != NULL);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    int top[TW];
    const double pi = 3.14159265358979323846;
    struct {
        const char *name;
        double x, z, above, yaw_deg, pitch_deg;
    } cams[] = {
        {"ground_2m", 3100, -1250, 2, 60, -5},      {"ground_2m_uphill", 8000, 2000, 2, 200, 2},
        {"ground_2m_lake", -7000, 9000, 2, 300, -12}, {"air_20km", 2000, 500, 20000, 45, -20},
        {"air_20km_down", -5000, 4000, 20000, 130, -55},
    };
    for (int k = 0; scene && k < (int)(sizeof cams / sizeof cams[0]); k++) {
        float g = 0;
        terra_source_height(src, cams[k].x, cams[k].z, &g);
        terra_camera cam = {.eye = {cams[k].x, g + cams[k].above, cams[k].z}, .yaw_rad = cams[k].yaw_deg * pi / 180,
                            .pitch_rad = cams[k].pitch_deg * pi / 180, .fov_y_rad = 60 * pi / 180};
        holes_result r = check_frame(scene, src, cam, rgb, top, cams[k].name);
        CHECK(r.holes == 0, "%s: %ld sky pixels below the silhouette (e.g. column %d)", cams[k].name, r.holes, r.where);
        CHECK(r.ground_columns >= TW - 2, "%s: ground in only %d columns", cams[k].name, r.ground_columns);
        printf("  %-16s %4d tiles, hole pixels %ld\n", cams[k].name, r.tiles, r.holes);
    }
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb);
}

/* The check sees a hole: the same frame with one tile left out of the draw list. */
static void a_missing_tile_is_seen(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, CELLS, TW, TH);
    CHECK(scene != NULL);
    if (!scene) return;
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    int top[TW];
    terra_camera cam = terra_fly_path_camera(src, 0.0);
    cam.aspect = (double)TW / TH;
    holes_result full = check_frame(scene, src, cam, rgb, top, "control_full");
    CHECK(full.holes == 0);
    /* drop the tile under the middle of the image's lower part: where the ray through that
     * pixel meets the ground (marched on the CPU) */
    terra_vec3 ray = pixel_ray(&cam, TW, TH, TW / 2, TH * 3 / 4);
    double hx = cam.eye.x, hz = cam.eye.z;
    for (double t = 0.5; t < 5000; t += 0.5) {
        float g;
        hx = cam.eye.x + ray.x * t, hz = cam.eye.z + ray.z * t;
        terra_source_height(src, hx, hz, &g);
        if (cam.eye.y + ray.y * t <= g) break;
    }
    const terra_stream_draw *draws;
    int n;
    terra_stream *stream = terra_gl_scene_stream(scene);
    CHECK(terra_stream_draws(stream, terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
    terra_stream_draw *fewer = malloc(sizeof *fewer * (size_t)n);
    const terra_select *sel = terra_gl_scene_select(scene);
    int m = 0, dropped = 0;
    for (int i = 0; i < n; i++) {
        const double side = terra_select_tile_side(sel, draws[i].level);
        const double x0 = terra_tile_key_x(draws[i].key) * side, z0 = terra_tile_key_y(draws[i].key) * side;
        if (!dropped && hx >= x0 && hx < x0 + side && hz >= z0 && hz < z0 + side) {
            dropped = 1;
            continue;
        }
        fewer[m++] = draws[i];
    }
    CHECK(dropped == 1, "no tile under the image's lower middle");
    terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}};
    CHECK(terra_gl_draw(terra_gl_scene_renderer(scene), &cam, fewer, m, &style) == TERRA_OK);
    CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
    int where;
    long holes = holes_below(rgb, TW, TH, top, 1, &where);
    CHECK(holes > 0, "a frame with a tile left out shows no hole");
    printf("  one tile left out: %ld hole pixels found\n", holes);
    /* and cracks: without the morph (and the skirts that would hide them), finer tiles' edge vertices leave slivers beside coarser
     * neighbours along the path */
    long cracks = 0;
    terra_gl_style unmorphed = {.flat = true, .clear_rgb = {1, 0, 1}, .no_morph = true, .no_skirts = true};
    for (int f = 0; f < 6; f++) {
        terra_camera c = terra_fly_path_camera(src, f / 5.0 * 0.2);
        c.aspect = (double)TW / TH;
        CHECK(terra_gl_scene_frame(scene, &c, &unmorphed, true, 60, NULL) == TERRA_OK);
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        cpu_silhouette(src, terra_gl_scene_select(scene), &c, TW, TH, top);
        cracks += holes_below(rgb, TW, TH, top, 1, &where);
    }
    CHECK(cracks > 0, "unmorphed frames show no cracks: the check would miss them");
    printf("  unmorphed (cracks between levels): %ld hole pixels found over 6 frames\n", cracks);
    free(fewer);
    free(rgb);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

int main(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "no headless OpenGL 4.5: %s\n", terra_last_error());
        return 1;
    }
    printf("  renderer: %s\n", terra_gl_renderer_name());
    RUN(a_missing_tile_is_seen);
    RUN(no_holes_near_and_far);
    RUN(no_holes_along_the_path);
    terra_gl_context_destroy(ctx);
    return finish();
}
