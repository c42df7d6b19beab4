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
    /* pixels skirts change (compare_unskirted): sky without them (holes closed); ground without
     * them, the skirt nearer (a crack seen through to ground behind, closed); other (changed) */
    long closed, cracks_closed, changed;
    long holes_unskirted; /* hole pixels without skirts */
} holes_result;

/* Draws the frame's draws again without skirts and compares with `rgb` and `z` (the frame drawn
 * with them). A skirt hangs below its tile's edge: wherever it shows, and is nearer than what is
 * there without it, a ray reached under the ground's edge without meeting the ground (sky, or
 * ground further on, through a crack). Anything else a skirt changes is counted as changed. */
static void compare_unskirted(terra_gl_scene *scene, const terra_camera *cam, const terra_gl_style *style,
                              const uint8_t *rgb, const float *z, const int *top, holes_result *r) {
    const terra_stream_draw *draws;
    int n;
    terra_gl_style unskirted = *style;
    unskirted.no_skirts = true;
    uint8_t *bare = malloc((size_t)TW * TH * 3);
    float *zb = malloc(sizeof(float) * TW * TH);
    terra_gl *gl = terra_gl_scene_renderer(scene);
    CHECK(terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
    CHECK(terra_gl_draw(gl, cam, draws, n, &unskirted) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_gl_read_rgb(gl, bare) == TERRA_OK && terra_gl_read_depth(gl, zb) == TERRA_OK);
    for (size_t i = 0; i < (size_t)TW * TH; i++) {
        const uint8_t *a = rgb + 3 * i, *b = bare + 3 * i;
        if (a[0] == b[0] && a[1] == b[1] && a[2] == b[2]) continue;
        if (b[0] == SKY[0] && b[1] == SKY[1] && b[2] == SKY[2]) r->closed++;
        else if (z[i] < zb[i]) r->cracks_closed++;
        else r->changed++;
    }
    int where;
    r->holes_unskirted = holes_below(bare, TW, TH, top, 1, &where);
    free(bare), free(zb);
}

static holes_result check_frame(terra_gl_scene *scene, const terra_source *src, terra_camera cam, uint8_t *rgb,
                                float *z, int *top, const char *name) {
    holes_result r = {0};
    terra_gl_style style = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    terra_gl_frame_stats fs;
    cam.aspect = (double)TW / TH;
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, &fs) == TERRA_OK, "%s: %s", name, terra_last_error());
    CHECK(fs.settled, "%s: the streamer did not settle", name);
    CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
    const terra_stream_draw *draws;
    int n;
    CHECK(terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
    cpu_silhouette_drawn(src, terra_gl_scene_select(scene), &cam, draws, n, TW, TH, top);
    r.holes = holes_below(rgb, TW, TH, top, 1, &r.where);
    r.ground_columns = columns_with_ground(top, TW, TH);
    r.tiles = fs.tiles;
    if (z) {
        CHECK(terra_gl_read_depth(terra_gl_scene_renderer(scene), z) == TERRA_OK);
        compare_unskirted(scene, &cam, &style, rgb, z, top, &r);
    }
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
    float *z = malloc(sizeof(float) * TW * TH);
    int top[TW];
    long worst = 0, total = 0, closed = 0, cracks = 0, changed = 0, unskirted = 0;
    int min_ground = TW, max_tiles = 0;
    double t0 = terra_now_s();
    for (int f = 0; scene && f < PATH_FRAMES; f++) {
        char name[32];
        snprintf(name, sizeof name, "path_%02d", f);
        holes_result r =
            check_frame(scene, src, terra_fly_path_camera(src, (double)f / (PATH_FRAMES - 1)), rgb, z, top, name);
        CHECK(r.holes == 0, "frame %d: %ld sky pixels below the silhouette (e.g. column %d)", f, r.holes, r.where);
        CHECK(r.changed == 0, "frame %d: skirts changed %ld ground pixels", f, r.changed);
        closed += r.closed, cracks += r.cracks_closed, changed += r.changed, unskirted += r.holes_unskirted;
        if (r.holes > worst) worst = r.holes;
        total += r.holes;
        if (r.ground_columns < min_ground) min_ground = r.ground_columns;
        if (r.tiles > max_tiles) max_tiles = r.tiles;
    }
    /* the check means something only if the ground fills the view's columns */
    CHECK(min_ground >= TW - 2, "ground found in only %d of %d columns", min_ground, TW);
    printf("  path: %d frames of %dx%d, hole pixels max %ld (total %ld), up to %d tiles, %.1f s\n", PATH_FRAMES, TW, TH,
           worst, total, max_tiles, terra_now_s() - t0);
    printf("  path without skirts: %ld hole pixels; skirts turned %ld sky pixels to ground, closed %ld cracks to ground "
           "further on, and changed %ld other pixels\n",
           unskirted, closed, cracks, changed);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb), free(z);
}

static void no_holes_near_and_far(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, CELLS, TW, TH);
    CHECK(scene != NULL);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
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
        holes_result r = check_frame(scene, src, cam, rgb, z, top, cams[k].name);
        CHECK(r.holes == 0, "%s: %ld sky pixels below the silhouette (e.g. column %d)", cams[k].name, r.holes, r.where);
        CHECK(r.ground_columns >= TW - 2, "%s: ground in only %d columns", cams[k].name, r.ground_columns);
        CHECK(r.changed == 0, "%s: skirts changed %ld ground pixels", cams[k].name, r.changed);
        printf("  %-16s %4d tiles, hole pixels %ld (without skirts %ld; skirts closed %ld sky and %ld crack pixels, changed "
               "%ld)\n",
               cams[k].name, r.tiles, r.holes, r.holes_unskirted, r.closed, r.cracks_closed, r.changed);
    }
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    free(rgb), free(z);
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
    holes_result full = check_frame(scene, src, cam, rgb, NULL, top, "control_full");
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
    /* and cracks: without the morph (and without the skirts, which close them too), finer tiles'
     * edge vertices leave slivers beside coarser neighbours along the path */
    long cracks = 0, skirted = 0;
    terra_gl_style unmorphed = {.flat = true, .clear_rgb = {1, 0, 1}, .no_morph = true, .no_skirts = true};
    for (int f = 0; f < 6; f++) {
        terra_camera c = terra_fly_path_camera(src, f / 5.0 * 0.2);
        c.aspect = (double)TW / TH;
        unmorphed.no_skirts = true;
        CHECK(terra_gl_scene_frame(scene, &c, &unmorphed, true, 60, NULL) == TERRA_OK);
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        cpu_silhouette(src, terra_gl_scene_select(scene), &c, TW, TH, top);
        cracks += holes_below(rgb, TW, TH, top, 1, &where);
        unmorphed.no_skirts = false;
        CHECK(terra_stream_draws(stream, terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
        CHECK(terra_gl_draw(terra_gl_scene_renderer(scene), &c, draws, n, &unmorphed) == TERRA_OK);
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        skirted += holes_below(rgb, TW, TH, top, 1, &where);
    }
    CHECK(cracks > 0, "unmorphed frames show no cracks: the check would miss them");
    CHECK(skirted == 0, "unmorphed frames with skirts show %ld hole pixels", skirted);
    printf("  unmorphed (cracks between levels): %ld hole pixels found over 6 frames without skirts, %ld with\n", cracks,
           skirted);
    free(fewer);
    free(rgb);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

/* ---- real time: every frame, tiles arriving late ---------------------------------------------------
 * The default world behind a source whose grid requests sleep 2-10 ms each (three per tile), so the
 * two workers make a few dozen tiles a second and a flight runs ahead of them. A flight's first frame
 * settles (the source not yet slowed); every later one runs the streamer once, as a real-time frame
 * does (again while a stand-in would be more than 2 levels coarser), and draws stand-ins where tiles
 * are still coming. On every frame: no sky pixel more than one
 * pixel below the silhouette (computed from the source at the lattice points of the tiles actually
 * drawn, stand-ins included: points on the drawn ground, so no tolerance is needed for a stand-in
 * being coarser), the same frame without skirts for the negative control, the gaps between the drawn
 * tiles' morphed sides against the skirt depth, collapses (tiles drawn falling below half of the
 * previous frame's) and how many levels coarser a stand-in is than the tiles it stands in for
 * (asserted at most 2 on every frame). */

#define RT_FRAMES 30

/* Stand-ins at most 2 levels coarser than any tile they cover, on every frame (the scene's
 * max_standin_levels: the parents of tiles still coming are asked for first, and a frame that would
 * draw deeper waits for them). A stand-in drops every wanted tile under it, so the figure counts
 * those too, not only the tile it stands for (the "nearest standing ancestor" figure is what each
 * tile alone would get). */

typedef terra_camera (*flight_camera)(const terra_source *world, int f, int n, bool *jump);

static terra_camera above_ground(const terra_source *world, double x, double z, double above, double yaw_deg,
                                 double pitch_deg) {
    const double pi = 3.14159265358979323846;
    float g = 0;
    terra_source_height(world, x, z, &g);
    return (terra_camera){.eye = {x, g + above, z}, .yaw_rad = yaw_deg * pi / 180, .pitch_rad = pitch_deg * pi / 180,
                          .fov_y_rad = 60 * pi / 180, .aspect = (double)TW / TH};
}

/* the built-in path, its first third (4 km east in 30 frames, 135 m a frame) */
static terra_camera path_camera(const terra_source *world, int f, int n, bool *jump) {
    *jump = false;
    terra_camera c = terra_fly_path_camera(world, 0.33 * f / (n - 1));
    c.aspect = (double)TW / TH;
    return c;
}
/* a climb from 2 m above the ground to 3 km, drifting forward, looking ahead and down */
static terra_camera climb_camera(const terra_source *world, int f, int n, bool *jump) {
    *jump = false;
    const double t = (double)f / (n - 1);
    return above_ground(world, 3100 + 600 * t, -1250, 2 * pow(1500, t), 60, -5 - 20 * t);
}
/* a dive back from 3 km to 2 m */
static terra_camera dive_camera(const terra_source *world, int f, int n, bool *jump) {
    terra_camera c = climb_camera(world, n - 1 - f, n, jump);
    c.yaw_rad += 3.14159265358979323846 / 3;
    return c;
}
/* teleports: every 6 frames a jump of 1 to 5 km in some direction (then a slow drift ahead) */
static terra_camera teleport_camera(const terra_source *world, int f, int n, bool *jump) {
    (void)n;
    static const double jumps[][4] = {/* distance km, bearing deg, above m, yaw deg */
                                      {0, 0, 40, 60}, {3.0, 20, 120, 200}, {1.2, 135, 30, 300},
                                      {4.8, 250, 300, 80}, {2.1, 300, 15, 150}};
    const int seg = f / 6 < 4 ? f / 6 : 4, in = f - 6 * seg;
    *jump = in == 0 && f > 0;
    double x = 0, z = 0;
    for (int k = 1; k <= seg; k++) {
        const double b = jumps[k][1] * 3.14159265358979323846 / 180;
        x += 1000 * jumps[k][0] * sin(b), z -= 1000 * jumps[k][0] * cos(b);
    }
    const double y = jumps[seg][3] * 3.14159265358979323846 / 180;
    x += 10.0 * in * sin(y), z -= 10.0 * in * cos(y);
    return above_ground(world, x, z, jumps[seg][2], jumps[seg][3], -8);
}

typedef struct flight_result {
    int frames, fallback_frames, collapsed, standin_max, standin_max_late, uncovered_max;
    int standin_own_max; /* the nearest standing ancestor's levels (standin_levels' own) */
    int deep_frames;     /* frames with a stand-in more than 2 levels coarser */
    long deep_holes_max; /* hole pixels on those */
    int dropped_max;     /* the most tiles a frame drew fewer than the one before (not after a teleport) */
    long holes_max, holes_frames;       /* with skirts */
    long bare_holes, bare_frames;       /* the same frames without skirts: the negative control */
    long bare_max;
    gap_stats gaps;
    double seconds;
} flight_result;

static flight_result fly_realtime(const char *name, flight_camera camera, int frames) {
    flight_result res = {0};
    terra_source *world;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &world) == TERRA_OK);
    slow_source slow = {.world = world, .min_ms = 2, .max_ms = 10};
    atomic_init(&slow.slow, 0);
    terra_source *src = slow_source_create(&slow);
    terra_gl_scene *scene = src ? test_scene(src, CELLS, TW, TH) : NULL;
    CHECK(scene != NULL);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    int top[TW];
    const terra_gl_style style = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    terra_gl_style bare = style;
    bare.no_skirts = true;
    const double t0 = terra_now_s();
    double segment_start = t0; /* from the end of the first (settled) frame, or from the last teleport */
    int prev_tiles = 0;
    for (int f = 0; scene && f < frames; f++) {
        bool jump = false;
        terra_camera cam = camera(world, f, frames, &jump);
        if (jump) segment_start = terra_now_s();
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, &style, f == 0, 60, &fs) == TERRA_OK, "%s frame %d: %s", name, f,
              terra_last_error());
        if (f == 0) { /* from the second frame on, tiles come late */
            atomic_store(&slow.slow, 1);
            segment_start = terra_now_s();
        }
        terra_gl *gl = terra_gl_scene_renderer(scene);
        terra_stream *st = terra_gl_scene_stream(scene);
        const terra_stream_draw *draws;
        int n;
        CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK);
        CHECK(terra_stream_draws(st, terra_gl_scene_focus(scene), &draws, &n) == TERRA_OK);
        cpu_silhouette_drawn(world, terra_gl_scene_select(scene), &cam, draws, n, TW, TH, top);
        int where;
        const long holes = holes_below(rgb, TW, TH, top, 1, &where);
        int own, uncovered;
        const int lv = standin_levels(st, terra_gl_scene_focus(scene), &own, &uncovered);
        CHECK(holes == 0, "%s frame %d: %ld sky pixels below the silhouette (e.g. column %d), %d stand-ins up to %d levels coarser",
              name, f, holes, where, fs.fallbacks, lv);
        if (lv > 2) {
            res.deep_frames++;
            if (holes > res.deep_holes_max) res.deep_holes_max = holes;
        }
        if (holes) {
            char path[64];
            snprintf(path, sizeof path, "holes_rt_%s_%02d.png", name, f);
            save_png(path, rgb, TW, TH);
        }
        res.holes_max = holes > res.holes_max ? holes : res.holes_max;
        res.holes_frames += holes > 0;
        /* the negative control: the same draws without skirts */
        CHECK(terra_gl_draw(gl, &cam, draws, n, &bare) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK);
        const long bh = holes_below(rgb, TW, TH, top, 1, &where);
        res.bare_holes += bh, res.bare_frames += bh > 0;
        res.bare_max = bh > res.bare_max ? bh : res.bare_max;
        measure_gaps(terra_gl_scene_select(scene), &cam.eye, draws, n, &res.gaps);
        if (lv > res.standin_max) res.standin_max = lv;
        if (own > res.standin_own_max) res.standin_own_max = own;
        if (uncovered > res.uncovered_max) res.uncovered_max = uncovered;
        if (terra_now_s() - segment_start > 1.0 && lv > res.standin_max_late) res.standin_max_late = lv;
        /* the tiles resolved for drawing (hidden ones too: a hill coming near hides many) */
        const int resolved = fs.tiles + fs.hidden_tiles;
        res.collapsed += f > 0 && !jump && 2 * resolved < prev_tiles;
        if (f > 0 && !jump && prev_tiles - resolved > res.dropped_max) res.dropped_max = prev_tiles - resolved;
        res.fallback_frames += fs.fallbacks > 0;
        prev_tiles = resolved;
        res.frames++;
    }
    res.seconds = terra_now_s() - t0;
    printf("  %-9s %2d frames in %4.1f s: %2d with stand-ins, up to %d levels coarser (%d after the first second; the "
           "nearest standing ancestor up to %d), %d frames deeper than 2 (hole pixels there up to %ld); %d collapsed "
           "(at most %d tiles fewer than the frame before); hole pixels max %ld\n"
           "            without skirts: %ld hole pixels in %ld frames (max %ld); neighbours up to 2 levels apart: %d "
           "pairs, gaps up to %.1f m, %.2f of the skirt above; further apart (up to %d): %d pairs, %.1f m, %.2f, %d "
           "deeper than the skirt\n",
           name, res.frames, res.seconds, res.fallback_frames, res.standin_max, res.standin_max_late, res.standin_own_max,
           res.deep_frames, res.deep_holes_max, res.collapsed, res.dropped_max, res.holes_max, res.bare_holes,
           res.bare_frames, res.bare_max, res.gaps.pairs_apart[0], res.gaps.gap_max_m[0], res.gaps.ratio_max[0],
           res.gaps.level_diff_max, res.gaps.pairs_apart[1], res.gaps.gap_max_m[1], res.gaps.ratio_max[1],
           res.gaps.uncovered[1]);
    CHECK(res.gaps.uncovered[0] == 0, "%s: %d sides of neighbours up to 2 levels apart part further than the skirt above reaches",
          name, res.gaps.uncovered[0]);
    CHECK(res.uncovered_max == 0, "%s: wanted tiles with no drawn tile over them", name);
    CHECK(res.standin_max <= 2, "%s: a stand-in %d levels coarser than a tile it covers", name, res.standin_max);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    terra_source_destroy(world);
    free(rgb);
    return res;
}

static void no_holes_in_real_time(void) {
    const struct {
        const char *name;
        flight_camera camera;
    } flights[] = {{"path", path_camera}, {"climb", climb_camera}, {"dive", dive_camera}, {"teleports", teleport_camera}};
    long bare = 0;
    int fallback_frames = 0, standin_max = 0, level_diff_max = 0, collapsed = 0;
    for (int i = 0; i < 4; i++) {
        const flight_result r = fly_realtime(flights[i].name, flights[i].camera, RT_FRAMES);
        bare += r.bare_holes, fallback_frames += r.fallback_frames, collapsed += r.collapsed;
        if (r.standin_max > standin_max) standin_max = r.standin_max;
        if (r.gaps.level_diff_max > level_diff_max) level_diff_max = r.gaps.level_diff_max;
    }
    printf("  real time: %d frames with stand-ins, up to %d levels coarser; neighbours up to %d levels apart; "
           "%d collapsed; without skirts %ld hole pixels\n",
           fallback_frames, standin_max, level_diff_max, collapsed, bare);
    CHECK(fallback_frames > 20, "only %d frames drew stand-ins: the source is not slow enough to test them", fallback_frames);
    CHECK(level_diff_max >= 2, "no neighbours two levels apart were drawn");
    CHECK(bare > 0, "without skirts the flights show no crack: the check would miss them");
    CHECK(collapsed == 0, "%d frames drew fewer than half the tiles of the frame before", collapsed);
}

/* Runs one test by name when given (test_gl_holes NAME), all otherwise. */
static const char *only;
#define RUN_SOME(fn)                                  \
    do {                                              \
        if (!only || strcmp(only, #fn) == 0) RUN(fn); \
    } while (0)

int main(int argc, char **argv) {
    only = argc > 1 ? argv[1] : NULL;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "no headless OpenGL 4.5: %s\n", terra_last_error());
        return 1;
    }
    printf("  renderer: %s\n", terra_gl_renderer_name());
    RUN_SOME(a_missing_tile_is_seen);
    RUN_SOME(no_holes_in_real_time);
    RUN_SOME(no_holes_near_and_far);
    RUN_SOME(no_holes_along_the_path);
    terra_gl_context_destroy(ctx);
    return finish();
}
