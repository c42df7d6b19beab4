/* terra edit: ground people change at run time, as a layer over any source.
 *
 * An edit layer is a source: its base's heights and surfaces with edits applied in order. Each edit
 * is a brush over a shape with a falloff: full strength inside the shape, fading smoothly to none
 * `falloff` metres outside it, so an edit never leaves a step (nor a hole) in the ground.
 *
 *   raise / lower   by `amount` metres
 *   flatten         toward the height `amount`
 *   smooth          toward the mean of the base ground around each point (4 points `falloff / 2`
 *                   away, at least one metre), by the fraction `amount` (0..1); edits before it are
 *                   kept (it smooths the base's relief, not them)
 *   dig             down to the floor height `amount`: ground above the floor is cut to it, ground
 *                   below it stays (a pit, a foundation, a trench)
 *   paint           the surface `surface` where the weight is at least one half; heights unchanged
 * Shapes: a cylinder (radius), a box (half sizes radius along its x, half_z along its z, turned by
 * yaw radians from +x toward +z), a pit (a cylinder whose dig floor is the bottom of a sphere of
 * that radius: `amount` at its centre, rising to amount + radius at its rim; other brushes treat
 * it as a cylinder).
 *
 * Ranges stay conservative: each edit over a rectangle widens the base's range by what it can do
 * there (raise its amount up, dig down to its floor, flatten to its height, smooth by the base's
 * own range around); over many edits, by what the edits over any one point can do together.
 *
 * Cost: edits are indexed by region, so a query (a point, a grid, a range) costs its base plus the
 * edits near it, whatever the number of edits elsewhere; heights are those of replaying every edit
 * in order. What one place can take is capped: an edit that would bring more than
 * TERRA_EDIT_MAX_OVERLAP edits (a smooth counting 4) to some point's index cells is refused
 * (TERRA_E_CAPACITY), as every query there replays them all.
 *
 * The journal: edits are appended to a file as they are applied (a header, then one fixed-size
 * record per edit with its CRC-32C), and replayed on create, so two processes with the same base
 * and journal give bit-identical heights everywhere. A last record cut short or not matching its
 * CRC (a write torn by a crash) is dropped with a warning and cut from the file; a damaged record
 * before the last, or one that terra_edit_apply would refuse, is an error naming the file, the
 * edit's number and its byte, and nothing is replayed. Appends and replays that may cut take the
 * file's exclusive lock (fcntl), read-only replays the shared one: one process's replay never
 * takes another's append in progress for a torn record. Each edit reaches the operating system as it is applied
 * (a process that dies loses none); the file is synced to the disk when the layer is destroyed (a
 * machine that loses power after that loses none: not per edit, which could stall a frame that
 * paints). A layer that runs out of memory taking an edit its journal already holds refuses every
 * later edit (TERRA_E_NOMEM) until it is opened again, which replays it.
 */
/* Threads: the layer's source may be called from any number of threads at once (source.h), also
 * while terra_edit_apply runs on another: each call sees the edits before or after it, whole.
 * terra_edit_layer_destroy must not overlap any use. */
#ifndef TERRA_EDIT_H
#define TERRA_EDIT_H

#include "terra/source.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum terra_brush {
    TERRA_BRUSH_RAISE,
    TERRA_BRUSH_LOWER,
    TERRA_BRUSH_FLATTEN,
    TERRA_BRUSH_SMOOTH,
    TERRA_BRUSH_DIG,
    TERRA_BRUSH_PAINT,
} terra_brush;

typedef enum terra_shape { TERRA_SHAPE_CYLINDER, TERRA_SHAPE_BOX, TERRA_SHAPE_PIT } terra_shape;

typedef struct terra_edit {
    terra_brush brush;
    terra_shape shape;
    double x, z;          /* the shape's centre, metres */
    double radius;        /* cylinder and pit radius; box half size along its x; > 0 */
    double half_z;        /* box half size along its z (0: radius) */
    double yaw;           /* box turn, radians */
    double falloff;       /* metres outside the shape over which the edit fades out; >= 0 */
    double amount;        /* metres (raise, lower: >= 0), a height (flatten, dig), a fraction (smooth) */
    terra_surface surface; /* paint: 1..255 (0 names no surface) */
} terra_edit;

#define TERRA_EDIT_MAX_EXTENT 1e7 /* metres: |x|, |z|, radius, half_z, falloff at most */
#define TERRA_EDIT_MAX_AMOUNT 1e5 /* |amount| at most */
/* What one place takes: the edits a point query meets (those listed in its index cells), a smooth
 * counting 4 (it samples the base at four points around each point) */
#define TERRA_EDIT_MAX_OVERLAP 256

typedef struct terra_edit_layer_desc {
    const terra_source *base; /* required; must outlive the layer; smooth needs its height_at */
    const char *journal;      /* the journal file (created if missing), or NULL: edits in memory only */
    bool read_only;           /* replay the journal (which must exist) without ever writing it: a torn
                                 last edit is left out, not cut; terra_edit_apply refuses */
} terra_edit_layer_desc;

typedef struct terra_edit_layer terra_edit_layer;

/* Creates the layer and replays its journal. */
TERRA_API terra_status terra_edit_layer_create(const terra_edit_layer_desc *desc, terra_edit_layer **out);
TERRA_API void terra_edit_layer_destroy(terra_edit_layer *l);
/* The edited ground; owned by the layer. */
TERRA_API terra_source *terra_edit_layer_source(terra_edit_layer *l);
/* Checks an edit (TERRA_E_INVALID naming the field; TERRA_E_CAPACITY past the overlap cap), appends
 * it to the journal (TERRA_E_IO), and applies it. region (may be NULL): the rectangle x0, z0, x1, z1 outside which no height or surface
 * changed: what a streamer and colliders stand again. */
TERRA_API terra_status terra_edit_apply(terra_edit_layer *l, const terra_edit *e, double region[4]);
/* Edits applied (replayed ones included). */
TERRA_API size_t terra_edit_count(const terra_edit_layer *l);
/* The rectangle an edit can change (see terra_edit_apply). */
TERRA_API void terra_edit_bounds(const terra_edit *e, double out[4]);

#ifdef __cplusplus
}
#endif
#endif
