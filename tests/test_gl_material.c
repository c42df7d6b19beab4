/* A user's material (terra_gl_style.material) shades every ground pixel of every kind of tile: a
 * constant material gives exactly its colour on every pixel with ground, on grid tiles, on a mesh
 * tile and on the planet; a material colouring by world height matches, within one colour step, the
 * height of the point the depth buffer puts under each pixel; a material that does not compile fails
 * its frame naming the file and the line, and the renderer goes on drawing as before. */
#include "check.h"
#include "test_gl_util.h"
#include "terra/tile_mesh.h"
#include "../cli/planet_path.h"

#include <string.h>

/* 51, 102, 153 exactly: 0.2, 0.4 and 0.6 of 255 */
static const char *const CONSTANT = "vec3 terra_material(terra_ground g) { return vec3(0.2, 0.4, 0.6); }\n";
static const uint8_t WANT[3] = {51, 102, 153};

static float hills(void *u, double x, double z) {
    (void)u;
    return (float)(150 + 60 * sin(x / 90) * cos(z / 70) + 20 * sin(z / 33));
}

/* Pixels with ground (a finite depth), and those of them not exactly WANT. */
static void count_constant(terra_gl *gl, uint8_t *rgb, float *z, long *ground, long *wrong) {
    CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK && terra_gl_read_depth(gl, z) == TERRA_OK, "%s", terra_last_error());
    *ground = *wrong = 0;
    for (int k = 0; k < TW * TH; k++) {
        if (!isfinite(z[k])) continue;
        (*ground)++;
        *wrong += memcmp(rgb + 3 * (size_t)k, WANT, 3) != 0;
    }
}

static void grid_tiles_constant_and_by_height(terra_gl_context *ctx) {
    (void)ctx;
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = hills, .min_height = 60, .max_height = 240, .name = "hills"}, &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_gl *gl = terra_gl_scene_renderer(scene);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
    /* a real-time flight over the hills: every frame, settled or not */
    long ground_all = 0, wrong_all = 0;
    for (int f = 0; f < 24; f++) {
        terra_camera cam = {.eye = {f * 40.0, 420, f * 25.0}, .yaw_rad = 0.3, .pitch_rad = -0.5, .fov_y_rad = 1.0,
                            .aspect = (double)TW / TH};
        terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}, .material = CONSTANT, .material_name = "constant.glsl"};
        CHECK(terra_gl_scene_frame(scene, &cam, &style, false, 0, NULL) == TERRA_OK, "%s", terra_last_error());
        long ground, wrong;
        count_constant(gl, rgb, z, &ground, &wrong);
        ground_all += ground, wrong_all += wrong;
    }
    printf("     grid tiles, 24 real-time frames: %ld ground pixels, %ld not the material's colour\n", ground_all, wrong_all);
    CHECK(ground_all > 24L * TW * TH / 2 && wrong_all == 0, "%ld of %ld ground pixels are not the constant material's",
          wrong_all, ground_all);

    /* by height: gray from 60 m (black) to 240 m (white), against the depth buffer's points */
    const char *by_height = "vec3 terra_material(terra_ground g) {\n"
                            "    return vec3(clamp((g.position.y - 60.0) / 180.0, 0.0, 1.0));\n"
                            "}\n";
    terra_camera cam = {.eye = {100, 500, 300}, .pitch_rad = -0.9, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}, .material = by_height, .material_name = "height.glsl"};
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK && terra_gl_read_depth(gl, z) == TERRA_OK);
    terra_vec3 fwd;
    terra_camera_basis(&cam, &fwd, NULL, NULL);
    long n = 0, off = 0;
    int worst = 0;
    for (int j = 0; j < TH; j++)
        for (int i = 0; i < TW; i++) {
            const float d = z[(size_t)j * TW + i];
            if (!isfinite(d)) continue;
            const terra_vec3 r = pixel_ray(&cam, TW, TH, i, j);
            const double y = cam.eye.y + r.y * d / (r.x * fwd.x + r.y * fwd.y + r.z * fwd.z);
            const int want = (int)lround(fmin(fmax((y - 60) / 180, 0), 1) * 255), got = rgb[3 * ((size_t)j * TW + i)];
            n++;
            off += abs(got - want) > 1;
            if (abs(got - want) > worst) worst = abs(got - want);
        }
    printf("     by height: %ld ground pixels, %ld more than one step from the depth buffer's height (worst %d)\n", n, off,
           worst);
    CHECK(n > TW * TH / 2 && off == 0, "%ld of %ld pixels more than one colour step from their height (worst %d)", off, n,
          worst);
    free(rgb);
    free(z);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

/* One mesh tile by hand: a 5 x 5 vertex patch of level 0 straight below the eye. */
static void mesh_tile_constant(void) {
    terra_gl *gl;
    CHECK(terra_gl_create(&(terra_gl_desc){.width = TW, .height = TH}, &gl) == TERRA_OK, "%s", terra_last_error());
    enum { S = 5 };
    const uint32_t nv = S * S, ni = 6 * (S - 1) * (S - 1);
    const size_t bytes = terra_tile_mesh_bytes(nv, ni);
    uint8_t *data = calloc(1, bytes);
    terra_tile_mesh *m = (terra_tile_mesh *)(void *)data;
    const double side = terra_grid_tile_side(NULL, 0);
    *m = (terra_tile_mesh){TERRA_TILE_MESH_MAGIC, nv, ni, 0, (float)side, (float)side, 0, 20, 2, 0};
    terra_tile_mesh_vertex *v = (terra_tile_mesh_vertex *)(void *)(m + 1);
    for (int j = 0; j < S; j++)
        for (int i = 0; i < S; i++)
            v[j * S + i] = (terra_tile_mesh_vertex){(uint16_t)(i * 32767 / (S - 1)), (uint16_t)(j * 32767 / (S - 1)),
                                                    (uint16_t)((i * 7 + j * 3) % 5 * 6000), {0, 0}, TERRA_SURFACE_NONE, 0};
    uint32_t *idx = (uint32_t *)(void *)terra_tile_mesh_indices(m);
    for (int j = 0, k = 0; j + 1 < S; j++)
        for (int i = 0; i + 1 < S; i++) {
            const uint32_t a = (uint32_t)(j * S + i), b = a + 1, c = a + S, d = c + 1;
            const uint32_t tri[6] = {a, c, b, b, c, d};
            memcpy(idx + k, tri, sizeof tri), k += 6;
        }
    const terra_tile_key key = terra_tile_key_make(0, 0, 0, 0);
    CHECK(terra_gl_upload(gl, key, data, bytes) == TERRA_OK, "%s", terra_last_error());
    const terra_stream_draw draw = {.key = key, .data = data, .bytes = bytes};
    terra_camera cam = {.eye = {side / 2, side / 3, side / 2}, .pitch_rad = -1.5707, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}, .material = CONSTANT};
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
    long ground = 0, wrong = 0;
    for (int f = 0; f < 2; f++) { /* drawn whole, then culled against it */
        CHECK(terra_gl_draw(gl, &cam, &draw, 1, &style) == TERRA_OK, "%s", terra_last_error());
        count_constant(gl, rgb, z, &ground, &wrong);
        CHECK(terra_gl_get_stats(gl)->mesh_tiles == 1, "the tile is not a mesh tile");
        CHECK(ground > TW * TH / 4 && wrong == 0, "mesh tile, frame %d: %ld of %ld ground pixels not the material's", f,
              wrong, ground);
    }
    printf("     a mesh tile: %ld ground pixels, %ld not the material's colour\n", ground, wrong);
    free(rgb);
    free(z);
    free(data);
    terra_gl_destroy(gl);
}

static void planet_constant(void) {
    terra_planet *p;
    terra_gl_planet *scene;
    CHECK(terra_planet_create(NULL, &p) == TERRA_OK);
    CHECK(terra_gl_planet_create(&(terra_gl_planet_desc){.planet = p, .width = TW, .height = TH, .threads = 2}, &scene) ==
              TERRA_OK,
          "%s", terra_last_error());
    terra_gl *gl = terra_gl_planet_renderer(scene);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
    long ground_all = 0, wrong_all = 0;
    for (int f = 0; f < 12; f++) { /* from orbit down toward the ground */
        terra_camera cam = terra_planet_path_camera(p, f / 11.0 * 0.9);
        cam.aspect = (double)TW / TH;
        terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}, .material = CONSTANT};
        terra_gl_frame_stats fs;
        CHECK(terra_gl_planet_frame(scene, &cam, &style, &fs) == TERRA_OK, "%s", terra_last_error());
        long ground, wrong;
        count_constant(gl, rgb, z, &ground, &wrong);
        ground_all += ground, wrong_all += wrong;
    }
    printf("     the planet, 12 frames: %ld ground pixels, %ld not the material's colour\n", ground_all, wrong_all);
    CHECK(ground_all > 12L * TW * TH / 4 && wrong_all == 0, "%ld of %ld planet pixels are not the material's", wrong_all,
          ground_all);
    free(rgb);
    free(z);
    terra_gl_planet_destroy(scene);
    terra_planet_destroy(p);
}

/* An error on the material's line 3: the frame fails naming bad.glsl:3, and the renderer still draws
 * its own shading and, after it, a good material. */
static void compile_error_names_the_line(void) {
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = hills, .min_height = 60, .max_height = 240, .name = "hills"}, &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_camera cam = {.eye = {0, 500, 0}, .pitch_rad = -1.0, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    const char *bad = "vec3 terra_material(terra_ground g) {\n"
                      "    float k = 0.5;\n"
                      "    return vec3(k, undefined_name, k);\n"
                      "}\n";
    terra_gl_style style = {.flat = true, .clear_rgb = {1, 0, 1}, .material = bad, .material_name = "bad.glsl"};
    const uint32_t before = terra_gl_get_stats(terra_gl_scene_renderer(scene))->frame;
    CHECK(terra_gl_scene_frame(scene, &cam, &style, false, 0, NULL) == TERRA_E_INVALID, "a bad material drew a frame");
    const char *e = terra_last_error();
    printf("     %s\n", e);
    CHECK(strstr(e, "bad.glsl") && strstr(e, "bad.glsl:3"), "the error does not name bad.glsl line 3: %s", e);
    CHECK(terra_gl_get_stats(terra_gl_scene_renderer(scene))->frame == before, "a frame was drawn");
    style.material = NULL;
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    style.material = CONSTANT;
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
    long ground, wrong;
    count_constant(terra_gl_scene_renderer(scene), rgb, z, &ground, &wrong);
    CHECK(ground > 0 && wrong == 0, "after the error, %ld of %ld pixels not the good material's", wrong, ground);
    free(rgb);
    free(z);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
}

int main(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("SKIP: no headless OpenGL 4.5: %s\n", terra_last_error());
        return 77;
    }
    grid_tiles_constant_and_by_height(ctx);
    RUN(mesh_tile_constant);
    RUN(planet_constant);
    RUN(compile_error_names_the_line);
    terra_gl_context_destroy(ctx);
    return finish();
}
