/* terra view: the default world in a window (GLFW), with a fly camera. */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include "cli.h"
#include "terra/gl.h"
#include "terra/io.h"

#include <epoxy/gl.h>
#include <GLFW/glfw3.h>
#include <dlfcn.h>
#include <getopt.h>
#include <link.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define PI 3.14159265358979323846

/* Marks the OpenGL driver's libraries as never to be unloaded. glfwTerminate closes the X display
 * and Mesa then unloads its driver, after which a leak checker can no longer name the driver's
 * one allocation kept for the process (see gl/lsan.supp); kept loaded, it can. */
static int pin_driver(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size, (void)user;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "/dri/") || strstr(n, "mesa") || strstr(n, "gallium") || strstr(n, "glapi") ||
              strstr(n, "LLVM")))
        (void)dlopen(n, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

static void view_usage(FILE *f) {
    fprintf(f,
            "Usage: terra view [OPTIONS]\n\n"
            "Opens a window (GLFW, OpenGL 4.5 core) over the default world with a fly camera:\n"
            "  W A S D     forward, left, back, right      Q / E   down / up\n"
            "  mouse       look (the cursor is captured; Tab frees it)\n"
            "  wheel       speed (x1.25 a notch)                  Esc     quit\n"
            "  M           morph on / off                          L       tint by level\n"
            "The title bar shows frame time, tiles, triangles, draw calls, tiles streaming and memory.\n"
            "Needs a display ($DISPLAY); without one try xvfb-run -a -s \"-screen 0 1280x720x24\".\n\n"
            "Options:\n"
            "      --size WxH        window size (default 1280x720)\n"
            "      --eye X,Y,Z       start position, each within 1e9 m (default 0,0,0 with --above 60)\n"
            "      --above H         start H metres (0.01..1000000) above the ground at X, Z\n"
            "      --yaw DEG         start heading, -360..360 (default 90: east)\n"
            "      --pitch DEG       start pitch (default -8)\n"
            "      --archive A       fly over a local-frame archive from terra bake instead of the\n"
            "                        default world (its tile size, cells, levels and area)\n"
            "      --seed N          world seed (default 1)\n"
            "      --cells N         cells per tile side, power of two 16..256 (default 32)\n"
            "      --frames N        quit after N frames (0: run until closed)\n"
            "      --screenshot PNG  write the last frame to PNG before quitting\n"
            "  -h, --help            this help\n\n"
            "Exit status: 0 on success, 1 on failure, 2 on bad usage.\n");
}

typedef struct view_state {
    terra_camera cam;
    double speed;
    double last_x, last_y;
    bool have_cursor, captured;
    terra_gl_style style;
    terra_gl *gl;
} view_state;

static void on_scroll(GLFWwindow *w, double dx, double dy) {
    (void)dx;
    view_state *v = glfwGetWindowUserPointer(w);
    v->speed *= pow(1.25, dy);
    if (v->speed < 0.5) v->speed = 0.5;
    if (v->speed > 50000) v->speed = 50000;
}

static void on_key(GLFWwindow *w, int key, int scancode, int action, int mods) {
    (void)scancode, (void)mods;
    view_state *v = glfwGetWindowUserPointer(w);
    if (action != GLFW_PRESS) return;
    if (key == GLFW_KEY_ESCAPE) glfwSetWindowShouldClose(w, GLFW_TRUE);
    if (key == GLFW_KEY_M) v->style.no_morph = !v->style.no_morph;
    if (key == GLFW_KEY_L) v->style.level_tint = !v->style.level_tint;
    if (key == GLFW_KEY_TAB) {
        v->captured = !v->captured;
        v->have_cursor = false;
        glfwSetInputMode(w, GLFW_CURSOR, v->captured ? GLFW_CURSOR_DISABLED : GLFW_CURSOR_NORMAL);
    }
}

static void on_resize(GLFWwindow *w, int width, int height) {
    view_state *v = glfwGetWindowUserPointer(w);
    if (width > 0 && height > 0) terra_gl_resize(v->gl, width, height);
}

static void move_camera(GLFWwindow *w, view_state *v, double dt) {
    if (v->captured) {
        double x, y;
        glfwGetCursorPos(w, &x, &y);
        if (v->have_cursor) {
            v->cam.yaw_rad += (x - v->last_x) * 0.0025;
            v->cam.pitch_rad -= (y - v->last_y) * 0.0025;
            if (v->cam.pitch_rad > 1.5) v->cam.pitch_rad = 1.5;
            if (v->cam.pitch_rad < -1.5) v->cam.pitch_rad = -1.5;
        }
        v->last_x = x, v->last_y = y, v->have_cursor = true;
    }
    terra_vec3 f, r;
    terra_camera_basis(&v->cam, &f, &r, NULL);
    double fw = 0, rt = 0, up = 0;
    fw += glfwGetKey(w, GLFW_KEY_W) == GLFW_PRESS;
    fw -= glfwGetKey(w, GLFW_KEY_S) == GLFW_PRESS;
    rt += glfwGetKey(w, GLFW_KEY_D) == GLFW_PRESS;
    rt -= glfwGetKey(w, GLFW_KEY_A) == GLFW_PRESS;
    up += glfwGetKey(w, GLFW_KEY_E) == GLFW_PRESS;
    up -= glfwGetKey(w, GLFW_KEY_Q) == GLFW_PRESS;
    const double s = v->speed * dt;
    v->cam.eye.x += (f.x * fw + r.x * rt) * s;
    v->cam.eye.y += (f.y * fw + up) * s;
    v->cam.eye.z += (f.z * fw + r.z * rt) * s;
}

int cmd_view(int argc, char **argv) {
    enum { OPT_SIZE = 256, OPT_EYE, OPT_ABOVE, OPT_YAW, OPT_PITCH, OPT_SEED, OPT_CELLS, OPT_FRAMES, OPT_SHOT, OPT_ARCHIVE };
    static const struct option longopts[] = {
        {"size", required_argument, 0, OPT_SIZE},   {"eye", required_argument, 0, OPT_EYE},
        {"above", required_argument, 0, OPT_ABOVE}, {"yaw", required_argument, 0, OPT_YAW},
        {"pitch", required_argument, 0, OPT_PITCH}, {"seed", required_argument, 0, OPT_SEED},
        {"cells", required_argument, 0, OPT_CELLS}, {"frames", required_argument, 0, OPT_FRAMES},
        {"screenshot", required_argument, 0, OPT_SHOT}, {"archive", required_argument, 0, OPT_ARCHIVE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int w = 1280, h = 720;
    double eye[3] = {0, 0, 0}, above = 60, yaw = 90, pitch = -8;
    bool have_eye = false, have_above = false;
    long frames = 0;
    uint64_t seed = 1;
    const char *shot = NULL, *archive = NULL;
    terra_select_desc sel = {.grid.cells = 32};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SIZE:
            if (!cli_opt_size("view", "--size", optarg, 16, 8192, &w, &h)) return EXIT_USAGE;
            break;
        case OPT_EYE:
            if (!cli_opt_doubles("view", "--eye", optarg, "X,Y,Z in metres", 3, -CLI_MAX_COORD, CLI_MAX_COORD, eye))
                return EXIT_USAGE;
            have_eye = true;
            break;
        case OPT_ABOVE:
            if (!cli_opt_double("view", "--above", optarg, "a height in metres", 0.01, 1e6, &above)) return EXIT_USAGE;
            have_above = true;
            break;
        case OPT_YAW:
            if (!cli_opt_double("view", "--yaw", optarg, "degrees", -360, 360, &yaw)) return EXIT_USAGE;
            break;
        case OPT_PITCH:
            if (!cli_opt_double("view", "--pitch", optarg, "degrees", -90, 90, &pitch)) return EXIT_USAGE;
            break;
        case OPT_SEED:
            if (!cli_opt_seed("view", "--seed", optarg, &seed)) return EXIT_USAGE;
            break;
        case OPT_CELLS:
            if (!cli_opt_cells("view", "--cells", optarg, 16, 256, &sel.grid.cells)) return EXIT_USAGE;
            break;
        case OPT_FRAMES:
            if (!cli_opt_long("view", "--frames", optarg, 0, 1000000000, &frames)) return EXIT_USAGE;
            break;
        case OPT_SHOT: shot = optarg; break;
        case OPT_ARCHIVE: archive = optarg; break;
        case 'h': view_usage(stdout); return EXIT_OK;
        default: return cli_usage_error("view", "unknown option");
        }
    }
    if (optind < argc) return cli_usage_error("view", "unexpected argument '%s'", argv[optind]);
    if (!archive && !cli_check_select("view", &sel)) return EXIT_USAGE; /* an archive brings its own */
    if (!have_eye) have_above = true;

    if (!glfwInit()) return cli_error("view", "cannot start GLFW (no display? try xvfb-run -a terra view)");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 5);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow *win = glfwCreateWindow(w, h, "terra view", NULL, NULL);
    if (!win) {
        glfwTerminate();
        return cli_error("view", "cannot open a %dx%d window with OpenGL 4.5 core", w, h);
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(1);
    dl_iterate_phdr(pin_driver, NULL);

    int rc = EXIT_OK;
    terra_source *src = NULL;
    terra_gl_scene *scene = NULL;
    uint8_t *rgb = NULL;
    terra_status st = cli_open_source(archive, seed, &src, &sel, have_eye ? NULL : eye);
    if (st == TERRA_OK && have_above) {
        float g = 0;
        st = terra_source_height(src, eye[0], eye[2], &g);
        eye[1] = g + above;
    }
    if (st == TERRA_OK) st = terra_gl_scene_create(&(terra_gl_scene_desc){.source = src, .select = sel}, &scene);
    view_state vs = {.cam = {.eye = {eye[0], eye[1], eye[2]}, .yaw_rad = yaw * PI / 180, .pitch_rad = pitch * PI / 180,
                             .fov_y_rad = 60 * PI / 180},
                     .speed = 60, .captured = true};
    int fbw = w, fbh = h;
    if (st == TERRA_OK) {
        vs.gl = terra_gl_scene_renderer(scene);
        glfwGetFramebufferSize(win, &fbw, &fbh);
        st = terra_gl_resize(vs.gl, fbw, fbh);
    }
    if (st != TERRA_OK) {
        rc = cli_error("view", "%s", terra_last_error());
        goto done;
    }
    glfwSetWindowUserPointer(win, &vs);
    glfwSetScrollCallback(win, on_scroll);
    glfwSetKeyCallback(win, on_key);
    glfwSetFramebufferSizeCallback(win, on_resize);
    glfwSetInputMode(win, GLFW_CURSOR, GLFW_CURSOR_DISABLED);
    printf("terra view on %s: WASD + mouse to fly, Q/E down/up, wheel for speed, M morph, L levels, Esc to quit\n",
           terra_gl_renderer_name());
    double last = glfwGetTime(), title_at = 0, frame_ms = 0;
    for (long f = 0; !glfwWindowShouldClose(win) && (frames == 0 || f < frames); f++) {
        const double now = glfwGetTime(), dt = now - last;
        last = now;
        frame_ms = frame_ms * 0.9 + dt * 1e3 * 0.1;
        glfwPollEvents();
        move_camera(win, &vs, dt > 0.25 ? 0.25 : dt);
        terra_gl_frame_stats fs;
        /* the first frame waits for the ground under the eye; then the streamer runs in real time */
        st = terra_gl_scene_frame(scene, &vs.cam, &vs.style, f == 0, 60, &fs);
        if (st != TERRA_OK) {
            rc = cli_error("view", "%s", terra_last_error());
            break;
        }
        if (shot && frames > 0 && f == frames - 1) {
            terra_gl_size(vs.gl, &fbw, &fbh);
            rgb = malloc((size_t)fbw * fbh * 3);
            st = rgb ? terra_gl_read_rgb(vs.gl, rgb) : TERRA_E_NOMEM;
            if (st == TERRA_OK) st = terra_io_write_png(shot, rgb, fbw, fbh, 3);
            if (st != TERRA_OK) rc = cli_error("view", "%s: %s", shot, terra_last_error());
            else printf("wrote %s (%dx%d)\n", shot, fbw, fbh);
        }
        if (now - title_at > 0.25) {
            char title[256];
            const terra_stream_stats *ss = terra_stream_get_stats(terra_gl_scene_stream(scene));
            snprintf(title, sizeof title,
                     "terra view - %.1f ms - %d tiles, %.2fM triangles, %d draw call%s - %d streaming - %.0f MB - %.0f "
                     "m/s%s%s",
                     frame_ms, fs.tiles, fs.triangles / 1e6, fs.draw_calls, fs.draw_calls == 1 ? "" : "s",
                     ss->in_flight + ss->ready, fs.bytes_held / 1048576.0, vs.speed,
                     vs.style.no_morph ? " - NO MORPH" : "", vs.style.level_tint ? " - levels" : "");
            glfwSetWindowTitle(win, title);
            title_at = now;
        }
        glfwSwapBuffers(win);
    }
    if (rc == EXIT_OK) rc = cli_failed_tiles("view", terra_gl_scene_stream(scene)); /* named at the end */
done:
    free(rgb);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    glfwDestroyWindow(win);
    glfwTerminate();
    return rc;
}
