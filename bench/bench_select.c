/* Benchmarks of the foundation: selection per visited tile, grid meshing per vertex, source sampling. */
#include "bench.h"
#include "terra/select.h"

#include <math.h>
#include <string.h>

#define RUNS 9

static long allocs;
static void *count_alloc(size_t n, void *u) { (void)u; allocs++; return malloc(n); }
static void *count_realloc(void *p, size_t n, void *u) { (void)u; allocs++; return realloc(p, n); }
static void count_free(void *p, void *u) { (void)u; free(p); }

static void bench_selection(const terra_source *src) {
    static const struct { const char *name; double x, above; } cases[] = {
        {"ground_origin", 0, 2}, {"ground_50km", 50e3, 2}, {"ground_5000km", 5e6, 2},
        {"air_origin", 0, 2000}, {"air_50km", 50e3, 2000}, {"air_5000km", 5e6, 2000},
    };
    terra_select *sel;
    if (terra_select_create(&(terra_select_desc){0}, src, &sel) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    double origin_ns = 0, far_ns = 0;
    long frames_allocs = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        terra_camera cam = {.eye = {cases[c].x, 0, cases[c].x * 0.3}, .yaw_rad = 0.7, .pitch_rad = -0.15};
        float g;
        terra_source_height(src, cam.eye.x, cam.eye.z, &g);
        cam.eye.y = g + cases[c].above;
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *tiles;
        int count;
        terra_select_run(sel, cam.eye, &fr, &tiles, &count); /* warm the height-range cache */
        const terra_select_stats *st = terra_select_get_stats(sel);
        double per_visit[RUNS], per_drawn[RUNS];
        const int frames = 400;
        for (int r = 0; r < RUNS; r++) {
            double t0 = bench_now();
            for (int f = 0; f < frames; f++) terra_select_run(sel, cam.eye, &fr, &tiles, &count);
            double ns = (bench_now() - t0) * 1e9 / frames;
            per_visit[r] = ns / st->visited;
            per_drawn[r] = ns / st->drawn;
        }
        char name[128];
        double v = bench_median(per_visit, RUNS);
        snprintf(name, sizeof name, "select.ns_per_visited.%s", cases[c].name);
        bench_record(name, v, "ns", RUNS, "median");
        snprintf(name, sizeof name, "select.ns_per_drawn.%s", cases[c].name);
        bench_record(name, bench_median(per_drawn, RUNS), "ns", RUNS, "median");
        snprintf(name, sizeof name, "select.visited.%s", cases[c].name);
        bench_record(name, st->visited, "tiles", 1, "value");
        snprintf(name, sizeof name, "select.drawn.%s", cases[c].name);
        bench_record(name, st->drawn, "tiles", 1, "value");
        if (c == 0) origin_ns = v;
        if (c == 2) far_ns = v;
        /* allocations over 100 frames of a moving camera, after the warm-up above */
        terra_set_allocator(&(terra_allocator){count_alloc, count_realloc, count_free, NULL});
        allocs = 0;
        for (int f = 0; f < 100; f++) {
            cam.eye.x += 3;
            terra_camera_frustum(&cam, &fr);
            terra_select_run(sel, cam.eye, &fr, &tiles, &count);
        }
        frames_allocs += allocs;
        terra_set_allocator(NULL);
    }
    bench_record("select.allocs_per_frame", (double)frames_allocs / (100.0 * 6), "allocs", 600, "mean");
    bench_record("select.cost_ratio.default_world.5000km_vs_origin", far_ns / origin_ns, "x", RUNS, "median");
    terra_select_destroy(sel);
}

/* The default world repeated every PERIOD metres (a whole number of the coarsest tiles), so an eye
 * at the origin and one ~5,000 km out see the same ground and the same tiles: any difference in
 * cost comes from the distance alone (precision, key range), not from the landscape. */
#define PERIOD 131072.0
static const terra_source *periodic_base;
static double wrap(double v) { return v - floor(v / PERIOD) * PERIOD; }
static float periodic_height(void *u, double x, double z) {
    (void)u;
    float h;
    terra_source_height(periodic_base, wrap(x), wrap(z), &h);
    return h;
}
static terra_status periodic_range(void *u, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    (void)u;
    double ox = floor(x0 / PERIOD) * PERIOD, oz = floor(z0 / PERIOD) * PERIOD;
    if (x1 - ox > PERIOD || z1 - oz > PERIOD) { /* straddles a period edge */
        *lo = TERRA_WORLD_MIN_HEIGHT, *hi = TERRA_WORLD_MAX_HEIGHT;
        return TERRA_OK;
    }
    return terra_source_height_range(periodic_base, x0 - ox, z0 - oz, x1 - ox, z1 - oz, lo, hi);
}

/* ns per visited tile for one eye, over `frames` frames (the height-range cache warmed first). */
static double frame_ns_per_visit(terra_select *sel, const terra_camera *cam, int frames) {
    terra_frustum fr;
    terra_camera_frustum(cam, &fr);
    const terra_selected_tile *tiles;
    int count;
    double t0 = bench_now();
    for (int f = 0; f < frames; f++) terra_select_run(sel, cam->eye, &fr, &tiles, &count);
    return (bench_now() - t0) * 1e9 / frames / terra_select_get_stats(sel)->visited;
}

static terra_camera same_ground_camera(const terra_source *src, double offset, double above) {
    terra_camera cam = {.eye = {offset + 1000, 0, offset + 700}, .yaw_rad = 0.7, .pitch_rad = -0.15};
    float g;
    terra_source_height(src, cam.eye.x, cam.eye.z, &g);
    cam.eye.y = g + above;
    return cam;
}

static void bench_distance(const terra_source *world) {
    periodic_base = world;
    terra_source *src;
    terra_source_create(&(terra_source_desc){.height_at = periodic_height, .height_range = periodic_range,
                                             .name = "periodic world"},
                        &src);
    terra_select *sel;
    terra_select_create(&(terra_select_desc){0}, src, &sel);
    const double far = 38 * PERIOD; /* 4,981 km */
    /* the two eyes measured in alternation, so load on a shared machine hits both alike; the
     * figure is the median of the paired ratios */
    enum { PAIRS = 15 };
    double ratio[2 * PAIRS], near_ns[2][PAIRS], far_ns[2][PAIRS];
    for (int k = 0; k < 2; k++) {
        terra_camera a = same_ground_camera(src, 0, k ? 2000 : 2), b = same_ground_camera(src, far, k ? 2000 : 2);
        frame_ns_per_visit(sel, &a, 1);
        frame_ns_per_visit(sel, &b, 1);
        for (int r = 0; r < PAIRS; r++) {
            near_ns[k][r] = frame_ns_per_visit(sel, &a, 100);
            far_ns[k][r] = frame_ns_per_visit(sel, &b, 100);
            ratio[k * PAIRS + r] = far_ns[k][r] / near_ns[k][r];
        }
    }
    bench_record("select.ns_per_visited.same_ground_origin", bench_median(near_ns[0], PAIRS), "ns", PAIRS, "median");
    bench_record("select.ns_per_visited.same_ground_4981km", bench_median(far_ns[0], PAIRS), "ns", PAIRS, "median");
    bench_record("select.ns_per_visited.same_ground_air_origin", bench_median(near_ns[1], PAIRS), "ns", PAIRS, "median");
    bench_record("select.ns_per_visited.same_ground_air_4981km", bench_median(far_ns[1], PAIRS), "ns", PAIRS, "median");
    bench_record("select.cost_ratio.5000km_vs_origin", bench_median(ratio, 2 * PAIRS), "x", 2 * PAIRS, "median");
    terra_select_destroy(sel);
    terra_source_destroy(src);
}

/* A source that hands back a grid sampled once: what remains of a tile build is the meshing. */
typedef struct cached { float *h; terra_surface *s; int n; } cached;
static terra_status cached_grid(void *u, const terra_grid_request *r, float *h, terra_surface *s) {
    const cached *c = u;
    memcpy(h, c->h, sizeof(float) * (size_t)r->nx * (size_t)r->nz);
    if (s) memcpy(s, c->s, (size_t)r->nx * (size_t)r->nz);
    return TERRA_OK;
}

static void bench_grid(const terra_source *world) {
    const int n = 64, w = n + 3, nv = terra_grid_vertex_count(n);
    terra_grid_desc g = {.tile0_size = 64, .cells = n};
    cached c = {malloc(sizeof(float) * w * w), malloc((size_t)w * w), n};
    terra_grid_request req = {.ix0 = 1000 * n - 1, .iz0 = -300 * n - 1, .spacing = 1, .nx = w, .nz = w};
    /* source sampling: heights and surfaces over the tile's (n+3)^2 grid */
    double per_sample[RUNS];
    for (int r = 0; r < RUNS; r++) {
        const int reps = 20;
        double t0 = bench_now();
        for (int k = 0; k < reps; k++) terra_source_sample(world, &req, c.h, c.s);
        per_sample[r] = (bench_now() - t0) * 1e9 / (reps * (double)w * w);
    }
    bench_record("source.ns_per_sample", bench_median(per_sample, RUNS), "ns", RUNS, "median");
    for (int r = 0; r < RUNS; r++) {
        const int reps = 20;
        double t0 = bench_now();
        for (int k = 0; k < reps; k++) terra_source_sample(world, &req, c.h, NULL);
        per_sample[r] = (bench_now() - t0) * 1e9 / (reps * (double)w * w);
    }
    bench_record("source.ns_per_sample.heights_only", bench_median(per_sample, RUNS), "ns", RUNS, "median");

    terra_source *src;
    terra_source_create(&(terra_source_desc){.sample_grid = cached_grid, .user = &c, .min_height = -1e4f,
                                             .max_height = 1e4f, .name = "cached"},
                        &src);
    terra_grid_vertex *v = malloc(sizeof *v * (size_t)nv);
    float *scratch = malloc(sizeof(float) * (size_t)terra_grid_scratch_floats(n));
    /* A build is the source's sampling (here a copy and the finiteness check) plus the meshing:
     * time both, and report the meshing alone as their difference. */
    double per_vertex[RUNS], with_sampling[RUNS];
    terra_tile_key key = terra_tile_key_make(0, 0, 1000, -300);
    for (int r = 0; r < RUNS; r++) {
        const int reps = 500;
        double t0 = bench_now();
        for (int k = 0; k < reps; k++) terra_grid_build(src, &g, key, v, scratch, NULL);
        double build = bench_now() - t0;
        t0 = bench_now();
        for (int k = 0; k < reps; k++) terra_source_sample(src, &req, scratch, (terra_surface *)(scratch + w * w));
        double sample = bench_now() - t0;
        per_vertex[r] = (build - sample) * 1e9 / (reps * (double)nv);
        with_sampling[r] = build * 1e9 / (reps * (double)nv);
    }
    bench_record("grid.ns_per_vertex", bench_median(per_vertex, RUNS), "ns", RUNS, "median");
    bench_record("grid.ns_per_vertex.with_copy_and_check", bench_median(with_sampling, RUNS), "ns", RUNS, "median");
    terra_source_destroy(src);
    free(v), free(scratch), free(c.h), free(c.s);
}

/* Selection by screen-space error: a per-tile error callback (an archive's index answers it from
 * an array, as this one does from a formula), tau 2 px on a 1080-pixel view. */
static float sse_error(void *u, terra_tile_key k) {
    (void)u;
    return 0.4f * (float)(1u << terra_tile_key_level(k));
}

static void bench_sse(const terra_source *src) {
    terra_select *sel;
    if (terra_select_create(&(terra_select_desc){.tile_error = sse_error}, src, &sel) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    static const struct { const char *name; double above; } cases[] = {{"ground", 2}, {"air", 2000}};
    for (size_t c = 0; c < 2; c++) {
        terra_camera cam = same_ground_camera(src, 0, cases[c].above);
        double v[RUNS];
        frame_ns_per_visit(sel, &cam, 10);
        for (int r = 0; r < RUNS; r++) v[r] = frame_ns_per_visit(sel, &cam, 400);
        char name[128];
        snprintf(name, sizeof name, "select.sse.ns_per_visited.%s", cases[c].name);
        bench_record(name, bench_median(v, RUNS), "ns", RUNS, "median");
        snprintf(name, sizeof name, "select.sse.drawn.%s", cases[c].name);
        bench_record(name, terra_select_get_stats(sel)->drawn, "tiles", 1, "value");
    }
    terra_select_destroy(sel);
}

/* Triangles drawn against the ideal for tau: the ideal mesh at each point has the coarsest spacing
 * whose error (the measured level errors, interpolated log-log in the spacing) the screen cannot
 * see there, never finer than level 0's; it is integrated over the drawn tiles (8 x 8 pieces each,
 * at each piece's distance) and compared with the triangles drawn. With `levels`, the spacing is
 * the coarsest level's whose error is within tau there (bench_level_spacing): the error-bounded
 * mesh of the source's own levels. */
static double ideal_triangles(const terra_select *sel, const terra_select_desc *d, const terra_selected_tile *t, int n,
                              terra_vec3 eye, bool levels) {
    const double s0 = d->grid.tile0_size / d->grid.cells;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const double side = t[i].box.max.x - t[i].box.min.x, piece = side / 8, ymid = 0.5 * (t[i].box.min.y + t[i].box.max.y);
        for (int pj = 0; pj < 8; pj++)
            for (int pi = 0; pi < 8; pi++) {
                const double x = t[i].box.min.x + (pi + 0.5) * piece, z = t[i].box.min.z + (pj + 0.5) * piece;
                const double dist = sqrt((x - eye.x) * (x - eye.x) + (z - eye.z) * (z - eye.z) + (ymid - eye.y) * (ymid - eye.y));
                const double allowed = d->max_sse_px * dist / terra_select_sse_px(sel, 1.0, 1.0); /* metres */
                const double s = levels ? bench_level_spacing(allowed, d->level_error, d->levels, s0)
                                        : bench_ideal_spacing(allowed, d->level_error, d->levels, s0);
                sum += 2.0 * piece * piece / (s * s);
            }
    }
    return sum;
}

/* The floor under that figure: the coarsest whole tiles whose own error (the level's) projects
 * within tau at their box's nearest point, each refined only where it must be (the per-tile rule of
 * tile_error, unmorphed, blind to neighbours), over the ground CDLOD covers (the coarsest level out
 * to its range). Any selection of whole cells x cells tiles each within tau draws at least these:
 * what it draws beyond them is what CDLOD's morph margin and neighbour rule cost. */
static float floor_error(void *u, terra_tile_key k) { return ((const float *)u)[terra_tile_key_level(k)]; }

static double floor_ratio(const terra_select *floor_sel, const terra_select *sel, const terra_select_desc *d,
                          const terra_frustum *fr, terra_vec3 eye, terra_selected_tile *keep) {
    const terra_selected_tile *t;
    int count, n = 0;
    if (terra_select_run((terra_select *)floor_sel, eye, fr, &t, &count) != TERRA_OK) return NAN;
    const int top = d->levels - 1;
    for (int i = 0; i < count; i++)
        if (t[i].level < top || terra_box3_distance(&t[i].box, eye) <= terra_select_range(sel, top)) keep[n++] = t[i];
    return 2.0 * d->grid.cells * d->grid.cells * n / ideal_triangles(sel, d, keep, n, eye, false);
}

static void bench_triangles_vs_ideal(const terra_source *src) {
    terra_select_desc d = {.view_height_px = 1080};
    if (terra_grid_level_errors(src, &(terra_grid_desc){0}, 12, 0, 0, d.level_error) != TERRA_OK ||
        terra_select_desc_resolve(&d, &d) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    terra_select *sel, *floor_sel;
    terra_select_create(&d, src, &sel);
    terra_select_desc fd = d;
    fd.tile_error = floor_error, fd.tile_error_user = d.level_error, fd.max_tiles = 1 << 16;
    if (terra_select_create(&fd, src, &floor_sel) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    terra_selected_tile *keep = malloc(sizeof *keep * (size_t)fd.max_tiles);
    double ratio[48], floor_r[48], mesh_r[48], sse_max = 0;
    int n = 0;
    for (int k = 0; k < 48; k++) { /* 48 views: 2 m to 3 km up, all around */
        terra_camera cam = same_ground_camera(src, 1000.0 * k, exp(log(2.0) + (log(3000.0) - log(2.0)) * (k % 8) / 7.0));
        cam.yaw_rad = 0.37 * k, cam.pitch_rad = -0.05 - 0.05 * (k % 5), cam.aspect = 16.0 / 9;
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *t;
        int count;
        if (terra_select_run(sel, cam.eye, &fr, &t, &count) != TERRA_OK) continue;
        sse_max = fmax(sse_max, terra_select_get_stats(sel)->sse_px_max);
        const double drawn = 2.0 * d.grid.cells * d.grid.cells * count;
        const double r = drawn / ideal_triangles(sel, &d, t, count, cam.eye, false);
        mesh_r[n] = drawn / ideal_triangles(sel, &d, t, count, cam.eye, true);
        floor_r[n] = floor_ratio(floor_sel, sel, &d, &fr, cam.eye, keep);
        ratio[n++] = r;
    }
    /* the analytic reading of the ideal, over the selected ground (bench_gl records the figure,
     * render.triangles_vs_ideal: the error-bounded mesh over the visible ground) */
    bench_record("render.triangles_vs_ideal.analytic_selected", bench_median(ratio, n), "x", n, "median");
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, ratio[i]);
    bench_record("render.triangles_vs_ideal.analytic_selected.worst", worst, "x", n, "max");
    bench_record("render.sse_px_max", sse_max, "px", n, "max");
    bench_record("render.triangles_vs_ideal.analytic_selected.whole_tile_floor", bench_median(floor_r, n), "x", n, "median");
    bench_record("render.triangles_vs_error_bounded_mesh", bench_median(mesh_r, n), "x", n, "median");
    worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, mesh_r[i]);
    bench_record("render.triangles_vs_error_bounded_mesh.worst", worst, "x", n, "max");
    bench_record("select.derived.range0", d.range0, "m", 1, "value");
    bench_record("select.derived.range_ratio", d.range_ratio, "x", 1, "value");
    terra_select_destroy(sel);
    terra_select_destroy(floor_sel);
    free(keep);
}

int main(void) {
    terra_source *world;
    if (terra_world_create(&(terra_world_desc){.seed = 1}, &world) != TERRA_OK) return 1;
    bench_selection(world);
    bench_distance(world);
    bench_sse(world);
    bench_triangles_vs_ideal(world);
    bench_grid(world);
    terra_source_destroy(world);
    return 0;
}
