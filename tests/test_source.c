#include "check.h"
#include "terra/source.h"

#include <math.h>
#include <string.h>

/* Samples a rectangle densely through the grid path and returns its true min/max. */
static void sampled_range(const terra_source *src, int64_t ix0, int64_t iz0, double spacing, int n, float *lo, float *hi) {
    static float h[129 * 129];
    terra_grid_request r = {.ix0 = ix0, .iz0 = iz0, .spacing = spacing, .nx = n + 1, .nz = n + 1};
    terra_status st = terra_source_sample(src, &r, h, NULL);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    *lo = INFINITY, *hi = -INFINITY;
    for (int k = 0; k < (n + 1) * (n + 1); k++) *lo = fminf(*lo, h[k]), *hi = fmaxf(*hi, h[k]);
}

/* The conservative range contains every sample, and is not wildly pessimistic: over tiles of
 * every level, the excess (bound width minus the true extent) stays a modest multiple of the
 * true extent plus a small floor, and averages little. */
static void height_range_is_conservative_and_tight(void) {
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 11}, &src) == TERRA_OK);
    unsigned long long s = 5;
    for (int level = 0; level <= 10; level++) {
        double tile = 64.0 * (double)(1 << level);
        double spacing = tile / 128.0;
        double excess_sum = 0, extent_sum = 0;
        int cases = 30;
        for (int c = 0; c < cases; c++) {
            int64_t tx = (int64_t)test_rand_range(&s, -2000, 2000), tz = (int64_t)test_rand_range(&s, -2000, 2000);
            float lo, hi, slo, shi;
            CHECK(terra_source_height_range(src, tx * tile, tz * tile, (tx + 1) * tile, (tz + 1) * tile, &lo, &hi) ==
                  TERRA_OK);
            sampled_range(src, tx * 128, tz * 128, spacing, 128, &slo, &shi); /* every 128th of a side */
            CHECK(lo <= slo && hi >= shi, "level %d tile (%lld,%lld): bound [%f,%f] misses [%f,%f]", level,
                  (long long)tx, (long long)tz, lo, hi, slo, shi);
            excess_sum += (hi - lo) - (shi - slo);
            extent_sum += shi - slo;
        }
        double mean_excess = excess_sum / cases, mean_extent = extent_sum / cases;
        printf("  level %2d (%7.0f m): mean extent %8.1f m, mean excess %8.1f m\n", level, tile, mean_extent,
               mean_excess);
        /* tight enough that distances and culling are not wildly pessimistic (the global bound
         * would add about 3,600 m) */
        CHECK(mean_excess <= 3.0 * mean_extent + 40.0, "level %d: excess %.1f vs extent %.1f", level, mean_excess,
              mean_extent);
    }
    terra_source_destroy(src);
}

static void world_is_deterministic_and_varied(void) {
    terra_source *a, *b, *c;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 3}, &a) == TERRA_OK);
    CHECK(terra_world_create(&(terra_world_desc){.seed = 3}, &b) == TERRA_OK);
    CHECK(terra_world_create(&(terra_world_desc){.seed = 4}, &c) == TERRA_OK);
    static float ha[65 * 65], hb[65 * 65], hc[65 * 65];
    static terra_surface sa[65 * 65];
    terra_grid_request r = {.ix0 = -1000, .iz0 = 77, .spacing = 8, .nx = 65, .nz = 65};
    CHECK(terra_source_sample(a, &r, ha, sa) == TERRA_OK);
    CHECK(terra_source_sample(b, &r, hb, NULL) == TERRA_OK);
    CHECK(terra_source_sample(c, &r, hc, NULL) == TERRA_OK);
    CHECK(memcmp(ha, hb, sizeof ha) == 0, "same seed, different heights");
    CHECK(memcmp(ha, hc, sizeof ha) != 0, "different seeds, same heights");
    /* the grid path and the point path agree bit for bit */
    for (int k = 0; k < 65 * 65; k += 97) {
        float h;
        double x = (double)(r.ix0 + k % 65) * r.spacing, z = (double)(r.iz0 + k / 65) * r.spacing;
        CHECK(terra_source_height(a, x, z, &h) == TERRA_OK);
        CHECK(h == ha[k]);
    }
    /* a lattice point asked at two spacings a power of two apart is the same point */
    terra_grid_request fine = {.ix0 = -2000, .iz0 = 154, .spacing = 4, .nx = 129, .nz = 129};
    static float hf[129 * 129];
    CHECK(terra_source_sample(a, &fine, hf, NULL) == TERRA_OK);
    for (int j = 0; j < 65; j++)
        for (int i = 0; i < 65; i++) CHECK(hf[(2 * j) * 129 + 2 * i] == ha[j * 65 + i]);
    /* the world has all its surfaces and its landforms somewhere in a big sample */
    int counts[8] = {0};
    float lo = INFINITY, hi = -INFINITY;
    static float hw[64 * 64];
    static terra_surface sw[64 * 64];
    for (int t = 0; t < 64; t++) {
        terra_grid_request w = {.ix0 = (t % 8) * 64 * 40 - 10000, .iz0 = (t / 8) * 64 * 40 - 10000, .spacing = 25, .nx = 64, .nz = 64};
        CHECK(terra_source_sample(a, &w, hw, sw) == TERRA_OK);
        for (int k = 0; k < 64 * 64; k++) {
            counts[sw[k] & 7]++;
            lo = fminf(lo, hw[k]), hi = fmaxf(hi, hw[k]);
        }
    }
    printf("  heights %.0f..%.0f m; grass %d rock %d snow %d sand %d\n", lo, hi, counts[1], counts[2], counts[3], counts[4]);
    for (int k = 1; k <= 4; k++) CHECK(counts[k] > 0, "surface %d never appears", k);
    CHECK(hi - lo > 1500, "no mountains: %f..%f", lo, hi);
    CHECK(lo < TERRA_WORLD_LAKE_LEVEL, "no lake bowls below the lake level");
    terra_source_destroy(a);
    terra_source_destroy(b);
    terra_source_destroy(c);
}

/* ---- user sources ------------------------------------------------------------------------------- */

static float plane_height(void *user, double x, double z) {
    (void)user;
    return (float)(0.5 * x - 0.25 * z);
}
static terra_surface road(void *user, double x, double z) {
    (void)user, (void)x;
    return fabs(z) < 4 ? 20 : TERRA_SURFACE_GRASS;
}
static float nan_height(void *user, double x, double z) {
    (void)user;
    return (x > 10 && z > 10) ? NAN : 1.0f;
}
static terra_status inverted_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    (void)user, (void)x0, (void)z0, (void)x1, (void)z1;
    *lo = 5, *hi = -5;
    return TERRA_OK;
}
static int grid_calls;
static terra_status grid_cb(void *user, const terra_grid_request *r, float *h, terra_surface *s) {
    grid_calls++;
    const float *k = user;
    for (int j = 0; j < r->nz; j++)
        for (int i = 0; i < r->nx; i++) {
            h[j * r->nx + i] = *k * (float)((r->ix0 + i) * r->spacing);
            if (s) s[j * r->nx + i] = 7;
        }
    return TERRA_OK;
}

static void user_sources(void) {
    terra_source *src;
    /* per point */
    CHECK(terra_source_create(&(terra_source_desc){.height_at = plane_height, .surface_at = road, .min_height = -1e4f,
                                                   .max_height = 1e4f},
                              &src) == TERRA_OK);
    float h[9];
    terra_surface s[9];
    CHECK(terra_source_sample(src, &(terra_grid_request){.ix0 = 0, .iz0 = -1, .spacing = 4, .nx = 3, .nz = 3}, h, s) ==
          TERRA_OK);
    /* samples at x = 0, 4, 8 and z = -4, 0, 4; the road is |z| < 4 */
    CHECK(h[0] == 1.0f && h[2] == 5.0f && h[8] == 3.0f, "%f %f %f", h[0], h[2], h[8]);
    CHECK(s[3] == 20 && s[5] == 20 && s[0] == TERRA_SURFACE_GRASS && s[6] == TERRA_SURFACE_GRASS);
    terra_source_destroy(src);
    /* per grid, with user data */
    float k = 2;
    CHECK(terra_source_create(&(terra_source_desc){.sample_grid = grid_cb, .user = &k, .min_height = -1e6f,
                                                   .max_height = 1e6f},
                              &src) == TERRA_OK);
    grid_calls = 0;
    CHECK(terra_source_sample(src, &(terra_grid_request){.ix0 = 1, .iz0 = 0, .spacing = 1, .nx = 3, .nz = 3}, h, s) ==
          TERRA_OK);
    CHECK(grid_calls == 1 && h[0] == 2 && h[2] == 6 && s[4] == 7);
    terra_source_destroy(src);
}

static void bad_sources_refused(void) {
    terra_source *src;
    CHECK(terra_source_create(&(terra_source_desc){0}, &src) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "height_at or sample_grid") != NULL, "%s", terra_last_error());
    CHECK(terra_source_create(&(terra_source_desc){.height_at = plane_height, .min_height = 1, .max_height = -1}, &src) ==
          TERRA_E_INVALID);
    CHECK(terra_source_create(&(terra_source_desc){.height_at = nan_height, .min_height = -1, .max_height = 1,
                                                   .name = "nan source"},
                              &src) == TERRA_OK);
    float h[16 * 16];
    CHECK(terra_source_sample(src, &(terra_grid_request){.ix0 = 0, .iz0 = 0, .spacing = 1, .nx = 16, .nz = 16}, h,
                              NULL) == TERRA_E_SOURCE);
    CHECK(strstr(terra_last_error(), "nan source") && strstr(terra_last_error(), "x=11"), "%s", terra_last_error());
    terra_source_destroy(src);
    CHECK(terra_source_create(&(terra_source_desc){.height_at = plane_height, .height_range = inverted_range}, &src) ==
          TERRA_OK);
    float lo, hi;
    CHECK(terra_source_height_range(src, 0, 0, 10, 10, &lo, &hi) == TERRA_E_SOURCE);
    CHECK(strstr(terra_last_error(), "height range") != NULL, "%s", terra_last_error());
    terra_source_destroy(src);
    CHECK(terra_world_create(&(terra_world_desc){.scale = -1}, &src) == TERRA_E_INVALID);
}

static float plateau(void *user, double x, double z) {
    (void)user, (void)x, (void)z;
    return 1000.0f;
}

/* A range callback that states too little: [0, 500] wherever it is asked. */
static terra_status too_low(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    (void)user, (void)x0, (void)z0, (void)x1, (void)z1;
    *lo = 0, *hi = 500;
    return TERRA_OK;
}

/* The range is a promise: a source that never states one is refused, and a height outside the
 * one it states fails where it is sampled, naming the point (selection would otherwise never
 * refine a 1,000 m plateau it believed lay at 0 m). */
static void range_is_a_promise(void) {
    terra_source *src = NULL;
    CHECK(terra_source_create(&(terra_source_desc){.height_at = plateau}, &src) == TERRA_E_INVALID && !src);
    CHECK(strstr(terra_last_error(), "no height range") != NULL, "%s", terra_last_error());
    CHECK(terra_source_create(&(terra_source_desc){.height_at = plateau, .min_height = 1000, .max_height = 1000}, &src) ==
          TERRA_OK, "a flat range that is stated: %s", terra_last_error());
    float h[4 * 4];
    CHECK(terra_source_sample(src, &(terra_grid_request){.spacing = 1, .nx = 4, .nz = 4}, h, NULL) == TERRA_OK);
    terra_source_destroy(src);
    const terra_source_desc liars[2] = {
        {.height_at = plateau, .min_height = -10, .max_height = 10, .name = "low plateau"},
        {.height_at = plateau, .height_range = too_low, .name = "low plateau"},
    };
    for (int i = 0; i < 2; i++) {
        CHECK(terra_source_create(&liars[i], &src) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_source_sample(src, &(terra_grid_request){.ix0 = 3, .iz0 = -2, .spacing = 2, .nx = 4, .nz = 4}, h,
                                  NULL) == TERRA_E_SOURCE);
        const char *e = terra_last_error();
        CHECK(strstr(e, "low plateau") && strstr(e, "x=6 z=-4") && strstr(e, "outside the range"), "%s", e);
        float one = 0;
        CHECK(terra_source_height(src, 1.5, 2.5, &one) == TERRA_E_SOURCE);
        CHECK(strstr(terra_last_error(), "x=1.5 z=2.5") != NULL, "%s", terra_last_error());
        terra_source_destroy(src);
    }
}

int main(void) {
    RUN(height_range_is_conservative_and_tight);
    RUN(world_is_deterministic_and_varied);
    RUN(user_sources);
    RUN(bad_sources_refused);
    RUN(range_is_a_promise);
    return finish();
}
