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

enum { VIEW_GROUPS = CLI_WORLD | CLI_ARCHIVE | CLI_LENS | CLI_POSE | CLI_STYLE | CLI_PLANET };

/* GLFW's last error, for the message when it cannot start or open the window. */
static char glfw_why[256] = "no reason given";
static void on_glfw_error(int code, const char *what) {
    snprintf(glfw_why, sizeof glfw_why, "%s (GLFW error 0x%x)", what ? what : "?", (unsigned)code);
}

static void view_usage(FILE *f) {
    fprintf(f,
            "Usage: terra view [OPTIONS]\n\n"
            "Opens a window (GLFW, OpenGL 4.5 core) over the default world (or --source, --archive) with\n"
            "a fly camera:\n"
            "  W A S D     forward, left, back, right      Q / E   down / up\n"
            "  mouse       look (the cursor is captured; Tab frees it)\n"
            "  wheel       speed (x1.25 a notch)                  Esc     quit\n"
            "  M           morph on / off                          L       tint by level\n"
            "  left click  dig a pit where the crosshair meets the ground (4 m deep)\n"
            "  right click raise a mound there (3 m); with --edits FILE the edits are kept\n"
            "The title bar shows frame time, tiles, triangles, draw calls, tiles streaming and memory.\n"
            "With --planet, over a whole planet from --lat, --lon, --alt: Q / E along the local up, the\n"
            "speed follows the height above the ground (the wheel scales it), no edits.\n"
            "Needs a display ($DISPLAY); without one try xvfb-run -a -s \"-screen 0 1280x720x24\".\n\n"
            "Options:\n"
            "      --frames N        quit after N frames, from 0 to 1000000000 (0: run until closed)\n"
            "      --screenshot PNG  write the last frame to PNG before quitting\n"
            "  -h, --help            this help\n");
    cli_scene_help(f, VIEW_GROUPS);
    fprintf(f, "\nThe pose and style options set the start; the keys change them as you fly.\n"
               "Exit status: 0 on success, 1 on failure, 2 on bad usage.\n");
}

typedef struct view_state {
    terra_camera cam;
    double speed;
    double last_x, last_y;
    bool have_cursor, captured;
    terra_gl_style style;
    terra_gl *gl;
    cli_scene *scene;        /* its edit layer takes the mouse's edits */
    terra_gl_scene *drawn;   /* told where the ground changed */
    int edits;
    const terra_planet *planet; /* --planet: moves follow its local up */
} view_state;

/* Where the ray from the eye through the middle of the window meets the ground (within 20 km). */
static bool crosshair_ground(const view_state *v, const terra_source *src, double *x, double *y, double *z) {
    terra_vec3 f;
    terra_camera_basis(&v->cam, &f, NULL, NULL);
    const terra_vec3 e = v->cam.eye;
    double t0 = 0;
    for (double t = 0.5; t < 20000; t = t * 1.02 + 0.5) {
        float h;
        if (terra_source_height(src, e.x + f.x * t, e.z + f.z * t, &h) != TERRA_OK) return false;
        if (e.y + f.y * t <= h) { /* under it: bisect between t0 (above) and t */
            for (int k = 0; k < 40; k++) {
                const double m = 0.5 * (t0 + t);
                if (terra_source_height(src, e.x + f.x * m, e.z + f.z * m, &h) != TERRA_OK) return false;
                if (e.y + f.y * m <= h) t = m;
                else t0 = m;
            }
            *x = e.x + f.x * t, *y = e.y + f.y * t, *z = e.z + f.z * t;
            return true;
        }
        t0 = t;
    }
    return false;
}

static void on_mouse(GLFWwindow *w, int button, int action, int mods) {
    (void)mods;
    view_state *v = glfwGetWindowUserPointer(w);
    if (action != GLFW_PRESS || !v->captured || !v->scene->edits) return;
    if (button != GLFW_MOUSE_BUTTON_LEFT && button != GLFW_MOUSE_BUTTON_RIGHT) return;
    const terra_source *src = terra_edit_layer_source(v->scene->edits);
    double x, y, z, region[4];
    if (!crosshair_ground(v, src, &x, &y, &z)) return;
    const terra_edit e = button == GLFW_MOUSE_BUTTON_LEFT
                             ? (terra_edit){.brush = TERRA_BRUSH_DIG, .shape = TERRA_SHAPE_PIT, .x = x, .z = z, .radius = 6,
                                            .falloff = 4, .amount = y - 4}
                             : (terra_edit){.brush = TERRA_BRUSH_RAISE, .x = x, .z = z, .radius = 8, .falloff = 10, .amount = 3};
    if (terra_edit_apply(v->scene->edits, &e, region) != TERRA_OK ||
        terra_stream_invalidate(terra_gl_scene_stream(v->drawn), region) != TERRA_OK) {
        fprintf(stderr, "terra view: %s\n", terra_last_error());
        return;
    }
    v->edits++;
}

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
    if (v->planet) { /* up and down along the local up; as fast as the height above the ground */
        const terra_vec3 u = v->cam.up;
        const double alt = terra_planet_altitude(v->planet, v->cam.eye, NULL, NULL);
        const double s = v->speed / 60 * fmax(alt, 2.0) * dt;
        v->cam.eye.x += (f.x * fw + r.x * rt + u.x * up) * s;
        v->cam.eye.y += (f.y * fw + r.y * rt + u.y * up) * s;
        v->cam.eye.z += (f.z * fw + r.z * rt + u.z * up) * s;
        const terra_vec3 e = v->cam.eye;
        const double l = sqrt(e.x * e.x + e.y * e.y + e.z * e.z);
        v->cam.up = (terra_vec3){e.x / l, e.y / l, e.z / l};
        return;
    }
    const double s = v->speed * dt;
    v->cam.eye.x += (f.x * fw + r.x * rt) * s;
    v->cam.eye.y += (f.y * fw + up) * s;
    v->cam.eye.z += (f.z * fw + r.z * rt) * s;
}

typedef struct view_opts {
    long frames;
    const char *shot;
} view_opts;

enum { OPT_FRAMES = 256, OPT_SHOT };

static bool view_opt(void *own, int c, const char *arg) {
    view_opts *o = own;
    switch (c) {
    case OPT_FRAMES: return cli_opt_long("view", "--frames", arg, 0, 1000000000, &o->frames);
    case OPT_SHOT: o->shot = arg; return true;
    default: return cli_usage_error("view", "unknown option"), false;
    }
}

int cmd_view(int argc, char **argv) {
    static const struct option longopts[] = {
        {"frames", required_argument, 0, OPT_FRAMES}, {"screenshot", required_argument, 0, OPT_SHOT}, {0, 0, 0, 0}};
    view_opts o = {0};
    cli_scene sc;
    int rc = cli_scene_parse("view", argc, argv, VIEW_GROUPS, NULL, longopts, view_opt, &o, view_usage, &sc);
    if (rc == CLI_HELP) return EXIT_OK;
    if (rc != EXIT_OK) return rc;
    sc.want_edits = !sc.archive; /* the mouse digs and raises */
    const long frames = o.frames;
    const char *shot = o.shot;
    const int w = sc.width, h = sc.height;

    sc.want_edits = sc.want_edits && !sc.planet;
    glfwSetErrorCallback(on_glfw_error);
    if (!glfwInit()) return cli_error("view", "cannot start GLFW: %s (no display? try xvfb-run -a terra view)", glfw_why);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 5);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow *win = glfwCreateWindow(w, h, "terra view", NULL, NULL);
    if (!win) {
        glfwTerminate();
        return cli_error("view", "cannot open a %dx%d window with OpenGL 4.5 core: %s", w, h, glfw_why);
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(1);
    dl_iterate_phdr(pin_driver, NULL);

    terra_source *src = NULL;
    terra_gl_scene *scene = NULL;
    terra_planet *planet = NULL;
    terra_gl_planet *pscene = NULL;
    uint8_t *rgb = NULL;
    terra_status st;
    if (sc.planet) { /* the planet scene draws into the window's framebuffer */
        st = cli_planet_open(&sc, &planet);
        if (st == TERRA_OK) st = cli_planet_scene(&sc, planet, false, 8, &pscene);
    } else {
        st = cli_scene_open(&sc, &src);
        if (st == TERRA_OK) st = terra_gl_scene_create(&(terra_gl_scene_desc){.source = src, .archive = sc.mesh, .select = sc.sel}, &scene);
    }
    view_state vs = {.cam = cli_scene_camera(&sc),
                     .style = cli_scene_style(&sc),
                     .speed = 60,
                     .captured = true,
                     .scene = &sc,
                     .drawn = scene,
                     .planet = planet};
    if (planet) vs.cam = cli_planet_camera(&sc, planet);
    int fbw = w, fbh = h;
    if (st == TERRA_OK) {
        vs.gl = planet ? terra_gl_planet_renderer(pscene) : terra_gl_scene_renderer(scene);
        glfwGetFramebufferSize(win, &fbw, &fbh);
        st = terra_gl_resize(vs.gl, fbw, fbh);
    }
    if (st != TERRA_OK) {
        rc = cli_error("view", "%s", terra_last_error());
        goto done;
    }
    glfwSetWindowUserPointer(win, &vs);
    glfwSetScrollCallback(win, on_scroll);
    glfwSetMouseButtonCallback(win, on_mouse);
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
        if (planet) {
            vs.style.sun = cli_planet_sun(vs.cam.eye);
            vs.cam.aspect = 0; /* the window's */
            st = terra_gl_planet_frame(pscene, &vs.cam, &vs.style, &fs);
        } else {
            if (cli_scene_reload(&sc, scene, stderr)) vs.style.surfaces = cli_scene_style(&sc).surfaces; /* --source edited */
            /* the first frame waits for the ground under the eye; then the streamer runs in real time */
            st = terra_gl_scene_frame(scene, &vs.cam, &vs.style, f == 0, 60, &fs);
        }
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
        if (planet && now - title_at > 0.25) {
            char title[256];
            double lat, lon;
            terra_planet_dir_latlon(vs.cam.eye, &lat, &lon);
            snprintf(title, sizeof title, "terra view --planet - %.1f ms - %d tiles, %.2fM triangles, %d draw call%s - lat %.4f lon %.4f, %.0f m up",
                     frame_ms, fs.tiles, fs.triangles / 1e6, fs.draw_calls, fs.draw_calls == 1 ? "" : "s", lat, lon,
                     terra_planet_altitude(planet, vs.cam.eye, NULL, NULL));
            glfwSetWindowTitle(win, title);
            title_at = now;
        } else if (now - title_at > 0.25) {
            char title[256];
            const terra_stream_stats *ss = terra_stream_get_stats(terra_gl_scene_stream(scene));
            snprintf(title, sizeof title,
                     "terra view - %.1f ms - %d tiles, %.2fM triangles, %d draw call%s - %d streaming - %.0f MB - %.0f "
                     "m/s - %d edits%s%s",
                     frame_ms, fs.tiles, fs.triangles / 1e6, fs.draw_calls, fs.draw_calls == 1 ? "" : "s",
                     ss->in_flight + ss->ready, fs.bytes_held / 1048576.0, vs.speed, vs.edits,
                     vs.style.no_morph ? " - NO MORPH" : "", vs.style.level_tint ? " - levels" : "");
            glfwSetWindowTitle(win, title);
            title_at = now;
        }
        glfwSwapBuffers(win);
    }
    if (rc == EXIT_OK && scene) rc = cli_failed_tiles("view", terra_gl_scene_stream(scene)); /* named at the end */
done:
    free(rgb);
    terra_gl_planet_destroy(pscene);
    cli_planet_close(planet);
    terra_gl_scene_destroy(scene);
    cli_scene_close(&sc, src);
    glfwDestroyWindow(win);
    glfwTerminate();
    return rc;
}
