/* tin: the mesher's builds (plain C, SSE2, AVX2) give the same mesh, byte for byte, on random and
 * real rasters; terra_tin_build's ISA choice is honoured and refused where it cannot run. */
#include "check.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

terra_status tin_build_scalar(const terra_tin_desc *d, terra_tin_mesh *out); /* tests/tin_scalar.c */

static bool same_mesh(const terra_tin_mesh *a, const terra_tin_mesh *b) {
    if (a->vertex_count != b->vertex_count || a->level_count != b->level_count) return false;
    if (memcmp(a->xy, b->xy, 2 * sizeof(int32_t) * a->vertex_count)) return false;
    for (int i = 0; i < a->level_count; i++) {
        const terra_tin_level *p = &a->levels[i], *q = &b->levels[i];
        if (p->vertex_count != q->vertex_count || p->triangle_count != q->triangle_count ||
            memcmp(p->triangles, q->triangles, 3 * sizeof(uint32_t) * p->triangle_count))
            return false;
    }
    return true;
}

/* Meshes with every build this machine runs and compares them with the portable one. */
static void compare_builds(const float *h, int w, int ht, double bound, const char *what) {
    static const double levels[2] = {4, 16};
    terra_tin_desc d = {0};
    d.width = w, d.height = ht, d.heights = h, d.max_error = bound, d.levels = levels, d.level_count = 2;
    d.isa = TERRA_TIN_ISA_PORTABLE;
    terra_tin_mesh ref, m;
    if (terra_tin_build(&d, &ref) != TERRA_OK) {
        CHECK(0, "%s: %s", what, terra_last_error());
        return;
    }
    memset(&m, 0, sizeof m);
    CHECK(tin_build_scalar(&d, &m) == TERRA_OK, "%s: %s", what, terra_last_error());
    CHECK(same_mesh(&ref, &m), "%s: the plain C build differs from the portable one", what);
    terra_tin_mesh_free(&m);
    d.isa = TERRA_TIN_ISA_AVX2;
    terra_status s = terra_tin_build(&d, &m);
    if (s == TERRA_OK) {
        CHECK(same_mesh(&ref, &m), "%s: the AVX2 build differs from the portable one", what);
        terra_tin_mesh_free(&m);
    } else {
        CHECK(s == TERRA_E_UNSUPPORTED, "%s: %s", what, terra_last_error());
    }
    d.isa = TERRA_TIN_ISA_AUTO;
    CHECK(terra_tin_build(&d, &m) == TERRA_OK);
    CHECK(same_mesh(&ref, &m), "%s: the automatic choice differs", what);
    terra_tin_mesh_free(&m);
    terra_tin_mesh_free(&ref);
}

static void test_random_rasters(void) {
    unsigned long long seed = 11;
    for (int iter = 0; iter < 80; iter++) {
        int w = 2 + (int)(test_rand_u64(&seed) % 150), h = 2 + (int)(test_rand_u64(&seed) % 150);
        float *hs = malloc((size_t)w * h * sizeof(float));
        const int kind = iter % 5;
        const double fx = test_rand_range(&seed, 0.02, 0.5), fy = test_rand_range(&seed, 0.02, 0.5);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                double v;
                if (kind == 0) v = test_rand_range(&seed, 0, 100);                             /* noise */
                else if (kind == 1) v = floor(test_rand_range(&seed, 0, 4)) * 0.5;             /* ties */
                else if (kind == 2) v = 80 * sin(x * fx) * cos(y * fy) + (x > w / 3) * 25;     /* cliff */
                else if (kind == 3) v = 30 * sin(x * fx + y * fy) + test_rand_range(&seed, 0, 2); /* ridges */
                else v = (double)((x * 7 + y * 3) % 5);                                         /* pattern */
                hs[(size_t)y * w + x] = (float)v;
            }
        if (iter % 3 == 0) /* holes: the paths that look for NaN */
            for (int k = 0; k < 6; k++) hs[test_rand_u64(&seed) % ((size_t)w * h)] = NAN;
        hs[0] = 1; /* at least one valid sample */
        char what[64];
        snprintf(what, sizeof what, "raster %d (%dx%d, kind %d)", iter, w, h, kind);
        compare_builds(hs, w, h, test_rand_range(&seed, 0.02, 3), what);
        free(hs);
    }
}

static void test_real_rasters(void) {
    if (!have_shared("test_real_rasters")) return;
    char p[1024];
    terra_raster_desc rd = {0};
    rd.path = shared_path("data/dem/fuji.png", p, sizeof p);
    rd.encoding = TERRA_RASTER_TERRAIN_RGB;
    terra_raster r;
    if (terra_raster_read(&rd, &r) != TERRA_OK) {
        CHECK(0, "%s", terra_last_error());
        return;
    }
    compare_builds(r.heights, r.width, r.height, 1.0, "fuji at 1 m");
    terra_raster_free(&r);
    memset(&rd, 0, sizeof rd);
    rd.path = shared_path("data/dem/sthelens_10m.png", p, sizeof p);
    rd.z_scale = 0.1;
    if (terra_raster_read(&rd, &r) != TERRA_OK) {
        CHECK(0, "%s", terra_last_error());
        return;
    }
    /* A 600x600 window of the crater at 0.5 m: small steep triangles, every narrow path. */
    float *win = malloc(600 * 600 * sizeof(float));
    for (int y = 0; y < 600; y++) memcpy(win + (size_t)y * 600, r.heights + (size_t)(700 + y) * r.width + 700, 600 * sizeof(float));
    compare_builds(win, 600, 600, 0.5, "St Helens window at 0.5 m");
    free(win);
    terra_raster_free(&r);
}

static void test_isa_field(void) {
    float hs[16] = {0, 1, 2, 3, 1, 5, 2, 0, 4, 2, 2, 1, 0, 0, 3, 9};
    terra_tin_desc d = {0};
    d.width = 4, d.height = 4, d.heights = hs, d.max_error = 0.1;
    terra_tin_mesh m;
    d.isa = (terra_tin_isa)7;
    CHECK(terra_tin_build(&d, &m) == TERRA_E_INVALID, "an unknown isa is refused");
    d.isa = TERRA_TIN_ISA_PORTABLE;
    CHECK(terra_tin_build(&d, &m) == TERRA_OK);
    terra_tin_mesh_free(&m);
}

int main(void) {
    RUN(test_random_rasters);
    RUN(test_real_rasters);
    RUN(test_isa_field);
    return finish();
}
