/* Hot reload of a script source while a scene runs in real time: the script is rewritten (its
 * ground 100 m higher, far deeper than any skirt, with a new range) mid-flight and opened again;
 * every frame, before, during and after, shows ground on every pixel (the old tiles are drawn
 * alone until the new ones cover the view, then the new alone), the old script is let go of, and
 * once the stream settles every drawn tile is the new ground, vertex for vertex. A script that
 * breaks on reload leaves the ground drawn. */
#include "check.h"
#include "terra/script.h"
#include "test_gl_util.h"

static char dir[] = "/tmp/terra_gl_script_XXXXXX";
static char path[600];

static void write_script(double base, double lo, double hi) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f,
            "return { min_height = %g, max_height = %g,\n"
            "  height = function(x, z) return %g + 30 * terra.fbm(x / 400, z / 400) end }\n",
            lo, hi, base);
    fclose(f);
}

/* How many drawn tiles differ from the tile the source makes for their key. */
static int drawn_unlike(terra_gl_scene *scene, const terra_source *src) {
    const terra_stream_draw *d;
    int n = 0, unlike = 0;
    terra_stream_draws(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &d, &n);
    const terra_grid_desc *g = &terra_select_get_desc(terra_gl_scene_select(scene))->grid;
    const size_t bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(g->cells);
    terra_grid_vertex *v = malloc(bytes);
    float *scratch = malloc(sizeof(float) * (size_t)terra_grid_scratch_floats(g->cells));
    for (int i = 0; v && scratch && i < n; i++)
        unlike += terra_grid_build(src, g, d[i].key, v, scratch, NULL) != TERRA_OK || memcmp(v, d[i].data, bytes) != 0;
    free(v), free(scratch);
    return n ? unlike : -1;
}

static void test_reload_while_flying(void) {
    write_script(40, 5, 75);
    terra_script *s = NULL, *old = NULL;
    CHECK(terra_script_open(&(terra_script_desc){.path = path}, &s) == TERRA_OK, "open: %s", terra_last_error());
    if (!s) return;
    terra_gl_scene *scene = test_scene(terra_script_source(s), 32, TW, TH);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    if (!scene || !rgb) return;
    const terra_gl_style flat = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    long sky_max = 0;
    int reloaded_at = -1, retired_at = -1, broken_kept = 0;
    const int frames = 90;
    for (int f = 0; f < frames; f++) {
        if (f == 15) write_script(140, 105, 175); /* mid-flight: 100 m up, deeper than any skirt */
        if (f == 60) { /* a broken edit: the ground stays */
            FILE *b = fopen(path, "w");
            if (b) fputs("return { height = function(x, z) return 1 end, min_height = \n", b), fclose(b);
        }
        if (terra_script_changed(s) && !old) {
            terra_script *fresh = NULL;
            if (terra_script_open(&(terra_script_desc){.path = path}, &fresh) == TERRA_OK) {
                CHECK(terra_gl_scene_set_source(scene, terra_script_source(fresh)) == TERRA_OK, "set source");
                old = s, s = fresh;
                if (reloaded_at < 0) reloaded_at = f;
            } else {
                broken_kept += strstr(terra_last_error(), "world.lua:") != NULL;
            }
        }
        if (old && !terra_gl_scene_busy(scene)) {
            terra_script_close(old);
            old = NULL;
            if (retired_at < 0) retired_at = f;
        }
        terra_camera cam = {.eye = {-300 + 8.0 * f, 330, 40}, .yaw_rad = 1.2, .pitch_rad = -0.9, .fov_y_rad = 1.0,
                            .aspect = (double)TW / TH};
        terra_gl_frame_stats fs;
        if (terra_gl_scene_frame(scene, &cam, &flat, f == 0 || f == frames - 1, 60, &fs) != TERRA_OK) {
            CHECK(false, "frame %d: %s", f, terra_last_error());
            break;
        }
        terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
        const long sky = sky_pixels(rgb, TW, TH);
        if (sky > sky_max) {
            sky_max = sky;
            save_png("script_reload_holes.png", rgb, TW, TH);
        }
    }
    CHECK(reloaded_at == 15, "reloaded at frame %d", reloaded_at);
    CHECK(retired_at >= 15, "the old script let go of at frame %d", retired_at);
    CHECK(sky_max == 0, "%ld sky pixels on a frame while the ground was replaced", sky_max);
    CHECK(broken_kept > 0, "a broken script is refused with its file:line");
    const int unlike = drawn_unlike(scene, terra_script_source(s));
    CHECK(unlike == 0, "settled: %d drawn tiles are not the new ground's", unlike);
    terra_gl_scene_destroy(scene);
    terra_script_close(old);
    terra_script_close(s);
    free(rgb);
}

int main(void) {
    terra_gl_context *ctx = NULL;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("SKIP: no headless OpenGL: %s\n", terra_last_error());
        return 77;
    }
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/world.lua", dir);
    RUN(test_reload_while_flying);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    terra_gl_context_destroy(ctx);
    return finish();
}
