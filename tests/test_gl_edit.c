/* Edits while the ground is drawn in real time (edit.h, terra_stream_invalidate): a pit dug in view
 * is drawn at every level within a few frames, with only the tiles over it made again; the body
 * standing where it is dug has its new collider before the next physics step; then an edit every
 * frame for 40 frames, and no frame shows a hole (each edit shows whole or not yet). */
#include "check.h"
#include "test_gl_util.h"

static void test_edits_in_flight(void) {
    const edit_flight r = fly_edits(40);
    CHECK(r.ok, "the flight failed: %s", terra_last_error());
    printf("  edit drawn after %d frames, %.2f tiles made per tile over it, collider after %d steps, %d edits, "
           "worst frame %ld sky pixels\n",
           r.frames_to_drawn, r.rebuilt_vs_touched, r.steps_to_collider, r.edits, r.sky_max);
    CHECK(r.frames_to_drawn > 0 && r.frames_to_drawn <= 30, "the pit drawn after %d frames", r.frames_to_drawn);
    CHECK(r.rebuilt_vs_touched >= 1.0 && r.rebuilt_vs_touched <= 1.5, "%.2f tiles made per tile touched",
          r.rebuilt_vs_touched);
    CHECK(r.steps_to_collider == 0, "the collider under the body waited %d steps", r.steps_to_collider);
    CHECK(r.edits > 30, "%d edits landed", r.edits);
    CHECK(r.sky_max == 0, "%ld sky pixels on a frame while edits landed", r.sky_max);
}

int main(void) {
    terra_gl_context *ctx = NULL;
    if (terra_gl_context_create_headless(&ctx) != TERRA_OK) {
        printf("SKIP: no headless OpenGL: %s\n", terra_last_error());
        return 77;
    }
    RUN(test_edits_in_flight);
    terra_gl_context_destroy(ctx);
    return finish();
}
