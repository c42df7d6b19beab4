/* Drawing a cooked TIN archive (terra cook of the real St Helens DEM) by its own tiles: views that
 * look down into the area, so every pixel must show ground, show no sky pixel on any frame —
 * settled or real-time with tiles arriving late (a slowed decoder) over a dive, a low pass and
 * teleports — while every settled tile above level 0 projects its index error within tau, a
 * stand-in is at most two levels coarser than what it stands for after the first frames, and no
 * frame's drawn tiles fall below half the previous frame's (but a teleport's first). A fixed number
 * of draw calls a frame, whatever the tiles (the depth prepass's two and the picture's four). A negative
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
    for (int i = 0; i < ARCHIVE_FLIGHTS; i++) {
        const archive_flight r = fly_archive(m, archive_flights[i].camera, archive_flights[i].frames, info.bounds,
                                             archive_flights[i].name);
        CHECK(r.ok && r.failed == 0, "%s: the flight stopped (%s), or %d tiles failed", archive_flights[i].name,
              terra_last_error(), r.failed);
        printf("  %-10s %d frames: sky pixels max %ld, collapsed %d, stand-ins at most %d levels coarser, %d frames "
               "with stand-ins\n",
               archive_flights[i].name, r.frames, r.sky_max, r.collapsed, r.standin_max, r.fallback_frames);
        CHECK(r.sky_max == 0, "%s: %ld sky pixels on a frame", archive_flights[i].name, r.sky_max);
        CHECK(r.collapsed == 0, "%s: %d frames drew less than half the tiles of the frame before", archive_flights[i].name,
              r.collapsed);
        CHECK(r.standin_max <= 2, "%s: a stand-in %d levels coarser", archive_flights[i].name, r.standin_max);
        CHECK(r.calls_max <= 6, "%s: %d draw calls in a frame", archive_flights[i].name, r.calls_max);
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
        terra_camera cam = archive_dive(info.bounds, f, 12);
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
    terra_camera cam = archive_dive(info.bounds, 5, 12);
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
