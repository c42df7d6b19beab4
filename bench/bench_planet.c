/* The planet: selection per visited tile from orbit to the ground, the horizon test against brute
 * force (wrongly culled, kept over the horizon), triangles against the ideal for tau. */
#include "planet_views.h"

#define RUNS 9

static long allocs;
static void *count_alloc(size_t n, void *u) { (void)u; allocs++; return malloc(n); }
static void *count_realloc(void *p, size_t n, void *u) { (void)u; allocs++; return realloc(p, n); }
static void count_free(void *p, void *u) { (void)u; free(p); }

static void bench_select(const terra_planet *p) {
    terra_planet_select *sel;
    if (terra_planet_select_create(&(terra_planet_select_desc){.max_tiles = 1 << 16}, p, &sel) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    double per_alt[NALTS];
    for (int a = 0; a < NALTS; a++) {
        const terra_camera cam = camera(p, 27.9, 86.9, ALTS[a], 40, -4);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_planet_tile *t;
        int n;
        terra_planet_select_run(sel, cam.eye, &fr, &t, &n); /* warm the range cache */
        const int visited = terra_planet_select_get_stats(sel)->visited;
        double ns[RUNS];
        const int frames = 200;
        for (int r = 0; r < RUNS; r++) {
            const double t0 = bench_now();
            for (int f = 0; f < frames; f++) terra_planet_select_run(sel, cam.eye, &fr, &t, &n);
            ns[r] = (bench_now() - t0) * 1e9 / frames / visited;
        }
        per_alt[a] = bench_median(ns, RUNS);
        char name[96];
        snprintf(name, sizeof name, "planet.select_ns_per_visited.alt_%gm", ALTS[a]);
        bench_record(name, per_alt[a], "ns", RUNS, "median");
        snprintf(name, sizeof name, "planet.drawn.alt_%gm", ALTS[a]);
        bench_record(name, n, "tiles", 1, "value");
    }
    double worst = 0, all[NALTS];
    for (int a = 0; a < NALTS; a++) worst = fmax(worst, per_alt[a]), all[a] = per_alt[a];
    bench_record("planet.select_ns_per_visited", bench_median(all, NALTS), "ns", NALTS, "median");
    bench_record("planet.select_ns_per_visited.worst", worst, "ns", NALTS, "max");
    /* allocations over a descent, after the first frame */
    allocs = 0;
    terra_set_allocator(&(terra_allocator){count_alloc, count_realloc, count_free, NULL});
    for (int f = 0; f < 100; f++) {
        const terra_camera cam = camera(p, 27.9 + f * 1e-3, 86.9, 2e7 * pow(1e-7, f / 99.0), 40, -4);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_planet_tile *t;
        int n;
        terra_planet_select_run(sel, cam.eye, &fr, &t, &n);
    }
    terra_set_allocator(NULL);
    bench_record("planet.select_allocations", (double)allocs, "allocs", 100, "value");
    terra_planet_select_destroy(sel);
}

/* Brute force at 1080 px: rays through a 96 x 54 grid of pixels of views from 2 m to 40,000 km; a ray
 * that meets ground no kept tile holds is a tile wrongly culled (by the frustum or the horizon); kept
 * tiles whose 81 sampled ground points are all hidden by the sea-level ball lie wholly beyond it. */
static bool held(const terra_planet *p, const terra_planet_tile *t, int n, terra_vec3 d) {
    double s, u;
    const int f = terra_planet_dir_face(d, &s, &u);
    for (int i = 0; i < n; i++) {
        if (terra_tile_key_face(t[i].key) != f) continue;
        const double per = terra_planet_tiles_per_side(p, t[i].level), x = terra_tile_key_x(t[i].key), y = terra_tile_key_y(t[i].key);
        const double eps = 1e-9 / per;
        if (s >= 2 * x / per - 1 - eps && s <= 2 * (x + 1) / per - 1 + eps && u >= 2 * y / per - 1 - eps && u <= 2 * (y + 1) / per - 1 + eps)
            return true;
    }
    return false;
}

/* The ideal for tau over a tile: 8 x 8 pieces, each meshed at the coarsest spacing whose error (the
 * planet's level errors, interpolated log-log) projects within tau at the piece's distance; with
 * `by_level` at the coarsest level's spacing whose error does (the error-bounded mesh of the planet's
 * own levels, bench_level_spacing). */
static double ideal_triangles(const terra_planet *p, const terra_planet_tile *t, int n, terra_vec3 eye, double k_px, bool by_level) {
    const int N = terra_planet_get_desc(p)->cells, levels = terra_planet_get_desc(p)->levels;
    float err[TERRA_PLANET_MAX_LEVELS];
    const double s0 = level_errors(p, err);
    double sum = 0;
    for (int i = 0; i < n; i++)
        for (int pj = 0; pj < 8; pj++)
            for (int pi = 0; pi < 8; pi++) {
                const terra_vec3 a = terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, pi * N / 8, pj * N / 8));
                const terra_vec3 b = terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, (pi + 1) * N / 8, pj * N / 8));
                const terra_vec3 c = terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, (pi + 1) * N / 8, (pj + 1) * N / 8));
                const terra_vec3 d = terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, pi * N / 8, (pj + 1) * N / 8));
                const double area = 0.5 * vlen(vcross(vsub(c, a), vsub(d, b)));
                const terra_vec3 mid = vscale(vadd(vadd(a, b), vadd(c, d)), 0.25);
                const double allowed = 2.0 * vlen(vsub(mid, eye)) / k_px;
                const double s = by_level ? bench_level_spacing(allowed, err, levels, s0) : bench_ideal_spacing(allowed, err, levels, s0);
                sum += 2.0 * area / (s * s);
            }
    return sum;
}

static void bench_horizon(const terra_planet *p, bool morph_margin, const char *suffix) {
    terra_planet_select *sel;
    if (terra_planet_select_create(&(terra_planet_select_desc){.max_tiles = 1 << 16, .morph_margin = morph_margin}, p, &sel) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    const double k_px = 1080 / (2 * tan(30 * PI / 180));
    /* hidden by the sea-level ellipsoid: by the unit ball in the space scaled by 1 / a, 1 / b, 1 / a */
    const terra_vec3 sc = {1 / terra_planet_get_desc(p)->radius_m, 1 / terra_planet_get_desc(p)->polar_radius_m,
                           1 / terra_planet_get_desc(p)->radius_m};
    const int N = terra_planet_get_desc(p)->cells;
    long wrong = 0, hits = 0, drawn = 0, beyond = 0;
    double ratio[64], mesh_r[64];
    int nr = 0;
    for (int v = 0; v < NVIEWS; v++) {
        const terra_camera cam = planet_view(p, v);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_planet_tile *t;
        int n;
        if (terra_planet_select_run(sel, cam.eye, &fr, &t, &n) != TERRA_OK) {
            fprintf(stderr, "%s\n", terra_last_error());
            exit(1);
        }
        drawn += n;
        for (int i = 0; i < n; i++) {
            bool seen = false;
            for (int j = 0; j <= 8 && !seen; j++)
                for (int k = 0; k <= 8 && !seen; k++) {
                    const terra_vec3 g = terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, k * N / 8, j * N / 8));
                    const terra_vec3 es = {cam.eye.x * sc.x, cam.eye.y * sc.y, cam.eye.z * sc.z};
                    const terra_vec3 dv = {(g.x - cam.eye.x) * sc.x, (g.y - cam.eye.y) * sc.y, (g.z - cam.eye.z) * sc.z};
                    const double s = fmin(fmax(-vdot(es, dv) / vdot(dv, dv), 0), 1);
                    seen = vlen(vadd(es, vscale(dv, s))) >= 1;
                }
            beyond += !seen;
        }
        static terra_vec3 at[RAYS_H][RAYS_W];
        static bool met[RAYS_H][RAYS_W];
        hits += view_rays(p, &cam, at, met);
        for (int py = 0; py < RAYS_H; py++)
            for (int px = 0; px < RAYS_W; px++)
                if (met[py][px]) wrong += !held(p, t, n, terra_planet_up_at(p, at[py][px], NULL));
        if (nr < 64) {
            mesh_r[nr] = 2.0 * N * N * n / ideal_triangles(p, t, n, cam.eye, k_px, true);
            ratio[nr++] = 2.0 * N * N * n / ideal_triangles(p, t, n, cam.eye, k_px, false);
        }
    }
    printf("  (%s: %ld pixel rays met the ground in %d views; %ld tiles drawn)\n", morph_margin ? "CDLOD with the morph margin" : "CDLOD", hits,
           NVIEWS, drawn);
    char mode[32], name[96];
    snprintf(mode, sizeof mode, "%s%s", morph_margin ? ".morph_margin" : "", suffix);
    snprintf(name, sizeof name, "planet.horizon_wrongly_culled%s", mode);
    bench_record(name, (double)wrong, "pixels", NVIEWS, "sum");
    snprintf(name, sizeof name, "planet.horizon_kept_beyond%s", mode);
    bench_record(name, 100.0 * beyond / drawn, "%", NVIEWS, "share");
    double worst = 0;
    for (int i = 0; i < nr; i++) worst = fmax(worst, ratio[i]);
    /* over the selected tiles' ground; issue 16's figure, over the visible ground, is bench_gl_planet's */
    snprintf(name, sizeof name, "planet.triangles_vs_continuous_ideal%s", mode);
    bench_record(name, bench_median(ratio, nr), "x", nr, "median");
    snprintf(name, sizeof name, "planet.triangles_vs_continuous_ideal%s.worst", mode);
    bench_record(name, worst, "x", nr, "max");
    snprintf(name, sizeof name, "planet.triangles_vs_error_bounded_mesh%s", mode);
    bench_record(name, bench_median(mesh_r, nr), "x", nr, "median");
    worst = 0;
    for (int i = 0; i < nr; i++) worst = fmax(worst, mesh_r[i]);
    snprintf(name, sizeof name, "planet.triangles_vs_error_bounded_mesh%s.worst", mode);
    bench_record(name, worst, "x", nr, "max");
    terra_planet_select_destroy(sel);
}

int main(void) {
    terra_planet *p;
    if (terra_planet_create(NULL, &p) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 1;
    }
    printf("planet: radius %.0f m, %d levels of %d-cell tiles\n", terra_planet_get_desc(p)->radius_m,
           terra_planet_get_desc(p)->levels, terra_planet_get_desc(p)->cells);
    bench_select(p);
    bench_horizon(p, false, "");
    bench_horizon(p, true, "");
    terra_planet_destroy(p);
    /* the same on the WGS84 ellipsoid (horizon in its scaled space) */
    if (terra_planet_create(&(terra_planet_desc){.wgs84 = true}, &p) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 1;
    }
    bench_horizon(p, false, ".wgs84");
    terra_planet_destroy(p);
    return 0;
}
