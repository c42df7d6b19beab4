/* Streaming scenarios in the headless simulator (bench/stream_sim.h): deterministic figures. */
#include "bench.h"
#include "stream_sim.h"

static void record(const char *scenario, const char *what, double v, const char *unit, const char *stat) {
    char name[160];
    snprintf(name, sizeof name, "stream.%s.%s", scenario, what);
    bench_record(name, v, unit, 1, stat);
}

int main(void) {
    terra_source *src;
    if (terra_world_create(&(terra_world_desc){.seed = 1}, &src) != TERRA_OK) return 1;
    int failures = 0;
    for (int k = 0; k < SIM_SCENARIOS; k++) {
        sim_result r;
        double t0 = bench_now();
        if (sim_run(src, &sim_scenarios[k], &sim_default_config, &r) != 0) return 1;
        double wall = bench_now() - t0;
        const char *n = sim_scenarios[k].name;
        record(n, "uncovered_frames", r.uncovered_frames, "frames", "value");
        record(n, "frames_to_full_detail", r.frames_to_full_detail, "frames", "max");
        record(n, "wasted_loads", (double)r.wasted_loads, "tiles", "value");
        record(n, "loads", (double)r.arrivals, "tiles", "value");
        record(n, "reloads", (double)r.reloads, "tiles", "value");
        record(n, "peak_bytes", (double)r.peak_bytes, "bytes", "max");
        record(n, "cap_bytes", (double)r.cap_bytes, "bytes", "value");
        record(n, "main_ms_p50", r.main_ms_p50, "ms", "p50");
        record(n, "main_ms_p99", r.main_ms_p99, "ms", "p99");
        record(n, "main_ms_max", r.main_ms_max, "ms", "max");
        record(n, "allocs_per_frame", r.allocs_per_frame, "allocs", "mean");
        record(n, "sim_us_per_frame", wall * 1e6 / r.frames, "us", "mean");
        failures += r.uncovered_frames != 0 || r.coverage_errors != 0;
    }
    sim_scenario small = {"world_8km", SIM_FLYOVER, 100, 20, 4000}, big = {"world_8000km", SIM_FLYOVER, 100, 20, 4e6};
    sim_config cfg = sim_default_config;
    cfg.load_radius = 1500;
    sim_result rs, rb;
    if (sim_run(src, &small, &cfg, &rs) || sim_run(src, &big, &cfg, &rb)) return 1;
    bench_record("stream.peak_bytes.world_8km", (double)rs.peak_bytes, "bytes", 1, "max");
    bench_record("stream.peak_bytes.world_8000km", (double)rb.peak_bytes, "bytes", 1, "max");
    terra_source_destroy(src);
    return failures ? 1 : 0;
}
