/* Surfaces drawn: a road painted into the surface function is drawn in the road's tint from the
 * surface table, and ground that names no surface is drawn in the built-in style. */
#include "check.h"
#include "test_gl_util.h"

static float raised(void *u, double x, double z) {
    (void)u;
    return (float)(300 + 3 * sin(x / 40) + 2 * cos(z / 55));
}
static terra_surface road(void *u, double x, double z) {
    (void)u, (void)x;
    return fabs(z) < 6 ? 20 : TERRA_SURFACE_NONE;
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

int main(void) {
    RUN(road_drawn_in_its_tint);
    return finish();
}
