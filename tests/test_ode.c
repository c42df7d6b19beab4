/* The proof with a real physics engine: ODE drops 200 bodies over the default world and drives four
 * fast ones (30 to 300 m/s, the fastest over a ridge) for 60 simulated seconds while terra stands
 * collider blocks around each; no body's lowest point ever goes below the ground, and every block a
 * body enters was standing before it arrived. */
#include "check.h"
#include "terra/ode.h"

#include <math.h>

static void progress(void *user, double t, const char *line) {
    (void)user;
    if (fmod(t, 10.0) < 1e-9) printf("  %s\n", line);
}

static void nothing_falls_through(void) {
    terra_drop_result r;
#ifdef TERRA_SANITIZED /* memory checks need not the whole minute; the plain run proves it */
    const double seconds = 12;
#else
    const double seconds = 60;
#endif
    terra_status st = terra_ode_drop_test(&(terra_drop_desc){.seconds = seconds, .progress = progress}, &r);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    printf("  %ld steps: fell through %ld (worst depth %.3f m, %.2f of a radius), block entries %ld (unready %ld), min lead %.1f ms, "
           "blocks max %d, built per frame max %.0f, %.2f ms per block, vehicle top speed %.0f m/s, "
           "max height above ground %.1f m\n",
           r.steps, r.fell_through, r.worst_depth_m, r.worst_depth_fraction, r.block_entries, r.entries_unready, r.min_lead_ms, r.max_blocks,
           r.max_built_per_frame, r.mean_build_ms, r.vehicle_top_speed, r.vehicle_max_height);
    CHECK(r.steps == (long)(seconds * 240));
    CHECK(r.fell_through == 0, "%ld body-steps below the ground", r.fell_through);
    CHECK(r.entries_unready == 0 && r.min_lead_ms > 0, "%ld blocks entered before they stood", r.entries_unready);
    CHECK(r.worst_depth_fraction < 0.5, "a body sank %.2f of its radius into the ground", r.worst_depth_fraction);
    CHECK(r.block_entries > seconds * 10, "too few block entries to mean anything (%ld)", r.block_entries);
    CHECK(r.vehicle_top_speed >= 295, "the fastest vehicle reached only %.0f m/s", r.vehicle_top_speed);
    CHECK(r.vehicle_max_height > 2, "no vehicle left the ground (%.1f m)", r.vehicle_max_height);
}

/* The same while pits are dug in front of every vehicle (terra drive --edits): the ground changes
 * under bodies driving at up to 300 m/s, and none falls through its new colliders. */
static void nothing_falls_through_dug_ground(void) {
    terra_source *w = NULL;
    terra_edit_layer *l = NULL;
    terra_world_create(&(terra_world_desc){.seed = 1}, &w);
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = w}, &l) == TERRA_OK, "%s", terra_last_error());
    if (!l) return;
    terra_drop_result r;
    CHECK(terra_ode_drop_test(&(terra_drop_desc){.seconds = 12, .bodies = 40, .edits = l}, &r) == TERRA_OK, "%s",
          terra_last_error());
    printf("  %ld pits dug; fell through %ld (worst depth %.3f m, %.2f of a radius), unready entries %ld\n", r.pits,
           r.fell_through, r.worst_depth_m, r.worst_depth_fraction, r.entries_unready);
    CHECK(r.pits >= 4 * 40 && terra_edit_count(l) == (size_t)r.pits, "%ld pits, %zu edits", r.pits, terra_edit_count(l));
    CHECK(r.fell_through == 0 && r.worst_depth_fraction < 0.5, "%ld body-steps below the dug ground", r.fell_through);
    CHECK(r.entries_unready == 0, "%ld blocks entered before they stood", r.entries_unready);
    terra_edit_layer_destroy(l);
    terra_source_destroy(w);
}

int main(void) {
    RUN(nothing_falls_through);
    RUN(nothing_falls_through_dug_ground);
    return finish();
}
