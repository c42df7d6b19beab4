/* terra select: which quadtree tiles to draw for an eye (CDLOD, Strugar 2010).
 *
 * Level L's range is ranges[L]: range0 × ratio^L, or derived from the levels' errors and the
 * screen-space error the view allows (level_error below). The walk starts from the coarsest tiles
 * laid around the eye (the world has no edge) and descends by the true 3-D distance from the eye
 * to each tile's bounding box (its rectangle × the source's height range over it):
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
    int max_tiles;             /* capacity of a frame's output, up to 2^20; 0 = as many as the ranges
                                  can select, from 4096 to 65536 */
    double bounds[4];          /* world rectangle min x, min z, max x, max z; all zero = no edge.
                                  Tiles wholly outside are never selected. */
    int range_cache_size;      /* sibling groups whose height ranges are remembered (power of two,
                                  4 to 2^24; 4-way associative); 0 = 4096 */
    /* ---- screen-space error: what the screen can resolve decides the detail ----
     * A tile of geometric error e metres (how far it departs from the finest ground) seen from d
     * metres, the true 3-D distance from the eye to its box (the eye's height counted), spans
     * e * view_height_px / (2 tan(view_fov_y_rad / 2)) / d pixels: its projected error. */
    double max_sse_px;         /* tau: the projected error a drawn tile may have; 0 = 2 pixels */
    int view_height_px;        /* the viewport's height; 0 = 1080 */
    double view_fov_y_rad;     /* its vertical field of view; 0 = 60 degrees */
    /* Per tile (an archive's index gives it before any tile is loaded): the walk refines a tile while
     * its projected error exceeds tau, into those of its children that exist, and draws it otherwise
     * or at level 0. Ranges then only bound how far the coarsest tiles are laid around the eye, and
     * tiles are drawn unmorphed (morph start = morph end = 0). tile_error returns the tile's error in
     * metres, or a negative value where the tile does not exist (nothing is drawn there). It runs on
     * the thread running the selection, without allocating; NULL: ranges decide (CDLOD). */
    float (*tile_error)(void *user, terra_tile_key key);
    void *tile_error_user;
    /* Per level, for CDLOD over a source (grid tiles, morphed): level L's error in metres
     * (terra_grid_level_errors measures it). With level_error[0] > 0 and range0, range_ratio and
     * ranges left 0, each level's range is derived from tau and the view: level L hands over to
     * level L+1 where L+1's error projects to tau, but no sooner than the morph margin allows
     * (range(L) - range(L-1) >= a level-L tile's diagonal / morph_start_ratio, the crack rule level
     * by level; the ground is then finer than tau asks); the coarsest reaches twice as far as the
     * level before. A morphing vertex counts as departing by the blend of its level's and its
     * parent level's errors in the morph's proportion, whose projection over distance is largest at
     * an end of the morph: so every tile drawn has a projected error of at most tau but those of
     * level 0 (the finest there is) nearer than its range. stats.sse_px_max reports the same
     * measure. A derived range is capped at TERRA_SELECT_MAX_DERIVED_RANGE_TILES of its level's
     * tiles (below): where the view asks for more, the next level takes over sooner and its error
     * projects above tau there; terra_select_derived_capped says where. */
    float level_error[TERRA_TILE_MAX_LEVEL + 1];
    /* Each level's range in metres, increasing; all 0: range0 x range_ratio^L (or derived as above).
     * Resolving fills them in (and range0 = ranges[0], range_ratio = ranges[1] / ranges[0]). */
    double ranges[TERRA_TILE_MAX_LEVEL + 1];
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
    double sse_px_max;            /* the largest projected error of a drawn tile above level 0, pixels
                                     (tile_error or level_error given; else 0): level 0 is the finest
                                     there is, drawn however near */
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
 * of them (the defaults give about 8.5). A derived range is at most
 * TERRA_SELECT_MAX_DERIVED_RANGE_TILES of its level's tiles, or the morph margin's least where that is
 * farther (a morph_start_ratio under about 0.09) (the default world's are 3 to 25 tiles at
 * the defaults, 540 and 1080 pixels high), so however much a view asks for (a tiny tau, a tall
 * viewport, a narrow field of view), a level stays a ring of a few thousand tiles at most: past that
 * the next level takes over, its error projecting above tau. */
#define TERRA_SELECT_MAX_SIDE 17592186044416.0
#define TERRA_SELECT_MAX_RANGE_TILES 64
#define TERRA_SELECT_MAX_DERIVED_RANGE_TILES 32
#define TERRA_SELECT_MAX_TILES (1 << 20) /* max_tiles at most */

/* Where a resolved description's ranges stop short of what tau asks of its level errors (derived
 * ranges capped at TERRA_SELECT_MAX_DERIVED_RANGE_TILES): the finest such level, or -1 where none
 * does; *sse_px (may be NULL) is then the largest error in pixels a level's successor projects
 * from that level's range, what the view gets instead of tau there. */
TERRA_API int terra_select_derived_capped(const terra_select_desc *resolved, double *sse_px);

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

/* The projected error of `error_m` metres at `distance_m` from the eye, in pixels, for the
 * selection's view (see max_sse_px). */
TERRA_API double terra_select_sse_px(const terra_select *s, double error_m, double distance_m);

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
