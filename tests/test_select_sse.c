/* Property tests of selection by screen-space error: over many random cameras, errors and missing
 * subtrees, every drawn tile's projected error is within tau (or it is finest), every parent of a
 * drawn tile was refined for a reason, the existing ground is covered exactly once and the walk
 * agrees with a brute-force reference (test_select checks that a frame allocates nothing). Then
 * ranges derived from per-level errors keep CDLOD's drawn error within tau too. */
#include "check.h"
#include "terra/select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

/* A synthetic index: error doubling per level with a per-tile factor, some subtrees absent, only
 * tiles inside `bounds` present. */
typedef struct fake_index {
    uint64_t seed;
    int top;
    double tile0, bounds[4];
    int calls;
} fake_index;

static bool present(const fake_index *f, terra_tile_key k) {
    const int L = terra_tile_key_level(k);
    const double side = ldexp(f->tile0, L), x = terra_tile_key_x(k) * side, z = terra_tile_key_y(k) * side;
    if (x + side <= f->bounds[0] || x >= f->bounds[2] || z + side <= f->bounds[1] || z >= f->bounds[3]) return false;
    for (int l = L; l < f->top; l++, k = terra_tile_key_parent(k))
        if (mix(k ^ f->seed) % 23 == 0) return false; /* this subtree is missing */
    return true;
}

static float fake_error(void *user, terra_tile_key k) {
    fake_index *f = user;
    f->calls++;
    if (!present(f, k)) return -1.0f;
    const double u = (double)(mix(k * 31 + f->seed) >> 11) / 9007199254740992.0;
    return (float)(0.25 * ldexp(1.0, terra_tile_key_level(k)) * (0.5 + u));
}

static terra_box3 tile_box(const terra_source *src, const fake_index *f, terra_tile_key k) {
    const double side = ldexp(f->tile0, terra_tile_key_level(k));
    const double x0 = terra_tile_key_x(k) * side, z0 = terra_tile_key_y(k) * side;
    float lo, hi;
    terra_source_height_range(src, x0, z0, x0 + side, z0 + side, &lo, &hi);
    return (terra_box3){{x0, lo, z0}, {x0 + side, hi, z0 + side}};
}

static int cmp_key(const void *a, const void *b) {
    terra_tile_key x = *(const terra_tile_key *)a, y = *(const terra_tile_key *)b;
    return x < y ? -1 : x > y;
}

/* The reference: the same rule written as plainly as it reads. */
static void brute(const terra_source *src, fake_index *f, const terra_select *sel, terra_vec3 eye, double tau,
                  terra_tile_key k, terra_tile_key *out, int *n) {
    const float e = fake_error(f, k);
    if (e < 0) return;
    const terra_box3 b = tile_box(src, f, k);
    const int L = terra_tile_key_level(k);
    if (L == 0 || terra_select_sse_px(sel, e, terra_box3_distance(&b, eye)) <= tau) {
        out[(*n)++] = k;
        return;
    }
    const int32_t x = terra_tile_key_x(k), y = terra_tile_key_y(k);
    for (int c = 0; c < 4; c++) brute(src, f, sel, eye, tau, terra_tile_key_make(0, L - 1, 2 * x + (c & 1), 2 * y + (c >> 1)), out, n);
}

static void sse_selection_properties(void) {
    unsigned long long s = 7;
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 3}, &src) == TERRA_OK);
    static terra_tile_key ref[1 << 16], got[1 << 16];
    static int owner[64 * 64];
    int cases = 0, refined_tiles = 0, finest_over = 0;
    double worst = 0;
    for (int it = 0; it < 300; it++) {
        fake_index f = {.seed = test_rand_u64(&s), .top = 5, .tile0 = 64};
        /* an area of at most 32 x 32 level-0 tiles somewhere, not aligned to the coarsest tiles */
        f.bounds[0] = test_rand_range(&s, -3000, 1000), f.bounds[1] = test_rand_range(&s, -3000, 1000);
        f.bounds[2] = f.bounds[0] + test_rand_range(&s, 200, 2048), f.bounds[3] = f.bounds[1] + test_rand_range(&s, 200, 2048);
        const double tau = test_rand_range(&s, 0.5, 8);
        terra_select_desc d = {.grid = {.tile0_size = f.tile0, .cells = 32}, .levels = f.top + 1, .max_tiles = 1 << 16,
                               .max_sse_px = tau, .view_height_px = 200 + (int)(test_rand_u64(&s) % 2000),
                               .view_fov_y_rad = test_rand_range(&s, 0.3, 1.6), .tile_error = fake_error,
                               .tile_error_user = &f};
        memcpy(d.bounds, f.bounds, sizeof f.bounds);
        terra_select *sel;
        if (terra_select_create(&d, src, &sel) != TERRA_OK) {
            CHECK(0, "create: %s", terra_last_error());
            continue;
        }
        terra_vec3 eye = {test_rand_range(&s, f.bounds[0] - 500, f.bounds[2] + 500), 0,
                          test_rand_range(&s, f.bounds[1] - 500, f.bounds[3] + 500)};
        float g;
        terra_source_height(src, eye.x, eye.z, &g);
        eye.y = g + exp(test_rand_range(&s, 0, log(5000.0)));
        const terra_selected_tile *t;
        int n;
        CHECK(terra_select_run(sel, eye, NULL, &t, &n) == TERRA_OK, "%s", terra_last_error());
        cases++;
        /* the reference over the coarsest tiles the walk lays out (all of the area: it is small) */
        int nr = 0;
        const double top_side = ldexp(f.tile0, f.top);
        for (int64_t ty = (int64_t)floor(f.bounds[1] / top_side); ty * top_side < f.bounds[3]; ty++)
            for (int64_t tx = (int64_t)floor(f.bounds[0] / top_side); tx * top_side < f.bounds[2]; tx++)
                brute(src, &f, sel, eye, tau, terra_tile_key_make(0, f.top, (int32_t)tx, (int32_t)ty), ref, &nr);
        for (int i = 0; i < n; i++) got[i] = t[i].key;
        qsort(ref, (size_t)nr, sizeof *ref, cmp_key);
        qsort(got, (size_t)n, sizeof *got, cmp_key);
        CHECK(n == nr && !memcmp(ref, got, sizeof *got * (size_t)n), "case %d: %d tiles, the reference %d", it, n, nr);
        double sse_max = 0;
        for (int i = 0; i < n; i++) {
            const float e = fake_error(&f, t[i].key);
            CHECK(e >= 0, "case %d: a drawn tile that does not exist", it);
            const terra_box3 b = tile_box(src, &f, t[i].key);
            const double sse = terra_select_sse_px(sel, e, terra_box3_distance(&b, eye));
            if (t[i].level > 0) sse_max = fmax(sse_max, sse);
            CHECK(t[i].morph_start == 0 && t[i].morph_end == 0, "tiles are drawn unmorphed");
            if (t[i].level > 0) {
                CHECK(sse <= tau * (1 + 1e-9), "case %d: level %d drawn at %g px > tau %g", it, t[i].level, sse, tau);
                worst = fmax(worst, sse / tau);
            } else if (sse > tau) {
                finest_over++;
            }
            if (t[i].level < f.top) { /* the parent was refined: the screen could tell it from finer ground */
                const terra_tile_key p = terra_tile_key_parent(t[i].key);
                const terra_box3 pb = tile_box(src, &f, p);
                CHECK(terra_select_sse_px(sel, fake_error(&f, p), terra_box3_distance(&pb, eye)) > tau,
                      "case %d: a parent within tau was refined", it);
                refined_tiles++;
            }
        }
        CHECK(fabs(terra_select_get_stats(sel)->sse_px_max - sse_max) <= 1e-9 * sse_max, "stats %g, measured %g",
              terra_select_get_stats(sel)->sse_px_max, sse_max);
        /* every existing level-0 tile of the area lies under exactly one drawn tile; no other is covered */
        const int32_t ox = (int32_t)floor(f.bounds[0] / f.tile0), oz = (int32_t)floor(f.bounds[1] / f.tile0);
        memset(owner, 0, sizeof owner);
        for (int i = 0; i < n; i++) {
            const int L = t[i].level;
            for (int32_t j = 0; j < (1 << L); j++)
                for (int32_t k = 0; k < (1 << L); k++) {
                    const int32_t gx = (terra_tile_key_x(t[i].key) * (1 << L)) + k - ox, gz = (terra_tile_key_y(t[i].key) * (1 << L)) + j - oz;
                    if (gx < 0 || gz < 0 || gx >= 64 || gz >= 64) continue;
                    owner[gz * 64 + gx]++;
                }
        }
        int twice = 0, missed = 0; /* (a coarse tile may reach past finer ground: its mesh has none there) */
        for (int gz = 0; gz < 64; gz++)
            for (int gx = 0; gx < 64; gx++) {
                const bool there = present(&f, terra_tile_key_make(0, 0, gx + ox, gz + oz));
                const int o = owner[gz * 64 + gx];
                twice += o > 1, missed += there && o == 0;
            }
        CHECK(!twice && !missed, "case %d: %d level-0 tiles covered twice, %d missed", it, twice, missed);
        terra_select_destroy(sel);
    }
    CHECK(refined_tiles > 1000, "only %d tiles with a refined parent: the cases do not refine", refined_tiles);
    printf("sse: %d cases, %d drawn tiles under a refined parent, worst drawn error %.3f tau, %d finest tiles over tau\n",
           cases, refined_tiles, worst, finest_over);
    terra_source_destroy(src);
}

/* ---- CDLOD ranges from per-level errors -------------------------------------------------------------- */

static void derived_ranges_keep_cdlod_within_tau(void) {
    unsigned long long s = 11;
    terra_source *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 4}, &src) == TERRA_OK);
    int cases = 0, raised = 0, capped_cases = 0;
    for (int it = 0; it < 40; it++) {
        terra_select_desc d = {.grid = {.tile0_size = 64, .cells = 64}, .levels = 10, .max_tiles = 1 << 18};
        d.max_sse_px = test_rand_range(&s, 1, 4);
        d.view_height_px = 300 + (int)(test_rand_u64(&s) % 800);
        const double growth = test_rand_range(&s, 1.3, 4.0), e0 = test_rand_range(&s, 0.02, 0.3);
        for (int l = 0; l < d.levels; l++) d.level_error[l] = (float)(e0 * pow(growth, l) * test_rand_range(&s, 0.7, 1.0));
        terra_select_desc r;
        CHECK(terra_select_desc_resolve(&d, &r) == TERRA_OK, "%s", terra_last_error());
        CHECK(r.levels == d.levels, "levels %d", r.levels);
        /* each level hands over where the next one's error projects to tau (but at most
         * TERRA_SELECT_MAX_DERIVED_RANGE_TILES of its tiles away), or later for the margin */
        const double K = d.view_height_px / (2 * tan(0.5 * r.view_fov_y_rad));
        for (int l = 0; l + 1 < r.levels; l++) {
            const double margin = ldexp(64, l) * sqrt(2.0) / r.morph_start_ratio;
            const double asked = fmin(r.level_error[l + 1] * K / r.max_sse_px, TERRA_SELECT_MAX_DERIVED_RANGE_TILES * ldexp(64, l));
            CHECK(r.ranges[l] >= asked * (1 - 1e-9), "level %d hands over too near", l);
            CHECK(r.ranges[l] - (l ? r.ranges[l - 1] : 0) >= margin * (1 - 1e-9), "level %d: no room to morph", l);
            /* and no later than one of the two asks: every metre past that draws finer ground for nothing */
            CHECK(r.ranges[l] <= fmax(asked, (l ? r.ranges[l - 1] : 0) + margin) * (1 + 1e-9),
                  "level %d hands over later than tau and the morph margin ask (%g m)", l, r.ranges[l]);
            raised += r.ranges[l] > asked * (1 + 1e-9);
        }
        double capped_px = 0; /* where the cap held a level short of tau: the error it reports there */
        const int capped = terra_select_derived_capped(&r, &capped_px);
        capped_cases += capped >= 0;
        terra_select *sel;
        CHECK(terra_select_create(&d, src, &sel) == TERRA_OK, "%s", terra_last_error());
        for (int k = 0; k < 3; k++) {
            terra_vec3 eye = {test_rand_range(&s, -5000, 5000), 0, test_rand_range(&s, -5000, 5000)};
            float g;
            terra_source_height(src, eye.x, eye.z, &g);
            eye.y = g + exp(test_rand_range(&s, 0, log(3000.0)));
            const terra_selected_tile *t;
            int n;
            terra_camera cam = {.eye = eye, .yaw_rad = test_rand_range(&s, -3, 3), .pitch_rad = -0.2, .aspect = 1.5};
            terra_frustum fr;
            terra_camera_frustum(&cam, &fr);
            if (terra_select_run(sel, eye, &fr, &t, &n) != TERRA_OK) {
                CHECK(0, "%s", terra_last_error());
                continue;
            }
            double worst = 0; /* the measure of select.h, recomputed from the tiles drawn */
            for (int i = 0; i < n; i++) {
                if (t[i].level == 0) continue;
                /* every vertex: at distance q it departs by the blend of its level's and its parent's
                 * errors in the morph's proportion (sampled densely over the tile's distances) */
                const double dist = terra_box3_distance(&t[i].box, eye);
                const int L = t[i].level;
                for (int q = 0; q <= 64; q++) {
                    const double at = dist + (t[i].morph_end * 1.5 - dist) * q / 64.0;
                    if (at < dist) continue;
                    double e = d.level_error[L];
                    if (L + 1 < r.levels)
                        e += terra_morph_factor(at, t[i].morph_start, t[i].morph_end) * (d.level_error[L + 1] - e);
                    worst = fmax(worst, terra_select_sse_px(sel, e, at));
                }
            }
            const double bound = fmax(d.max_sse_px, capped_px);
            CHECK(worst <= bound * (1 + 1e-6), "case %d: a tile drawn at %g px > %g (tau %g)", it, worst, bound, d.max_sse_px);
            cases++;
        }
        terra_select_destroy(sel);
    }
    printf("derived ranges: %d selections within tau (or the capped ranges' stated error: %d descriptions); %d levels "
           "handed over later than tau asks, for the morph margin\n",
           cases, capped_cases, raised);
    /* explicit ranges stay the caller's */
    terra_select_desc d = {.range0 = 900, .range_ratio = 2, .level_error = {1, 2, 4}}, r;
    CHECK(terra_select_desc_resolve(&d, &r) == TERRA_OK && r.range0 == 900 && r.range_ratio == 2);
    d = (terra_select_desc){.level_error = {1, -1}};
    CHECK(terra_select_desc_resolve(&d, &r) == TERRA_E_INVALID);
    d = (terra_select_desc){.max_sse_px = -1};
    CHECK(terra_select_desc_resolve(&d, &r) == TERRA_E_INVALID);
    terra_source_destroy(src);
}

/* Derived ranges for any view the options allow (a tiny or huge tau, 16 to 8192 rows, a 1 to 170 degree
 * field of view, any grid): they resolve, keep the crack rule between every two levels in the arithmetic
 * resolve checks it with, reach at most TERRA_SELECT_MAX_DERIVED_RANGE_TILES of a level's tiles (or the
 * margin's least), resolve again to themselves, and select without running out of max_tiles. The
 * errors are the default world's, measured under the eye, or random ones (growing, shrinking or flat). */
static void derived_ranges_resolve_for_any_view(void) {
    unsigned long long s = 2027;
    terra_source *src;
    CHECK(terra_world_create(NULL, &src) == TERRA_OK);
    int cases = 0, capped = 0, most = 0;
    for (int it = 0; it < 600; it++) {
        terra_select_desc d = {.grid = {.tile0_size = 64, .cells = 32}, .levels = 12};
        if (it % 3 == 1) { /* any grid --tile0, --cells and --levels allow */
            d.grid.cells = 16 << (test_rand_u64(&s) % 5);
            d.grid.tile0_size = exp(test_rand_range(&s, log(0.01), log(1e5)));
            d.levels = 1 + (int)(test_rand_u64(&s) % 24);
            while (ldexp(d.grid.tile0_size, d.levels - 1) > TERRA_SELECT_MAX_SIDE) d.levels--;
        }
        d.max_sse_px = exp(test_rand_range(&s, log(0.1), log(1000)));
        d.view_height_px = (int)exp(test_rand_range(&s, log(16), log(8192)));
        d.view_fov_y_rad = test_rand_range(&s, 1, 170) * PI / 180;
        terra_camera cam = {.yaw_rad = test_rand_range(&s, -PI, PI), .pitch_rad = test_rand_range(&s, -PI / 2, PI / 2),
                            .fov_y_rad = d.view_fov_y_rad,
                            .aspect = exp(test_rand_range(&s, log(16), log(8192))) / d.view_height_px};
        cam.eye = (terra_vec3){test_rand_range(&s, -1e6, 1e6), 0, test_rand_range(&s, -1e6, 1e6)};
        if (it == 0) { /* issue 37's: terra render --size 640x360 --eye -250000,0,90000 --above 150 */
            d.max_sse_px = 2, d.view_height_px = 360, d.view_fov_y_rad = PI / 3, cam.eye.x = -250000, cam.eye.z = 90000;
        }
        if (it % 2 == 0) {
            CHECK(terra_grid_level_errors(src, &d.grid, d.levels, cam.eye.x, cam.eye.z, d.level_error) == TERRA_OK, "%s",
                  terra_last_error());
        } else {
            const double growth = exp(test_rand_range(&s, log(0.3), log(8)));
            double e = exp(test_rand_range(&s, log(1e-4), log(10)));
            for (int l = 0; l < d.levels; l++, e *= growth) d.level_error[l] = (float)fmin(e * test_rand_range(&s, 0.5, 1), 1e30);
        }
        float g;
        terra_source_height(src, cam.eye.x, cam.eye.z, &g);
        cam.eye.y = g + exp(test_rand_range(&s, log(0.01), log(1e6)));
        terra_select_desc r, again;
        if (terra_select_desc_resolve(&d, &r) != TERRA_OK) {
            CHECK(0, "case %d (%d rows, fov %g, tau %g, tile0 %g, %d levels): %s", it, d.view_height_px,
                  d.view_fov_y_rad * 180 / PI, d.max_sse_px, d.grid.tile0_size, d.levels, terra_last_error());
            continue;
        }
        CHECK(r.levels == d.levels, "case %d: %d levels of %d", it, r.levels, d.levels);
        for (int l = 0; l < r.levels; l++) {
            const double side = ldexp(d.grid.tile0_size, l), prev = l ? r.ranges[l - 1] : 0;
            if (l > 0) CHECK(r.morph_start_ratio * (r.ranges[l] - prev) >= side * sqrt(2.0), "case %d level %d: no room to morph", it, l);
            CHECK(r.ranges[l] <= fmax(TERRA_SELECT_MAX_DERIVED_RANGE_TILES * side, 2 * prev + side * sqrt(2.0) / r.morph_start_ratio),
                  "case %d level %d: %g m is %g tiles", it, l, r.ranges[l], r.ranges[l] / side);
        }
        CHECK(terra_select_desc_resolve(&r, &again) == TERRA_OK && !memcmp(again.ranges, r.ranges, sizeof r.ranges),
              "case %d: the resolved description does not resolve to itself: %s", it, terra_last_error());
        capped += terra_select_derived_capped(&r, NULL) >= 0;
        terra_select *sel;
        if (terra_select_create(&r, src, &sel) != TERRA_OK) {
            CHECK(0, "case %d: %s", it, terra_last_error());
            continue;
        }
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *t;
        int n;
        CHECK(terra_select_run(sel, cam.eye, &fr, &t, &n) == TERRA_OK, "case %d (%d rows, aspect %g, fov %g, tau %g): %s", it,
              d.view_height_px, cam.aspect, d.view_fov_y_rad * 180 / PI, d.max_sse_px, terra_last_error());
        if (n > most) most = n;
        terra_select_destroy(sel);
        cases++;
    }
    printf("any view: %d descriptions resolved and selected (%d with ranges capped short of tau); at most %d tiles\n", cases,
           capped, most);
    terra_source_destroy(src);
}

/* ---- measured per-level errors --------------------------------------------------------------------- */

static float parabola(void *u, double x, double z) {
    (void)z;
    return (float)(*(double *)u * x * x);
}
static terra_status parabola_range(void *u, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    (void)z0, (void)z1;
    const double a = *(double *)u, m = fmax(x0 * x0, x1 * x1);
    *lo = x0 <= 0 && x1 >= 0 ? 0.0f : (float)(a * fmin(x0 * x0, x1 * x1)) - 1;
    *hi = (float)(a * m) + 1;
    return TERRA_OK;
}

/* h = a x^2 drawn by linear pieces of width s departs from it by a s^2 / 4 at most, mid-cell: the
 * measure must find exactly that at every level (its fine samples fall on the mid-points). */
static void level_errors_are_measured(void) {
    double a = 1e-3;
    terra_source *src;
    CHECK(terra_source_create(&(terra_source_desc){.height_at = parabola, .height_range = parabola_range, .user = &a}, &src) ==
          TERRA_OK, "%s", terra_last_error());
    const terra_grid_desc g = {.tile0_size = 32, .cells = 16};
    float e[12];
    CHECK(terra_grid_level_errors(src, &g, 8, 100, -50, e) == TERRA_OK, "%s", terra_last_error());
    for (int L = 0; L < 8; L++) {
        const double s = 2.0 * (1 << L), want = a * s * s / 4;
        /* heights are floats: the difference of two large ones loses a little */
        CHECK(fabs(e[L] - want) <= 1e-3 * want + 2e-7 * a * pow(40 * 32 * (1 << L), 2), "level %d: %g, expected %g", L,
              (double)e[L], want);
    }
    terra_source_destroy(src);
    terra_source *world;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &world) == TERRA_OK);
    CHECK(terra_grid_level_errors(world, NULL, 12, 0, 0, e) == TERRA_OK);
    bool rising = true;
    for (int L = 1; L < 8; L++) rising = rising && e[L] > e[L - 1];
    CHECK(e[0] > 0 && rising, "the default world's errors do not rise with the level: %g %g %g", (double)e[0], (double)e[1],
          (double)e[2]);
    printf("default world, level errors (m):");
    for (int L = 0; L < 12; L++) printf(" %.3g", (double)e[L]);
    printf("\n");
    CHECK(terra_grid_level_errors(world, NULL, 0, 0, 0, e) == TERRA_E_INVALID);
    terra_source_destroy(world);
}

int main(void) {
    RUN(sse_selection_properties);
    RUN(derived_ranges_keep_cdlod_within_tau);
    RUN(derived_ranges_resolve_for_any_view);
    RUN(level_errors_are_measured);
    return finish();
}
