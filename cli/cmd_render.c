/* terra render: one frame of the default world or of an archive, headless (EGL), to a PNG. */
#include "cli.h"
#include "terra/gl.h"
#include "terra/io.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RENDER_GROUPS = CLI_WORLD | CLI_ARCHIVE | CLI_LENS | CLI_POSE | CLI_STYLE | CLI_PLANET };

static void render_usage(FILE *f) {
    fprintf(f,
            "Usage: terra render -o OUT.png --eye X,Y,Z --yaw DEG --pitch DEG [OPTIONS]\n"
            "       terra render -o OUT.png --planet --lat DEG --lon DEG --alt M --heading DEG --pitch DEG [OPTIONS]\n\n"
            "Renders one frame of the default world (or of a local-frame archive: terra cook's or bake's),\n"
            "or with --planet of a whole planet seen from anywhere between orbit and the ground, headless\n"
            "(OpenGL 4.5 on EGL, no display needed) to a PNG. Every tile the view wants is held before the\n"
            "frame is drawn, so it shows the selection's full detail.\n\n"
            "Options:\n"
            "  -o, --out FILE        the PNG to write (required)\n"
            "  -h, --help            this help\n");
    cli_scene_help(f, RENDER_GROUPS);
    fprintf(f, "\nExit status: 0 on success, 1 on failure, 2 on bad usage. A tile that fails to load (a damaged\n"
               "archive) is reported once, drawn as its ancestor, and named at the end with exit status 1.\n");
}

typedef struct render_opts {
    const char *out;
} render_opts;

static bool render_opt(void *own, int c, const char *arg) {
    render_opts *o = own;
    if (c == 'o') return o->out = arg, true;
    return cli_usage_error("render", "unknown option"), false;
}

/* --planet: the planet scene draws every tile the view wants before the frame */
static int render_planet(const cli_scene *sc, const char *out) {
    const int w = sc->width, h = sc->height;
    terra_planet *planet = NULL;
    terra_gl_context *ctx = NULL;
    terra_gl_planet *scene = NULL;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) return cli_error("render", "out of memory for a %dx%d image", w, h);
    terra_status st = cli_planet_open(sc, &planet);
    if (st == TERRA_OK) st = terra_gl_context_create_headless(&ctx);
    if (st == TERRA_OK) st = cli_planet_scene(sc, planet, true, 0, &scene);
    terra_camera cam = {0};
    terra_gl_style style = cli_scene_style(sc);
    terra_gl_frame_stats fs;
    if (st == TERRA_OK) {
        cam = cli_planet_camera(sc, planet);
        style.sun = cli_planet_sun(cam.eye);
        st = terra_gl_planet_frame(scene, &cam, &style, &fs);
    }
    if (st == TERRA_OK) st = terra_gl_read_rgb(terra_gl_planet_renderer(scene), rgb);
    if (st == TERRA_OK) st = terra_io_write_png(out, rgb, w, h, 3);
    int rc = EXIT_OK;
    if (st != TERRA_OK) {
        rc = cli_error("render", "%s", terra_last_error());
    } else {
        double over, lat, lon;
        terra_planet_dir_latlon(terra_planet_up_at(planet, cam.eye, &over), &lat, &lon);
        const terra_planet_desc *pd = terra_planet_get_desc(planet);
        printf("wrote %s: %dx%d, lat %.6f lon %.6f, %.3f m above the ground, %.3f m above the %s; %d tiles, %d triangles, "
               "%d draw call%s\n", out, w, h, lat, lon, terra_planet_altitude(planet, cam.eye, NULL, NULL), over,
               pd->polar_radius_m != pd->radius_m ? "ellipsoid" : "sphere", fs.tiles, fs.triangles, fs.draw_calls,
               fs.draw_calls == 1 ? "" : "s");
    }
    terra_gl_planet_destroy(scene);
    terra_gl_context_destroy(ctx);
    cli_planet_close(planet);
    free(rgb);
    return rc;
}

int cmd_render(int argc, char **argv) {
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    render_opts o = {0};
    cli_scene sc;
    int rc = cli_scene_parse("render", argc, argv, RENDER_GROUPS, "o:", longopts, render_opt, &o, render_usage, &sc);
    if (rc == CLI_HELP) return EXIT_OK;
    if (rc != EXIT_OK) return rc;
    if (!o.out) return cli_usage_error("render", "-o OUT.png is required");
    const char *out = o.out;
    const int w = sc.width, h = sc.height;
    if (sc.planet) return render_planet(&sc, out);

    terra_source *src = NULL;
    terra_gl_context *ctx = NULL;
    terra_gl_scene *scene = NULL;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) return cli_error("render", "out of memory for a %dx%d image", w, h);
    terra_status st = cli_scene_open(&sc, &src);
    if (st == TERRA_OK) st = terra_gl_context_create_headless(&ctx);
    if (st == TERRA_OK)
        st = terra_gl_scene_create(&(terra_gl_scene_desc){.source = src, .archive = sc.mesh, .select = sc.sel, .width = w, .height = h},
                                   &scene);
    const terra_camera cam = cli_scene_camera(&sc);
    const terra_gl_style style = cli_scene_style(&sc); /* a script's surfaces, once it is open */
    terra_gl_frame_stats fs;
    if (st == TERRA_OK) st = terra_gl_scene_frame(scene, &cam, &style, true, 120, &fs);
    if (st == TERRA_OK) st = terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
    if (st == TERRA_OK) st = terra_io_write_png(out, rgb, w, h, 3);
    if (st != TERRA_OK) {
        rc = cli_error("render", "%s", terra_last_error());
    } else {
        printf("wrote %s: %dx%d, eye %.1f,%.1f,%.1f; %d tiles, %d triangles (%d hidden left out), %d draw call%s%s\n", out,
               w, h, cam.eye.x, cam.eye.y, cam.eye.z, fs.tiles, fs.triangles, fs.occluded_triangles, fs.draw_calls,
               fs.draw_calls == 1 ? "" : "s",
               fs.settled ? "" : " (streaming had not settled)");
        /* a tile that failed is drawn as its ancestor, but the frame is not what was asked for */
        rc = cli_failed_tiles("render", terra_gl_scene_stream(scene));
    }
    terra_gl_scene_destroy(scene);
    terra_gl_context_destroy(ctx);
    cli_scene_close(&sc, src);
    free(rgb);
    return rc;
}
