/* Edits while drawing in real time (tests/test_gl_util.h fly_edits): a pit dug in view, then an edit
 * every frame for 40 frames, over the default world at 320x180 at a 4 ms budget on llvmpipe.
 * edit.frames_to_drawn (goal <= 2), edit.rebuilt_vs_touched (goal 1.0), edit.steps_to_collider
 * (goal 0), edit.hole_pixels_max (goal 0); medians and worsts of RUNS flights. */
#include "bench.h"

#include "terra/gl.h"
#include "../tests/test_gl_util.h"

enum { RUNS = 5 };

int main(void) {
    terra_gl_context *ctx = NULL;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        fprintf(stderr, "bench_gl_edit: no headless OpenGL: %s\n", terra_last_error());
        return 0;
    }
    double frames[RUNS], rebuilt[RUNS];
    long sky = 0;
    int steps = 0, edits = 0;
    for (int k = 0; k < RUNS; k++) {
        const edit_flight r = fly_edits(40);
        if (!r.ok) {
            fprintf(stderr, "bench_gl_edit: %s\n", terra_last_error());
            return 1;
        }
        frames[k] = r.frames_to_drawn, rebuilt[k] = r.rebuilt_vs_touched;
        if (r.sky_max > sky) sky = r.sky_max;
        if (r.steps_to_collider > steps) steps = r.steps_to_collider;
        edits += r.edits;
    }
    bench_record("edit.frames_to_drawn", bench_median(frames, RUNS), "frames", RUNS, "median");
    bench_record("edit.frames_to_drawn_max", frames[RUNS - 1], "frames", RUNS, "max"); /* sorted by the median */
    bench_record("edit.rebuilt_vs_touched", bench_median(rebuilt, RUNS), "ratio", RUNS, "median");
    bench_record("edit.steps_to_collider", steps, "steps", RUNS, "max");
    bench_record("edit.hole_pixels_max", (double)sky, "px", edits, "max");
    terra_gl_context_destroy(ctx);
    return 0;
}
