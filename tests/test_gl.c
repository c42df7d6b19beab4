/* The renderer: a frame's draw calls as few whatever the number of tiles (counted independently, by
 * wrapping libepoxy's dispatch: the depth prepass's and the picture's), tiles reach the GPU only
 * through the streamer's upload callback
 * and leave when the streamer lets go, the same frame gives the same bytes, two frames a small
 * step apart differ only slightly (no pop where levels change), the vertex 3-colouring that gives
 * the fragment stage a triangle's three surfaces, and camera-relative precision far from the
 * origin. Mesh tiles (tile_mesh.h) beside grid tiles in the same draw calls: the ground where
 * they are at the distance the height field puts it, no sky through the sides they share or
 * between levels (skirts), upload and release churn that fails only when the free total is short
 * (the fragmentation bound) and never harms the tiles still held, capacity refused by name. */
#include "check.h"
#include "test_gl_util.h"
#include "terra/tile_mesh.h"

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
static PFNGLMULTIDRAWELEMENTSINDIRECTCOUNTPROC real_mdeic;
static void APIENTRY count_mdeic(GLenum m, GLenum t, const void *i, GLintptr c, GLsizei n, GLsizei s) {
    draw_entry_calls++;
    real_mdeic(m, t, i, c, n, s);
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

/* Buffer copies (compaction): a copy within one buffer must never overlap itself. */
static long buffer_copies, overlapping_copies;
static PFNGLCOPYNAMEDBUFFERSUBDATAPROC real_copy;
static void APIENTRY count_copy(GLuint rb, GLuint wb, GLintptr ro, GLintptr wo, GLsizeiptr n) {
    buffer_copies++;
    if (rb == wb && ro < wo + n && wo < ro + n) overlapping_copies++;
    real_copy(rb, wb, ro, wo, n);
}

static void wrap_draw_calls(void) {
    /* the driver's own entry points (epoxy's pointers start as resolving stubs that call back
     * through the pointer, which would then be ours) */
    real_mdei = (PFNGLMULTIDRAWELEMENTSINDIRECTPROC)eglGetProcAddress("glMultiDrawElementsIndirect");
    real_da = (PFNGLDRAWARRAYSPROC)eglGetProcAddress("glDrawArrays");
    real_de = (PFNGLDRAWELEMENTSPROC)eglGetProcAddress("glDrawElements");
    real_mdeic = (PFNGLMULTIDRAWELEMENTSINDIRECTCOUNTPROC)eglGetProcAddress("glMultiDrawElementsIndirectCountARB");
    real_copy = (PFNGLCOPYNAMEDBUFFERSUBDATAPROC)eglGetProcAddress("glCopyNamedBufferSubData");
    CHECK(real_mdei && real_mdeic && real_da && real_de && real_copy);
    epoxy_glCopyNamedBufferSubData = count_copy;
    epoxy_glMultiDrawElementsIndirect = count_mdei;
    epoxy_glMultiDrawElementsIndirectCount = count_mdeic;
    epoxy_glMultiDrawElementsIndirectCountARB = count_mdeic;
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
        /* grid tiles: the depth prepass (the last culled frame's list) and the picture, one call each */
        CHECK(draw_entry_calls == fs.draw_calls && draw_entry_calls <= 2 && other_draw_calls == 0,
              "frame %d: %ld draw calls (and %ld others) for %d tiles", k, draw_entry_calls, other_draw_calls, fs.tiles);
        uint8_t px[3 * TW * TH];
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), px) == TERRA_OK); /* the GPU's counts of the frame */
        const terra_gl_stats *gs = terra_gl_get_stats(terra_gl_scene_renderer(scene));
        CHECK(gs->counted_frame == gs->frame && gs->draw_calls == fs.draw_calls);
        CHECK(prims == (GLuint)(gs->triangles + gs->prepass_triangles),
              "frame %d: GL drew %u triangles, the renderer says %d and %d in the prepass", k, prims, gs->triangles,
              gs->prepass_triangles);
        fs.tiles = gs->tiles, fs.hidden_tiles = gs->hidden_tiles;
        CHECK(fs.settled && fs.tiles > 1);
        if (fs.tiles + fs.hidden_tiles < min_tiles) min_tiles = fs.tiles + fs.hidden_tiles; /* the draw list's */
        if (fs.tiles + fs.hidden_tiles > max_tiles) max_tiles = fs.tiles + fs.hidden_tiles;
    }
    glDeleteQueries(1, &query);
    CHECK(max_tiles > 4 * min_tiles, "tile counts %d..%d do not vary enough to mean anything", min_tiles, max_tiles);
    printf("  at most 2 draw calls per frame for %d to %d tiles\n", min_tiles, max_tiles);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

/* Tiles reach the vertex buffer only through the streamer's upload callback, within its budget,
 * and their slots are freed when the streamer lets them go. */
static void uploads_follow_the_streamer(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 4}, &src) == TERRA_OK);
    /* no bound on stand-ins: a frame never waits, so it runs the streamer exactly once */
    terra_gl_scene_desc d = {.source = src, .width = TW, .height = TH, .capacity_tiles = 1200, .threads = 2,
                             .max_standin_levels = -1};
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

/* Tiles of many cells with no capacity given: the default holds as many as 1 GiB of vertices
 * allows (2048 tiles of 256 cells would ask for a 4.3 GiB buffer, which llvmpipe refuses with
 * GL_OUT_OF_MEMORY), and the scene draws. */
static void many_cells_fit_the_default_buffer(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 4}, &src) == TERRA_OK);
    terra_gl_scene_desc d = {.source = src, .width = TW, .height = TH, .threads = 2};
    d.select.grid.cells = 256;
    terra_gl_scene *scene = NULL;
    CHECK(terra_gl_scene_create(&d, &scene) == TERRA_OK, "%s", terra_last_error());
    if (!scene) return;
    const int slots = terra_stream_slots(terra_gl_scene_stream(scene));
    const size_t slot_bytes = sizeof(terra_grid_vertex) * (size_t)(terra_grid_vertex_count(256) + 4 * 256);
    CHECK(slots >= 64 && slots < 2048 && (size_t)slots * slot_bytes <= (size_t)1 << 30,
          "%d slots of %zu bytes for 256-cell tiles", slots, slot_bytes);
    terra_camera cam = terra_fly_path_camera(src, 0);
    terra_gl_frame_stats fs;
    CHECK(terra_gl_scene_frame(scene, &cam, NULL, false, 60, &fs) == TERRA_OK, "%s", terra_last_error());
    printf("  256 cells: %d tiles held by default (%zu MiB of vertices)\n", slots, (size_t)slots * slot_bytes >> 20);
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

/* A grid tile's skirt as the renderer holds it, read back from its buffers (the renderer's one
 * vertex array names them): 8 cells triangles after the grid's shared indices, each with three
 * colours (the grid's (i + j) mod 3, the skirt vertices' colour attribute), hanging from one border
 * cell edge: two of its corners that edge's ends or their copies, and every skirt vertex a copy of
 * the border vertex it hangs from (the same position, morph target, normals and surface). */
static void grid_skirts_three_coloured(void);

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


/* ---- mesh tiles ------------------------------------------------------------------------------------ */

/* A height field: a tilted plane and bumps of amplitude amp (|height - plane| <= amp). */
typedef struct field {
    double base, sx, sz, amp, kx, kz;
} field;

static double field_at(const field *f, double x, double z) {
    return f->base + f->sx * x + f->sz * z + f->amp * sin(x * f->kx) * sin(z * f->kz);
}
static float field_height(void *user, double x, double z) { return (float)field_at(user, x, z); }

static terra_source *field_source(field *f) {
    terra_source *src = NULL;
    CHECK(terra_source_create(&(terra_source_desc){.height_at = field_height, .user = f, .min_height = -2000,
                                                   .max_height = 2000},
                              &src) == TERRA_OK,
          "%s", terra_last_error());
    return src;
}

#define TILE0 64.0
#define CELLS 16

/* A mesh tile of the field over tile `key`: a grid of `cells` cells (vertex ids shuffled, each cell
 * split along a random diagonal), quantized as tile_mesh.h says, normals from the field's slope. */
static uint8_t *field_mesh(const field *f, terra_tile_key key, int cells, float skirt_m, terra_surface surface,
                           unsigned long long *rng, size_t *bytes) {
    const double side = ldexp(TILE0, terra_tile_key_level(key)), sp = side / cells;
    const double ox = terra_tile_key_x(key) * side, oz = terra_tile_key_y(key) * side;
    const uint32_t nv = (uint32_t)((cells + 1) * (cells + 1)), ni = (uint32_t)(6 * cells * cells);
    double *h = malloc(sizeof *h * nv), lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j <= cells; j++)
        for (int i = 0; i <= cells; i++) {
            const double y = field_at(f, ox + i * sp, oz + j * sp);
            h[j * (cells + 1) + i] = y;
            lo = fmin(lo, y), hi = fmax(hi, y);
        }
    if (hi <= lo) hi = lo + 1;
    *bytes = terra_tile_mesh_bytes(nv, ni);
    uint8_t *b = calloc(1, *bytes);
    terra_tile_mesh hd = {.magic = TERRA_TILE_MESH_MAGIC, .vertex_count = nv, .index_count = ni, .size_x = (float)side,
                          .size_z = (float)side, .min_height = (float)lo, .max_height = (float)hi, .skirt_m = skirt_m};
    memcpy(b, &hd, sizeof hd);
    terra_tile_mesh_vertex *v = (terra_tile_mesh_vertex *)(void *)(b + sizeof hd);
    uint32_t *idx = (uint32_t *)(void *)(b + (*bytes - 4 * (size_t)ni));
    uint32_t *id = malloc(sizeof *id * nv);
    for (uint32_t i = 0; i < nv; i++) id[i] = i;
    for (uint32_t i = nv - 1; i > 0; i--) {
        const uint32_t j = (uint32_t)(test_rand_u64(rng) % (i + 1)), t = id[i];
        id[i] = id[j], id[j] = t;
    }
    for (int j = 0; j <= cells; j++)
        for (int i = 0; i <= cells; i++) {
            const double x = ox + i * sp, z = oz + j * sp, e = 0.01;
            const double dx = (field_at(f, x + e, z) - field_at(f, x - e, z)) / (2 * e);
            const double dz = (field_at(f, x, z + e) - field_at(f, x, z - e)) / (2 * e);
            const float n[3] = {(float)-dx, (float)-dz, 1.0f}; /* (nx, nz, ny): +y the pole */
            terra_tile_mesh_vertex *o = &v[id[j * (cells + 1) + i]];
            *o = (terra_tile_mesh_vertex){.u = (uint16_t)lrint(i * 32767.0 / cells), .v = (uint16_t)lrint(j * 32767.0 / cells),
                                          .h = (uint16_t)lrint((h[j * (cells + 1) + i] - lo) / (hi - lo) * 32767.0),
                                          .surface = surface};
            terra_oct_encode(n, o->normal);
        }
    uint32_t t = 0;
    for (int j = 0; j < cells; j++)
        for (int i = 0; i < cells; i++) {
            const uint32_t a = id[j * (cells + 1) + i], bb = id[j * (cells + 1) + i + 1],
                           c = id[(j + 1) * (cells + 1) + i + 1], d = id[(j + 1) * (cells + 1) + i];
            const bool flip = test_rand_u64(rng) & 1;
            const uint32_t tri[6] = {a, d, flip ? bb : c, flip ? bb : a, flip ? d : c, flip ? c : bb};
            memcpy(idx + 6 * t++, tri, sizeof tri);
        }
    free(h), free(id);
    return b;
}

/* A grid tile of the source: its bytes (malloc'ed), as a streamer would upload them. */
static uint8_t *grid_tile(const terra_source *src, terra_tile_key key, size_t *bytes) {
    const terra_grid_desc g = {.tile0_size = TILE0, .cells = CELLS};
    *bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(CELLS);
    terra_grid_vertex *v = malloc(*bytes);
    float *scratch = malloc(sizeof(float) * (size_t)terra_grid_scratch_floats(CELLS));
    CHECK(terra_grid_build(src, &g, key, v, scratch, NULL) == TERRA_OK, "%s", terra_last_error());
    free(scratch);
    return (uint8_t *)v;
}

static terra_gl *mesh_renderer(size_t vertex_bytes, size_t index_bytes, int max_tiles) {
    terra_gl *r = NULL;
    terra_gl_desc d = {.grid = {.tile0_size = TILE0, .cells = CELLS}, .capacity_tiles = 64, .width = TW, .height = TH,
                       .vertex_bytes = vertex_bytes, .index_bytes = index_bytes, .max_tiles = max_tiles};
    CHECK(terra_gl_create(&d, &r) == TERRA_OK, "%s", terra_last_error());
    return r;
}

static terra_stream_draw draw_of(terra_tile_key key) {
    /* morph start = end: no morph (and no division by zero in the vertex stage) */
    return (terra_stream_draw){.key = key, .level = terra_tile_key_level(key), .morph_start = 0, .morph_end = 0};
}

typedef struct ground_check {
    long checked;  /* pixels whose ray must meet the ground */
    long holes;    /* of them: nothing drawn */
    long off;      /* of them: drawn at another distance than the plane's (only when amp is 0) */
    long seam;     /* of them: within a metre of a tile's side */
    long seam_off; /* of off: within a metre of a tile's side */
    double worst;  /* largest distance error, metres */
} ground_check;

/* Which pixels must show ground over [x0, x1] x [z0, z1]: the ray meets the field's plane at P,
 * and P +- amp / sin(angle to the plane) along the ray (where the ray is amp above and below the
 * plane, so it crosses any surface within amp of it in between) both lie half a metre inside the
 * area. With amp 0 (the plane itself) the distance must be the plane's too. */
static ground_check check_ground(const float *z, const terra_camera *cam, const field *f, double amp, double x0,
                                 double z0, double x1, double z1) {
    ground_check g = {0};
    terra_vec3 fw;
    terra_camera_basis(cam, &fw, NULL, NULL);
    const double nl = sqrt(f->sx * f->sx + 1 + f->sz * f->sz), nx = -f->sx / nl, ny = 1 / nl, nz = -f->sz / nl;
    for (int j = 0; j < TH; j++)
        for (int i = 0; i < TW; i++) {
            const terra_vec3 d = pixel_ray(cam, TW, TH, i, j);
            /* plane: y = base + sx x + sz z */
            const double den = d.y - f->sx * d.x - f->sz * d.z;
            const double num = f->base + f->sx * cam->eye.x + f->sz * cam->eye.z - cam->eye.y;
            if (den >= 0) continue;
            const double t = num / den;
            if (!(t > 1)) continue;
            const double sn = fabs(d.x * nx + d.y * ny + d.z * nz), m = amp / sn + 0.5;
            bool inside = true;
            for (int k = -1; k <= 1; k += 2) {
                const double px = cam->eye.x + d.x * (t + k * (m - 0.5)), pz = cam->eye.z + d.z * (t + k * (m - 0.5));
                inside = inside && px > x0 + 0.5 && px < x1 - 0.5 && pz > z0 + 0.5 && pz < z1 - 0.5;
            }
            if (!inside) continue;
            g.checked++;
            const double px = cam->eye.x + d.x * t, pz = cam->eye.z + d.z * t;
            const double fx = fmod(px, TILE0), fz = fmod(pz, TILE0);
            const bool at_seam = fx < 1 || fx > TILE0 - 1 || fz < 1 || fz > TILE0 - 1;
            g.seam += at_seam;
            const float got = z[(size_t)j * TW + i];
            if (!isfinite(got)) {
                g.holes++;
                continue;
            }
            if (amp == 0) {
                const double want = t * (d.x * fw.x + d.y * fw.y + d.z * fw.z), err = fabs(got - want);
                if (err > g.worst) g.worst = err;
                if (err > 2e-3 * want + 0.02) {
                    g.off++;
                    g.seam_off += at_seam;
                    printf("    pixel (%d, %d): the plane at (%.3f, %.3f), %.2f m; drawn at %.2f m\n", i, j, px, pz, want, got);
                }
            }
        }
    return g;
}

/* Mesh tiles and grid tiles in a checkerboard over a tilted plane, drawn whole in one call: every pixel
 * over them shows ground (no sky), also in views grazing along the sides a mesh tile and a grid
 * tile share, at the plane's distance. Along those sides a mesh tile's edge lies off the grid
 * tile's by up to a quantization step (its heights in steps of 1/32767 of its range, its side
 * vertices 1/32767 of the side from the grid's lattice): the mesh tile's skirt covers the gap
 * where its edge is the higher, the grid tile's where the grid's is, so no ray grazing the side
 * slips through to ground further on; without skirts (counted, not asserted) one can (a window of
 * ~0.1 mm, widened to 1/256 pixel by the rasterizer's snapping). The triangles drawn are the grid
 * tiles' and the mesh tiles' own and skirts, as GL counts them. Culled (a depth prepass and the picture,
 * each a fixed number of calls), the picture and depth are the whole frame's, bit for bit. */
static void mesh_and_grid_tiles_in_one_draw(void) {
    field f = {.base = 30, .sx = 0.05, .sz = -0.03};
    terra_source *src = field_source(&f);
    terra_gl *r = mesh_renderer(0, 0, 0);
    if (!src || !r) return;
    unsigned long long rng = 21;
    terra_stream_draw draws[16];
    int n = 0, grid_tris = 0, mesh_tris = 0;
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) {
            const terra_tile_key key = terra_tile_key_make(0, 0, x, y);
            size_t bytes;
            const bool mesh = (x + y) % 2 == 1;
            uint8_t *data = mesh ? field_mesh(&f, key, 4 + (int)(test_rand_u64(&rng) % 20), 2.0f, 0, &rng, &bytes)
                                 : grid_tile(src, key, &bytes);
            CHECK(terra_gl_upload(r, key, data, bytes) == TERRA_OK, "%s", terra_last_error());
            if (mesh) mesh_tris += (int)(((const terra_tile_mesh *)(const void *)data)->index_count / 3);
            else grid_tris += 2 * CELLS * CELLS;
            free(data);
            draws[n++] = draw_of(key);
        }
    const terra_gl_stats *gs = terra_gl_get_stats(r);
    CHECK(gs->resident == 16 && gs->mesh_tiles == 8, "%d resident, %d mesh", gs->resident, gs->mesh_tiles);
    /* a high view of it all; low views grazing along x = 64 and z = 128, sides of mesh and grid tiles */
    const terra_camera cams[] = {
        {.eye = {128, 260, 330}, .yaw_rad = 0, .pitch_rad = -0.75, .fov_y_rad = 1.0},
        {.eye = {64.3, 0, -4}, .yaw_rad = 3.14159265358979 - 0.03, .pitch_rad = -0.1, .fov_y_rad = 1.0},
        {.eye = {-4, 0, 128.2}, .yaw_rad = 1.5707963 + 0.02, .pitch_rad = -0.08, .fov_y_rad = 1.0},
        {.eye = {250, 0, 250}, .yaw_rad = -0.785, .pitch_rad = -0.12, .fov_y_rad = 1.0},
    };
    float *z = malloc(sizeof(float) * TW * TH), *zc = malloc(sizeof(float) * TW * TH);
    uint8_t *rgb = malloc((size_t)TW * TH * 3), *rgbc = malloc((size_t)TW * TH * 3);
    GLuint query;
    glGenQueries(1, &query);
    long seam = 0, seam_off = 0, bare_off = 0, bare_holes = 0, culled_differ = 0;
    for (int c = 0; c < 4; c++) {
        terra_camera cam = cams[c];
        if (cam.eye.y == 0) cam.eye.y = field_at(&f, cam.eye.x, cam.eye.z) + 3;
        cam.aspect = (double)TW / TH;
        draw_entry_calls = other_draw_calls = 0;
        glBeginQuery(GL_PRIMITIVES_GENERATED, query);
        CHECK(terra_gl_draw(r, &cam, draws, n, &(terra_gl_style){.flat = true, .no_occlusion = true}) == TERRA_OK, "%s",
              terra_last_error());
        glEndQuery(GL_PRIMITIVES_GENERATED);
        GLuint prims = 0;
        glGetQueryObjectuiv(query, GL_QUERY_RESULT, &prims);
        CHECK(draw_entry_calls == 1 && other_draw_calls == 0 && gs->draw_calls == 1, "%ld draw calls", draw_entry_calls);
        CHECK(gs->tiles == 16 && gs->triangles == grid_tris + mesh_tris + gs->skirt_triangles && gs->skirt_triangles > 0,
              "%d tiles, %d triangles (%d grid, %d mesh, %d skirt)", gs->tiles, gs->triangles, grid_tris, mesh_tris,
              gs->skirt_triangles);
        CHECK(prims == (GLuint)gs->triangles, "GL drew %u triangles, the renderer says %d", prims, gs->triangles);
        CHECK(terra_gl_read_rgb(r, rgb) == TERRA_OK && terra_gl_read_depth(r, z) == TERRA_OK);
        const ground_check g = check_ground(z, &cam, &f, 0, 0, 0, 256, 256);
        printf("  view %d: %ld ground pixels (%ld along tile sides): %ld sky, %ld at another distance (%ld along sides)\n",
               c, g.checked, g.seam, g.holes, g.off, g.seam_off);
        /* culled: the prepass (the list's ground, the mesh tiles' ground) and the picture (the list's skirts
         * and ground, the mesh tiles' skirts and ground), whatever the tiles */
        draw_entry_calls = other_draw_calls = 0;
        CHECK(terra_gl_draw(r, &cam, draws, n, &(terra_gl_style){.flat = true}) == TERRA_OK, "%s", terra_last_error());
        CHECK(draw_entry_calls == gs->draw_calls && draw_entry_calls <= 6 && other_draw_calls == 0, "%ld draw calls culled",
              draw_entry_calls);
        CHECK(terra_gl_read_rgb(r, rgbc) == TERRA_OK && terra_gl_read_depth(r, zc) == TERRA_OK);
        for (int i = 0; i < TW * TH; i++) culled_differ += memcmp(rgb + 3 * i, rgbc + 3 * i, 3) || z[i] != zc[i];
        CHECK(g.checked > TW * TH / 4 && g.holes == 0 && g.off == 0, "view %d", c);
        seam += g.seam, seam_off += g.seam_off;
        CHECK(terra_gl_draw(r, &cam, draws, n, &(terra_gl_style){.flat = true, .no_skirts = true}) == TERRA_OK);
        CHECK(terra_gl_read_depth(r, z) == TERRA_OK);
        const ground_check b = check_ground(z, &cam, &f, 0, 0, 0, 256, 256);
        bare_off += b.off, bare_holes += b.holes;
    }
    CHECK(seam > 10000, "only %ld pixels along tile sides were checked", seam);
    CHECK(seam_off == 0, "%ld of %ld pixels along tile sides see through", seam_off, seam);
    CHECK(culled_differ == 0, "%ld pixels differ culled and whole", culled_differ);
    printf("  without skirts: %ld pixels see through to ground further on, %ld to the sky\n", bare_off, bare_holes);
    glDeleteQueries(1, &query);
    free(z), free(zc), free(rgb), free(rgbc);
    terra_gl_destroy(r);
    terra_source_destroy(src);
}

/* A coarse mesh tile (level 1) beside fine ones (level 0) over bumpy ground: the fine tiles' sides
 * have a vertex between each two of the coarse one's, off its straight edge, so without skirts sky
 * shows through the gaps in views grazing across the side; with skirts (re-uploaded over the same
 * keys) none does. */
static void skirts_close_gaps_between_levels(void) {
    field f = {.base = 40, .sx = 0.02, .sz = 0.01, .amp = 1.5, .kx = 0.61, .kz = 0.47};
    terra_gl *r = mesh_renderer(0, 0, 0);
    if (!r) return;
    unsigned long long rng = 22;
    const terra_tile_key keys[5] = {terra_tile_key_make(0, 1, 0, 0), terra_tile_key_make(0, 0, 2, 0),
                                    terra_tile_key_make(0, 0, 3, 0), terra_tile_key_make(0, 0, 2, 1),
                                    terra_tile_key_make(0, 0, 3, 1)};
    terra_stream_draw draws[5];
    for (int k = 0; k < 5; k++) draws[k] = draw_of(keys[k]);
    const terra_camera cams[] = {
        {.eye = {110, 0, 64}, .yaw_rad = 1.5707963, .pitch_rad = -0.12, .fov_y_rad = 1.0},
        {.eye = {150, 0, 50}, .yaw_rad = -1.5707963, .pitch_rad = -0.12, .fov_y_rad = 1.0},
        {.eye = {100, 0, 10}, .yaw_rad = 2.3, .pitch_rad = -0.1, .fov_y_rad = 1.0},
        {.eye = {160, 0, 120}, .yaw_rad = -0.8, .pitch_rad = -0.1, .fov_y_rad = 1.0},
        {.eye = {128.4, 0, -6}, .yaw_rad = 3.14159265358979, .pitch_rad = -0.09, .fov_y_rad = 1.0},
    };
    float *z = malloc(sizeof(float) * TW * TH);
    long holes[2] = {0, 0}, checked = 0;
    for (int pass = 0; pass < 2; pass++) { /* 0: no skirts, 1: skirts */
        for (int k = 0; k < 5; k++) {
            size_t bytes;
            uint8_t *data = field_mesh(&f, keys[k], 16, pass ? 6.0f : 0.0f, 0, &rng, &bytes);
            CHECK(terra_gl_upload(r, keys[k], data, bytes) == TERRA_OK, "%s", terra_last_error());
            free(data);
        }
        CHECK(terra_gl_get_stats(r)->resident == 5, "a second upload of a key replaces it");
        for (int c = 0; c < 5; c++) {
            terra_camera cam = cams[c];
            cam.eye.y = field_at(&f, cam.eye.x, cam.eye.z) + 4;
            cam.aspect = (double)TW / TH;
            CHECK(terra_gl_draw(r, &cam, draws, 5, &(terra_gl_style){.flat = true}) == TERRA_OK, "%s", terra_last_error());
            CHECK(terra_gl_read_depth(r, z) == TERRA_OK);
            const ground_check g = check_ground(z, &cam, &f, f.amp, 0, 0, 256, 128);
            holes[pass] += g.holes;
            if (pass) checked += g.checked;
        }
    }
    printf("  sky pixels through a coarse tile's side against finer ones: %ld without skirts, %ld with (%ld checked)\n",
           holes[0], holes[1], checked);
    CHECK(holes[0] > 0, "the views show no gap even without skirts: the check proves nothing");
    CHECK(holes[1] == 0 && checked > TW * TH, "%ld holes with skirts", holes[1]);
    free(z);
    terra_gl_destroy(r);
}

static void grid_skirts_three_coloured(void) {
    field f = {.base = 20, .sx = 0.03, .sz = -0.01, .amp = 4, .kx = 0.3, .kz = 0.2};
    terra_source *src = field_source(&f);
    for (int cells = 16; src && cells <= 256; cells *= 2) {
        terra_gl *r = NULL;
        const terra_grid_desc g = {.tile0_size = TILE0, .cells = cells};
        CHECK(terra_gl_create(&(terra_gl_desc){.grid = g, .capacity_tiles = 2, .width = 8, .height = 8}, &r) == TERRA_OK,
              "%s", terra_last_error());
        if (!r) break;
        const int nv = terra_grid_vertex_count(cells), ng = terra_grid_index_count(cells), ns = 24 * cells;
        terra_grid_vertex *v = malloc(sizeof *v * (size_t)(nv + 4 * cells)), *back = malloc(sizeof *v * (size_t)(nv + 4 * cells));
        float *scratch = malloc(sizeof(float) * (size_t)terra_grid_scratch_floats(cells));
        const terra_tile_key key = terra_tile_key_make(0, 1, 3, -2);
        CHECK(terra_grid_build(src, &g, key, v, scratch, NULL) == TERRA_OK);
        CHECK(terra_gl_upload(r, key, v, sizeof *v * (size_t)nv) == TERRA_OK, "%s", terra_last_error());
        /* the renderer's vertex array: the newest one; its element and vertex buffers */
        GLuint vao = 0;
        for (GLuint name = 1; name < 4096; name++)
            if (glIsVertexArray(name)) vao = name;
        GLint ibo = 0, vbo = 0;
        glGetVertexArrayiv(vao, GL_ELEMENT_ARRAY_BUFFER_BINDING, &ibo);
        glGetVertexArrayIndexediv(vao, 0, GL_VERTEX_BINDING_BUFFER, &vbo);
        uint32_t *idx = malloc(sizeof *idx * (size_t)(ng + ns));
        glGetNamedBufferSubData((GLuint)ibo, 0, (GLsizeiptr)(sizeof *idx * (size_t)(ng + ns)), idx);
        glGetNamedBufferSubData((GLuint)vbo, 0, (GLsizeiptr)(sizeof *back * (size_t)(nv + 4 * cells)), back);
        CHECK(glGetError() == GL_NO_ERROR && vao && ibo && vbo);
        CHECK(memcmp(back, v, sizeof *v * (size_t)nv) == 0, "cells %d: the grid's vertices are not as uploaded", cells);
        int bad_colour = 0, bad_copy = 0, bad_edge = 0;
        /* the border vertex each skirt vertex copies: the one whose every field but the colour it repeats */
        int *top = malloc(sizeof(int) * (size_t)(4 * cells));
        int *border = malloc(sizeof(int) * (size_t)(4 * cells)), nb = 0;
        for (int u = 0; u < nv; u++) {
            const int i = u % (cells + 1), j = u / (cells + 1);
            if (i == 0 || j == 0 || i == cells || j == cells) border[nb++] = u;
        }
        for (int k = 0; k < 4 * cells; k++) {
            top[k] = -1;
            for (int q = 0; q < nb && top[k] < 0; q++) {
                const int u = border[q];
                terra_grid_vertex a = back[nv + k], b = v[u];
                a.colour = b.colour = 0;
                if (memcmp(&a, &b, sizeof a) == 0) top[k] = u;
            }
            bad_copy += top[k] < 0;
        }
        for (int t = ng; t < ng + ns; t += 3) {
            int c[3], at[3][2], skirt = 0;
            for (int k = 0; k < 3; k++) {
                const uint32_t w = idx[t + k];
                const int u = w < (uint32_t)nv ? (int)w : (w < (uint32_t)(nv + 4 * cells) ? top[w - (uint32_t)nv] : -1);
                if (u < 0) {
                    bad_edge++;
                    c[k] = k, at[k][0] = at[k][1] = 0;
                    continue;
                }
                skirt += w >= (uint32_t)nv;
                c[k] = w < (uint32_t)nv ? (int)((w % (cells + 1) + w / (cells + 1)) % 3) : back[w].colour;
                at[k][0] = u % (cells + 1), at[k][1] = u / (cells + 1);
            }
            bad_colour += c[0] == c[1] || c[1] == c[2] || c[0] == c[2] || c[0] > 2 || c[1] > 2 || c[2] > 2;
            /* the three hang from one border cell edge: two distinct border points a cell apart */
            int span = 0;
            for (int a = 0; a < 3; a++)
                for (int b = a + 1; b < 3; b++) {
                    const int d = abs(at[a][0] - at[b][0]) + abs(at[a][1] - at[b][1]);
                    if (d > span) span = d;
                }
            bad_edge += span != 1 || skirt < 1 || skirt > 2;
        }
        CHECK(bad_colour == 0 && bad_copy == 0 && bad_edge == 0,
              "cells %d: %d skirt triangles with a repeated colour, %d skirt vertices copying no border vertex, %d "
              "triangles off a border cell edge",
              cells, bad_colour, bad_copy, bad_edge);
        free(v), free(back), free(scratch), free(idx), free(top), free(border);
        terra_gl_destroy(r);
    }
    terra_source_destroy(src);
}

/* What the test holds of each key in the churn. */
typedef struct held {
    uint8_t *data;
    size_t bytes;
    uint32_t vertices, indices;
} held;

/* The vertices and indices a tile takes in the renderer's buffers. */
static void tile_needs(const uint8_t *data, size_t bytes, uint32_t *nv, uint32_t *ni) {
    uint32_t magic;
    memcpy(&magic, data, 4);
    if (magic != TERRA_TILE_MESH_MAGIC) { /* its own vertices and its skirt's (gl.h) */
        *nv = (uint32_t)(terra_grid_vertex_count(CELLS) + 4 * CELLS), *ni = 0;
        return;
    }
    terra_tile_mesh h;
    memcpy(&h, data, sizeof h);
    terra_tile_mesh_limits lim;
    CHECK(terra_tile_mesh_limits_for(h.vertex_count, h.index_count, &lim) == TERRA_OK);
    terra_grid_vertex *v = malloc(sizeof *v * lim.vertices);
    uint32_t *i = malloc(sizeof *i * lim.indices);
    void *scratch = malloc(lim.scratch_bytes);
    terra_tile_mesh_info info = {0};
    CHECK(terra_tile_mesh_expand(data, bytes, terra_tile_key_make(0, 0, 0, 0), v, i, scratch, &info) == TERRA_OK);
    *nv = info.vertices, *ni = info.indices;
    free(v), free(i), free(scratch);
}

/* Draws what `r` holds of the 8 x 8 keys and compares with a fresh renderer given only those tiles
 * (in the other order): the pixels and depths must be the same. */
static bool same_as_fresh(terra_gl *r, const held *h, size_t vb, size_t ib, int max_tiles) {
    terra_stream_draw draws[64];
    int n = 0;
    for (int k = 0; k < 64; k++)
        if (h[k].data) draws[n++] = draw_of(terra_tile_key_make(0, 0, k % 8, k / 8));
    terra_gl *fresh = mesh_renderer(vb, ib, max_tiles);
    if (!fresh) return false;
    for (int k = 63; k >= 0; k--)
        if (h[k].data)
            CHECK(terra_gl_upload(fresh, terra_tile_key_make(0, 0, k % 8, k / 8), h[k].data, h[k].bytes) == TERRA_OK, "%s",
                  terra_last_error());
    const terra_camera cam = {.eye = {256, 520, 640}, .yaw_rad = 0, .pitch_rad = -0.85, .fov_y_rad = 1.0,
                              .aspect = (double)TW / TH};
    const terra_gl_style style = {.fog_distance = -1};
    uint8_t *a = malloc((size_t)TW * TH * 3), *b = malloc((size_t)TW * TH * 3);
    float *za = malloc(sizeof(float) * TW * TH), *zb = malloc(sizeof(float) * TW * TH);
    CHECK(terra_gl_draw(r, &cam, draws, n, &style) == TERRA_OK && terra_gl_get_stats(r)->not_resident == 0);
    CHECK(terra_gl_read_rgb(r, a) == TERRA_OK && terra_gl_read_depth(r, za) == TERRA_OK);
    CHECK(terra_gl_draw(fresh, &cam, draws, n, &style) == TERRA_OK && terra_gl_get_stats(fresh)->not_resident == 0);
    CHECK(terra_gl_read_rgb(fresh, b) == TERRA_OK && terra_gl_read_depth(fresh, zb) == TERRA_OK);
    long ground = 0;
    for (size_t i = 0; i < (size_t)TW * TH; i++) ground += isfinite(za[i]);
    const bool same = memcmp(a, b, (size_t)TW * TH * 3) == 0 && memcmp(za, zb, sizeof(float) * TW * TH) == 0;
    if (!same) save_png("churn_held.png", a, TW, TH), save_png("churn_fresh.png", b, TW, TH);
    CHECK(n == 0 || ground > 1000, "%d tiles drawn over %ld pixels", n, ground);
    free(a), free(b), free(za), free(zb);
    terra_gl_destroy(fresh);
    return same;
}

/* Random uploads (mesh tiles of 1 to 24 cells a side with and without skirts, grid tiles,
 * replacements of held keys) and releases over 64 keys, in buffers a few dozen tiles big: an
 * upload fails exactly when the free total of a buffer it needs is short (or max_tiles are held),
 * with TERRA_E_CAPACITY and the older version kept; compaction happens, its copies never overlap;
 * and what is held draws as a fresh renderer given the same tiles draws it. */
static void churn_never_fails_while_room_is_free(void) {
    field f = {.base = 10, .sx = 0.01, .sz = 0.02, .amp = 6, .kx = 0.05, .kz = 0.07};
    terra_source *src = field_source(&f);
    const size_t vb = 32 * 6000, ib = 4 * 24000;
    const int max_tiles = 24;
    terra_gl *r = mesh_renderer(vb, ib, max_tiles);
    if (!src || !r) return;
    const terra_gl_stats *gs = terra_gl_get_stats(r);
    held h[64] = {{0}};
    unsigned long long rng = 23;
    long ok = 0, refused_room = 0, refused_tiles = 0, releases = 0, compares = 0, same = 0;
    const long copies0 = buffer_copies, overlaps0 = overlapping_copies;
    int nheld = 0;
    for (int op = 0; op < 4000; op++) {
        const int k = (int)(test_rand_u64(&rng) % 64);
        const terra_tile_key key = terra_tile_key_make(0, 0, k % 8, k / 8);
        if (h[k].data && test_rand_u64(&rng) % 100 < 45) {
            terra_gl_release(r, key);
            free(h[k].data);
            h[k] = (held){0};
            nheld--, releases++;
        } else {
            held t = {0};
            if (test_rand_u64(&rng) % 5 == 0) {
                t.data = grid_tile(src, key, &t.bytes);
            } else {
                const int cells = 1 + (int)(test_rand_u64(&rng) % 24);
                t.data = field_mesh(&f, key, cells, test_rand_u64(&rng) % 3 ? 3.0f : 0.0f,
                                    (terra_surface)(test_rand_u64(&rng) % 4), &rng, &t.bytes);
            }
            tile_needs(t.data, t.bytes, &t.vertices, &t.indices);
            const size_t vfree = gs->vertex_bytes - gs->vertex_bytes_used + 32 * (size_t)h[k].vertices;
            const size_t ifree = gs->index_bytes - gs->index_bytes_used + 4 * (size_t)h[k].indices;
            const bool room = vfree >= 32 * (size_t)t.vertices && ifree >= 4 * (size_t)t.indices;
            const bool slot = h[k].data || nheld < max_tiles;
            const int resident = gs->resident;
            const size_t vused = gs->vertex_bytes_used, iused = gs->index_bytes_used;
            const terra_status st = terra_gl_upload(r, key, t.data, t.bytes);
            if (room && slot) {
                CHECK(st == TERRA_OK, "op %d: %s (free %zu, %zu bytes; the tile needs %u vertices, %u indices)", op,
                      terra_last_error(), vfree, ifree, t.vertices, t.indices);
            } else {
                CHECK(st == TERRA_E_CAPACITY && strstr(terra_last_error(), room ? "max_tiles" : "free"),
                      "op %d: %d, %s", op, st, terra_last_error());
                CHECK(gs->resident == resident && gs->vertex_bytes_used == vused && gs->index_bytes_used == iused,
                      "op %d: a refused upload changed what is held", op);
            }
            if (st == TERRA_OK) {
                nheld += !h[k].data;
                free(h[k].data);
                h[k] = t;
                ok++;
            } else {
                free(t.data);
                refused_room += !room;
                refused_tiles += room;
            }
        }
        size_t vsum = 0, isum = 0;
        for (int q = 0; q < 64; q++) vsum += 32 * (size_t)h[q].vertices, isum += 4 * (size_t)h[q].indices;
        CHECK(gs->resident == nheld && gs->vertex_bytes_used == vsum && gs->index_bytes_used == isum,
              "op %d: the renderer holds %d tiles, %zu + %zu bytes; the test %d, %zu + %zu", op, gs->resident,
              gs->vertex_bytes_used, gs->index_bytes_used, nheld, vsum, isum);
        if (op % 500 == 499) {
            compares++;
            same += same_as_fresh(r, h, vb, ib, max_tiles);
        }
    }
    printf("  4000 operations: %ld uploads, %ld releases, %ld refused for room (the free total short), %ld for max_tiles; "
           "%d compactions, %ld buffer copies; %ld of %ld pictures as a fresh renderer's\n",
           ok, releases, refused_room, refused_tiles, gs->compactions, buffer_copies - copies0, same, compares);
    CHECK(same == compares, "the tiles held drew differently from a fresh renderer's %ld times", compares - same);
    CHECK(gs->compactions > 5 && refused_room > 0 && refused_tiles > 0, "the churn did not exercise compaction and refusal");
    CHECK(overlapping_copies == overlaps0, "%ld copies overlapped themselves", overlapping_copies - overlaps0);
    for (int k = 0; k < 64; k++) free(h[k].data);
    terra_gl_destroy(r);
    terra_source_destroy(src);
}

/* TERRA_E_CAPACITY by name when the vertex buffer, the index buffer or max_tiles is full (the held
 * tiles untouched, a too-large replacement leaving the older version); bad tiles refused. */
static void capacity_and_bad_tiles_refused(void) {
    field f = {.base = 5};
    terra_source *src = field_source(&f);
    /* a grid tile with its skirt (gl.h) */
    const size_t tile = sizeof(terra_grid_vertex) * (size_t)(terra_grid_vertex_count(CELLS) + 4 * CELLS);
    terra_gl *r = mesh_renderer(3 * tile, 4 * 3000, 0);
    if (!src || !r) return;
    const terra_gl_stats *gs = terra_gl_get_stats(r);
    unsigned long long rng = 24;
    for (int x = 0; x < 4; x++) {
        size_t bytes;
        uint8_t *g = grid_tile(src, terra_tile_key_make(0, 0, x, 0), &bytes);
        const terra_status st = terra_gl_upload(r, terra_tile_key_make(0, 0, x, 0), g, bytes);
        CHECK(x < 3 ? st == TERRA_OK : st == TERRA_E_CAPACITY && strstr(terra_last_error(), "vertex buffer"), "%d: %s", x,
              terra_last_error());
        free(g);
    }
    CHECK(gs->resident == 3 && gs->capacity == 3);
    terra_gl_release(r, terra_tile_key_make(0, 0, 1, 0));
    terra_gl_release(r, terra_tile_key_make(0, 0, 1, 0)); /* twice: nothing */
    CHECK(gs->resident == 2);
    /* a mesh tile whose indices do not fit; then one that does */
    size_t bytes;
    uint8_t *m = field_mesh(&f, terra_tile_key_make(0, 0, 1, 0), 24, 0, 0, &rng, &bytes); /* 3456 indices */
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 1, 0), m, bytes) == TERRA_E_CAPACITY &&
              strstr(terra_last_error(), "index buffer"),
          "%s", terra_last_error());
    free(m);
    m = field_mesh(&f, terra_tile_key_make(0, 0, 1, 0), 8, 2, 0, &rng, &bytes);
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 1, 0), m, bytes) == TERRA_OK, "%s", terra_last_error());
    CHECK(gs->resident == 3 && gs->mesh_tiles == 1);
    /* replacing it by a tile too large for the room keeps the older version */
    const size_t vused = gs->vertex_bytes_used;
    uint8_t *big = field_mesh(&f, terra_tile_key_make(0, 0, 1, 0), 20, 0, 0, &rng, &bytes);
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 1, 0), big, bytes) == TERRA_E_CAPACITY);
    CHECK(gs->resident == 3 && gs->mesh_tiles == 1 && gs->vertex_bytes_used == vused);
    free(big);
    /* bad tiles: a mesh tile spanning another square than its key's (a level-1 tile's under a
     * level-0 key), damaged mesh bytes, a size that is neither kind */
    size_t wide_bytes;
    uint8_t *wide = field_mesh(&f, terra_tile_key_make(0, 1, 1, 1), 8, 2, 0, &rng, &wide_bytes);
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 2, 2), wide, wide_bytes) == TERRA_E_CORRUPT &&
              strstr(terra_last_error(), "not its square's"),
          "%s", terra_last_error());
    free(wide);
    ((terra_tile_mesh *)(void *)m)->index_count += 3;
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 2, 2), m, bytes) == TERRA_E_CORRUPT &&
              strstr(terra_last_error(), "gl: tile (level 0, 2, 2)"),
          "%s", terra_last_error());
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 2, 2), m, 17) == TERRA_E_CORRUPT); /* the magic says mesh */
    static const uint8_t zeros[17];
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 2, 2), zeros, 17) == TERRA_E_INVALID &&
              strstr(terra_last_error(), "not a mesh tile"),
          "%s", terra_last_error());
    CHECK(terra_gl_upload(r, terra_tile_key_make(0, 0, 2, 2), m, 2) == TERRA_E_INVALID);
    free(m);
    CHECK(gs->resident == 3);
    terra_gl_destroy(r);
    /* max_tiles */
    r = mesh_renderer(0, 0, 2);
    for (int x = 0; x < 3 && r; x++) {
        uint8_t *t = field_mesh(&f, terra_tile_key_make(0, 0, x, 0), 2, 0, 0, &rng, &bytes);
        const terra_status st = terra_gl_upload(r, terra_tile_key_make(0, 0, x, 0), t, bytes);
        CHECK(x < 2 ? st == TERRA_OK : st == TERRA_E_CAPACITY && strstr(terra_last_error(), "max_tiles"), "%s",
              terra_last_error());
        free(t);
    }
    terra_gl_destroy(r);
    terra_source_destroy(src);
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
    RUN_SOME(grid_skirts_three_coloured);
    RUN_SOME(one_draw_call_whatever_the_tiles);
    RUN_SOME(uploads_follow_the_streamer);
    RUN_SOME(many_cells_fit_the_default_buffer);
    RUN_SOME(same_frame_same_bytes);
    RUN_SOME(morph_continuity);
    RUN_SOME(steady_far_from_the_origin);
    RUN_SOME(mesh_and_grid_tiles_in_one_draw);
    RUN_SOME(skirts_close_gaps_between_levels);
    RUN_SOME(churn_never_fails_while_room_is_free);
    RUN_SOME(capacity_and_bad_tiles_refused);
    terra_gl_context_destroy(ctx);
    return finish();
}
