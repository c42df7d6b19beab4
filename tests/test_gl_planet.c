/* The planet drawn: every frame of `terra fly --planet`'s path (a descent from 20,000 km to 2 m, a low
 * flight across a face edge and over a pole) without a hole: no pixel whose ray meets the ground
 * (terra_planet_raycast), well inside the ground's silhouette, shows the clear colour. A negative
 * control drops a tile and must see holes. Occlusion culling changes no pixel. And no tremble at 2 m
 * above the ground, 6,371 km from the origin: moving the eye by millimetres moves the picture by as
 * much. */
#include "check.h"
#include "terra/gl.h"
#include "terra/io.h"
#include "../cli/planet_path.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 160 /* llvmpipe on two cores */
#define H 90
#define FRAMES 40
#define MARGIN 3 /* pixels: a hole counts only this far inside the silhouette (tau is 2) */
#define STANDIN_MARGIN 12 /* with stand-ins up to two levels coarser, whose error is up to about 5 tau */

static const uint8_t CLEAR[3] = {255, 0, 255};

static terra_vec3 pixel_ray(const terra_camera *c, int i, int j) {
    terra_vec3 f, r, u;
    terra_camera_basis(c, &f, &r, &u);
    const double ty = tan(c->fov_y_rad * 0.5), tx = ty * W / H;
    const double a = ((i + 0.5) / W * 2 - 1) * tx, b = (1 - (j + 0.5) / H * 2) * ty;
    return (terra_vec3){f.x + a * r.x + b * u.x, f.y + a * r.y + b * u.y, f.z + a * r.z + b * u.z};
}

/* Which pixels must show ground: their ray and those of the pixels `margin` away in the eight
 * directions all meet it. */
static void must_be_ground(const terra_planet *p, const terra_camera *c, int margin, bool *out) {
    static bool hit[W * H];
    for (int j = 0; j < H; j++)
        for (int i = 0; i < W; i++) hit[j * W + i] = terra_planet_raycast(p, c->eye, pixel_ray(c, i, j), 0, NULL, NULL);
    for (int j = 0; j < H; j++)
        for (int i = 0; i < W; i++) {
            bool all = hit[j * W + i];
            for (int dj = -1; dj <= 1 && all; dj++)
                for (int di = -1; di <= 1 && all; di++) {
                    const int x = i + di * margin, y = j + dj * margin;
                    all = x >= 0 && y >= 0 && x < W && y < H && hit[y * W + x];
                }
            out[j * W + i] = all;
        }
}

static long count_holes(const uint8_t *rgb, const bool *ground, long *checked) {
    long holes = 0;
    for (int k = 0; k < W * H; k++) {
        if (!ground[k]) continue;
        (*checked)++;
        holes += rgb[3 * k] == CLEAR[0] && rgb[3 * k + 1] == CLEAR[1] && rgb[3 * k + 2] == CLEAR[2];
    }
    return holes;
}

static terra_planet *planet;

/* The negative control: the frame drawn again without the tile under the picture's lower middle
 * (where the ray through it meets the ground), and the holes then found. */
static long without_middle_tile(terra_gl *gl, const terra_camera *cam, const terra_stream_draw *draws, int n,
                                const terra_gl_style *style, uint8_t *rgb, const bool *ground) {
    terra_vec3 g;
    if (n < 2 || !terra_planet_raycast(planet, cam->eye, pixel_ray(cam, W / 2, 3 * H / 4), 0, NULL, &g)) return 0;
    int drop = -1;
    for (int i = 0; i < n && drop < 0; i++)
        if (terra_planet_key_at(planet, terra_planet_up_at(planet, g, NULL), draws[i].level) == draws[i].key) drop = i;
    if (drop < 0) return 0;
    terra_stream_draw *less = malloc(sizeof *less * (size_t)n);
    memcpy(less, draws, sizeof *less * (size_t)n);
    less[drop] = less[n - 1];
    long checked = 0;
    CHECK(terra_gl_draw(gl, cam, less, n - 1, style) == TERRA_OK && terra_gl_read_rgb(gl, rgb) == TERRA_OK);
    const long holes = count_holes(rgb, ground, &checked);
    free(less);
    return holes;
}

static void descent_has_no_holes(void) {
    terra_gl_planet *scene;
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = planet, .width = W, .height = H, .threads = 2,
                                                         .capacity_tiles = 4096},
                                 &scene) == TERRA_OK,
          "%s", terra_last_error());
    if (!scene) return;
    terra_gl *gl = terra_gl_planet_renderer(scene);
    const terra_gl_style style = {.flat = true, .clear_rgb = {CLEAR[0] / 255.0f, CLEAR[1] / 255.0f, CLEAR[2] / 255.0f}};
    terra_gl_style bare = style;
    bare.no_skirts = true;
    uint8_t *rgb = malloc(W * H * 3);
    bool *ground = malloc(W * H);
    long worst = 0, checked = 0, bare_holes = 0, control_holes = 0, triangles = 0;
    int faces_seen = 0;
    double lat_max = -90;
    /* the path, then where it is hardest: a pole, a face's edge, a cube's corner, 2 m and more up */
    static const double extra[][4] = {{90, 0, 2, -10}, {89.9, 30, 500, -8}, {0, 45, 2, -5}, {35.2644, 45, 100, -20}, {-35.2644, -135, 3000, -30}};
    enum { EXTRA = sizeof extra / sizeof extra[0] };
    for (int f = 0; f < FRAMES + EXTRA; f++) {
        terra_camera cam = terra_planet_path_camera(planet, f / (FRAMES - 1.0));
        if (f >= FRAMES) {
            const double *e = extra[f - FRAMES];
            const terra_vec3 d = terra_planet_latlon_dir(e[0], e[1]);
            cam = (terra_camera){.eye = terra_planet_point(planet, d, terra_planet_height(planet, d) + e[2]), .yaw_rad = 0.3, .pitch_rad = e[3] * 3.14159265358979323846 / 180,
                                 .fov_y_rad = 60 * 3.14159265358979323846 / 180, .up = d};
        }
        cam.aspect = (double)W / H;
        double s, t, lat, lon;
        faces_seen |= 1 << terra_planet_dir_face(cam.eye, &s, &t);
        terra_planet_dir_latlon(cam.eye, &lat, &lon);
        lat_max = fmax(lat_max, lat);
        terra_gl_frame_stats fs;
        CHECK(terra_gl_planet_frame(scene, &cam, &style, &fs) == TERRA_OK, "frame %d: %s", f, terra_last_error());
        CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK);
        triangles += fs.triangles;
        must_be_ground(planet, &cam, MARGIN, ground);
        long n_checked = 0;
        const long holes = count_holes(rgb, ground, &n_checked);
        checked += n_checked;
        CHECK(holes == 0, "frame %d (%.0f m up): %ld hole pixels", f,
              terra_planet_altitude(planet, cam.eye, NULL, NULL), holes);
        if (holes > worst) worst = holes;
        if (f == 0 || f == FRAMES / 2) {
            char path[64];
            snprintf(path, sizeof path, "planet_frame_%02d.png", f);
            terra_io_write_png(path, rgb, W, H, 3);
        }
        /* without skirts, and with one drawn tile left out (the negative control: it must show) */
        const terra_stream_draw *draws;
        int n;
        terra_gl_planet_draws(scene, &draws, &n);
        CHECK(terra_gl_draw(gl, &cam, draws, n, &bare) == TERRA_OK && terra_gl_read_rgb(gl, rgb) == TERRA_OK);
        long c2 = 0;
        bare_holes += count_holes(rgb, ground, &c2);
        control_holes += without_middle_tile(gl, &cam, draws, n, &style, rgb, ground);
    }
    printf("     %d frames, %ld pixels that must show ground, worst frame %ld holes; %.0f triangles a frame\n", FRAMES + EXTRA,
           checked, worst, (double)triangles / (FRAMES + EXTRA));
    printf("     without skirts %ld hole pixels; with a tile left out %ld (the control)\n", bare_holes, control_holes);
    printf("     planet.hole_pixels_max %ld\n", worst);
    CHECK(checked > FRAMES * W * H / 4, "too few pixels checked (%ld)", checked);
    CHECK(control_holes > 100, "a missing tile went unseen (%ld holes): the check proves nothing", control_holes);
    CHECK(__builtin_popcount((unsigned)faces_seen) >= 3 && lat_max > 89.99, "the frames saw faces %x, reached latitude %g",
          faces_seen, lat_max);
    free(rgb), free(ground);
    terra_gl_planet_destroy(scene);
}

/* In real time (2 ms of uploads a frame, tiles meshed across frames, ancestors up to two levels
 * coarser standing in): every frame of a descent from 30 km to 2 m, coherent as a flight is, has no
 * hole (in frames with stand-ins, counted STANDIN_MARGIN inside the silhouette), though most frames
 * draw stand-ins; standing still, it settles to the frame drawn whole. */
static void realtime_frames_have_no_holes(void) {
    terra_gl_planet *scene;
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = planet, .width = W, .height = H, .threads = 2,
                                                         .capacity_tiles = 4096, .budget_ms = 2},
                                 &scene) == TERRA_OK,
          "%s", terra_last_error());
    if (!scene) return;
    terra_gl *gl = terra_gl_planet_renderer(scene);
    const terra_gl_style style = {.flat = true, .clear_rgb = {CLEAR[0] / 255.0f, CLEAR[1] / 255.0f, CLEAR[2] / 255.0f}};
    uint8_t *rgb = malloc(W * H * 3);
    bool *ground = malloc(W * H);
    long worst = 0, checked = 0;
    int with_standins = 0, most = 0, max_gap = 0;
    long control = 0;
    const int frames = 48;
    for (int f = 0; f < frames; f++) {
        const double t = 0.46 + 0.14 * f / (frames - 1); /* 30 km down to 2 m */
        terra_camera cam = terra_planet_path_camera(planet, t);
        cam.aspect = (double)W / H;
        terra_gl_frame_stats fs;
        CHECK(terra_gl_planet_frame(scene, &cam, &style, &fs) == TERRA_OK, "frame %d: %s", f, terra_last_error());
        CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK);
        with_standins += fs.fallbacks > 0;
        if (fs.fallbacks > most) most = fs.fallbacks;
        if (fs.standin_levels > max_gap) max_gap = fs.standin_levels;
        must_be_ground(planet, &cam, fs.fallbacks ? STANDIN_MARGIN : MARGIN, ground);
        long c = 0;
        const long holes = count_holes(rgb, ground, &c);
        checked += c;
        CHECK(holes == 0, "real-time frame %d (%.0f m up, %d stand-ins): %ld hole pixels", f,
              terra_planet_altitude(planet, cam.eye, NULL, NULL), fs.fallbacks, holes);
        if (holes > worst) worst = holes;
        if (f % 8 == 7) { /* the wider margin still sees a missing tile */
            const terra_stream_draw *draws;
            int n;
            terra_gl_planet_draws(scene, &draws, &n);
            control += without_middle_tile(gl, &cam, draws, n, &style, rgb, ground);
        }
    }
    printf("     real time: %d frames, %d with stand-ins (at most %d, at most %d levels coarser), %ld pixels checked, worst %ld holes\n",
           frames, with_standins, most, max_gap, checked, worst);
    CHECK(with_standins > frames / 4, "only %d frames had stand-ins: the flight proves little", with_standins);
    CHECK(max_gap <= 2, "a stand-in %d levels coarser than the tile it stood for", max_gap);
    printf("     with a tile left out (6 frames) %ld holes (the control)\n", control);
    CHECK(control > 100, "a missing tile went unseen with the wider margin (%ld)", control);
    /* standing still, it settles */
    terra_camera cam = terra_planet_path_camera(planet, 0.6);
    cam.aspect = (double)W / H;
    terra_gl_frame_stats fs = {0};
    for (int k = 0; k < 400 && !fs.settled; k++) CHECK(terra_gl_planet_frame(scene, &cam, &style, &fs) == TERRA_OK);
    CHECK(fs.settled && fs.fallbacks == 0, "standing still, the frame never settled");
    free(rgb), free(ground);
    terra_gl_planet_destroy(scene);
}

/* Occlusion culling on the planet hides only what nothing shows: each frame's draws drawn culled and
 * whole (style.no_occlusion), the pictures and depth buffers equal pixel for pixel. Views: the path
 * of `terra fly --planet`, random cameras from 2 m to 40,000 km (every heading, pitch from 60 degrees
 * under to 20 over the horizon), real-time frames of a descent with stand-ins still coming, and views
 * of a WGS84 planet (culled by the view's sides alone). And it must cull: much of what low views select
 * is hidden. */
typedef struct cull_tally {
    int frames, culled;
    long drawn, hidden, differ;
} cull_tally;

static void compare_culled(terra_gl *gl, const terra_camera *cam, const terra_stream_draw *draws, int n, int w, int h,
                           uint8_t *rgb[2], float *z[2], cull_tally *t, const char *what, int index) {
    for (int pass = 0; pass < 2; pass++) {
        terra_gl_style s = {.flat = true, .clear_rgb = {1, 0, 1}, .no_occlusion = pass == 1};
        CHECK(terra_gl_draw(gl, cam, draws, n, &s) == TERRA_OK, "%s %d: %s", what, index, terra_last_error());
        CHECK(terra_gl_read_rgb(gl, rgb[pass]) == TERRA_OK && terra_gl_read_depth(gl, z[pass]) == TERRA_OK);
        const terra_gl_stats *gs = terra_gl_get_stats(gl);
        if (pass == 0) t->culled += gs->occlusion || n == 0, t->hidden += gs->occluded_triangles, t->drawn += gs->triangles - gs->skirt_triangles;
        else CHECK(gs->occluded_triangles == 0 && !gs->occlusion, "%s %d: culled though asked not to", what, index);
    }
    long differ = 0;
    for (int i = 0; i < w * h; i++) differ += memcmp(rgb[0] + 3 * i, rgb[1] + 3 * i, 3) || z[0][i] != z[1][i];
    CHECK(differ == 0, "%s %d (%.0f m up): %ld pixels differ culled and whole", what, index,
          terra_planet_altitude(planet, cam->eye, NULL, NULL), differ);
    t->differ += differ;
    t->frames++;
}

static void culling_hides_only_the_unseen(void) {
    enum { CW = 320, CH = 180, RANDOM = 60 };
    uint8_t *rgb[2] = {malloc(CW * CH * 3), malloc(CW * CH * 3)};
    float *z[2] = {malloc(sizeof(float) * CW * CH), malloc(sizeof(float) * CW * CH)};
    cull_tally whole = {0}, low = {0};
    for (int realtime = 0; realtime < 2; realtime++) {
        terra_gl_planet *scene;
        CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = planet, .width = CW, .height = CH, .threads = 2,
                                                             .budget_ms = realtime ? 2 : 0},
                                     &scene) == TERRA_OK,
              "%s", terra_last_error());
        if (!scene) break;
        terra_gl *gl = terra_gl_planet_renderer(scene);
        uint64_t rng = 7;
        const int views = realtime ? 48 : FRAMES + RANDOM;
        for (int v = 0; v < views; v++) {
            terra_camera cam;
            if (realtime) cam = terra_planet_path_camera(planet, 0.46 + 0.14 * v / 47.0); /* 30 km to 2 m */
            else if (v < FRAMES) cam = terra_planet_path_camera(planet, v / (FRAMES - 1.0));
            else {
                double u[4];
                for (int k = 0; k < 4; k++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    u[k] = (double)(rng >> 11) / 9007199254740992.0;
                }
                const terra_vec3 d = terra_planet_latlon_dir(u[0] * 180 - 90, u[1] * 360 - 180);
                const double alt = 2 * pow(2e7, u[2]), pi = 3.14159265358979323846; /* 2 m to 40,000 km */
                cam = (terra_camera){.eye = terra_planet_point(planet, d, terra_planet_height(planet, d) + alt),
                                     .yaw_rad = u[3] * 2 * pi, .pitch_rad = (u[2] * 80 - 60) * pi / 180,
                                     .fov_y_rad = 60 * pi / 180, .up = d};
            }
            cam.aspect = (double)CW / CH;
            terra_gl_frame_stats fs;
            CHECK(terra_gl_planet_frame(scene, &cam, NULL, &fs) == TERRA_OK, "view %d: %s", v, terra_last_error());
            const terra_stream_draw *draws;
            int n;
            terra_gl_planet_draws(scene, &draws, &n);
            cull_tally *t = terra_planet_altitude(planet, cam.eye, NULL, NULL) < 100 ? &low : &whole;
            compare_culled(gl, &cam, draws, n, CW, CH, rgb, z, t, realtime ? "real-time frame" : "view", v);
        }
        terra_gl_planet_destroy(scene);
    }
    whole.frames += low.frames, whole.culled += low.culled, whole.drawn += low.drawn, whole.hidden += low.hidden;
    printf("     %d frames drawn culled and whole (%d culled): %ld pixels differ; ground triangles left out %.1f%% "
           "(below 100 m %.1f%%)\n",
           whole.frames, whole.culled, whole.differ + low.differ, 100.0 * whole.hidden / (whole.hidden + whole.drawn),
           100.0 * low.hidden / (low.hidden + low.drawn));
    CHECK(whole.culled == whole.frames, "only %d of %d frames were culled", whole.culled, whole.frames);
    CHECK(low.hidden > low.drawn, "below 100 m only %ld of %ld ground triangles were left out", low.hidden, low.hidden + low.drawn);
    /* on an ellipsoid (its ground off its lattice's great circles) only what lies outside the view's
     * sides is left out: the same pictures */
    terra_planet *wgs;
    terra_gl_planet *scene;
    CHECK(terra_planet_create(&(terra_planet_desc){.wgs84 = true}, &wgs) == TERRA_OK);
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = wgs, .width = CW, .height = CH, .threads = 2}, &scene) ==
          TERRA_OK);
    cull_tally ell = {0};
    for (int v = 0; v < 8; v++) {
        terra_camera cam = terra_planet_path_camera(wgs, 0.3 + 0.1 * v);
        cam.aspect = (double)CW / CH;
        CHECK(terra_gl_planet_frame(scene, &cam, NULL, NULL) == TERRA_OK, "%s", terra_last_error());
        const terra_stream_draw *draws;
        int n;
        terra_gl_planet_draws(scene, &draws, &n);
        compare_culled(terra_gl_planet_renderer(scene), &cam, draws, n, CW, CH, rgb, z, &ell, "WGS84 view", v);
    }
    printf("     WGS84: %d frames culled and whole: %ld pixels differ; ground triangles left out %.1f%% (outside the view)\n",
           ell.frames, ell.differ, 100.0 * ell.hidden / (ell.hidden + ell.drawn));
    CHECK(ell.culled == ell.frames && ell.hidden > 0, "WGS84: %d of %d frames culled, %ld triangles left out", ell.culled,
          ell.frames, ell.hidden);
    terra_gl_planet_destroy(scene);
    terra_planet_destroy(wgs);
    free(rgb[0]), free(rgb[1]), free(z[0]), free(z[1]);
}

/* 2 m above the ground, 6,371 km from the origin: the eye moved by 1 to 8 mm along the view moves the
 * depth of the picture's middle by as much (floats relative to the world would move it by half a
 * metre or not at all). */
static void steady_at_two_metres(void) {
    terra_gl_planet *scene;
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = planet, .width = W, .height = H, .threads = 2}, &scene) ==
          TERRA_OK);
    if (!scene) return;
    terra_gl *gl = terra_gl_planet_renderer(scene);
    const terra_gl_style style = {.flat = true};
    static float z[W * H];
    double worst = 0;
    const double lats[2] = {-4.3, 63.0}, lons[2] = {-12.3, 167.7}; /* on two faces, one far from +x */
    for (int k = 0; k < 2; k++) {
        const terra_vec3 d = terra_planet_latlon_dir(lats[k], lons[k]);
        const double r = terra_planet_get_desc(planet)->radius_m + terra_planet_height(planet, d) + 2;
        terra_camera cam = {.eye = {d.x * r, d.y * r, d.z * r}, .yaw_rad = 0.5, .pitch_rad = -0.3,
                            .fov_y_rad = 60 * 3.14159265358979323846 / 180, .aspect = (double)W / H, .up = d};
        terra_vec3 fw;
        terra_camera_basis(&cam, &fw, NULL, NULL);
        double z0 = 0;
        for (int step = 0; step <= 8; step++) {
            terra_camera c = cam;
            const double move = step * 1e-3;
            c.eye.x += fw.x * move, c.eye.y += fw.y * move, c.eye.z += fw.z * move;
            CHECK(terra_gl_planet_frame(scene, &c, &style, NULL) == TERRA_OK);
            CHECK(terra_gl_read_depth(gl, z) == TERRA_OK);
            const double mid = z[(H / 2) * W + W / 2];
            if (step == 0) z0 = mid;
            const double err = fabs((z0 - mid) - move);
            worst = fmax(worst, err);
            CHECK(err < 1.5e-3, "at %g, %g the eye moved %.0f mm and the middle's depth by %.2f mm", lats[k], lons[k], move * 1e3,
                  (z0 - mid) * 1e3);
        }
    }
    printf("     depth of the middle follows millimetre moves within %.3f mm\n", worst * 1e3);
    terra_gl_planet_destroy(scene);
}

/* A view that asks for more tiles than the selection holds (here a cache of 16 tiles, as a tiny tau
 * or a tall picture asks more of the default one) is drawn at a coarser tau, whole: no hole. */
static void too_much_asked_is_drawn_coarser(void) {
    terra_gl_planet *scene;
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = planet, .width = W, .height = H, .threads = 2,
                                                         .capacity_tiles = 16},
                                 &scene) == TERRA_OK,
          "%s", terra_last_error());
    if (!scene) return;
    const terra_gl_style style = {.flat = true, .clear_rgb = {CLEAR[0] / 255.0f, CLEAR[1] / 255.0f, CLEAR[2] / 255.0f}};
    static uint8_t rgb[W * H * 3];
    static bool ground[W * H];
    terra_camera cam = terra_planet_path_camera(planet, 0.7); /* low over the ground */
    cam.aspect = (double)W / H;
    CHECK(terra_gl_planet_frame(scene, &cam, &style, NULL) == TERRA_OK, "%s", terra_last_error());
    const double tau = terra_planet_select_sse(terra_gl_planet_select(scene));
    CHECK(tau > 2, "tau %g: the frame fitted 10 tiles at 2 px, so the test asks for nothing", tau);
    CHECK(terra_gl_read_rgb(terra_gl_planet_renderer(scene), rgb) == TERRA_OK);
    must_be_ground(planet, &cam, MARGIN, ground);
    long checked = 0;
    const long holes = count_holes(rgb, ground, &checked);
    CHECK(holes == 0 && checked > W * H / 4, "%ld hole pixels of %ld", holes, checked);
    printf("     16 tiles held: drawn at a screen-space error of %g px, %ld pixels of ground, %ld holes\n", tau, checked, holes);
    terra_gl_planet_destroy(scene);
}

/* A geographic grid laid over the WGS84 planet (ridges 1,400 m high over 45..45.5 N, 7..7.5 E,
 * blended into the planet's ground over 3 km): settled frames looking across its borders and down
 * on a corner, from 30 m to 30 km up, show no hole. */
static void overlay_border_has_no_holes(void) {
    enum { GW = 241, GH = 181 };
    static float h[GW * GH];
    for (int j = 0; j < GH; j++)
        for (int i = 0; i < GW; i++)
            h[j * GW + i] = (float)(800 + 700 * sin(i * 0.21) * cos(j * 0.17) + 120 * sin(i * 1.3 + j * 0.9));
    terra_geo_grid *g = NULL;
    terra_planet *p = NULL;
    terra_gl_planet *scene = NULL;
    CHECK(terra_geo_grid_create(&(terra_geo_grid_desc){.bounds = {7, 45, 7.5, 45.5}, .width = GW, .height = GH, .heights = h},
                                &g) == TERRA_OK &&
              terra_planet_create(&(terra_planet_desc){.cells = 32, .wgs84 = true, .overlay = g, .overlay_blend_m = 3000}, &p) ==
                  TERRA_OK &&
              terra_gl_planet_create(&(terra_gl_planet_desc){.planet = p, .width = W, .height = H, .threads = 2,
                                                             .capacity_tiles = 16384},
                                     &scene) == TERRA_OK,
          "%s", terra_last_error());
    if (scene) {
        const terra_gl_style style = {.flat = true, .clear_rgb = {CLEAR[0] / 255.0f, CLEAR[1] / 255.0f, CLEAR[2] / 255.0f}};
        uint8_t *rgb = malloc(W * H * 3);
        bool *ground = malloc(W * H);
        static const double views[][5] = {/* lat, lon, alt, heading, pitch */
                                          {45.25, 6.98, 30, 90, -3},    {45.25, 7.03, 300, 270, -8}, {44.99, 7.25, 1000, 0, -15},
                                          {45.52, 7.48, 3000, 200, -25}, {44.97, 6.97, 8000, 45, -35}, {45.0, 7.0, 30000, 0, -90}};
        long worst = 0, checked = 0;
        for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
            const terra_vec3 d = terra_planet_latlon_dir(views[v][0], views[v][1]);
            const terra_camera cam = {.eye = terra_planet_point(p, d, terra_planet_height(p, d) + views[v][2]),
                                      .yaw_rad = views[v][3] * 3.14159265358979323846 / 180,
                                      .pitch_rad = views[v][4] * 3.14159265358979323846 / 180,
                                      .fov_y_rad = 60 * 3.14159265358979323846 / 180, .aspect = (double)W / H, .up = d};
            terra_gl_frame_stats fs;
            CHECK(terra_gl_planet_frame(scene, &cam, &style, &fs) == TERRA_OK, "view %zu: %s", v, terra_last_error());
            CHECK(terra_gl_read_rgb(terra_gl_planet_renderer(scene), rgb) == TERRA_OK);
            must_be_ground(p, &cam, MARGIN, ground);
            const long holes = count_holes(rgb, ground, &checked);
            CHECK(holes == 0, "view %zu (%.0f m up over %.2f, %.2f): %ld hole pixels", v, views[v][2], views[v][0], views[v][1], holes);
            if (holes > worst) worst = holes;
            if (v == 1 || holes) { /* the picture of a view with holes, to look at */
                char path[64];
                snprintf(path, sizeof path, holes ? "planet_overlay_view_%zu.png" : "planet_overlay_border.png", v);
                terra_io_write_png(path, rgb, W, H, 3);
            }
        }
        printf("     %zu views across the grid's borders: %ld pixels that must show ground, worst %ld holes\n",
               sizeof views / sizeof views[0], checked, worst);
        CHECK(checked > 20000, "too few ground pixels checked (%ld)", checked);
        free(rgb);
        free(ground);
    }
    terra_gl_planet_destroy(scene);
    terra_planet_destroy(p);
    terra_geo_grid_destroy(g);
}

int main(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("skip: no OpenGL 4.5 context (%s)\n", terra_last_error());
        return 77;
    }
    if (terra_planet_create(&(terra_planet_desc){.cells = 16}, &planet) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 1;
    }
    RUN(descent_has_no_holes);
    RUN(realtime_frames_have_no_holes);
    RUN(culling_hides_only_the_unseen);
    RUN(steady_at_two_metres);
    RUN(too_much_asked_is_drawn_coarser);
    RUN(overlay_border_has_no_holes);
    terra_planet_destroy(planet);
    terra_gl_context_destroy(ctx);
    return finish();
}
