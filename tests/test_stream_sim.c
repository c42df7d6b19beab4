/* Every streaming scenario of the headless simulator, frame by frame: the ground covered exactly
 * once, no frame uncovered once the coarsest tiles are in, caps held, nothing allocated. */
#include "check.h"
#include "stream_sim.h"

/* ---- scenarios ---------------------------------------------------------------------------------------- */

static void scenarios_cover_every_frame(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 1}, &src);
    for (int k = 0; k < SIM_SCENARIOS; k++) {
        sim_result r;
        CHECK(sim_run(src, &sim_scenarios[k], &sim_default_config, &r) == 0);
        printf("  %-13s frames %5d: uncovered %d (first covered %d), coverage errors %d, full detail %d frames, "
               "wasted %ld/%ld, reloads %ld, peak %.1f/%.1f MB, work ms p99 %.2f max %.2f, allocs/frame %.2f, "
               "wanted max %d\n",
               sim_scenarios[k].name, r.frames, r.uncovered_frames, r.first_covered_frame, r.coverage_errors,
               r.frames_to_full_detail, r.wasted_loads, r.arrivals, r.reloads, r.peak_bytes / 1e6, r.cap_bytes / 1e6,
               r.main_ms_p99, r.main_ms_max, r.allocs_per_frame, r.max_wanted);
        CHECK(r.coverage_errors == 0, "%s: %d frames with overlapping or stray draws", sim_scenarios[k].name,
              r.coverage_errors);
        CHECK(r.uncovered_frames == 0, "%s: %d frames with uncovered ground", sim_scenarios[k].name, r.uncovered_frames);
        CHECK(r.first_covered_frame >= 0 && r.first_covered_frame < r.frames / 4, "%s: coarsest tiles took %d frames",
              sim_scenarios[k].name, r.first_covered_frame);
        CHECK(r.peak_bytes <= r.cap_bytes);
        CHECK(r.allocs_per_frame == 0, "%s: %.2f allocations per frame", sim_scenarios[k].name, r.allocs_per_frame);
    }
    /* memory follows the radius, not the map */
    sim_scenario small = {"world_8km", SIM_FLYOVER, 100, 20, 4000}, big = {"world_8000km", SIM_FLYOVER, 100, 20, 4e6};
    sim_result rs, rb;
    sim_config cfg = sim_default_config;
    cfg.load_radius = 1500;
    CHECK(sim_run(src, &small, &cfg, &rs) == 0 && sim_run(src, &big, &cfg, &rb) == 0);
    double ratio = (double)rb.peak_bytes / (double)rs.peak_bytes;
    printf("  peak bytes: 8 km world %.2f MB, 8000 km world %.2f MB (ratio %.3f)\n", rs.peak_bytes / 1e6,
           rb.peak_bytes / 1e6, ratio);
    CHECK(ratio > 0.95 && ratio < 1.05, "peak bytes differ by world size: ratio %.3f", ratio);
    CHECK(rs.uncovered_frames == 0 && rb.uncovered_frames == 0 && rs.coverage_errors == 0 && rb.coverage_errors == 0);
    terra_source_destroy(src);
}

int main(void) {
    RUN(scenarios_cover_every_frame);
    return finish();
}
