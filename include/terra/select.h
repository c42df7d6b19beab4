/* terra select: which quadtree tiles to draw for an eye (CDLOD, Strugar 2010).
 *
 * Level L's range is range0 × ratio^L. The walk starts from the coarsest tiles laid around the
 * eye (the world has no edge) and descends by the true 3-D distance from the eye to each tile's
 * bounding box (its rectangle × the source's height range over it):
 *  - a tile beyond its level's range is left to its parent;
 *  - a tile in range but beyond the next finer range is drawn at its level;
 *  - a nearer tile tries its four children, and a child out of even its own range is drawn at its
 *    level, fully morphed onto its parent's grid;
 *  - a tile outside the frustum is skipped, and a subtree wholly inside skips further tests.
 * Each level morphs from morph_start to morph_end (= its range) by vertex distance.
 *
 * A selection object is created once; a frame's selection allocates nothing.
 */
/* Threads: a terra_select is used by one thread at a time: terra_select_run rewrites its range cache,
 * output buffer and stats and asks the source's height_range on the calling thread, and
 * terra_select_set_source clears the cache. terra_select_get_desc, _range, _morph, _tile_side and
 * terra_select_origin_shift read only what creation fixed: any thread may call them while the object
 * lives, even during a run. The tiles and stats a run hands out change with the next run. */
#ifndef TERRA_SELECT_H
#define TERRA_SELECT_H

#include "terra/grid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_select_desc {
    terra_grid_desc grid;      /* tile0_size and cells (see grid.h) */
    int levels;                /* number of levels, 1..24; 0 = 12 */
    double range0;             /* range of level 0 in metres; 0 = 1.5 × the smallest valid */
    double range_ratio;        /* ratio of successive ranges, > 1; 0 = 2 */
    double morph_start_ratio;  /* fraction of each level's band [previous range, range] before its
                                  morph starts, in (0, 1); 0 = 0.5 */
    int max_tiles;             /* capacity of a frame's output, up to 2^20; 0 = 4096 */
    double bounds[4];          /* world rectangle min x, min z, max x, max z; all zero = no edge.
                                  Tiles wholly outside are never selected. */
    int range_cache_size;      /* sibling groups whose height ranges are remembered (power of two,
                                  4 to 2^24; 4-way associative); 0 = 4096 */
} terra_select_desc;

/* One tile to draw. */
typedef struct terra_selected_tile {
    terra_tile_key key;
    int level;
    float morph_start, morph_end; /* metres from the eye */
    terra_box3 box;               /* world bounding box */
} terra_selected_tile;

typedef struct terra_select_stats {
    int visited;                  /* tiles whose box was tested */
    int drawn;                    /* tiles output */
    int culled;                   /* subtrees dropped by the frustum */
    int range_misses;             /* sibling groups whose ranges were asked of the source */
    int crack_risk;               /* subdivided tiles too steep for the morph margin (see below) */
    int per_level[TERRA_TILE_MAX_LEVEL + 1];
} terra_select_stats;

typedef struct terra_select terra_select;

/* Checks options against the rules and fills in defaults; TERRA_E_INVALID says which rule broke.
 * The crack rule: morph_start_ratio × (range_ratio − 1) × range0 must be at least twice the
 * diagonal of a level-0 tile (so range0 always clears twice that diagonal), or a neighbour can
 * change level before a tile has finished morphing and a crack opens.
 * With heights the exact condition is stricter: the 3-D diagonal of every subdivided level-(L+1)
 * tile box must fit in the morph margin of level L+1, morph_start(L+1) - range(L). The default
 * range0 leaves room for slopes near 1 (the default world, tested crack-free); a run counts the
 * subdivided tiles whose box is taller than that in terra_select_stats.crack_risk (boxes are
 * conservative, so this counts risks, not cracks). */
TERRA_API terra_status terra_select_desc_resolve(const terra_select_desc *in, terra_select_desc *out);
/* The size rules, which keep every loop bounded and every coordinate exact: the coarsest tiles,
 * tile0_size × 2^(levels − 1), are at most TERRA_SELECT_MAX_SIDE (2^44 m) on a side, and the
 * coarsest level's range, range0 × range_ratio^(levels − 1), is at most TERRA_SELECT_MAX_RANGE_TILES
 * of them (the defaults give about 8.5). */
#define TERRA_SELECT_MAX_SIDE 17592186044416.0
#define TERRA_SELECT_MAX_RANGE_TILES 64
#define TERRA_SELECT_MAX_TILES (1 << 20) /* max_tiles at most */

/* `src` must outlive the selection object. */
TERRA_API terra_status terra_select_create(const terra_select_desc *desc, const terra_source *src, terra_select **out);
TERRA_API void terra_select_destroy(terra_select *s);
/* Selects over another source from now on (forgets the height ranges it had). */
TERRA_API void terra_select_set_source(terra_select *s, const terra_source *src);
TERRA_API const terra_select_desc *terra_select_get_desc(const terra_select *s);

/* Selects the tiles for an eye in world doubles. `frustum` may be NULL (no culling). On success
 * *tiles points into the object's buffer (valid until the next run) and *count is set. */
TERRA_API terra_status terra_select_run(terra_select *s, terra_vec3 eye, const terra_frustum *frustum,
                              const terra_selected_tile **tiles, int *count);
TERRA_API const terra_select_stats *terra_select_get_stats(const terra_select *s);

/* Range, morph start and morph end of a level. */
TERRA_API double terra_select_range(const terra_select *s, int level);
TERRA_API void terra_select_morph(const terra_select *s, int level, float *start, float *end);
/* Side of a tile at a level. */
TERRA_API double terra_select_tile_side(const terra_select *s, int level);

/* ---- floating origin ------------------------------------------------------------------------
 * Far from the origin, float positions tremble. Keep the camera near a floating origin: when the
 * camera (relative to the current origin) has gone past threshold_m horizontally (0 = 1000 m),
 * this returns true and the shift to add to the origin (and subtract from the camera), a whole
 * multiple of the largest tile side not above the threshold, so tile edges stay on whole numbers
 * relative to the new origin. Selection itself takes world doubles and world keys, so a shift
 * changes nothing it selects. */
TERRA_API bool terra_select_origin_shift(const terra_select *s, terra_vec3 camera_local, double threshold_m, terra_vec3 *shift);

#ifdef __cplusplus
}
#endif
#endif
