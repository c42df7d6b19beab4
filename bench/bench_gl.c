/* Rendering (gl): CPU ms per frame of the built-in path flown at 60 Hz at 1920x1080, split into select /
 * stream / upload / submit, and the frame's (terra_gl_frame_stats.cpu_ms: select + stream + waiting
 * for stand-ins + submit: terra's own, not uploads, not the time inside GL calls) median and 99th
 * percentile, with the driver's time (llvmpipe shades vertices inside
 * GL calls and rasterises on its threads) reported apart; draw calls and commands per frame; hole
 * pixels over the path; triangles per frame against the error-bounded mesh over the visible ground; the
 * time llvmpipe takes for the same settled frames culled and whole (--no-occlusion); and real time with
 * tiles arriving late (a slowed source, then a TIN archive of the same world with slowed decodes):
 * hole pixels, collapsed frames, how coarse stand-ins get.
 *
 * Usage: bench_gl [frames [--flight]]   (default 240: 8 stretches of 30 frames at 60 Hz; --flight: the
 * real-time flights' figures alone, the default world's and St Helens') */
#include "bench.h"
#include "gl_ideal.h"

#include <epoxy/gl.h>
#include <unistd.h>

#include "terra/gl.h"
#include "../cli/fly_path.h"

static double median_d(double *v, int n) { return bench_median(v, n); }

/* Triangles the visible ground would need (gl_ideal.h) with the world's measured level errors. */
static double ideal_triangles(const terra_camera *cam, int w, int h, const float *view_z, const terra_select_desc *sd) {
    const double k_px = sd->view_height_px / (2 * tan(0.5 * sd->view_fov_y_rad));
    return depth_ideal(cam, w, h, view_z, sd->max_sse_px, k_px, sd->level_error, sd->levels, sd->grid.tile0_size / sd->grid.cells);
}

/* terra's CPU per frame (cpu_ms) over a cooked St Helens TIN archive (as test_gl_tin
 * cooks it from ../shared's 10 m DEM), flown in real time at 1920x1080 (test_gl_tin's dive, `frames`
 * frames, the first settled and left out): median and 99th percentile. Skipped, saying so, without
 * ../shared or the cook. */
static void tin_frame_cpu(int frames) {
    char dem[1024], bin[4096], dir[] = "/tmp/bench_gl_sth_XXXXXX", path[64], cmd[6000];
    const char *shared = getenv("TERRA_SHARED"); /* as the tests find ../shared */
    snprintf(dem, sizeof dem, "%s/data/dem/sthelens_10m.png", shared ? shared : "../shared");
    FILE *f = fopen(dem, "rb");
    if (!f || !terra_io_sibling_path("terra-cook", bin, sizeof bin) || !mkdtemp(dir)) {
        printf("  (no %s or no terra-cook: render.tin.cpu_ms.frame not recorded)\n", dem);
        if (f) fclose(f);
        return;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/sth.terra", dir);
    snprintf(cmd, sizeof cmd, "'%s' cook '%s' --spacing 10 --z-scale 0.1 -e 2 --tile-size 128 -q --no-cache -o '%s'", bin, dem,
             path);
    terra_archive_mesh *m = NULL;
    terra_archive_mesh_info info;
    terra_gl_scene *scene = NULL;
    if (system(cmd) != 0 || terra_archive_mesh_open(path, NULL, &m, &info) != TERRA_OK ||
        terra_gl_scene_create(&(terra_gl_scene_desc){.archive = m, .width = 1920, .height = 1080, .budget_ms = 4}, &scene) !=
            TERRA_OK) {
        printf("  (St Helens not cooked or not opened by '%s': render.tin.cpu_ms.frame not recorded)\n", cmd);
    } else {
        double *ms = malloc(sizeof(double) * frames);
        int n = 0;
        for (int k = 0; k < frames && ms; k++) {
            terra_camera cam = archive_dive(info.bounds, k, frames);
            cam.aspect = 1920.0 / 1080;
            terra_gl_frame_stats fs;
            if (terra_gl_scene_frame(scene, &cam, NULL, k == 0, 60, &fs) != TERRA_OK) break;
            glFinish();
            if (k > 0) ms[n++] = fs.cpu_ms;
        }
        if (n > 0) {
            bench_record("render.tin.cpu_ms.frame.p50", bench_percentile(ms, n, 50), "ms", n, "median");
            bench_record("render.tin.cpu_ms.frame.p99", bench_percentile(ms, n, 99), "ms", n, "p99");
        }
        free(ms);
    }
    terra_gl_scene_destroy(scene);
    terra_archive_mesh_close(m);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv) {
    enum { STRETCHES = 8 };
    const int per = argc > 1 && atoi(argv[1]) / STRETCHES > 2 ? atoi(argv[1]) / STRETCHES : 30;
    const int frames = STRETCHES * per;
    const int W = 1920, H = 1080;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "bench_gl: %s\n", terra_last_error());
        return 1;
    }
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 1}, &src);
    terra_gl_scene_desc d = {.source = src, .width = W, .height = H};
    /* as `terra fly` draws: 12 levels of 32-cell tiles from 64 m, ranges from tau and the world's
     * measured level errors (select.h: derived ranges) */
    d.select.grid.cells = 32, d.select.grid.tile0_size = 64, d.select.levels = 12;
    if (terra_grid_level_errors(src, &d.select.grid, d.select.levels, 0, 0, d.select.level_error) != TERRA_OK) {
        fprintf(stderr, "bench_gl: %s\n", terra_last_error());
        return 1;
    }
    terra_gl_scene *scene;
    if (terra_gl_scene_create(&d, &scene) != TERRA_OK) {
        fprintf(stderr, "bench_gl: %s\n", terra_last_error());
        return 1;
    }
    terra_gl *gl = terra_gl_scene_renderer(scene);
    const terra_select_desc *sd = terra_select_get_desc(terra_gl_scene_select(scene));
    printf("bench_gl: %d frames of the built-in path at %dx%d on %s (cells %d, range0 %.0f m)\n", frames, W, H,
           terra_gl_renderer_name(), sd->grid.cells, sd->range0);

    double *sel = malloc(sizeof(double) * frames), *str = malloc(sizeof(double) * frames),
           *upl = malloc(sizeof(double) * frames), *sub = malloc(sizeof(double) * frames),
           *drv = malloc(sizeof(double) * frames), *ras = malloc(sizeof(double) * frames),
           *tris = malloc(sizeof(double) * frames), *ratio = malloc(sizeof(double) * 12),
           *ideal = malloc(sizeof(double) * 12), *tris_settled = malloc(sizeof(double) * 12),
           *ratio_whole = malloc(sizeof(double) * 12), *frame_ms = malloc(sizeof(double) * frames),
           *commands = malloc(sizeof(double) * frames), *llvmpipe = malloc(sizeof(double) * 12),
           *ratio_cut = malloc(sizeof(double) * 12);
    float *z = malloc(sizeof(float) * W * H);
    int max_calls = 0, nratio = 0, fallback_frames = 0, waited_frames = 0;
    double(*part)[5] = malloc(sizeof *part * (size_t)frames); /* select, stream, wait, submit; the frame */
    /* a real-time flight as a game flies it: frames 1/60 s apart, the built-in path flown in a minute
     * (200 m/s), in STRETCHES stretches spread over the path (low over the ground, climbing, 2.5 km up,
     * coming down); each stretch's first frame follows a cut and settles (left out of the frame figures) */
    int nframe = 0;
    for (int f = 0; f < STRETCHES * per; f++) {
        const int k = f / per, i = f % per;
        terra_camera cam = terra_fly_path_camera(src, (double)k / STRETCHES + i / 3600.0);
        terra_gl_frame_stats fs;
        if (terra_gl_scene_frame(scene, &cam, NULL, i == 0, 60, &fs) != TERRA_OK) {
            fprintf(stderr, "bench_gl: %s\n", terra_last_error());
            return 1;
        }
        double t0 = bench_now();
        glFinish();
        ras[f] = (bench_now() - t0) * 1e3;
        sel[f] = fs.select_ms, str[f] = fs.stream_ms, upl[f] = fs.upload_ms, sub[f] = fs.submit_ms;
        drv[f] = fs.driver_ms, tris[f] = fs.triangles;
        if (i > 0) {
            part[nframe][0] = fs.select_ms, part[nframe][1] = fs.stream_ms, part[nframe][2] = fs.wait_ms;
            part[nframe][3] = fs.submit_ms, part[nframe][4] = f;
            frame_ms[nframe] = fs.cpu_ms, commands[nframe++] = terra_gl_get_stats(gl)->draw_commands;
        }
        if (fs.draw_calls > max_calls) max_calls = fs.draw_calls;
        fallback_frames += fs.fallbacks > 0;
        waited_frames += i > 0 && fs.wait_ms > 0;
    }
    const bool flight_only = argc > 2 && strcmp(argv[2], "--flight") == 0;
    /* triangles against the ideal, on frames with every wanted tile standing */
    for (int f = 0; f < 12 && !flight_only; f++) {
        terra_camera cam = terra_fly_path_camera(src, f / 11.0);
        terra_gl_frame_stats fs;
        terra_gl_scene_frame(scene, &cam, NULL, true, 60, &fs);
        cam.aspect = (double)W / H;
        terra_gl_read_depth(gl, z); /* the GPU's counts of that frame come with it */
        const double id = ideal_triangles(&cam, W, H, z, sd);
        ideal[nratio] = id;
        /* that frame followed a cut (the views are a twelfth of the path apart): its prepass, the last
         * view's list, hid little */
        tris_settled[nratio] = terra_gl_get_stats(gl)->triangles;
        ratio[nratio] = ratio_cut[nratio] = tris_settled[nratio] / id;
        /* the same draws culled (after that frame: its list is the depth prepass, as a flight's next frame
         * has its last) and whole (what occlusion culling leaves out), each drawn to the end twice,
         * alternately: llvmpipe's time for each */
        const terra_stream_draw *draws;
        int nd;
        terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &draws, &nd);
        double ms[2] = {0, 0};
        for (int k = 0; k < 4; k++) {
            const double t0 = bench_now();
            terra_gl_draw(gl, &cam, draws, nd, &(terra_gl_style){.no_occlusion = k % 2});
            glFinish();
            ms[k % 2] += bench_now() - t0;
            const terra_gl_stats *gs = terra_gl_get_stats(gl);
            if (k == 0 && gs->counted_frame == gs->frame) tris_settled[nratio] = gs->triangles, ratio[nratio] = gs->triangles / id;
        }
        llvmpipe[nratio] = ms[0] / ms[1];
        ratio_whole[nratio++] = terra_gl_get_stats(gl)->triangles / id;
    }
    bench_record("render.cpu_ms.select", median_d(sel, frames), "ms", frames, "median");
    bench_record("render.cpu_ms.stream", median_d(str, frames), "ms", frames, "median");
    bench_record("render.cpu_ms.upload", median_d(upl, frames), "ms", frames, "median");
    bench_record("render.cpu_ms.submit", median_d(sub, frames), "ms", frames, "median");
    /* the frame (terra_gl_frame_stats.cpu_ms): the stretches' first frames (after a cut) left out */
    bench_record("render.cpu_ms.frame.p50", bench_percentile(frame_ms, nframe, 50), "ms", nframe, "median");
    bench_record("render.cpu_ms.frame.p99", bench_percentile(frame_ms, nframe, 99), "ms", nframe, "p99");
    bench_record("render.draw_commands.p50", median_d(commands, nframe), "cmds", nframe, "median");
    bench_record("render.llvmpipe_ms.draw_call", median_d(drv, frames), "ms", frames, "median");
    bench_record("render.llvmpipe_ms.raster", median_d(ras, frames), "ms", frames, "median");
    bench_record("render.draw_calls_per_frame", max_calls, "calls", frames, "max");
    bench_record("render.triangles_per_frame", median_d(tris, frames), "tris", frames, "median");
    if (nratio) {
        bench_record("render.triangles_per_frame.settled", median_d(tris_settled, nratio), "tris", nratio, "median");
        bench_record("render.triangles_ideal_per_frame", median_d(ideal, nratio), "tris", nratio, "median");
        bench_record("render.triangles_vs_error_bounded_mesh.visible", median_d(ratio, nratio), "x", nratio, "median");
        /* issue 14's figure: the ideal for tau is that mesh's count over the visible ground */
        bench_record("render.triangles_vs_ideal", median_d(ratio, nratio), "x", nratio, "median");
        bench_record("render.triangles_vs_error_bounded_mesh.visible.unculled", median_d(ratio_whole, nratio), "x", nratio,
                     "median");
        bench_record("render.triangles_vs_ideal.after_cut", median_d(ratio_cut, nratio), "x", nratio, "median");
        bench_record("render.llvmpipe_ms.frame_culled_vs_unculled", median_d(llvmpipe, nratio), "x", nratio, "median");
    }
    printf("  (%d of %d frames drew ancestors for tiles still streaming; %d waited for them)\n", fallback_frames, frames,
           waited_frames);
    bench_print_slowest(part, nframe, "frame");
    if (flight_only) {
        tin_frame_cpu(frames);
        return 0;
    }

    /* holes over the path, settled, against a flat sky colour, at a size the CPU silhouette
     * affords (the same check as tests/test_gl_holes.c) */
    terra_gl_scene_destroy(scene);
    d.width = 640, d.height = 360;
    terra_gl_scene_create(&d, &scene);
    gl = terra_gl_scene_renderer(scene);
    uint8_t *rgb = malloc((size_t)640 * 360 * 3);
    int *top = malloc(sizeof(int) * 640);
    long worst = 0;
    const int hole_frames = 48;
    const terra_gl_style flat = {.flat = true, .clear_rgb = {1, 0, 1}};
    for (int f = 0; f < hole_frames; f++) {
        terra_camera cam = terra_fly_path_camera(src, (double)f / (hole_frames - 1));
        cam.aspect = 640.0 / 360;
        terra_gl_scene_frame(scene, &cam, &flat, true, 60, NULL);
        terra_gl_read_rgb(gl, rgb);
        cpu_silhouette(src, terra_gl_scene_select(scene), &cam, 640, 360, top);
        int where;
        long holes = holes_below(rgb, 640, 360, top, 1, &where);
        if (holes > worst) worst = holes;
        if (holes) {
            int row = -1;
            for (int j = 359; j > top[where] + 1; j--)
                if (rgb[((size_t)j * 640 + where) * 3] == 255 && rgb[((size_t)j * 640 + where) * 3 + 1] == 0) row = j;
            printf("  frame %d: %ld hole pixels, e.g. column %d row %d (silhouette row %d)\n", f, holes, where, row,
                   top[where]);
        }
    }
    bench_record("render.hole_pixels_max", worst, "px", hole_frames, "max");
    terra_gl_scene_destroy(scene);

    /* real time with tiles arriving late: the path flown in `frames` frames at 640x360 over the
     * default world behind a source whose grid requests sleep 2-10 ms each (three per tile), the
     * first frame settled, then the streamer run once a frame: sky pixels below the silhouette of
     * the tiles drawn (stand-ins included; tests/test_gl_holes.c), frames whose tiles drawn fall
     * below half the previous frame's, and how many levels coarser a stand-in is than the tiles it
     * stands in for (the nearest standing ancestor's too) */
    slow_source slow = {.world = src, .min_ms = 2, .max_ms = 10};
    atomic_init(&slow.slow, 0);
    terra_source *slowed = slow_source_create(&slow);
    d.source = slowed;
    if (!slowed || terra_gl_scene_create(&d, &scene) != TERRA_OK) {
        fprintf(stderr, "bench_gl: %s\n", terra_last_error());
        return 1;
    }
    gl = terra_gl_scene_renderer(scene);
    long rt_worst = 0, rt_bare = 0;
    int collapsed = 0, standin_max = 0, standin_own = 0, prev_tiles = 0, standin_frames = 0, deep_frames = 0, waited = 0;
    double wait_ms_max = 0;
    const terra_gl_style bare = {.flat = true, .clear_rgb = {1, 0, 1}, .no_skirts = true};
    const double rt0 = bench_now();
    for (int f = 0; f < frames; f++) {
        terra_camera cam = terra_fly_path_camera(src, frames > 1 ? (double)f / (frames - 1) : 0);
        cam.aspect = 640.0 / 360;
        terra_gl_frame_stats fs;
        const double f0 = bench_now();
        if (terra_gl_scene_frame(scene, &cam, &flat, f == 0, 60, &fs) != TERRA_OK) {
            fprintf(stderr, "bench_gl: %s\n", terra_last_error());
            return 1;
        }
        if (f > 0 && fs.updates > 1) { /* it waited for stand-ins within 2 levels (gl.h, max_standin_levels) */
            waited++;
            wait_ms_max = fmax(wait_ms_max, (bench_now() - f0) * 1e3 - fs.driver_ms - fs.submit_ms);
        }
        if (f == 0) atomic_store(&slow.slow, 1);
        terra_gl_read_rgb(gl, rgb);
        const terra_stream_draw *draws;
        int n, where, own, uncovered;
        terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &draws, &n);
        cpu_silhouette_drawn(src, terra_gl_scene_select(scene), &cam, draws, n, 640, 360, top);
        const long holes = holes_below(rgb, 640, 360, top, 1, &where);
        if (holes > rt_worst) rt_worst = holes;
        terra_gl_draw(gl, &cam, draws, n, &bare); /* the same frame without skirts, for comparison */
        terra_gl_read_rgb(gl, rgb);
        rt_bare += holes_below(rgb, 640, 360, top, 1, &where);
        const int lv = standin_levels(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &own, &uncovered);
        if (lv > standin_max) standin_max = lv;
        if (own > standin_own) standin_own = own;
        standin_frames += fs.fallbacks > 0, deep_frames += lv > 2;
        collapsed += f > 0 && 2 * (fs.tiles + fs.hidden_tiles) < prev_tiles; /* resolved, hidden ones too */
        prev_tiles = fs.tiles + fs.hidden_tiles;
        if (holes) printf("  real time, frame %d: %ld hole pixels, stand-ins up to %d levels coarser\n", f, holes, lv);
    }
    printf("  real time: %d frames in %.1f s, %d with stand-ins, %d with one more than 2 levels coarser (the nearest "
           "standing ancestor up to %d); %d frames waited for stand-ins, the longest %.0f ms; without skirts %ld hole "
           "pixels in all\n",
           frames, bench_now() - rt0, standin_frames, deep_frames, standin_own, waited, wait_ms_max, rt_bare);
    bench_record("render.realtime.frames_waited", waited, "frames", frames, "value");
    bench_record("render.realtime.wait_ms_max", wait_ms_max, "ms", frames, "max");
    bench_record("render.realtime.hole_pixels_max", rt_worst, "px", frames, "max");
    bench_record("render.realtime.frames_collapsed", collapsed, "frames", frames, "value");
    bench_record("render.realtime.standin_levels_max", standin_max, "levels", frames, "max");

    /* the same over a TIN archive: the default world through `terra bake --tin`, 32 km square at
     * 16 m (so no view sees past its edge), within 1 m, decodes slowed by 15 ms each; test_gl_tin's
     * three flights looking down into it at 320x180: sky pixels on every frame (every pixel should
     * show ground), collapses (a teleport's first frame not counted), the coarsest stand-in on any
     * frame */
    char bin[4096], dir[] = "/tmp/bench_gl_tin_XXXXXX", tin[64], cmd[4400];
    if (terra_io_sibling_path("terra", bin, sizeof bin) && mkdtemp(dir)) {
        snprintf(tin, sizeof tin, "%s/world.terra", dir);
        snprintf(cmd, sizeof cmd, "'%s' bake --tin --area -16000,-16000,16000,16000 --cells 4 -e 1 -q '%s'", bin, tin);
        terra_archive_mesh *m = NULL;
        terra_archive_mesh_info info;
        if (system(cmd) != 0 ||
            terra_archive_mesh_open(tin, &(terra_archive_mesh_desc){.latency_ms = 15}, &m, &info) != TERRA_OK) {
            printf("  (no TIN archive from '%s': the TIN figures are not recorded)\n", cmd);
        } else {
            long sky = 0;
            int tin_collapsed = 0, tin_standin = 0, tin_frames = 0;
            for (int i = 0; i < ARCHIVE_FLIGHTS; i++) {
                const archive_flight r = fly_archive(m, archive_flights[i].camera, archive_flights[i].frames, info.bounds,
                                                     archive_flights[i].name);
                if (!r.ok) {
                    fprintf(stderr, "bench_gl: TIN flight %s: %s\n", archive_flights[i].name, terra_last_error());
                    return 1;
                }
                printf("  TIN %-9s %d frames: sky pixels max %ld, %d collapsed, stand-ins up to %d levels coarser, %d "
                       "frames with stand-ins\n",
                       archive_flights[i].name, r.frames, r.sky_max, r.collapsed, r.standin_max, r.fallback_frames);
                sky = r.sky_max > sky ? r.sky_max : sky;
                tin_collapsed += r.collapsed, tin_frames += r.frames;
                if (r.standin_max > tin_standin) tin_standin = r.standin_max;
            }
            bench_record("render.realtime.tin.hole_pixels_max", sky, "px", tin_frames, "max");
            bench_record("render.realtime.tin.frames_collapsed", tin_collapsed, "frames", tin_frames, "value");
            bench_record("render.realtime.tin.standin_levels_max", tin_standin, "levels", tin_frames, "max");
        }
        terra_archive_mesh_close(m);
        unlink(tin);
        rmdir(dir);
    }
    tin_frame_cpu(frames);

    free(sel), free(str), free(upl), free(sub), free(drv), free(ras), free(tris), free(ratio), free(ideal), free(tris_settled), free(z);
    free(ratio_whole), free(frame_ms), free(commands), free(llvmpipe), free(ratio_cut), free(part);
    free(rgb), free(top);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(slowed);
    terra_source_destroy(src);
    terra_gl_context_destroy(ctx);
    return 0;
}
