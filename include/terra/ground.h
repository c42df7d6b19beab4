/* terra ground: what the ground is under a point, and where bodies can stand.
 *
 * Queries answer for the ground as drawn at the finest level: the level-0 lattice of the grid
 * (spacing tile0 / cells), each cell split along the same diagonal as the drawn mesh (from its
 * (0,0) corner to its (1,1) corner), so a query meets the very triangle a ray cast straight down
 * meets. They read the source directly (or a standing collider block, which holds the same
 * samples), so they answer whether or not a tile is standing there.
 *
 * The landscape may sit under a transform (translate, rotate about any axis, uniform scale):
 * queries then take world X and Z and answer in world space.
 *
 * Collider blocks: around every entity focus that asks for collision, blocks of
 * collider_cells × collider_cells level-0 cells stand within collider_radius, nearest first,
 * within the budget; the block under each such body (and, for a body whose velocity is given,
 * every block within the distance it covers over the next lookahead_s) is stood up the frame it is
 * missing, whatever the budget. Neighbouring blocks share their edge rows, and a block's surface is
 * exactly what terra_ground_height_at answers.
 */
/* Threads: the queries (height_at, normal_at, surface_at, query) do not change the ground, though they
 * take a non-const pointer: they may run on several threads at once, and alongside the const
 * functions, between updates. terra_ground_update, _set_source, _set_transform, _set_physics and
 * _destroy must not overlap any other call on the same ground. A query where no block stands samples
 * the source on the querying thread, so queries from several threads need a thread-safe source (see
 * source.h). Blocks and stats handed out stay valid until the next update. */
#ifndef TERRA_GROUND_H
#define TERRA_GROUND_H

#include "terra/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the landscape sits: world = translation + rotation · (scale · local). */
typedef struct terra_transform {
    terra_vec3 translation;
    double rotation[4]; /* unit quaternion (w, x, y, z); all zero = identity */
    double scale;       /* uniform, > 0; 0 = 1 */
} terra_transform;

/* Physical properties of a surface, for contacts. */
typedef struct terra_surface_physics {
    double friction;    /* Coulomb coefficient; default 0.8 */
    double restitution; /* 0..1; default 0.1 */
} terra_surface_physics;

typedef struct terra_ground_desc {
    const terra_source *source;
    terra_grid_desc grid;         /* the finest level's lattice: spacing tile0_size / cells */
    terra_transform transform;
    int collider_cells;           /* cells along a block side; 0 = 32 */
    double collider_radius;       /* metres from an entity focus; 0 = 160 */
    int max_blocks;               /* blocks held at once; 0 = 1024 */
    double budget_ms;             /* block building per frame (beyond the blocks under bodies); 0 = 2 */
    double lookahead_s;           /* a body with a velocity also gets, whatever the budget, every block
                                     within the distance it covers in this long (in any direction, a
                                     bounce may turn it); 0 = 0.1 s */
    double (*clock)(void *user);  /* seconds; NULL = monotonic clock */
    void *clock_user;
} terra_ground_desc;

typedef struct terra_ground terra_ground;

TERRA_API terra_status terra_ground_create(const terra_ground_desc *desc, terra_ground **out);
TERRA_API void terra_ground_destroy(terra_ground *g);

/* Replaces the source (a new function table, or one whose user data changed): every block is
 * stood again from it, nearest first, within the budget; queries answer from it at once. */
TERRA_API terra_status terra_ground_set_source(terra_ground *g, const terra_source *src);
/* The source changed inside region (x0, z0, x1, z1, source metres: an edit, edit.h): the blocks
 * over it are stood again as after terra_ground_set_source (the one under a body on the next update,
 * whatever the budget), and queries there answer from the source at once. */
TERRA_API terra_status terra_ground_invalidate(terra_ground *g, const double region[4]);
TERRA_API terra_status terra_ground_set_transform(terra_ground *g, const terra_transform *t);

/* ---- queries ------------------------------------------------------------------------------------
 * TERRA_E_INVALID for non-finite coordinates or coordinates past 2^40 lattice cells;
 * TERRA_E_NOT_FOUND when a tilted landscape has no ground under the point. */

typedef struct terra_ground_hit {
    double y;              /* world height */
    terra_vec3 normal;     /* world-space unit normal of the triangle met */
    terra_surface surface; /* the surface of the nearest sample (edges run midway between samples) */
    terra_status status;
} terra_ground_hit;

TERRA_API terra_status terra_ground_height_at(terra_ground *g, double x, double z, double *y);
TERRA_API terra_status terra_ground_normal_at(terra_ground *g, double x, double z, terra_vec3 *normal);
TERRA_API terra_status terra_ground_surface_at(terra_ground *g, double x, double z, terra_surface *surface);
/* All three for n points xz[2n]; each hit carries its own status. Returns TERRA_OK if all were. */
TERRA_API terra_status terra_ground_query(terra_ground *g, const double *xz, int n, terra_ground_hit *hits);

/* Per-surface physics; surfaces never set get the defaults. */
TERRA_API void terra_ground_set_physics(terra_ground *g, terra_surface id, terra_surface_physics p);
TERRA_API terra_surface_physics terra_ground_physics(const terra_ground *g, terra_surface id);

/* ---- collider blocks ------------------------------------------------------------------------------ */

/* A block: (cells+1)² heights and surfaces of the level-0 lattice, row-major (z rows of x),
 * starting at lattice point (ix0, iz0) in landscape-local coordinates. Triangles: every cell split
 * from (i, j) to (i+1, j+1), the same as the drawn mesh (terra_grid_indices(cells) gives them). */
typedef struct terra_collider_block {
    int32_t bx, bz;          /* block coordinates */
    int64_t ix0, iz0;        /* first lattice point */
    int cells;
    double spacing;          /* metres between samples (local) */
    const float *heights;    /* local heights */
    const terra_surface *surfaces;
    uint32_t version;        /* changes when the block is stood again (new source) */
    uint64_t stood_frame;    /* the update (counted from 1) in which it was stood up */
} terra_collider_block;

typedef struct terra_ground_stats {
    int blocks_standing;
    int blocks_built;        /* this frame */
    int blocks_forced;       /* built this frame beyond the budget (a body over no block) */
    int blocks_released;     /* this frame */
    double build_ms;         /* this frame */
    double build_ms_per_block; /* mean so far */
} terra_ground_stats;

/* Stands and lets go of blocks around the entity foci that ask for collision. */
TERRA_API terra_status terra_ground_update(terra_ground *g, const terra_focus_info *foci, int count);
/* Whether the collider under a world point stands; the block itself, or NULL. */
TERRA_API bool terra_ground_is_ready_at(const terra_ground *g, double x, double z);
TERRA_API const terra_collider_block *terra_ground_block_at(const terra_ground *g, double x, double z);
/* Updates run so far. */
TERRA_API uint64_t terra_ground_frame(const terra_ground *g);
/* The standing blocks (valid until the next update). */
TERRA_API int terra_ground_blocks(const terra_ground *g, const terra_collider_block **blocks);
TERRA_API const terra_ground_stats *terra_ground_get_stats(const terra_ground *g);

/* World position of a block's lattice point (i, j) (transform applied). */
TERRA_API terra_vec3 terra_ground_block_point(const terra_ground *g, const terra_collider_block *b, int i, int j);

#ifdef __cplusplus
}
#endif
#endif
