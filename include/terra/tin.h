/* terra tin: heightmaps into triangle networks (Garland & Heckbert 1995, greedy insertion).
 *
 * Start from the four corners of the raster; repeatedly insert the sample with the largest
 * vertical error into a Delaunay triangulation (Lawson flips), until every sample is within the
 * bound. Each triangle keeps its worst sample (found by rasterising it) in a priority queue.
 *
 * Guarantees:
 *  - Exact predicates: sample coordinates are integers; orientation is computed in 64-bit and the
 *    in-circle test in 128-bit integers, exact for every side up to TERRA_TIN_MAX_SIDE samples.
 *    Flat ground, collinear rows and cocircular lattices never break the triangulation.
 *  - Deterministic: the same input gives the same mesh, byte for byte, on every run and thread count.
 *  - Insertion order is kept: vertex i is the i-th inserted point, so the mesh at a coarser bound
 *    is made of a prefix of the vertices of the mesh at a finer one (levels share one vertex array).
 *  - The bound is strict: after terra_tin_build, every valid sample covered by the mesh is within
 *    max_error of it (checked independently by terra_tin_check), unless a count limit stopped first.
 *  - No-data (NaN) samples are holes: no output triangle covers one, and no error is measured there.
 *
 * Coordinates: vertex (x, y) are sample columns and rows (row 0 at the top of the raster).
 * Triangles are listed so that they turn counter-clockwise when y is flipped to point north
 * (y_out = height - 1 - row), i.e. their normals point up.
 */
/* Threads: terra_tin_build, terra_tin_check, terra_tin_error_colors, terra_tin_layers_build and
 * terra_tin_level_for_distance keep no state: any number of calls may run at once. terra_tin_tiles_build
 * meshes on a pool, one job per worker (up to 64), every job reading desc->heights, and blocks the
 * caller until all are done. Do not call it from a job of the pool it meshes on: with one worker it
 * never returns. */
#ifndef TERRA_TIN_H
#define TERRA_TIN_H

#include "terra/core.h"
#include "terra/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest raster side, in samples (65,536: a sample's column and row pack into 32 bits). The
 * predicates stay exact far beyond it: orient needs |coordinates| < 2^31 in 64-bit integers,
 * in-circle < 2^30 in 128-bit ones; rasterising weights stay exact integers in doubles (< 2^53). */
#define TERRA_TIN_MAX_SIDE 65536
/* Largest number of vertices in one mesh (indices are 32-bit). */
#define TERRA_TIN_MAX_VERTICES 0x7ffffff0u

typedef enum terra_tin_stop {
    TERRA_TIN_STOP_ERROR = 0,   /* every sample within max_error */
    TERRA_TIN_STOP_TRIANGLES,   /* max_triangles reached */
    TERRA_TIN_STOP_VERTICES     /* max_vertices reached */
} terra_tin_stop;

/* Which build of the mesher runs. On x86-64 it is compiled twice: for any x86-64 (SSE2) and for
 * CPUs with AVX2, BMI1/2 and POPCNT (Intel since 2013, AMD since 2015). Both do the same
 * arithmetic (no fused multiply-add), so they give the same mesh, byte for byte. */
typedef enum terra_tin_isa {
    TERRA_TIN_ISA_AUTO = 0,     /* the fastest this CPU runs */
    TERRA_TIN_ISA_PORTABLE,     /* the x86-64 baseline (or the only build elsewhere) */
    TERRA_TIN_ISA_AVX2          /* TERRA_E_UNSUPPORTED where the CPU or the build lacks it */
} terra_tin_isa;

/* What to mesh. Zero means the documented default everywhere. */
typedef struct terra_tin_desc {
    int width, height;          /* samples, 2..TERRA_TIN_MAX_SIDE each */
    const float *heights;       /* width*height metres, row-major, NaN = no-data (hole) */
    /* Optional second layer (two-layer ground): heights of an upper surface above a gap, NaN where
     * there is none. Points are chosen against both layers' errors at once. */
    const float *upper;
    double max_error;           /* metres, > 0 (required, finite) */
    size_t max_triangles;       /* 0 = no limit */
    size_t max_vertices;        /* 0 = no limit */
    /* Extra, coarser bounds to snapshot on the way (any order; values <= max_error are ignored).
     * Every level is a prefix of the vertices. */
    const double *levels;
    int level_count;
    /* Points inserted right after the four corners, in this order (x, y pairs), e.g. fixed tile
     * borders. They become vertices 4.. in every level. */
    const int32_t *seed_xy;
    size_t seed_count;
    terra_tin_isa isa;          /* 0: the fastest build this CPU runs */
} terra_tin_desc;

typedef struct terra_tin_level {
    double max_error;           /* bound asked for this level */
    double reached_error;       /* worst error measured when the level was taken */
    terra_tin_stop stop;        /* why it stopped */
    size_t vertex_count;        /* this level uses vertices [0, vertex_count) */
    size_t triangle_count;      /* triangles drawn (holes removed) */
    uint32_t *triangles;        /* 3 per triangle */
    size_t upper_triangle_count;/* two-layer ground: triangles of the upper layer */
    uint32_t *upper_triangles;
} terra_tin_level;

typedef struct terra_tin_mesh {
    int width, height;
    size_t vertex_count;        /* of the finest level */
    int32_t *xy;                /* 2 per vertex: column, row */
    float *z;                   /* height of the lower (only) layer; NaN for a corner on a hole */
    float *z_upper;             /* NULL unless two-layer: upper height, NaN where absent */
    int level_count;            /* coarsest first; the last level is desc->max_error */
    terra_tin_level *levels;
    bool has_holes;             /* the raster had no-data samples */
} terra_tin_mesh;

/* Meshes a raster. On success *out owns its arrays (free with terra_tin_mesh_free). */
TERRA_API terra_status terra_tin_build(const terra_tin_desc *desc, terra_tin_mesh *out);
TERRA_API void terra_tin_mesh_free(terra_tin_mesh *mesh);

/* ---- independent checker -------------------------------------------------------------------
 * Measures every sample against a mesh given in sample coordinates (any tool's output): each
 * triangle is rasterised on its own with exact integer inside tests and the height interpolated
 * in long double. A sample's error is the largest over the triangles that contain it. */
typedef struct terra_tin_check_result {
    double max_error;           /* over valid, covered samples */
    double rms_error;
    int worst_x, worst_y;       /* where max_error was found */
    size_t samples;             /* valid samples measured */
    size_t uncovered;           /* valid samples no triangle covers (and no vertex sits on) */
    size_t holes_covered;       /* no-data samples some triangle covers */
    size_t degenerate;          /* zero-area triangles */
    size_t flipped;             /* triangles turning the other way from the first one */
    bool area_exact;            /* hole-free raster: triangle areas add up to the raster exactly */
} terra_tin_check_result;

/* Vertices a checked triangle uses lie strictly within this many samples of the origin (2^30):
 * the checker's integer arithmetic is then exact in 64 bits. Others are refused (TERRA_E_INVALID). */
#define TERRA_TIN_CHECK_MAX_COORD ((int64_t)1 << 30)

/* vertices: xy (2 per vertex, sample units; may lie outside the raster, within
 * TERRA_TIN_CHECK_MAX_COORD), z (metres);
 * err_out: optional width*height floats receiving each sample's error (NaN: hole, -1: uncovered). */
TERRA_API terra_status terra_tin_check(const float *heights, int width, int height, const int32_t *xy, const float *z,
                             size_t vertex_count, const uint32_t *triangles, size_t triangle_count, float *err_out,
                             terra_tin_check_result *result);

/* Colours a per-sample error map (from terra_tin_check) into RGB: 0 dark blue, bound red, above
 * the bound white, holes black, uncovered magenta. rgb receives width*height*3 bytes. */
TERRA_API void terra_tin_error_colors(const float *err, int width, int height, double bound, uint8_t *rgb);

/* ---- tiles with levels of detail -------------------------------------------------------------
 * The raster is cut into tiles of tile_size x tile_size samples sharing their border samples
 * (step tile_size - 1). Every tile edge gets its vertices once, from a 1-D greedy insertion over
 * its profile at the finest bound; every level of both tiles that share it keeps exactly those,
 * so two neighbours at any two levels meet exactly (no T-junction, no crack, no skirt). */
typedef struct terra_tin_tiles_desc {
    int width, height;
    const float *heights;       /* NaN = no-data */
    int tile_size;              /* samples per side, 0 = 128 (>= 3) */
    const double *levels;       /* error bounds, coarsest first, strictly decreasing, > 0 */
    int level_count;            /* 1..16 */
    int threads;                /* 0 = terra_default_threads(); workers of a pool made for the call, when pool is NULL */
    terra_pool *pool;           /* mesh on this pool's workers (shared with, say, a streamer); NULL:
                                   a pool of `threads` workers for the call */
} terra_tin_tiles_desc;

typedef struct terra_tin_tile {
    int tx, ty;                 /* tile column, row */
    int x0, y0;                 /* first sample of the tile in the raster */
    int w, h;                   /* samples (the last row/column of tiles may be smaller) */
    terra_tin_mesh mesh;        /* in tile-local sample coordinates; one level per desc level */
} terra_tin_tile;

typedef struct terra_tin_tiles {
    int tiles_x, tiles_y, tile_size, level_count;
    terra_tin_tile *tiles;      /* tiles_x * tiles_y, row-major */
    double seconds;
} terra_tin_tiles;

TERRA_API terra_status terra_tin_tiles_build(const terra_tin_tiles_desc *desc, terra_tin_tiles *out);
TERRA_API void terra_tin_tiles_free(terra_tin_tiles *tiles);

/* The level (index into levels, coarsest first) to draw a tile at `distance` metres from the
 * camera so that its error covers about `pixel_error` pixels on a screen `viewport_px` tall with
 * a vertical field of view fov_y_rad: the coarsest level whose projected error is within it.
 * Projected error halves when distance doubles, so triangles on screen stay roughly constant. */
TERRA_API int terra_tin_level_for_distance(const double *levels, int level_count, double distance, double fov_y_rad,
                                 double viewport_px, double pixel_error);

/* ---- two-layer ground ------------------------------------------------------------------------
 * A lower surface everywhere and an upper one (a bridge deck, an overhang, a tunnel roof) where
 * present, over the same points (chosen once against both layers). The upper layer is a slab:
 * its underside lies thickness_m below its top but never below the lower surface. Where the
 * upper layer ends abruptly, vertical walls close the slab (one quad per border edge). */
typedef struct terra_tin_layers_desc {
    int width, height;
    const float *lower;         /* NaN = hole */
    const float *upper;         /* NaN where there is no upper layer */
    double max_error;
    double thickness_m;         /* 0 = the slab reaches down to the lower surface */
} terra_tin_layers_desc;

typedef struct terra_tin_layers {
    terra_tin_mesh mesh;        /* points and lower/upper triangles (one level) */
    float *z_under;             /* per vertex: underside of the upper slab (NaN where absent) */
    size_t wall_count;          /* walls: each a vertical quad under an upper border edge */
    uint32_t *walls;            /* 2 per wall: vertex a, vertex b (the upper edge a->b) */
    /* Everything as one triangle soup, ready to write: positions (x, row, z) and triangles. */
    size_t soup_vertex_count, soup_triangle_count;
    double *soup_xyz;
    uint32_t *soup_triangles;
} terra_tin_layers;

TERRA_API terra_status terra_tin_layers_build(const terra_tin_layers_desc *desc, terra_tin_layers *out);
TERRA_API void terra_tin_layers_free(terra_tin_layers *layers);

#ifdef __cplusplus
}
#endif
#endif
