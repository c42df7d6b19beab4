/* tin: greedy insertion mesher, checked by the independent checker on real and synthetic rasters. */
#include "check.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <math.h>
#include <string.h>

static bool read_dem(const char *rel, terra_raster_encoding enc, double zscale, terra_raster *r) {
    char p[1024];
    terra_raster_desc d = {0};
    d.path = shared_path(rel, p, sizeof p);
    d.encoding = enc;
    d.z_scale = zscale;
    terra_status s = terra_raster_read(&d, r);
    CHECK(s == TERRA_OK, "%s", terra_last_error());
    return s == TERRA_OK;
}

/* Meshes and checks every level with the independent checker. Returns the finest level. */
static terra_tin_level *mesh_and_check(const float *h, const float *upper, int w, int ht, double bound,
                                       terra_tin_mesh *m, bool expect_holes_free) {
    terra_tin_desc d = {0};
    d.width = w, d.height = ht, d.heights = h, d.upper = upper, d.max_error = bound;
    terra_status s = terra_tin_build(&d, m);
    CHECK(s == TERRA_OK, "%s", terra_last_error());
    if (s != TERRA_OK) return NULL;
    terra_tin_level *lv = &m->levels[m->level_count - 1];
    terra_tin_check_result r;
    s = terra_tin_check(h, w, ht, m->xy, m->z, lv->vertex_count, lv->triangles, lv->triangle_count, NULL, &r);
    CHECK(s == TERRA_OK);
    CHECK(r.max_error <= bound, "max error %.17g > bound %g at (%d,%d)", r.max_error, bound, r.worst_x, r.worst_y);
    CHECK(r.uncovered == 0, "%zu uncovered", r.uncovered);
    CHECK(r.holes_covered == 0, "%zu holes covered", r.holes_covered);
    CHECK(r.degenerate == 0 && r.flipped == 0, "degenerate %zu flipped %zu", r.degenerate, r.flipped);
    if (expect_holes_free) CHECK(r.area_exact, "areas do not add up");
    return lv;
}

static void test_fuji_published(void) {
    terra_raster r;
    if (!read_dem("data/dem/fuji.png", TERRA_RASTER_TERRAIN_RGB, 0, &r)) return;
    CHECK(r.width == 512 && r.height == 512);
    terra_tin_mesh m;
    terra_tin_level *lv = mesh_and_check(r.heights, NULL, r.width, r.height, 30.0, &m, true);
    if (lv) {
        printf("  fuji 30 m: %zu vertices, %zu triangles (published 5668 / 11140)\n", lv->vertex_count,
               lv->triangle_count);
        CHECK(lv->vertex_count >= 5640 && lv->vertex_count <= 5696, "%zu", lv->vertex_count);
        CHECK(lv->triangle_count >= 11084 && lv->triangle_count <= 11196, "%zu", lv->triangle_count);
        terra_tin_mesh_free(&m);
    }
    terra_raster_free(&r);
}

int main(void) {
    RUN(test_fuji_published);
    return finish();
}
