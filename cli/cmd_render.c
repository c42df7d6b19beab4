/* terra render: one frame of the default world or of a baked archive, headless (EGL), to a PNG. */
#include "cli.h"
#include "terra/gl.h"
#include "terra/io.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

static void render_usage(FILE *f) {
    fprintf(f,
            "Usage: terra render -o OUT.png --eye X,Y,Z --yaw DEG --pitch DEG [OPTIONS]\n\n"
            "Renders one frame of the default world (or of a local-frame archive from terra bake)\n"
            "headless (OpenGL 4.5 on EGL, no display needed) to a PNG. The streamer is run until every\n"
            "tile the view wants is held, so the frame shows the selection's full detail.\n\n"
            "Options:\n"
            "  -o, --out FILE      the PNG to write (required)\n"
            "      --eye X,Y,Z     eye position in world metres, each within 1e9 (y up; default 0,0,0\n"
            "                      with --above 40)\n"
            "      --yaw DEG       turn from -z toward +x, -360..360 (default 0)\n"
            "      --pitch DEG     up from the horizon (default -10)\n"
            "      --fov DEG       vertical field of view (default 60)\n"
            "      --size WxH      image size (default 1280x720)\n"
            "      --above H       put the eye H metres (0.01..1000000) above the ground at X, Z (Y is ignored)\n"
            "      --clear R,G,B   no sky and no fog: only this colour (0..255) behind the ground\n"
            "      --archive A     draw a local-frame archive baked by terra bake instead of the default\n"
            "                      world: its tile size, cells, levels and area; points past its edge\n"
            "                      are not drawn (--seed, --cells, --levels do not apply)\n"
            "      --seed N        world seed (default 1)\n"
            "      --cells N       cells per tile side, power of two 16..256 (default 32)\n"
            "      --levels N      number of levels, 1..24 (default 12)\n"
            "      --level-tint    colour tiles by level instead of surface\n"
            "      --no-morph      draw tiles unmorphed (shows what morphing hides)\n"
            "  -h, --help          this help\n\n"
            "Exit status: 0 on success, 1 on failure, 2 on bad usage. A tile that fails to load (a damaged\n"
            "archive) is reported once, drawn as its ancestor, and named at the end with exit status 1.\n");
}

int cmd_render(int argc, char **argv) {
    enum { OPT_EYE = 256, OPT_YAW, OPT_PITCH, OPT_FOV, OPT_SIZE, OPT_ABOVE, OPT_CLEAR, OPT_ARCHIVE, OPT_SEED,
           OPT_CELLS, OPT_LEVELS, OPT_LEVEL_TINT, OPT_NO_MORPH };
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'},         {"eye", required_argument, 0, OPT_EYE},
        {"yaw", required_argument, 0, OPT_YAW},     {"pitch", required_argument, 0, OPT_PITCH},
        {"fov", required_argument, 0, OPT_FOV},     {"size", required_argument, 0, OPT_SIZE},
        {"above", required_argument, 0, OPT_ABOVE}, {"clear", required_argument, 0, OPT_CLEAR},
        {"archive", required_argument, 0, OPT_ARCHIVE}, {"seed", required_argument, 0, OPT_SEED},
        {"cells", required_argument, 0, OPT_CELLS}, {"levels", required_argument, 0, OPT_LEVELS},
        {"level-tint", no_argument, 0, OPT_LEVEL_TINT}, {"no-morph", no_argument, 0, OPT_NO_MORPH},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0},
    };
    const char *out = NULL, *archive = NULL;
    double eye[3] = {0, 0, 0}, yaw = 0, pitch = -10, fov = 60, above = 40, clear[3];
    bool have_eye = false, have_above = false, have_clear = false;
    int w = 1280, h = 720;
    uint64_t seed = 1;
    terra_select_desc sel = {.grid.cells = 32};
    terra_gl_style style = {0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case OPT_EYE:
            if (!cli_opt_doubles("render", "--eye", optarg, "X,Y,Z in metres", 3, -CLI_MAX_COORD, CLI_MAX_COORD, eye))
                return EXIT_USAGE;
            have_eye = true;
            break;
        case OPT_YAW:
            if (!cli_opt_double("render", "--yaw", optarg, "degrees", -360, 360, &yaw)) return EXIT_USAGE;
            break;
        case OPT_PITCH:
            if (!cli_opt_double("render", "--pitch", optarg, "degrees", -90, 90, &pitch)) return EXIT_USAGE;
            break;
        case OPT_FOV:
            if (!cli_opt_double("render", "--fov", optarg, "degrees", 1, 170, &fov)) return EXIT_USAGE;
            break;
        case OPT_SIZE:
            if (!cli_opt_size("render", "--size", optarg, 16, 8192, &w, &h)) return EXIT_USAGE;
            break;
        case OPT_ABOVE:
            if (!cli_opt_double("render", "--above", optarg, "a height in metres", 0.01, 1e6, &above)) return EXIT_USAGE;
            have_above = true;
            break;
        case OPT_CLEAR:
            if (!cli_opt_doubles("render", "--clear", optarg, "R,G,B", 3, 0, 255, clear)) return EXIT_USAGE;
            have_clear = true;
            break;
        case OPT_ARCHIVE: archive = optarg; break;
        case OPT_SEED:
            if (!cli_opt_seed("render", "--seed", optarg, &seed)) return EXIT_USAGE;
            break;
        case OPT_CELLS:
            if (!cli_opt_cells("render", "--cells", optarg, 16, 256, &sel.grid.cells)) return EXIT_USAGE;
            break;
        case OPT_LEVELS:
            if (!cli_opt_int("render", "--levels", optarg, 1, 24, &sel.levels)) return EXIT_USAGE;
            break;
        case OPT_LEVEL_TINT: style.level_tint = true; break;
        case OPT_NO_MORPH: style.no_morph = true; break;
        case 'h': render_usage(stdout); return EXIT_OK;
        default: return cli_usage_error("render", "unknown option");
        }
    }
    if (optind < argc) return cli_usage_error("render", "unexpected argument '%s'", argv[optind]);
    if (!out) return cli_usage_error("render", "-o OUT.png is required");
    if (!archive && !cli_check_select("render", &sel)) return EXIT_USAGE; /* an archive brings its own */
    if (!have_eye && !have_above) have_above = true; /* default: 40 m above the ground at the origin */
    if (have_clear) {
        style.flat = true;
        for (int i = 0; i < 3; i++) style.clear_rgb[i] = (float)(clear[i] / 255.0);
    }

    int rc = EXIT_OK;
    terra_source *src = NULL;
    terra_gl_context *ctx = NULL;
    terra_gl_scene *scene = NULL;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) return cli_error("render", "out of memory for a %dx%d image", w, h);
    terra_status st = cli_open_source(archive, seed, &src, &sel, have_eye ? NULL : eye);
    if (st == TERRA_OK && have_above) {
        float g = 0;
        st = terra_source_height(src, eye[0], eye[2], &g);
        eye[1] = g + above;
    }
    if (st == TERRA_OK) st = terra_gl_context_create_headless(&ctx);
    if (st == TERRA_OK)
        st = terra_gl_scene_create(&(terra_gl_scene_desc){.source = src, .select = sel, .width = w, .height = h}, &scene);
    terra_camera cam = {.eye = {eye[0], eye[1], eye[2]}, .yaw_rad = yaw * PI / 180, .pitch_rad = pitch * PI / 180,
                        .fov_y_rad = fov * PI / 180};
    terra_gl_frame_stats fs;
    if (st == TERRA_OK) st = terra_gl_scene_frame(scene, &cam, &style, true, 120, &fs);
    if (st == TERRA_OK) st = terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
    if (st == TERRA_OK) st = terra_io_write_png(out, rgb, w, h, 3);
    if (st != TERRA_OK) {
        rc = cli_error("render", "%s", terra_last_error());
    } else {
        printf("wrote %s: %dx%d, eye %.1f,%.1f,%.1f; %d tiles, %d triangles, %d draw call%s%s\n", out, w, h, cam.eye.x,
               cam.eye.y, cam.eye.z, fs.tiles, fs.triangles, fs.draw_calls, fs.draw_calls == 1 ? "" : "s",
               fs.settled ? "" : " (streaming had not settled)");
        /* a tile that failed is drawn as its ancestor, but the frame is not what was asked for */
        rc = cli_failed_tiles("render", terra_gl_scene_stream(scene));
    }
    terra_gl_scene_destroy(scene);
    terra_gl_context_destroy(ctx);
    terra_source_destroy(src);
    free(rgb);
    return rc;
}
