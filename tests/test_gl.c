/* The renderer: one draw call per frame whatever the number of tiles (counted independently, by
 * wrapping libepoxy's dispatch), tiles reach the GPU only through the streamer's upload callback
 * and leave when the streamer lets go, the same frame gives the same bytes, two frames a small
 * step apart differ only slightly (no pop where levels change), the vertex 3-colouring that gives
 * the fragment stage a triangle's three surfaces, and camera-relative precision far from the
 * origin. */
#include "check.h"
#include "test_gl_util.h"

#include <epoxy/egl.h>
#include <epoxy/gl.h>

/* ---- every GL draw entry point, counted ------------------------------------------------------- */

static long draw_entry_calls;
static PFNGLMULTIDRAWELEMENTSINDIRECTPROC real_mdei;
static PFNGLDRAWARRAYSPROC real_da;
static PFNGLDRAWELEMENTSPROC real_de;
static void APIENTRY count_mdei(GLenum m, GLenum t, const void *i, GLsizei n, GLsizei s) {
    draw_entry_calls++;
    real_mdei(m, t, i, n, s);
}
static void APIENTRY count_da(GLenum m, GLint f, GLsizei n) {
    draw_entry_calls++;
    real_da(m, f, n);
}
static void APIENTRY count_de(GLenum m, GLsizei n, GLenum t, const void *i) {
    draw_entry_calls++;
    real_de(m, n, t, i);
}
/* Any other draw entry point is replaced by one that counts and fails the test if ever called. */
static long other_draw_calls;
static void APIENTRY no_mdebv(GLenum m, const GLsizei *c, GLenum t, const void *const *i, GLsizei n, const GLint *b) {
    (void)m, (void)c, (void)t, (void)i, (void)n, (void)b;
    other_draw_calls++;
}
static void APIENTRY no_debv(GLenum m, GLsizei c, GLenum t, const void *i, GLint b) {
    (void)m, (void)c, (void)t, (void)i, (void)b;
    other_draw_calls++;
}
static void APIENTRY no_dei(GLenum m, GLenum t, const void *i) {
    (void)m, (void)t, (void)i;
    other_draw_calls++;
}
static void APIENTRY no_deibvbi(GLenum m, GLsizei c, GLenum t, const void *i, GLsizei n, GLint b, GLuint bi) {
    (void)m, (void)c, (void)t, (void)i, (void)n, (void)b, (void)bi;
    other_draw_calls++;
}

static void wrap_draw_calls(void) {
    /* the driver's own entry points (epoxy's pointers start as resolving stubs that call back
     * through the pointer, which would then be ours) */
    real_mdei = (PFNGLMULTIDRAWELEMENTSINDIRECTPROC)eglGetProcAddress("glMultiDrawElementsIndirect");
    real_da = (PFNGLDRAWARRAYSPROC)eglGetProcAddress("glDrawArrays");
    real_de = (PFNGLDRAWELEMENTSPROC)eglGetProcAddress("glDrawElements");
    CHECK(real_mdei && real_da && real_de);
    epoxy_glMultiDrawElementsIndirect = count_mdei;
    epoxy_glDrawArrays = count_da;
    epoxy_glDrawElements = count_de;
    epoxy_glMultiDrawElementsBaseVertex = no_mdebv;
    epoxy_glDrawElementsBaseVertex = no_debv;
    epoxy_glDrawElementsIndirect = no_dei;
    epoxy_glDrawElementsInstancedBaseVertexBaseInstance = no_deibvbi;
}

static void one_draw_call_whatever_the_tiles(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 3}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, 16, TW, TH);
    CHECK(scene != NULL);
    if (!scene) return;
    /* a low camera looking at the horizon (hundreds of tiles) down to one high above looking down */
    const double pitches[] = {-0.05, -0.3, -0.9, -1.5};
    const double heights[] = {30, 300, 3000, 20000};
    int min_tiles = 1 << 30, max_tiles = 0;
    GLuint query;
    glGenQueries(1, &query);
    for (int k = 0; k < 4; k++) {
        float g;
        terra_source_height(src, 500, 500, &g);
        terra_camera cam = {.eye = {500, g + heights[k], 500}, .yaw_rad = 0.7 * k, .pitch_rad = pitches[k],
                            .fov_y_rad = 1.0};
        terra_gl_frame_stats fs;
        draw_entry_calls = other_draw_calls = 0;
        glBeginQuery(GL_PRIMITIVES_GENERATED, query);
        CHECK(terra_gl_scene_frame(scene, &cam, NULL, true, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        glEndQuery(GL_PRIMITIVES_GENERATED);
        GLuint prims = 0;
        glGetQueryObjectuiv(query, GL_QUERY_RESULT, &prims);
        CHECK(draw_entry_calls == 1 && other_draw_calls == 0, "frame %d: %ld draw calls (and %ld others) for %d tiles",
              k, draw_entry_calls, other_draw_calls, fs.tiles);
        CHECK(fs.draw_calls == 1, "frame %d: the renderer counted %d draw calls", k, fs.draw_calls);
        CHECK(prims == (GLuint)fs.triangles, "frame %d: GL drew %u triangles, the renderer says %d", k, prims,
              fs.triangles);
        CHECK(fs.settled && fs.tiles > 1);
        if (fs.tiles < min_tiles) min_tiles = fs.tiles;
        if (fs.tiles > max_tiles) max_tiles = fs.tiles;
    }
    glDeleteQueries(1, &query);
    CHECK(max_tiles > 4 * min_tiles, "tile counts %d..%d do not vary enough to mean anything", min_tiles, max_tiles);
    printf("  1 draw call per frame for %d to %d tiles\n", min_tiles, max_tiles);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

/* Tiles reach the vertex buffer only through the streamer's upload callback, within its budget,
 * and their slots are freed when the streamer lets them go. */
static void uploads_follow_the_streamer(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 4}, &src) == TERRA_OK);
    terra_gl_scene_desc d = {.source = src, .width = TW, .height = TH, .capacity_tiles = 1200, .threads = 2};
    d.select.grid.cells = 16;
    terra_gl_scene *scene = NULL;
    CHECK(terra_gl_scene_create(&d, &scene) == TERRA_OK, "%s", terra_last_error());
    if (!scene) return;
    terra_gl *gl = terra_gl_scene_renderer(scene);
    terra_stream *stream = terra_gl_scene_stream(scene);
    long uploads = 0, releases = 0;
    int worst_unresident = 0;
    for (int f = 0; f < 60; f++) {
        terra_camera cam = terra_fly_path_camera(src, f / 59.0);
        terra_gl_frame_stats fs;
        CHECK(terra_gl_scene_frame(scene, &cam, NULL, f == 0, 60, &fs) == TERRA_OK, "%s", terra_last_error());
        const terra_gl_stats *gs = terra_gl_get_stats(gl);
        const terra_stream_stats *ss = terra_stream_get_stats(stream);
        uploads += gs->uploads;
        releases += gs->releases;
        if (f > 0) /* one update a frame: the renderer's uploads are the streamer's budgeted pieces */
            CHECK(gs->uploads == ss->pieces[TERRA_WORK_UPLOAD], "frame %d: %d uploads, the streamer ran %d", f,
                  gs->uploads, ss->pieces[TERRA_WORK_UPLOAD]);
        CHECK(gs->resident == ss->standing, "frame %d: %d tiles resident on the GPU, %d standing", f, gs->resident,
              ss->standing);
        if (gs->not_resident > worst_unresident) worst_unresident = gs->not_resident;
    }
    CHECK(worst_unresident == 0, "a drawn tile was not resident");
    CHECK(releases > 0, "no tile ever left the vertex buffer (the path should force evictions)");
    printf("  60 frames: %ld uploads, %ld released\n", uploads, releases);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

static uint8_t *render(terra_gl_scene *scene, terra_camera cam, const terra_gl_style *style) {
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    CHECK(terra_gl_scene_frame(scene, &cam, style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
    return rgb;
}

static void same_frame_same_bytes(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *a = test_scene(src, 16, TW, TH), *b = test_scene(src, 16, TW, TH);
    CHECK(a && b);
    if (!a || !b) return;
    const terra_camera cam = terra_fly_path_camera(src, 0.3);
    uint8_t *x = render(a, cam, NULL);
    uint8_t *y = render(a, cam, NULL); /* the same scene again */
    /* another scene, reached by another way (tiles arrive in another order, other slots) */
    uint8_t *w = render(b, terra_fly_path_camera(src, 0.6), NULL);
    uint8_t *z = render(b, cam, NULL);
    CHECK(memcmp(x, y, (size_t)TW * TH * 3) == 0, "the same frame twice differs");
    CHECK(memcmp(x, z, (size_t)TW * TH * 3) == 0, "the same frame from another scene differs");
    CHECK(memcmp(x, w, (size_t)TW * TH * 3) != 0);
    free(x), free(y), free(z), free(w);
    terra_gl_scene_destroy(a);
    terra_gl_scene_destroy(b);
    terra_source_destroy(src);
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b) {
    double s = 0;
    for (size_t i = 0; i < (size_t)TW * TH * 3; i++) s += abs((int)a[i] - (int)b[i]);
    return s / ((double)TW * TH * 3);
}

/* Whether the two draw lists differ in a tile of level `max_level` or finer. */
static bool near_change(const terra_stream_draw *a, int na, const terra_stream_draw *b, int nb, int max_level) {
    for (int pass = 0; pass < 2; pass++) {
        const terra_stream_draw *x = pass ? b : a, *y = pass ? a : b;
        const int nx = pass ? nb : na, ny = pass ? na : nb;
        for (int i = 0; i < nx; i++) {
            if (x[i].level > max_level) continue;
            bool found = false;
            for (int j = 0; j < ny && !found; j++) found = x[i].key == y[j].key;
            if (!found) return true;
        }
    }
    return false;
}

typedef struct pop {
    double mean;  /* mean relative change of the distance to the ground per pixel */
    long pixels;  /* pixels whose distance changed by more than 0.1% */
} pop;

static pop compare_depth(const float *a, const float *b) {
    pop p = {0, 0};
    long n = 0;
    for (size_t i = 0; i < (size_t)TW * TH; i++) {
        if (!isfinite(a[i]) && !isfinite(b[i])) continue;
        double r = (!isfinite(a[i]) || !isfinite(b[i])) ? 1.0 : fabs(a[i] - b[i]) / a[i];
        p.mean += r;
        p.pixels += r > 1e-3;
        n++;
    }
    p.mean /= n ? n : 1;
    return p;
}

/* Morph continuity. Where a small step of the eye changes which tiles are drawn (a tile splits
 * into four or four merge into one), the ground must not pop. The pop is separated from the
 * motion: the frame at the first eye is drawn twice, with the tiles chosen at the first eye and
 * with the tiles chosen 0.5 m further on, and the distance to the ground is compared pixel by
 * pixel. Morphed, a tile that splits is at that moment already its parent's surface, and the
 * ground does not move; unmorphed, it pops. (Shading may still change a little: a level's normals
 * come from its own sample spacing.) And the two frames a step apart, motion included, differ
 * only slightly (mean change per channel). */
static void morph_continuity(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &src) == TERRA_OK);
    terra_gl_scene *scene = test_scene(src, 16, TW, TH);
    CHECK(scene != NULL);
    if (!scene) return;
    terra_stream *stream = terra_gl_scene_stream(scene);
    terra_gl *gl = terra_gl_scene_renderer(scene);
    terra_stream_draw *d0 = malloc(sizeof *d0 * 4096), *d1 = malloc(sizeof *d1 * 4096);
    uint8_t *a = malloc((size_t)TW * TH * 3), *m = malloc((size_t)TW * TH * 3);
    float *za = malloc(sizeof(float) * TW * TH), *zb = malloc(sizeof(float) * TW * TH);
    int changes = 0;
    pop worst = {0}, worst_unmorphed = {0};
    double worst_step = 0;
    const terra_gl_style morphed = {.fog_distance = -1}, unmorphed = {.fog_distance = -1, .no_morph = true};
    terra_select *probe;
    CHECK(terra_select_create(terra_select_get_desc(terra_gl_scene_select(scene)), src, &probe) == TERRA_OK);
    terra_tile_key *k0 = malloc(sizeof *k0 * 4096);
    int candidates = 0;
    for (int k = 0; k < 3000 && changes < 3 && candidates < 12; k++) {
        const double t = 0.005 + k * 0.0003;
        terra_camera c0 = terra_fly_path_camera(src, t), c1 = c0;
        c0.aspect = c1.aspect = (double)TW / TH;
        terra_vec3 f;
        terra_camera_basis(&c0, &f, NULL, NULL);
        c1.eye.x += 0.5 * f.x, c1.eye.y += 0.5 * f.y, c1.eye.z += 0.5 * f.z;
        /* cheap first: does the selection change in a tile of level 3 or finer? */
        const terra_selected_tile *sel;
        int s0, s1;
        terra_frustum fr;
        terra_camera_frustum(&c0, &fr);
        terra_select_run(probe, c0.eye, &fr, &sel, &s0);
        for (int i = 0; i < s0 && i < 4096; i++) k0[i] = sel[i].level <= 3 ? sel[i].key : 0;
        terra_camera_frustum(&c1, &fr);
        terra_select_run(probe, c1.eye, &fr, &sel, &s1);
        bool differs = false;
        for (int i = 0; i < s1 && !differs; i++) {
            if (sel[i].level > 3) continue;
            bool found = false;
            for (int j = 0; j < s0 && !found; j++) found = k0[j] == sel[i].key;
            differs = !found;
        }
        if (!differs) continue;
        candidates++;
        const terra_stream_draw *d;
        int n0, n1;
        CHECK(terra_gl_scene_frame(scene, &c1, &morphed, true, 60, NULL) == TERRA_OK);
        CHECK(terra_gl_read_rgb(gl, m) == TERRA_OK); /* the frame one step on */
        terra_stream_draws(stream, terra_gl_scene_focus(scene), &d, &n1);
        memcpy(d1, d, sizeof *d * (size_t)(n1 < 4096 ? n1 : 4096));
        CHECK(terra_gl_scene_frame(scene, &c0, &morphed, true, 60, NULL) == TERRA_OK);
        terra_stream_draws(stream, terra_gl_scene_focus(scene), &d, &n0);
        memcpy(d0, d, sizeof *d * (size_t)(n0 < 4096 ? n0 : 4096));
        if (!near_change(d0, n0, d1, n1, TERRA_TILE_MAX_LEVEL)) continue;
        pop p[2];
        for (int u = 0; u < 2; u++) {
            const terra_gl_style *st = u ? &unmorphed : &morphed;
            CHECK(terra_gl_draw(gl, &c0, d0, n0, st) == TERRA_OK);
            CHECK(terra_gl_read_rgb(gl, a) == TERRA_OK);
            CHECK(terra_gl_read_depth(gl, za) == TERRA_OK);
            CHECK(terra_gl_draw(gl, &c0, d1, n1, st) == TERRA_OK);
            CHECK(terra_gl_get_stats(gl)->not_resident == 0);
            CHECK(terra_gl_read_depth(gl, zb) == TERRA_OK);
            p[u] = compare_depth(za, zb);
            if (!u) { /* the real step, motion included */
                const double step = mean_abs_diff(a, m);
                if (step > worst_step) worst_step = step;
            }
        }
        if (p[1].pixels < 10) continue; /* the tiles that changed are out of sight */
        changes++;
        printf("  t %.3f: tiles split or merge in view; ground moved: %ld pixels (mean %.2e) morphed, %ld (%.2e) "
               "unmorphed\n",
               t, p[0].pixels, p[0].mean, p[1].pixels, p[1].mean);
        if (p[0].pixels > worst.pixels) worst = p[0];
        if (p[1].pixels > worst_unmorphed.pixels) worst_unmorphed = p[1];
        CHECK(p[0].pixels * 10 <= p[1].pixels, "t %.3f: morphing did not remove the pop (%ld vs %ld pixels)", t,
              p[0].pixels, p[1].pixels);
    }
    CHECK(changes >= 2, "found only %d steps where tiles in view change level", changes);
    CHECK(worst.pixels <= 3, "a level change moved the ground in %ld pixels", worst.pixels);
    CHECK(worst_step < 1.0, "a 0.5 m step changed the picture by %.3f per channel on average", worst_step);
    printf("  %d level changes in view: ground moved in at most %ld pixels morphed, %ld unmorphed; a 0.5 m step "
           "changes the picture by %.3f per channel\n",
           changes, worst.pixels, worst_unmorphed.pixels, worst_step);
    free(d0), free(d1), free(a), free(m), free(za), free(zb), free(k0);
    terra_select_destroy(probe);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

/* The vertex stage colours grid vertex (i, j) with (i + j) mod 3: every triangle of the shared
 * index buffer must get three colours, or the fragment stage would not see its three surfaces. */
static void grid_vertices_three_coloured(void) {
    for (int cells = 16; cells <= 256; cells *= 2) {
        const int n = terra_grid_index_count(cells);
        uint32_t *idx = malloc(sizeof *idx * (size_t)n);
        terra_grid_indices(cells, idx);
        int bad = 0;
        for (int t = 0; t < n; t += 3) {
            int c[3];
            for (int k = 0; k < 3; k++) c[k] = (int)((idx[t + k] % (cells + 1) + idx[t + k] / (cells + 1)) % 3);
            bad += c[0] == c[1] || c[1] == c[2] || c[0] == c[2];
        }
        CHECK(bad == 0, "cells %d: %d triangles with a repeated colour", cells, bad);
        free(idx);
    }
}

/* 5,000 km from the origin the ground looks as it does near it: the same hills at the same place
 * relative to the eye give the same picture (the world shifted by a whole number of coarsest
 * tiles, 38 and 32 of 131,072 m, so every lattice sample is the same height). */
static float shifted_height(void *user, double x, double z) {
    float h;
    terra_source_height(user, x - 4980736.0, z + 4194304.0, &h);
    return h;
}
static terra_status shifted_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    return terra_source_height_range(user, x0 - 4980736.0, z0 + 4194304.0, x1 - 4980736.0, z1 + 4194304.0, lo, hi);
}

static void steady_far_from_the_origin(void) {
    terra_source *world, *far;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &world) == TERRA_OK);
    CHECK(terra_source_create(&(terra_source_desc){.height_at = shifted_height, .height_range = shifted_range,
                                                   .user = world},
                              &far) == TERRA_OK);
    terra_gl_scene *near_s = test_scene(world, 16, TW, TH), *far_s = test_scene(far, 16, TW, TH);
    CHECK(near_s && far_s);
    if (near_s && far_s) {
        terra_camera c = terra_fly_path_camera(world, 0.05);
        terra_gl_style flat = {.flat = true, .level_tint = true};
        uint8_t *a = render(near_s, c, &flat);
        c.eye.x += 4980736.0, c.eye.z -= 4194304.0;
        uint8_t *b = render(far_s, c, &flat);
        const double m = mean_abs_diff(a, b);
        CHECK(m < 0.05, "5,000 km out the picture differs by %.3f per channel", m);
        printf("  5,000 km from the origin: mean pixel difference %.4f\n", m);
        free(a), free(b);
    }
    terra_gl_scene_destroy(near_s);
    terra_gl_scene_destroy(far_s);
    terra_source_destroy(far);
    terra_source_destroy(world);
}

/* Runs one test by name when given (test_gl NAME), all otherwise. */
static const char *only;
#define RUN_SOME(fn)                                    \
    do {                                                \
        if (!only || strcmp(only, #fn) == 0) RUN(fn);   \
    } while (0)

/* A NULL description: the defaults for the renderer; the scene, which must be given a source, says so.
 * A stream is attached only if its tiles are the renderer's. */
static void null_desc(void) {
    terra_gl *r = NULL;
    CHECK(terra_gl_create(NULL, &r) == TERRA_OK && r, "%s", terra_last_error());
    terra_stream_desc sd = {0};
    CHECK(terra_gl_attach(r, &sd) == TERRA_OK && sd.upload == terra_gl_upload && sd.release == terra_gl_release);
    sd = (terra_stream_desc){.select.grid.cells = 16};
    CHECK(terra_gl_attach(r, &sd) == TERRA_E_INVALID && !sd.upload && strstr(terra_last_error(), "16 cells"), "%s",
          terra_last_error());
    terra_gl_destroy(r);
    terra_gl_scene *s = NULL;
    CHECK(terra_gl_scene_create(NULL, &s) == TERRA_E_INVALID && !s && strstr(terra_last_error(), "source"));
}

int main(int argc, char **argv) {
    only = argc > 1 ? argv[1] : NULL;
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "no headless OpenGL 4.5: %s\n", terra_last_error());
        return 1;
    }
    printf("  renderer: %s\n", terra_gl_renderer_name());
    wrap_draw_calls();
    RUN_SOME(null_desc);
    RUN_SOME(grid_vertices_three_coloured);
    RUN_SOME(one_draw_call_whatever_the_tiles);
    RUN_SOME(uploads_follow_the_streamer);
    RUN_SOME(same_frame_same_bytes);
    RUN_SOME(morph_continuity);
    RUN_SOME(steady_far_from_the_origin);
    terra_gl_context_destroy(ctx);
    return finish();
}
