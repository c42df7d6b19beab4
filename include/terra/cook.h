/* terra cook: elevation rasters and scenery meshes into a pyramid of irregular (TIN) tiles.
 *
 * The ground is kept as an irregular mesh on a plane, cut along a quadtree of tiles:
 *  - the finest tiles come from the sources (rasters: a greedy-insertion TIN per tile whose border
 *    vertices come from a 1-D insertion over each edge, so neighbours share them; meshes: triangles
 *    cut along the tile grid and welded, nothing resampled);
 *  - each coarser tile is its four children merged (the cross between them unlocked) and
 *    edge-collapsed until its level's error; every vertex and edge on its outer border is kept,
 *    so two neighbours at any two levels share their border exactly: nothing to stitch;
 *  - a hole stays a hole (no triangle is added), a wall (two heights over one line) is laid once;
 *  - every tile's stated geometric error is measured (rasters: the largest vertical distance from
 *    the tile to the samples under it; meshes: from the finest mesh, plus the finest mesh's own
 *    measured error against the source), and its longest edge too.
 *
 * The plane. Positions are (x, y) in plane units and z in metres. A tile at depth d (0 = the
 * finest) and column, row (tx, ty) covers [tx * S * 2^d, (tx + 1) * S * 2^d] in x and the same in y,
 * S = terra_cook_grid.tile_units. Plane units are chosen so that tile edges are exact in doubles
 * (a raster's sample step, or metres for meshes), so "on the border" is an exact comparison.
 *  - local frame: x = grid.origin[0] + x_units * grid.unit[0] metres east (scenery x), the plane's
 *    y = scenery z: grid.origin[1] + y_units * grid.unit[1]. Archive keys: level = d, x = tx, y = ty.
 *  - geographic frame: x in units of grid.unit[0] degrees east from 180 W, y in units of
 *    grid.unit[1] degrees north from 90 S (origin = -180, -90); S * unit = 180 / 2^zoom_finest.
 *    Archive keys: level = zoom_finest - d, x = tx, y = ty (TMS: row 0 in the south).
 * Triangles turn counter-clockwise seen from above in the plane (x right, y up); the encoder turns
 * them into each frame's convention (docs/FORMAT.md).
 */
/* Threads: terra_cook_pyramid calls make_finest, simplify, emit, distance and window on pool workers,
 * several at once and for neighbouring tiles at the same time: each must be safe to call
 * concurrently with itself and the others. progress runs on the calling thread, which waits for the
 * whole pyramid. The pyramid's jobs hold every worker of the pool (up to 64) until it is done, so a
 * shared pool runs nothing else meanwhile; do not call it from a job of that pool (with one worker it
 * never returns). terra_cook_simplify_plane, the vertical distances, encoding and the mesh and key
 * functions keep no state. */
#ifndef TERRA_COOK_H
#define TERRA_COOK_H

#include "terra/archive.h"
#include "terra/pool.h"
#include "terra/qmesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the plane and its tiles ----------------------------------------------------------------- */

typedef struct terra_cook_grid {
    terra_frame frame;
    double origin[2];   /* local: metres (scenery x, z) of plane (0, 0); geographic: -180, -90 degrees */
    double unit[2];     /* local: metres per plane unit in x and y; geographic: degrees per unit */
    double tile_units;  /* S: side of a finest tile in plane units (an integer, or a power of two) */
    int depth;          /* the coarsest depth; geographic: = the finest zoom (roots at depth = zoom_finest) */
} terra_cook_grid;

/* The archive key of tile (d, tx, ty), and back (false if key is not on the grid's levels). */
TERRA_API terra_tile_key terra_cook_key(const terra_cook_grid *g, int d, int32_t tx, int32_t ty);
TERRA_API bool terra_cook_key_tile(const terra_cook_grid *g, terra_tile_key key, int *d, int32_t *tx, int32_t *ty);
/* A tile's corners in plane units: x0, y0, x1, y1. */
TERRA_API void terra_cook_tile_rect(const terra_cook_grid *g, int d, int32_t tx, int32_t ty, double rect[4]);

/* ---- one tile's mesh ------------------------------------------------------------------------- */

typedef struct terra_cook_mesh {
    uint32_t vertex_count, triangle_count;
    double *xy;          /* 2 per vertex, plane units */
    float *z;            /* metres */
    float *normal;       /* 3 per vertex, unit, in (plane x, plane y, up) axes; NULL: computed from the mesh */
    uint16_t *material;  /* one id per vertex; NULL: none */
    uint32_t *tri;       /* 3 per triangle, counter-clockwise in the plane seen from above */
    uint32_t vertex_capacity, triangle_capacity; /* of the arrays above (terra_cook_mesh_reserve) */
} terra_cook_mesh;

/* Grows the arrays to hold at least `vertices` and `triangles` (keeps contents; allocates normal
 * and material arrays only if with_normals / with_materials). TERRA_E_NOMEM. */
TERRA_API terra_status terra_cook_mesh_reserve(terra_cook_mesh *m, uint32_t vertices, uint32_t triangles, bool with_normals,
                                     bool with_materials);
TERRA_API void terra_cook_mesh_free(terra_cook_mesh *m);

/* ---- the pyramid ----------------------------------------------------------------------------- */

/* Makes the finest tile (tx, ty) into *out (an empty mesh the callee fills; the pyramid frees it)
 * and its largest vertical error against the source into *error (0 for meshes kept as they are). */
typedef terra_status (*terra_cook_finest_fn)(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out,
                                             double *error);

/* Heights of the plane's samples over a window: heights[j * width + i] at plane point
 * (x0 + i * stride, y0 + j * stride), NaN where there is no ground. stride 1: every sample; more:
 * a window too wide to hold whole, thinned (the simplifier's cost is then an estimate). */
typedef struct terra_cook_samples {
    const float *heights;
    int64_t x0, y0;
    int width, height;
    int stride;
} terra_cook_samples;

/* Edge collapse with locked borders: simplifies the triangles `tri` (3 * triangle_count indices
 * over positions pos, 3 floats a vertex, metres) and writes the kept ones to out_tri (capacity
 * 3 * triangle_count); vertices on a border of the mesh (an edge used by one triangle) never move
 * or go. Collapses until the next one would exceed target_error (metres, the simplifier's own
 * measure). xy: the same vertices' plane positions (2 doubles a vertex), on which the pyramid
 * judges whether a triangle turned over or lost its area: pos rounds to floats, so lattice points
 * in a line can look like a thin triangle there. rect: the tile's bounds in xy (x0, y0, x1, y1), or
 * NULL; a simplifier may then take border vertices off those lines (on a hole rim or the edge of
 * the data) where the rim runs straight through them, so the ground covered stays the same.
 * samples: the source under the tile where there is one (the error is then measured against it;
 * may be NULL). Returns the number of triangles written. */
typedef size_t (*terra_cook_simplify_fn)(void *user, const double *xy, const float *pos, uint32_t vertex_count,
                                         const uint32_t *tri, size_t triangle_count, double target_error,
                                         const double *rect, const terra_cook_samples *samples, uint32_t *out_tri);
/* The ground's own edge collapse (user unused): a vertex goes into a neighbour only if every triangle
 * of its new fan keeps an area in the plane (judged on xy, exactly as the pyramid does; z up),
 * cheapest first by the largest vertical distance of the new fan from the samples under it (with
 * samples: exact against them), or else from every input vertex under it and from the surface it
 * replaces at old/new edge crossings (target_error: metres, vertical), never a corner of a
 * triangle with no area in the plane (a wall) nor a border vertex, except, given rect, one inside
 * it whose rim runs straight on both sides (it goes along the rim). Deterministic. On
 * ground, meshoptimizer's simplifier (terra_cook_simplify_meshopt) folds triangles in the plane on
 * steep slopes (it guards normals in three dimensions), and the pyramid must then refuse the try. */
TERRA_API size_t terra_cook_simplify_plane(void *user, const double *xy, const float *pos, uint32_t vertex_count,
                                 const uint32_t *tri, size_t triangle_count, double target_error,
                                 const double *rect, const terra_cook_samples *samples, uint32_t *out_tri);

/* A finished tile: its mesh (only valid during the call), the stated error (measured), the
 * longest edge (metres). Called once per tile, on any thread, after its children's calls. */
typedef struct terra_cook_tile {
    int depth;
    int32_t tx, ty;
    const terra_cook_mesh *mesh;
    double geometric_error;
    double longest_edge;
    double min_height, max_height;
    const int32_t *finest;          /* tx, ty pairs of the finest tiles under it (itself at depth 0) */
    size_t finest_count;
    /* A coarser tile states no less than any of its children (selection refines a tile whose error
     * is too large for the view into its children, so theirs must be no larger; 3D Tiles and
     * Cesium's terrain levels keep the same order): children_stated is the largest error they
     * stated (0 at depth 0); *stated holds max(geometric_error, children_stated) and emit writes
     * there what it states for this tile, at least that, for its parent. */
    double children_stated;
    double *stated;
} terra_cook_tile;
typedef terra_status (*terra_cook_emit_fn)(void *user, const terra_cook_tile *tile);

/* Fills out[j * w + i] with the height of plane sample (x0 + i, y0 + j), i < w, j < h: metres, NaN
 * for no-data and outside the data. Called from the pyramid's workers, several at once, for
 * overlapping windows: a sample must come back the same every time (neighbouring tiles then agree
 * on their shared edge without seeing each other). */
typedef terra_status (*terra_cook_window_fn)(void *user, const terra_cook_grid *g, int64_t x0, int64_t y0, int w,
                                             int h, float *out);

/* The largest vertical distance from `mesh` to the source over the finest tiles listed (tx, ty
 * pairs): every source point under a triangle, or up to `slack` plane units outside one, against
 * the triangle's plane; once the distance passes `limit`, some distance past it may come back. */
typedef terra_status (*terra_cook_distance_fn)(void *user, const terra_cook_mesh *mesh, const int32_t *finest,
                                               size_t finest_count, double slack, double limit, double *out);

typedef struct terra_cook_root terra_cook_root; /* below */

typedef struct terra_cook_pyramid_desc {
    const terra_cook_grid *grid;
    const int32_t *finest;          /* tx, ty pairs of the finest tiles that hold ground */
    size_t finest_count;
    double max_error;               /* bound of the finest level (m); depth d is max_error * 2^d */
    terra_cook_finest_fn make_finest;
    void *finest_user;
    terra_cook_simplify_fn simplify;
    void *simplify_user;
    terra_cook_emit_fn emit;
    void *emit_user;
    /* How coarser tiles are measured: against the source (a raster's samples), or where NULL,
     * against the finest meshes, plus the largest error the finest state. */
    terra_cook_distance_fn distance;
    void *distance_user;
    /* The source's samples under a coarser tile's ground, for the simplifier (may be NULL: none);
     * ground wider than window_max samples gets every 2nd, 4th... sample. */
    terra_cook_window_fn window;
    void *window_user;
    int64_t window_max;
    terra_pool *pool;               /* NULL: one of `threads` workers for the call */
    int threads;                    /* 0 = terra_default_threads() */
    /* Progress: tiles done of the total (every tile of every depth), called on the calling thread
     * (may be NULL). */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    /* One part of the pyramid (a round of a cook shared by several processes, terra_cook_split_plan):
     * part_top > 0: only the tiles under the roots (tiles of depth part_top) that `want` accepts
     * (NULL: every root) are built, up to and including the roots, and each built root is handed to
     * root_done instead of its parent being built. part_bottom > 0: the tiles of that depth are not
     * built but come from load_root, and only the depths above are built (part_top 0: up to
     * grid->depth). A split pyramid builds the same tiles as a whole one; it needs `distance` (the
     * measures are against the source, never against finest meshes a part does not hold). */
    int part_bottom, part_top;
    bool (*want)(void *user, int32_t tx, int32_t ty);
    terra_status (*load_root)(void *user, int32_t tx, int32_t ty, terra_cook_root *out);
    terra_status (*root_done)(void *user, const terra_cook_root *root);
    void *part_user;
} terra_cook_pyramid_desc;

/* A tile that ends one part of the pyramid and starts the next: its mesh exactly as built (not as
 * encoded), its stated error, the largest finest error under it and the finest tiles with ground
 * under it. load_root fills one (mesh grown with terra_cook_mesh_reserve, finest with terra_alloc:
 * the pyramid takes both over); root_done's is only valid during the call. */
struct terra_cook_root {
    int32_t tx, ty;
    terra_cook_mesh mesh;
    double error, finest_error;
    double stated;                  /* what emit stated for it (terra_cook_tile.stated) */
    int32_t *finest;                /* tx, ty pairs */
    size_t finest_count;
};

typedef struct terra_cook_level_stats {
    uint64_t tiles, vertices, triangles;
    double max_error;               /* the largest stated error at this depth */
} terra_cook_level_stats;

typedef struct terra_cook_pyramid_stats {
    terra_cook_level_stats level[32]; /* by depth */
    size_t peak_bytes;              /* the most mesh memory the pyramid held at once */
} terra_cook_pyramid_stats;

/* Builds every tile from the finest up to grid->depth, emitting each once (a tile with no triangle,
 * all holes, is not emitted). Memory stays bounded:
 * a tile's children are dropped once it is built (the finest meshes its error is measured against
 * are kept only while an ancestor still needs them). */
TERRA_API terra_status terra_cook_pyramid(const terra_cook_pyramid_desc *desc, terra_cook_pyramid_stats *stats);

/* The largest vertical distance from the surfaces `fine` (n meshes) to `coarse`, over every
 * fine vertex and every crossing of a fine edge with a coarse edge, where coarse covers the point
 * (points coarse leaves uncovered are counted in *uncovered, may be NULL). Triangles with no area
 * in the plane (walls) are skipped. */
TERRA_API double terra_cook_vertical_distance(const terra_cook_mesh *coarse, const terra_cook_mesh *const *fine, int n,
                                    size_t *uncovered);
/* The same, stopping at the first distance found over `limit` (returned: some distance > limit,
 * not the largest): enough to refuse a mesh that cannot fit. Both return +INFINITY when out of
 * memory. */
TERRA_API double terra_cook_vertical_distance_within(const terra_cook_mesh *coarse, const terra_cook_mesh *const *fine, int n,
                                           double limit, size_t *uncovered);

/* ---- one cook shared by several processes ---------------------------------------------------
 * The pyramid is cut into rounds of subtrees: a round builds the tiles of depths bottom+1 .. top
 * (the first round from the finest) under each of its roots (tiles of depth top), every root on
 * one process; a next round would start from those roots (the stages and part files take any
 * number; the planner makes one, as a higher depth has fewer roots than the one below). What is
 * left over the last round's roots is built by one process, which merges every part into the
 * archive. */

/* Where source samples lie: a rectangle in plane units (x0, y0, x1, y1) holding `samples` of them,
 * evenly. */
typedef struct terra_cook_footprint {
    double rect[4];
    uint64_t samples;
} terra_cook_footprint;

#define TERRA_COOK_SPLIT_MAX_ROUNDS 8

typedef struct terra_cook_split_round {
    int bottom, top;                /* depths: built are bottom + 1 .. top (the first round: 0 .. top) */
    size_t root_count;
    int32_t *roots;                 /* tx, ty pairs of depth `top`, Morton order */
    uint64_t *work;                 /* source samples under each root */
    int32_t *owner;                 /* the process that builds each */
} terra_cook_split_round;

typedef struct terra_cook_split_plan {
    int ranks;
    int round_count;
    terra_cook_split_round round[TERRA_COOK_SPLIT_MAX_ROUNDS];
    int top_bottom;                 /* the last part: depths top_bottom + 1 .. grid->depth, on process 0
                                       (top_bottom = grid->depth: nothing left; no rounds: the whole
                                       pyramid there) */
    double imbalance;               /* the first round's largest work per process over the mean */
} terra_cook_split_plan;

/* Plans `ranks` processes over the finest tiles (as the pyramid takes them) of a grid, their work
 * weighed by the source samples under each root (each footprint spread evenly over its rectangle):
 * one round, at the highest depth whose roots share out within 5% of the mean (largest work first,
 * each to the least loaded process) or, failing that, the one that shares out best; no round for
 * one process or fewer roots than processes at every depth. Deterministic. *out: free with
 * terra_cook_split_plan_free. TERRA_E_INVALID, TERRA_E_NOMEM. */
TERRA_API terra_status terra_cook_split_plan_make(const terra_cook_grid *g, const int32_t *finest, size_t finest_count,
                                        const terra_cook_footprint *inputs, size_t input_count, int ranks,
                                        terra_cook_split_plan *out);
TERRA_API void terra_cook_split_plan_free(terra_cook_split_plan *p);

/* A part file: one round's root and every tile of its subtree that round built (stored as the
 * archive will hold them), stamped with the fingerprint of the cook (inputs, options, plan) so a
 * rerun reuses only what the same cook made. Little-endian, a CRC-32C at the end. */
typedef struct terra_cook_part_tile {
    terra_archive_entry entry;      /* key, size, raw_size, compression, geometric error, edges, heights */
    const uint8_t *data;            /* entry.size stored bytes */
    uint32_t vertices, triangles;   /* of the mesh, for the report */
    float quantization;             /* what the stated error passes the mesh's own */
} terra_cook_part_tile;

typedef struct terra_cook_part {
    uint64_t fingerprint;
    int bottom, depth;              /* the round's: the root's depth, and the depth it was built from
                                       (0: from the finest) */
    terra_cook_root root;
    size_t tile_count;
    terra_cook_part_tile *tiles;
} terra_cook_part;

/* Encodes a part into *out (terra_free), *size bytes. */
TERRA_API terra_status terra_cook_part_encode(const terra_cook_part *p, uint8_t **out, size_t *size);
/* Decodes n bytes: every count checked against what is left, the checksum first; the tiles' data
 * point into `bytes` (keep it); the root's mesh and finest list are allocated (terra_cook_part_free).
 * TERRA_E_CORRUPT naming the byte and the problem, TERRA_E_NOMEM. */
TERRA_API terra_status terra_cook_part_decode(const uint8_t *bytes, size_t n, terra_cook_part *out);
TERRA_API void terra_cook_part_free(terra_cook_part *p);

/* What a part is of, as its head states it (its first 40 bytes): the cook's fingerprint, the
 * round's depths and the root. A part file's name says the same ("BOTTOM-DEPTH-TX-TY.part"): one
 * whose head says otherwise was renamed or copied and is not the part its name promises (the cook
 * never takes it: a round builds it again, a merge refuses it). Reads the
 * head alone (magic, version, depths checked; terra_cook_part_decode checks the whole):
 * TERRA_E_CORRUPT naming the byte and the problem. */
typedef struct terra_cook_part_key {
    uint64_t fingerprint;
    int bottom, depth;
    int32_t tx, ty;
} terra_cook_part_key;
#define TERRA_COOK_PART_KEY_BYTES 40
TERRA_API terra_status terra_cook_part_key_read(const uint8_t *bytes, size_t n, terra_cook_part_key *out);

/* ---- encoding -------------------------------------------------------------------------------- */

/* One tile as quantized-mesh-1.0 bytes (raw, uncompressed) for the grid's frame: u, v from the
 * tile's rect, heights over [min, max] of the tile, edge lists (vertices on each side of the rect),
 * octvertexnormals, terra-material when the mesh has materials, header fields (local: scenery
 * metres; geographic: ECEF, the horizon occlusion point as Cesium's EllipsoidalOccluder computes
 * it). *out: terra_free. */
TERRA_API terra_status terra_cook_encode(const terra_cook_grid *g, const terra_cook_tile *tile, uint8_t **out, size_t *size);

#ifdef __cplusplus
}
#endif
#endif
