/* Ground queries and collider blocks on the default world. */
#include "bench.h"
#include "terra/ode.h"

#define RUNS 9
#define N 4096

int main(void) {
    terra_source *src;
    if (terra_world_create(&(terra_world_desc){.seed = 1}, &src) != TERRA_OK) return 1;
    terra_ground *g;
    if (terra_ground_create(&(terra_ground_desc){.source = src, .budget_ms = 1e9}, &g) != TERRA_OK) return 1;
    static double xz[2 * N];
    static terra_ground_hit hits[N];
    unsigned long long s = 1;
    for (int k = 0; k < 2 * N; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xz[k] = (double)(s >> 11) / 9007199254740992.0 * 300.0 - 150.0; /* within a body's collider radius */
    }
    double single[RUNS], batched[RUNS], cached[RUNS], normal[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double y, t0 = bench_now();
        for (int k = 0; k < N; k++) terra_ground_height_at(g, xz[2 * k], xz[2 * k + 1], &y);
        single[r] = (bench_now() - t0) * 1e9 / N;
        terra_vec3 n;
        t0 = bench_now();
        for (int k = 0; k < N; k++) terra_ground_normal_at(g, xz[2 * k], xz[2 * k + 1], &n);
        normal[r] = (bench_now() - t0) * 1e9 / N;
        t0 = bench_now();
        terra_ground_query(g, xz, N, hits);
        batched[r] = (bench_now() - t0) * 1e9 / N;
    }
    bench_record("ground.height_at_ns", bench_median(single, RUNS), "ns", RUNS, "median");
    bench_record("ground.normal_at_ns", bench_median(normal, RUNS), "ns", RUNS, "median");
    bench_record("ground.height_at_batched_ns", bench_median(batched, RUNS), "ns", RUNS, "median");
    /* with the collider blocks around a body standing, queries read them instead of the source */
    terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {0, 0, 0}, .collision = true};
    double t0 = bench_now();
    terra_ground_update(g, &body, 1);
    double build_s = bench_now() - t0;
    int built = terra_ground_get_stats(g)->blocks_built;
    for (int r = 0; r < RUNS; r++) {
        double y;
        t0 = bench_now();
        for (int k = 0; k < N; k++) terra_ground_height_at(g, xz[2 * k], xz[2 * k + 1], &y);
        cached[r] = (bench_now() - t0) * 1e9 / N;
    }
    bench_record("ground.height_at_ns.blocks_standing", bench_median(cached, RUNS), "ns", RUNS, "median");
    /* one 32x32 block: release and rebuild the same ones */
    double per_block[RUNS];
    for (int r = 0; r < RUNS; r++) {
        terra_ground_set_source(g, src); /* every block stale: the next update stands them all again */
        t0 = bench_now();
        terra_ground_update(g, &body, 1);
        per_block[r] = (bench_now() - t0) * 1e6 / terra_ground_get_stats(g)->blocks_built;
    }
    bench_record("ground.block_build_us", bench_median(per_block, RUNS), "us", RUNS, "median");
    printf("  (first stand-up: %d blocks in %.1f ms)\n", built, build_s * 1e3);
    terra_ground_destroy(g);
    terra_source_destroy(src);

    /* the physics proof: 200 bodies and 4 vehicles, 60 s in ODE */
    terra_drop_result r;
    t0 = bench_now();
    if (terra_ode_drop_test(NULL, &r) != TERRA_OK) return 1;
    bench_record("ground.bodies_fell_through", (double)r.fell_through, "body-steps", 1, "value");
    bench_record("ground.worst_depth_fraction", r.worst_depth_fraction, "radius", 1, "max");
    bench_record("ground.min_collider_lead_ms", r.min_lead_ms, "ms", 1, "min");
    bench_record("ground.blocks_built_per_frame_max", r.max_built_per_frame, "blocks", 1, "max");
    bench_record("ground.drop_test_wall_s", bench_now() - t0, "s", 1, "value");
    return r.fell_through == 0 ? 0 : 1;
}
