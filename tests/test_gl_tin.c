/* Drawing a cooked TIN archive (terra cook of the real St Helens DEM) by its own tiles: views that
 * look down into the area, so every pixel must show ground, show no sky pixel on any frame —
 * settled or real-time with tiles arriving late (a slowed decoder) over a dive, a low pass and
 * teleports — while every settled tile above level 0 projects its index error within tau, a
 * stand-in is at most two levels coarser than what it stands for after the first frames, and no
 * frame's drawn tiles fall below half the previous frame's (but a teleport's first). One draw call
 * a frame. A negative
 * control drops a drawn tile and sees the hole. */
#include "check.h"
#include "test_gl_util.h"
#include "terra/archive_mesh.h"

#include <unistd.h>

static char dir[64] = "/tmp/terra_test_gl_tin_XXXXXX", path[160];

static bool cook_once(void) {
    if (path[0]) return true;
    const char *bin = getenv("TERRA_BIN");
    if (!bin) {
        printf("SKIP: TERRA_BIN not set (ctest sets it)\n");
        check_skips_++;
        return false;
    }
    if (!have_shared("a cooked St Helens archive")) return false;
    char dem[512], cmd[1400];
    shared_path("data/dem/sthelens_10m.png", dem, sizeof dem);
    if (!mkdtemp(dir)) return false;
    snprintf(path, sizeof path, "%s/sth.terra", dir);
    snprintf(cmd, sizeof cmd, "'%s' cook '%s' --spacing 10 --z-scale 0.1 -e 2 --tile-size 128 -q --no-cache -o '%s'", bin,
             dem, path);
    const int rc = system(cmd);
    CHECK(rc == 0, "%s: exit %d", cmd, rc);
    return rc == 0;
}

static long sky_pixels(const uint8_t *rgb, int w, int h) {
    long n = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) n += rgb[3 * i] == SKY[0] && rgb[3 * i + 1] == SKY[1] && rgb[3 * i + 2] == SKY[2];
    return n;
}

/* How many levels coarser than the tile it stands in for (a wanted tile not standing) the coarsest
 * stand-in of the frame is. */
static int tin_standin_levels(terra_stream *st, terra_focus f) {
    const terra_stream_draw *d;
    const terra_selected_tile *w;
    int nd, nw, worst = 0;
    terra_stream_draws(st, f, &d, &nd);
    terra_stream_wanted(st, f, &w, &nw);
    for (int k = 0; k < nw; k++) {
        if (terra_stream_is_standing(st, w[k].key)) continue;
        for (int i = 0; i < nd; i++) {
            if (!d[i].fallback || d[i].level <= w[k].level) continue;
            terra_tile_key a = w[k].key;
            while (terra_tile_key_level(a) < d[i].level) a = terra_tile_key_parent(a);
            if (a == d[i].key && d[i].level - w[k].level > worst) worst = d[i].level - w[k].level;
        }
    }
    return worst;
}

typedef struct flight_result {
    long sky_max;
    int frames, collapsed, standin_max, fallback_frames, calls_max;
} flight_result;

/* Flies `n` frames of cam(t) in real time (the first settled) and checks every one. */
static flight_result fly(terra_archive_mesh *m, terra_camera (*cam_at)(const double *area, int f, int n), int n,
                         const double *area, const char *name) {
    flight_result r = {0};
    terra_gl_scene *scene;
    CHECK(terra_gl_scene_create(&(terra_gl_scene_desc){.archive = m, .width = TW, .height = TH, .threads = 4, .max_in_flight = 8,
                                                       .budget_ms = 4},
                                &scene) == TERRA_OK,
          "%s", terra_last_error());
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    const terra_gl_style flat = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    int prev_tiles = 0;
    terra_vec3 prev_eye = {0, 0, 0};
    for (int f = 0; f < n; f++) {
        terra_camera cam = cam_at(area, f, n);
        /* a teleport (kilometres in a frame; the flights move 50 m) is a cut to ground not yet
         * seen, whose first frame draws stand-ins for all of it: not a collapse */
        const double dx = cam.eye.x - prev_eye.x, dz = cam.eye.z - prev_eye.z;
        const bool jump = f > 0 && dx * dx + dz * dz > 1000.0 * 1000.0;
        prev_eye = cam.eye;
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &flat, f == 0, 60, &fs) == TERRA_OK, "%s: %s", name, terra_last_error());
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        const long sky = sky_pixels(rgb, TW, TH);
        if (sky > r.sky_max) {
            r.sky_max = sky;
            char png[96];
            snprintf(png, sizeof png, "tin_holes_%s_%d.png", name, f);
            save_png(png, rgb, TW, TH);
        }
        r.collapsed += f > 0 && !jump && fs.tiles * 2 < prev_tiles;
        prev_tiles = fs.tiles;
        const int lv = tin_standin_levels(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene));
        if (f >= 10 && lv > r.standin_max) r.standin_max = lv;
        r.fallback_frames += fs.fallbacks > 0;
        if (fs.draw_calls > r.calls_max) r.calls_max = fs.draw_calls;
        r.frames++;
        CHECK(fs.failed == 0, "%s frame %d: %d tiles failed", name, f, fs.failed);
    }
    free(rgb);
    terra_gl_scene_destroy(scene);
    return r;
}

/* Looking down (pitch -50 to -80 degrees: the view's top edge 20 degrees or more below the
 * horizon), 1.5 to 3.6 km up over the middle of the area: every ray meets ground inside it. The
 * flights move 50 m a frame (3 km/s at 60 frames a second), the teleports kilometres at once. */
static terra_camera dive(const double *a, int f, int n) {
    const double t = (double)f / (n - 1), cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    return (terra_camera){.eye = {cx - 1000 + 2000 * t, 3600 - 1500 * t, cz + 500 * sin(6 * t)}, .yaw_rad = 0.9 + t,
                          .pitch_rad = -0.9 - 0.4 * t, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}
static terra_camera low_pass(const double *a, int f, int n) {
    const double t = (double)f / (n - 1), cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    return (terra_camera){.eye = {cx - 1000 + 2000 * t, 3000, cz - 500 + 1000 * t}, .yaw_rad = 2.0, .pitch_rad = -1.2,
                          .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}
static terra_camera teleports(const double *a, int f, int n) {
    (void)n;
    const double cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    const int hop = f / 6; /* a jump of kilometres every 6 frames */
    return (terra_camera){.eye = {cx + 3000 * sin(hop * 2.1), 2600 + 600 * cos(hop * 1.3), cz + 3000 * cos(hop * 1.7)},
                          .yaw_rad = hop * 0.8, .pitch_rad = -1.1, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}

static void tin_archive_is_whole_on_every_frame(void) {
    if (!cook_once()) return;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("SKIP: no headless OpenGL 4.5: %s\n", terra_last_error());
        check_skips_++;
        return;
    }
    terra_archive_mesh *m;
    terra_archive_mesh_info info;
    CHECK(terra_archive_mesh_open(path, &(terra_archive_mesh_desc){.latency_ms = 15}, &m, &info) == TERRA_OK,
          "%s", terra_last_error());
    CHECK(info.tin && info.levels >= 3, "a TIN archive of %d levels", info.levels);
    static const struct {
        const char *name;
        terra_camera (*cam)(const double *, int, int);
        int frames;
    } flights[] = {{"dive", dive, 40}, {"low_pass", low_pass, 40}, {"teleports", teleports, 36}};
    for (int i = 0; i < 3; i++) {
        const flight_result r = fly(m, flights[i].cam, flights[i].frames, info.bounds, flights[i].name);
        printf("  %-10s %d frames: sky pixels max %ld, collapsed %d, stand-ins at most %d levels coarser, %d frames "
               "with stand-ins\n",
               flights[i].name, r.frames, r.sky_max, r.collapsed, r.standin_max, r.fallback_frames);
        CHECK(r.sky_max == 0, "%s: %ld sky pixels on a frame", flights[i].name, r.sky_max);
        CHECK(r.collapsed == 0, "%s: %d frames drew less than half the tiles of the frame before", flights[i].name,
              r.collapsed);
        CHECK(r.standin_max <= 2, "%s: a stand-in %d levels coarser", flights[i].name, r.standin_max);
        CHECK(r.calls_max == 1, "%s: %d draw calls in a frame", flights[i].name, r.calls_max);
        if (i == 0) CHECK(r.fallback_frames > 0, "the decoder is slowed, yet no frame drew a stand-in");
    }
    terra_archive_mesh_close(m);
    terra_gl_context_destroy(ctx);
}

/* Settled views: every tile above level 0 within tau by its index error; and a dropped tile is seen. */
static void settled_tiles_within_tau_and_a_hole_is_seen(void) {
    if (!cook_once()) return;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("SKIP: no headless OpenGL 4.5\n");
        check_skips_++;
        return;
    }
    terra_archive_mesh *m;
    terra_archive_mesh_info info;
    CHECK(terra_archive_mesh_open(path, NULL, &m, &info) == TERRA_OK, "%s", terra_last_error());
    terra_gl_scene *scene;
    const double tau = 2;
    terra_gl_scene_desc sd = {.archive = m, .width = TW, .height = TH};
    sd.select.max_sse_px = tau;
    CHECK(terra_gl_scene_create(&sd, &scene) == TERRA_OK, "%s", terra_last_error());
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    const terra_gl_style flat = {.flat = true, .clear_rgb = {1, 0, 1}};
    double worst = 0;
    int levels_seen = 0, views = 0;
    for (int f = 0; f < 12; f++) {
        terra_camera cam = dive(info.bounds, f, 12);
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &flat, true, 60, &fs) == TERRA_OK && fs.settled, "%s", terra_last_error());
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        CHECK(sky_pixels(rgb, TW, TH) == 0, "settled view %d shows sky", f);
        const terra_selected_tile *w;
        int nw;
        terra_stream_wanted(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &w, &nw);
        for (int k = 0; k < nw; k++) {
            const double e = terra_archive_mesh_tile_error(m, w[k].key);
            const double sse = terra_select_sse_px(terra_gl_scene_select(scene), e, terra_box3_distance(&w[k].box, cam.eye));
            if (w[k].level > 0) worst = fmax(worst, sse);
            levels_seen |= 1 << w[k].level;
        }
        views++;
    }
    printf("  settled: %d views, largest projected error of a tile above level 0 %.2f px (tau %g), levels drawn 0x%x\n",
           views, worst, tau, (unsigned)levels_seen);
    CHECK(worst <= tau, "a drawn tile projects %g px", worst);
    CHECK(__builtin_popcount((unsigned)levels_seen) >= 2, "the views drew one level only (0x%x)", (unsigned)levels_seen);
    /* the negative control: the same view drawn without one of its tiles shows sky */
    terra_camera cam = dive(info.bounds, 5, 12);
    terra_gl_frame_stats fs;
    terra_gl_scene_frame(scene, &cam, &flat, true, 60, &fs);
    const terra_stream_draw *d;
    int nd;
    terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &d, &nd);
    cam.aspect = (double)TW / TH;
    long most = 0;
    for (int skip = 0; skip < nd; skip++) {
        terra_stream_draw less[256];
        int n = 0;
        for (int i = 0; i < nd && n < 256; i++)
            if (i != skip) less[n++] = d[i];
        CHECK(terra_gl_draw(terra_gl_scene_renderer(scene), &cam, less, n, &flat) == TERRA_OK);
        terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
        const long sky = sky_pixels(rgb, TW, TH);
        if (sky > most) most = sky;
    }
    CHECK(most > 0, "no tile of %d left out shows as sky: the check sees nothing", nd);
    free(rgb);
    terra_gl_scene_destroy(scene);
    terra_archive_mesh_close(m);
    terra_gl_context_destroy(ctx);
}

int main(void) {
    RUN(settled_tiles_within_tau_and_a_hole_is_seen);
    RUN(tin_archive_is_whole_on_every_frame);
    if (path[0]) unlink(path);
    rmdir(dir);
    return finish();
}
