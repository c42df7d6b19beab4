/* Surfaces drawn: a road painted into the surface function is drawn in the road's tint from the
 * surface table, and ground that names no surface is drawn in the built-in style, with a table or
 * without one. */
#include "check.h"
#include "test_gl_util.h"
#include "terra/tile_mesh.h"

#include <unistd.h>

static float raised(void *u, double x, double z) {
    (void)u;
    return (float)(300 + 3 * sin(x / 40) + 2 * cos(z / 55));
}
static terra_surface road(void *u, double x, double z) {
    (void)u, (void)x;
    return fabs(z) < 6 ? 20 : TERRA_SURFACE_NONE;
}
static terra_surface narrow_road(void *u, double x, double z) { /* u: the spacing */
    (void)x;
    return fabs(z) < 3.2 * *(const double *)u ? 20 : 21;
}

static void road_drawn_in_its_tint(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = raised, .surface_at = road, .min_height = 290,
                                             .max_height = 310, .name = "road"},
                        &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_surface_table *table;
    terra_surface_table_create(&table);
    terra_surface_table_set(table, 20, &(terra_surface_look){.tint = {1, 0, 0}});
    /* straight down from 120 m: the road is a band across the middle of the picture */
    terra_camera cam = {.eye = {0, 420, 0}, .pitch_rad = -1.5707, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    terra_gl_style style = {.fog_distance = -1, .surfaces = table, .sun = {0, 1, 0}};
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
    int road_px = 0, grass_px = 0, middle = 0, edges = 0;
    for (int j = 0; j < TH; j++)
        for (int i = 0; i < TW; i++) {
            const uint8_t *p = rgb + ((size_t)j * TW + i) * 3;
            bool red = p[0] > 2 * p[1] + 20 && p[0] > 2 * p[2] + 20;
            bool green = p[1] > p[0] && p[1] > p[2];
            if (abs(j - TH / 2) <= 2) middle++, road_px += red;
            if (j < TH / 5 || j >= TH - TH / 5) edges++, grass_px += green, road_px -= red;
        }
    CHECK(road_px > middle * 8 / 10, "the road's band is not drawn in its tint (%d of %d)", road_px, middle);
    CHECK(grass_px > edges * 9 / 10, "ground with no surface is not drawn in the built-in style (%d of %d green)",
          grass_px, edges);
    free(rgb);
    terra_surface_table_destroy(table);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    terra_gl_context_destroy(ctx);
}

/* No surface table at all (what terra fly and terra render draw): the built-in style, lit, never
 * black - the texture layers must read "none" before any table was seen. */
static void built_in_style_without_a_table(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = raised, .min_height = 290, .max_height = 310, .name = "plain"},
                        &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_camera cam = {.eye = {0, 420, 0}, .pitch_rad = -1.5707, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    for (int run = 0; run < 2; run++) { /* the default style, then a sun from above and no fog */
        terra_gl_style style = run ? (terra_gl_style){.fog_distance = -1, .sun = {0, 1, 0}} : (terra_gl_style){0};
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        long green = 0, sum = 0;
        for (int k = 0; k < TW * TH; k++) {
            const uint8_t *p = rgb + (size_t)k * 3;
            green += p[1] > p[0] && p[1] > p[2];
            sum += p[0] + p[1] + p[2];
        }
        const double mean = (double)sum / (3.0 * TW * TH);
        CHECK(green > TW * TH * 9L / 10, "run %d: only %ld of %d pixels in the built-in grass", run, green, TW * TH);
        CHECK(mean > 60, "run %d: the ground is drawn dark (mean level %.1f of 255)", run, mean);
        if (run == 1) printf("  built-in style, no table: %ld of %d pixels grass, mean level %.0f\n", green, TW * TH, mean);
    }
    free(rgb);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    terra_gl_context_destroy(ctx);
}

static void solid_png(const char *path, uint8_t r, uint8_t g, uint8_t b) {
    uint8_t px[4 * 4 * 3];
    for (int i = 0; i < 16; i++) px[3 * i] = r, px[3 * i + 1] = g, px[3 * i + 2] = b;
    CHECK(terra_io_write_png(path, px, 4, 4, 3) == TERRA_OK, "%s", terra_last_error());
}

static int warned;
static void count_warn(terra_log_level l, const char *m, void *u) {
    (void)u;
    if (l == TERRA_LOG_WARN && strstr(m, "surface 21") && strstr(m, "no/such/texture.png")) warned++;
}

/* Counts pixels in the picture's middle rows whose colour is mostly channel `c`. */
static int band_pixels(const uint8_t *rgb, int c) {
    int n = 0;
    for (int j = TH / 2 - 8; j <= TH / 2 + 8; j++)
        for (int i = 0; i < TW; i++) {
            const uint8_t *p = rgb + ((size_t)j * TW + i) * 3;
            n += p[c] > 2 * p[(c + 1) % 3] + 20 && p[c] > 2 * p[(c + 2) % 3] + 20;
        }
    return n;
}

/* Textures: an albedo multiplies the tint, a mask scales a surface's weight in the blend, a normal
 * texture tilts the light, and a texture that cannot be read is reported and drawn without. */
static void textures_drawn_or_reported(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    char dir[] = "/tmp/terra_tex_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char blue[64], black[64], flat[64], tilted[64];
    snprintf(blue, sizeof blue, "%s/blue.png", dir), solid_png(blue, 0, 0, 255);
    snprintf(black, sizeof black, "%s/black.png", dir), solid_png(black, 0, 0, 0);
    snprintf(flat, sizeof flat, "%s/flat.png", dir), solid_png(flat, 128, 128, 255);
    snprintf(tilted, sizeof tilted, "%s/tilted.png", dir), solid_png(tilted, 255, 128, 128);
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = raised, .surface_at = road, .min_height = 290,
                                             .max_height = 310, .name = "road"},
                        &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_camera cam = {.eye = {0, 420, 0}, .pitch_rad = -1.5707, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    int counts[5];
    for (int run = 0; run < 5; run++) {
        terra_surface_table *t;
        terra_surface_table_create(&t);
        terra_surface_look look = {.tint = {1, 0, 0}, .tiling_m = 8};
        if (run == 1) look.tint[2] = 1, look.tint[1] = 1, look.albedo = blue;  /* white tint, blue texture */
        if (run == 2) look.mask = black;                                       /* the road's weight to zero */
        if (run >= 3) look.tint[0] = look.tint[1] = look.tint[2] = 0.3f; /* grey: light unsaturated */
        if (run == 3) look.normal = flat;
        if (run == 4) look.normal = tilted;
        terra_surface_table_set(t, 20, &look);
        terra_surface_table_set(t, 21, &(terra_surface_look){.tint = {0, 1, 0}, .albedo = "no/such/texture.png"});
        warned = 0;
        terra_set_log(count_warn, NULL);
        terra_gl_style style = {.fog_distance = -1, .surfaces = t, .sun = {-1, 1, 0}};
        CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
        terra_set_log(NULL, NULL);
        CHECK(warned == 1, "run %d: the missing texture was reported %d times", run, warned);
        CHECK(terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) == TERRA_OK);
        counts[run] = run == 1 ? band_pixels(rgb, 2) : band_pixels(rgb, 0);
        if (run >= 3) { /* the mean brightness of the band, for the normal textures */
            long sum = 0;
            for (int j = TH / 2 - 2; j <= TH / 2 + 2; j++)
                for (int i = 0; i < TW; i++) sum += rgb[((size_t)j * TW + i) * 3];
            counts[run] = (int)(sum / (5 * TW));
        }
        terra_surface_table_destroy(t);
    }
    CHECK(counts[1] > counts[0] * 8 / 10, "the blue albedo is not drawn (%d blue vs %d red)", counts[1], counts[0]);
    CHECK(counts[2] < counts[0], "a black mask did not shrink the road's share (%d vs %d)", counts[2], counts[0]);
    CHECK(abs(counts[4] - counts[3]) > 5, "a tilted normal texture changed nothing (%d vs %d)", counts[4], counts[3]);
    free(rgb);
    remove(blue), remove(black), remove(flat), remove(tilted), rmdir(dir);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    terra_gl_context_destroy(ctx);
}

/* Classifies a pixel: 1 the road's red, 2 the grass's green, 0 neither (a blend). */
static int kind(const uint8_t *p) {
    if (p[0] > 2 * p[1] + 20 && p[0] > 2 * p[2] + 20) return 1;
    if (p[1] > p[0] + 20 && p[1] > p[2] + 20) return 2;
    return 0;
}

/* On grid tiles a surface's edge steps midway between samples: the road's samples are those with
 * |z| < 3.2 spacings, so its drawn edges lie at z = +-3.5 spacings, each a step (no blended pixel),
 * on every column of a frame looking straight down from 20 m over level-0 tiles (a spacing is 16 px). */
static void grid_edge_steps_midway(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    double s = terra_grid_tile_side(NULL, 0) / 32; /* test_scene's 32 cells */
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = raised, .surface_at = narrow_road, .min_height = 290,
                                             .max_height = 310, .name = "narrow road", .user = &s},
                        &src);
    terra_gl_scene *scene = test_scene(src, 32, TW, TH);
    terra_surface_table *table;
    terra_surface_table_create(&table);
    terra_surface_table_set(table, 20, &(terra_surface_look){.tint = {1, 0, 0}});
    terra_surface_table_set(table, 21, &(terra_surface_look){.tint = {0, 1, 0}});
    float g = 0;
    terra_source_height(src, 0.3, 0.2, &g);
    terra_camera cam = {.eye = {0.3, g + 20, 0.2}, .pitch_rad = -1.5707963, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
    terra_gl_style style = {.fog_distance = -1, .surfaces = table, .sun = {0, 1, 0}};
    CHECK(terra_gl_scene_frame(scene, &cam, &style, true, 60, NULL) == TERRA_OK, "%s", terra_last_error());
    terra_gl *gl = terra_gl_scene_renderer(scene);
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    float *z = malloc(sizeof(float) * TW * TH);
    CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK && terra_gl_read_depth(gl, z) == TERRA_OK);
    terra_vec3 fwd;
    terra_camera_basis(&cam, &fwd, NULL, NULL);
    int edges = 0, blended = 0, columns = 0;
    double worst = 0;
    for (int i = 0; i < TW; i += 4) {
        int last = 0;
        columns++;
        for (int j = 0; j < TH; j++) {
            const int k = kind(rgb + 3 * ((size_t)j * TW + i));
            blended += k == 0;
            if (k && last && k != last) { /* an edge between rows j - 1 and j: its z midway */
                const int rows[2] = {j - 1, j};
                double zz[2];
                for (int r = 0; r < 2; r++) {
                    const terra_vec3 ray = pixel_ray(&cam, TW, TH, i, rows[r]);
                    const double t = z[(size_t)rows[r] * TW + i] / (ray.x * fwd.x + ray.y * fwd.y + ray.z * fwd.z);
                    zz[r] = cam.eye.z + ray.z * t;
                }
                const double px = fabs(zz[1] - zz[0]), off = fabs(fabs(0.5 * (zz[0] + zz[1])) - 3.5 * s);
                worst = fmax(worst, off / px);
                edges++;
            }
            if (k) last = k;
        }
    }
    printf("     grid tiles: %d road edges over %d columns, worst %.2f px from midway between samples; %d blended pixels\n",
           edges, columns, worst, blended);
    CHECK(edges == 2 * columns, "%d road edges over %d columns (2 each expected)", edges, columns);
    CHECK(worst <= 1.0, "an edge lies %.2f pixels from midway between samples", worst);
    CHECK(blended == 0, "%d pixels blend road and grass: the edge is not a step", blended);
    free(rgb);
    free(z);
    terra_surface_table_destroy(table);
    terra_gl_scene_destroy(scene);
    terra_source_destroy(src);
    terra_gl_context_destroy(ctx);
}

/* On a mesh tile (TIN) surfaces blend across the triangle (seed 003): one vertex of a two-triangle
 * tile is road, the rest grass; its triangle shades from red to green, many pixels in between. */
static void mesh_tile_blends(void) {
    terra_gl_context *ctx;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        CHECK(0, "no headless OpenGL context: %s", terra_last_error());
        return;
    }
    terra_gl *gl;
    CHECK(terra_gl_create(&(terra_gl_desc){.width = TW, .height = TH}, &gl) == TERRA_OK, "%s", terra_last_error());
    const size_t bytes = terra_tile_mesh_bytes(4, 6);
    uint8_t *data = calloc(1, bytes);
    terra_tile_mesh *m = (terra_tile_mesh *)(void *)data;
    const double side = terra_grid_tile_side(NULL, 0);
    *m = (terra_tile_mesh){TERRA_TILE_MESH_MAGIC, 4, 6, 0, (float)side, (float)side, 0, 1, 0, 0};
    terra_tile_mesh_vertex *v = (terra_tile_mesh_vertex *)(void *)(m + 1);
    for (int k = 0; k < 4; k++)
        v[k] = (terra_tile_mesh_vertex){(uint16_t)(k & 1 ? 32767 : 0), (uint16_t)(k & 2 ? 32767 : 0), 0, {0, 0}, k == 0 ? 20 : 21, 0};
    const uint32_t idx[6] = {0, 2, 1, 1, 2, 3};
    memcpy((void *)terra_tile_mesh_indices(m), idx, sizeof idx);
    const terra_tile_key key = terra_tile_key_make(0, 0, 0, 0);
    CHECK(terra_gl_upload(gl, key, data, bytes) == TERRA_OK, "%s", terra_last_error());
    terra_surface_table *table;
    terra_surface_table_create(&table);
    terra_surface_table_set(table, 20, &(terra_surface_look){.tint = {1, 0, 0}});
    terra_surface_table_set(table, 21, &(terra_surface_look){.tint = {0, 1, 0}});
    const terra_stream_draw draw = {.key = key, .data = data, .bytes = bytes};
    terra_camera cam = {.eye = {side / 2, side * 0.6, side / 2}, .pitch_rad = -1.5707963, .fov_y_rad = 1.2, .aspect = (double)TW / TH};
    terra_gl_style style = {.fog_distance = -1, .surfaces = table, .sun = {0, 1, 0}, .flat = true, .clear_rgb = {0, 0, 1}};
    CHECK(terra_gl_draw(gl, &cam, &draw, 1, &style) == TERRA_OK, "%s", terra_last_error());
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    CHECK(terra_gl_read_rgb(gl, rgb) == TERRA_OK);
    int n[3] = {0, 0, 0};
    for (int k = 0; k < TW * TH; k++) {
        const uint8_t *p = rgb + 3 * (size_t)k;
        if (p[2] > 200 && p[0] < 50 && p[1] < 50) continue; /* the clear colour */
        n[kind(p)]++;
    }
    printf("     a mesh tile: %d red, %d green, %d blended pixels\n", n[1], n[2], n[0]);
    CHECK(n[0] > (n[0] + n[1] + n[2]) / 10 && n[1] > 0 && n[2] > 0, "the mesh tile's surfaces do not blend (%d red, %d green, %d between)",
          n[1], n[2], n[0]);
    free(rgb);
    free(data);
    terra_surface_table_destroy(table);
    terra_gl_destroy(gl);
    terra_gl_context_destroy(ctx);
}

int main(void) {
    RUN(road_drawn_in_its_tint);
    RUN(built_in_style_without_a_table);
    RUN(textures_drawn_or_reported);
    RUN(grid_edge_steps_midway);
    RUN(mesh_tile_blends);
    return finish();
}
