/* The planet drawn (gl): bench_planet's 27 views at 1920 x 1080 through terra_gl_planet, every
 * wanted tile standing: ground triangles drawn against the error-bounded mesh over the ground the view
 * shows (issue 16's "triangles within 2x the ideal for tau"), with occlusion culling and without, and
 * the pictures and depth buffers culled and whole compared pixel for pixel; then stretches of `terra fly
 * --planet`'s path in real time at 60 Hz (a 4 ms budget for tiles), terra's CPU per frame (cpu_ms: select
 * + stream bookkeeping + waiting + submit; not uploads, not the time inside GL calls): median and 99th
 * percentile. */
#include "planet_views.h"
#include "gl_ideal.h"
#include "../cli/planet_path.h"

#include <epoxy/gl.h>

#include "terra/gl.h"

int main(int argc, char **argv) {
    const bool flight_only = argc > 1 && strcmp(argv[1], "--flight") == 0; /* the real-time figures alone */
    const int W = 1920, H = 1080;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "bench_gl_planet: %s\n", terra_last_error());
        return 1;
    }
    terra_planet *p;
    terra_gl_planet *scene;
    if (terra_planet_create(NULL, &p) != TERRA_OK ||
        terra_gl_planet_create(&(terra_gl_planet_desc){.planet = p, .width = W, .height = H}, &scene) != TERRA_OK) {
        fprintf(stderr, "bench_gl_planet: %s\n", terra_last_error());
        return 1;
    }
    terra_gl *gl = terra_gl_planet_renderer(scene);
    printf("bench_gl_planet: %d views of the built-in planet at %dx%d on %s\n", NVIEWS, W, H, terra_gl_renderer_name());
    const double k_px = H / (2 * tan(30 * PI / 180));
    const terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}};
    uint8_t *rgb[2] = {malloc((size_t)W * H * 3), malloc((size_t)W * H * 3)};
    float *z[2] = {malloc(sizeof(float) * W * H), malloc(sizeof(float) * W * H)};
    double ratio[NVIEWS], whole[NVIEWS], rays[NVIEWS];
    float err[TERRA_PLANET_MAX_LEVELS];
    const double s0 = level_errors(p, err);
    const int levels = terra_planet_get_desc(p)->levels;
    long differ = 0;
    int nr = 0;
    for (int v = 0; v < NVIEWS && !flight_only; v++) {
        terra_camera cam = planet_view(p, v);
        cam.aspect = (double)W / H;
        terra_gl_frame_stats fs;
        if (terra_gl_planet_frame(scene, &cam, &style, &fs) != TERRA_OK) {
            fprintf(stderr, "bench_gl_planet: %s\n", terra_last_error());
            return 1;
        }
        const terra_stream_draw *draws;
        int n;
        terra_gl_planet_draws(scene, &draws, &n);
        double tris[2] = {0, 0};
        for (int pass = 0; pass < 2; pass++) {
            terra_gl_style s = style;
            s.no_occlusion = pass == 1;
            terra_gl_draw(gl, &cam, draws, n, &s);
            terra_gl_read_rgb(gl, rgb[pass]);
            terra_gl_read_depth(gl, z[pass]);
            const terra_gl_stats *gs = terra_gl_get_stats(gl);
            tris[pass] = gs->triangles - gs->skirt_triangles;
        }
        long d = 0;
        for (size_t i = 0; i < (size_t)W * H; i++) d += memcmp(rgb[0] + 3 * i, rgb[1] + 3 * i, 3) || z[0][i] != z[1][i];
        differ += d;
        static terra_vec3 at[RAYS_H][RAYS_W];
        static bool met[RAYS_H][RAYS_W];
        view_rays(p, &cam, at, met);
        const double rays_ideal = visible_ideal(p, at, met, cam.eye, k_px);
        const double ideal = depth_ideal(&cam, W, H, z[1], 2.0, k_px, err, levels, s0);
        if (ideal > 0) {
            ratio[nr] = tris[0] / ideal, whole[nr] = tris[1] / ideal, rays[nr++] = tris[0] / rays_ideal;
            printf("  view %2d, %8.0f m up: %4d tiles, %8.0f of %8.0f triangles drawn, %.2fx the visible ideal (whole %.2fx; rays %.2fx)\n",
                   v, ALTS[v % NALTS], n, tris[0], tris[1], tris[0] / ideal, tris[1] / ideal, tris[0] / rays_ideal);
        }
    }
    if (!flight_only) {
        bench_record("planet.triangles_vs_error_bounded_mesh.visible", bench_median(ratio, nr), "x", nr, "median");
        /* issue 16's figure: the ideal for tau is that mesh's count over the visible ground */
        bench_record("planet.triangles_vs_ideal", bench_median(ratio, nr), "x", nr, "median");
        double worst = 0;
        for (int i = 0; i < nr; i++) worst = fmax(worst, ratio[i]);
        bench_record("planet.triangles_vs_ideal.worst", worst, "x", nr, "max");
        bench_record("planet.triangles_vs_error_bounded_mesh.visible.rays", bench_median(rays, nr), "x", nr, "median");
        bench_record("planet.triangles_vs_error_bounded_mesh.visible.unculled", bench_median(whole, nr), "x", nr, "median");
        bench_record("planet.occlusion_differing_pixels", (double)differ, "pixels", NVIEWS, "sum");
    }
    terra_gl_planet_destroy(scene);
    if (terra_gl_planet_create(&(terra_gl_planet_desc){.planet = p, .width = W, .height = H, .budget_ms = 4}, &scene) != TERRA_OK) {
        fprintf(stderr, "bench_gl_planet: %s\n", terra_last_error());
        return 1;
    }
    /* real time as a globe viewer flies: frames 1/60 s apart, in STRETCHES stretches of the descent and
     * the low flight (from 20,000 km to 2 m, then 500 m over a face edge and the pole), each flown at its
     * height per second (the speed such viewers scale with height); each stretch's first frame follows a
     * cut and is drawn whole (left out of the figures) */
    enum { STRETCHES = 8, PER = 30, FLIGHT = STRETCHES * PER };
    double frame_ms[FLIGHT], part[FLIGHT][5]; /* select, stream, wait, submit; the height */
    double waited_ms = 0;
    int nf = 0, waited = 0;
    for (int k = 0; k < STRETCHES; k++) {
        const double u0 = (k + 0.5) / STRETCHES;
        terra_camera a = terra_planet_path_camera(p, u0), b = terra_planet_path_camera(p, u0 + 1e-4);
        const double moved = sqrt((b.eye.x - a.eye.x) * (b.eye.x - a.eye.x) + (b.eye.y - a.eye.y) * (b.eye.y - a.eye.y) +
                                  (b.eye.z - a.eye.z) * (b.eye.z - a.eye.z));
        const double du = 1e-4 * fmax(terra_planet_altitude(p, a.eye, NULL, NULL), 2.0) / 60 / fmax(moved, 1e-9);
        for (int i = 0; i < PER; i++) {
            terra_camera cam = terra_planet_path_camera(p, u0 + i * du);
            cam.aspect = (double)W / H;
            terra_gl_frame_stats fs;
            for (int again = 0; again < 10000; again++) { /* a stretch's first view: until it settles */
                if (terra_gl_planet_frame(scene, &cam, NULL, &fs) != TERRA_OK) {
                    fprintf(stderr, "bench_gl_planet: %s\n", terra_last_error());
                    return 1;
                }
                glFinish();
                if (i > 0 || fs.settled) break;
                nanosleep(&(struct timespec){0, 1000000}, NULL);
            }
            if (i == 0) continue;
            frame_ms[nf] = fs.cpu_ms, waited_ms += fs.wait_ms, waited += fs.wait_ms > 0;
            part[nf][0] = fs.select_ms, part[nf][1] = fs.stream_ms, part[nf][2] = fs.wait_ms, part[nf][3] = fs.submit_ms;
            part[nf++][4] = terra_planet_altitude(p, cam.eye, NULL, NULL);
        }
    }
    bench_record("planet.cpu_ms.frame.p50", bench_percentile(frame_ms, nf, 50), "ms", nf, "median");
    bench_record("planet.cpu_ms.frame.p99", bench_percentile(frame_ms, nf, 99), "ms", nf, "p99");
    printf("  (%d of %d real-time frames waited for stand-ins, %.1f ms in all)\n", waited, nf, waited_ms);
    bench_print_slowest(part, nf, "metres up");
    terra_gl_planet_destroy(scene);
    terra_planet_destroy(p);
    terra_gl_context_destroy(ctx);
    return differ != 0;
}
