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
            "      --eye X,Y,Z     eye position in world metres (y up; default 0,0,0 with --above 40)\n"
            "      --yaw DEG       turn from -z toward +x (default 0)\n"
            "      --pitch DEG     up from the horizon (default -10)\n"
            "      --fov DEG       vertical field of view (default 60)\n"
            "      --size WxH      image size (default 1280x720)\n"
            "      --above H       put the eye H metres above the ground at X, Z (Y is ignored)\n"
            "      --clear R,G,B   no sky and no fog: only this colour (0..255) behind the ground\n"
            "      --archive A     draw a local-frame archive baked by terra bake instead of the default\n"
            "                      world: its tile size, cells, levels and area; points past its edge\n"
            "                      are not drawn (--seed, --cells, --levels do not apply)\n"
            "      --seed N        world seed (default 1)\n"
            "      --cells N       cells per tile side, power of two 16..256 (default 32)\n"
            "      --levels N      number of levels (default 12)\n"
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
    long v;
    uint64_t seed = 1;
    terra_select_desc sel = {.grid.cells = 32};
    terra_gl_style style = {0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case OPT_EYE:
            if (!cli_parse_doubles(optarg, eye, 3) || !isfinite(eye[0]) || !isfinite(eye[1]) || !isfinite(eye[2]))
                return cli_usage_error("render", "--eye wants X,Y,Z in metres, not '%s'", optarg);
            have_eye = true;
            break;
        case OPT_YAW:
            if (!cli_parse_double(optarg, &yaw) || !isfinite(yaw))
                return cli_usage_error("render", "--yaw wants degrees, not '%s'", optarg);
            break;
        case OPT_PITCH:
            if (!cli_parse_double(optarg, &pitch) || !(pitch >= -90 && pitch <= 90))
                return cli_usage_error("render", "--pitch wants degrees from -90 to 90, not '%s'", optarg);
            break;
        case OPT_FOV:
            if (!cli_parse_double(optarg, &fov) || !(fov >= 1 && fov <= 170))
                return cli_usage_error("render", "--fov wants degrees from 1 to 170, not '%s'", optarg);
            break;
        case OPT_SIZE:
            if (!cli_parse_size(optarg, &w, &h) || w < 16 || h < 16 || w > 8192 || h > 8192)
                return cli_usage_error("render", "--size wants WxH from 16x16 to 8192x8192, not '%s'", optarg);
            break;
        case OPT_ABOVE:
            if (!cli_parse_double(optarg, &above) || !(above > 0 && above < 1e6))
                return cli_usage_error("render", "--above wants a height in metres above 0, not '%s'", optarg);
            have_above = true;
            break;
        case OPT_CLEAR:
            if (!cli_parse_doubles(optarg, clear, 3) || !(clear[0] >= 0 && clear[0] <= 255) ||
                !(clear[1] >= 0 && clear[1] <= 255) || !(clear[2] >= 0 && clear[2] <= 255))
                return cli_usage_error("render", "--clear wants R,G,B from 0 to 255, not '%s'", optarg);
            have_clear = true;
            break;
        case OPT_ARCHIVE: archive = optarg; break;
        case OPT_SEED:
            if (!cli_parse_int(optarg, &v)) return cli_usage_error("render", "--seed wants a whole number, not '%s'", optarg);
            seed = (uint64_t)v;
            break;
        case OPT_CELLS:
            if (!cli_parse_int(optarg, &v) || v <= 0 || v > 4096)
                return cli_usage_error("render", "--cells wants a power of two from 16 to 256, not '%s'", optarg);
            sel.grid.cells = (int)v;
            break;
        case OPT_LEVELS:
            if (!cli_parse_int(optarg, &v) || v < 1 || v > 24)
                return cli_usage_error("render", "--levels wants a whole number from 1 to 24, not '%s'", optarg);
            sel.levels = (int)v;
            break;
        case OPT_LEVEL_TINT: style.level_tint = true; break;
        case OPT_NO_MORPH: style.no_morph = true; break;
        case 'h': render_usage(stdout); return EXIT_OK;
        default: return cli_usage_error("render", "unknown option");
        }
    }
    if (optind < argc) return cli_usage_error("render", "unexpected argument '%s'", argv[optind]);
    if (!out) return cli_usage_error("render", "-o OUT.png is required");
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
