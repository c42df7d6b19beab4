/* terra cook, the whole job: elevation rasters and scenery meshes in, a TIN tile archive out
 * (libterra-cook: links terra-io, meshoptimizer and assimp; rasters are read through terra-raster,
 * the isolated GDAL reader). The pyramid itself is terra/cook.h, in the core. */
/* Threads: terra_cook runs the pyramid (terra/cook.h) on a pool of desc->threads workers of its own and
 * returns when it is done; progress runs on the calling thread. During the call the workers read the
 * inputs (a raster read whole by all of them at once, each opened source by one worker at a time) and
 * use the cache: do not change or close any of them until it returns. terra_cook_raster_window_read,
 * terra_cook_raster_finest, terra_cook_raster_distance and terra_cook_simplify_meshopt keep no state:
 * the pyramid's workers call them several at once. */
#ifndef TERRA_COOK_IO_H
#define TERRA_COOK_IO_H

#include "terra/archive_io.h"
#include "terra/cook.h"
#include "terra/cook_cache.h"
#include "terra/raster.h"
#include "terra/scenery.h"

#ifdef __cplusplus
extern "C" {
#endif

/* meshoptimizer's simplifier with the border locked, as a terra_cook_simplify_fn (user, xy, rect
 * and samples unused: every border vertex stays). */
TERRA_API size_t terra_cook_simplify_meshopt(void *user, const double *xy, const float *pos, uint32_t vertex_count,
                                   const uint32_t *tri, size_t triangle_count, double target_error,
                                   const double *rect, const terra_cook_samples *samples, uint32_t *out_tri);

/* ---- samples on the plane --------------------------------------------------------------------
 * A raster's heights as the cook sees them: one sample at every whole point (x, y) of the plane
 * (local frame: x = the raster's column, y = its row, so the plane's y runs down the image, which is
 * scenery +z; geographic frame: the point's longitude and latitude, terra/cook.h). */

/* The window provider's type: terra_cook_window_fn (terra/cook.h). */

/* A raster read whole as a window provider (user: the terra_cook_raster_window). Local frame: the
 * samples themselves. Geographic frame: an EPSG:4326 raster (degrees, no rotation) resampled at
 * each plane point bilinearly between the four sample centres around it through its geotransform;
 * NaN where a sample with a weight is no-data or the point lies outside the sample centres. */
typedef struct terra_cook_raster_window {
    const terra_raster *raster;
} terra_cook_raster_window;
TERRA_API terra_status terra_cook_raster_window_read(void *user, const terra_cook_grid *g, int64_t x0, int64_t y0, int w, int h,
                                           float *out);

/* ---- finest tiles from samples (the core: src/cook/raster_tiles.c) ---------------------------
 * Tile (tx, ty) of depth 0 from its (S + 1)^2 samples (S = grid->tile_units, a whole number): each
 * of its four edges gets the vertices of a 1-D greedy insertion over the edge's samples (the same
 * as terra_tin_tiles_build's, so the tile on the other side picks the same ones), then the tile is
 * a greedy-insertion TIN seeded with them at max_error. Vertices in plane units, normals from
 * central differences of the samples (a ring of one sample around the tile is read, so a vertex
 * on an edge gets the same normal in both tiles), *error the largest vertical error measured. A
 * tile without ground comes back with no triangles. */
typedef struct terra_cook_raster_tiles {
    const terra_cook_grid *grid;
    double max_error;               /* metres, > 0 */
    terra_cook_window_fn window;
    void *window_user;
} terra_cook_raster_tiles;
/* A terra_cook_finest_fn: user is a const terra_cook_raster_tiles. */
TERRA_API terra_status terra_cook_raster_finest(void *user, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error);
/* A terra_cook_distance_fn over the same samples (user: a const terra_cook_raster_tiles): each
 * finest tile's (S + 1)^2 samples read once and every triangle over them scanned row by row;
 * no-data samples are skipped (holes have no ground to compare). */
TERRA_API terra_status terra_cook_raster_distance(void *user, const terra_cook_mesh *mesh, const int32_t *finest,
                                        size_t finest_count, double slack, double limit, double *out);

/* ---- the whole job --------------------------------------------------------------------------- */

/* The heights the cook takes (metres, after z_scale): below the deepest sea floor (-10 935 m) or
 * above the highest summit (8 849 m) by over a kilometre a height is not the Earth's, and within
 * 16 384 m a float32 height still resolves a millimetre, the stated errors' slack. terra_cook refuses
 * a raster read whole with a sample outside (naming the file, the sample and its place); open the
 * sources of a cook with these as the desc's bound and nan_is_nodata (terra cook does). */
#define TERRA_COOK_MIN_HEIGHT (-12000.0)
#define TERRA_COOK_MAX_HEIGHT 10000.0

typedef enum terra_cook_frame {
    TERRA_COOK_FRAME_AUTO = 0,      /* geographic when an input is georeferenced in a system that goes to
                                       EPSG:4326 (or is on another body than the Earth: refused), else
                                       local */
    TERRA_COOK_FRAME_LOCAL,
    TERRA_COOK_FRAME_GEOGRAPHIC
} terra_cook_frame;

/* One input: a raster, either read whole (terra_raster_read_isolated) or opened for windowed reads
 * (terra_raster_open) several times, one source for each worker that may read at once (a source
 * serves one read at a time). Its georeference picks the frame and the finest tiles' step; in the
 * geographic frame an opened raster is resampled by GDAL's warper (any CRS PROJ takes to
 * EPSG:4326), one read whole by its geotransform (EPSG:4326 degrees only). Several georeferenced
 * inputs are one ground, by the overlap rule: inputs ranked finest first (the smallest sample, in
 * square degrees), then in the desc's order; at each place the first that has data there is the
 * ground (inside its sample centres, and every sample the bilinear interpolation weighs there
 * holds a height), the others' samples there are not (terra check holds the same rule). */
typedef struct terra_cook_input {
    const char *path;               /* for messages and the archive's metadata */
    const terra_raster *raster;     /* read whole; or NULL and: */
    terra_raster_source *const *sources;
    int source_count;
    /* Or a scenery's ground (terra_scenery_read), cut along the grid and welded: it cooks alone, in
     * the local frame with plane units of metres (tile_size metres to a finest tile). */
    const terra_scenery *scenery;
    const uint32_t *named;          /* the cache manifest's numbers of the files the scenery names */
    size_t named_count;
} terra_cook_input;

/* One process's share of a cook split over several (terra-cook-mpi; terra/cook.h for the rounds).
 * Every process runs terra_cook with the same inputs and options and its own split:
 *  - PLAN: opens the inputs, plans the plane and the rounds into split->plan (nothing written);
 *  - ROUND: builds the roots of split->plan.round[split->round] that split->rank owns, each subtree
 *    into the part file PARTS/BOTTOM-TOP-TX-TY.part; a part already there with the same fingerprint
 *    is reused, not built again (a rerun after a failure redoes only what was lost). The roots of
 *    the round below come from their part files;
 *  - MERGE (one process, after the last round): the levels over the last round's roots, then every
 *    part's tiles and those into the archive at desc->output: the same bytes as the whole cook.
 * The part files are on a filesystem every process sees. desc->cache must be NULL. */
typedef enum terra_cook_stage {
    TERRA_COOK_STAGE_PLAN = 1,
    TERRA_COOK_STAGE_ROUND,
    TERRA_COOK_STAGE_MERGE
} terra_cook_stage;

typedef struct terra_cook_split {
    terra_cook_stage stage;
    const char *parts;              /* directory of the part files (created if need be) */
    uint64_t fingerprint;           /* of the inputs' contents and the options: other parts are not reused */
    int ranks, rank;
    terra_cook_split_plan plan;     /* PLAN fills it (terra_cook_split_plan_free); ROUND and MERGE read it */
    int round;                      /* ROUND: which */
    int (*die_after)(void *user);   /* tests: called after each part written; non-zero ends the process (_exit) */
    void *die_user;
    /* out */
    uint64_t parts_built, parts_reused;
    double top_s, merge_s;          /* MERGE: building the levels over the rounds; reading parts and
                                       writing the archive */
} terra_cook_split;

typedef struct terra_cook_desc {
    const terra_cook_input *inputs;
    size_t input_count;
    const char *output;             /* the archive to write (renamed into place when complete) */
    double max_error;               /* the finest level's bound, metres; 0 = 1 */
    int levels;                     /* local frame: levels to build, 0 = up to one tile covering all;
                                       geographic: 0 (the levels go down to the two roots) */
    int tile_size;                  /* S, samples (a scenery: metres) along a finest tile's side; 0 = 256
                                       (geographic: a power of two) */
    terra_cook_frame frame;
    int threads;                    /* 0 = terra_default_threads() */
    terra_compression compression;  /* 0 (none) is allowed; the CLI's default is packed (tiles are
                                       then put in the packed codec's order) */
    int compression_level;          /* 0 = the default (gzip 6, zstd 9) */
    const char *options_json;       /* how the inputs were read (encoding, z-scale, ...), JSON, or NULL:
                                       recorded in the metadata */
    void (*progress)(void *user, uint64_t done, uint64_t total); /* may be NULL; any thread */
    void *progress_user;
    /* The cook cache (terra/cook_cache.h), opened by the caller over a manifest of the inputs in
     * their order here (so input k is manifest file k), with an outcome other than UNCHANGED; NULL:
     * no cache. terra_cook plans it, reuses what it allows, and commits it once the archive is in
     * place; the caller closes it. */
    terra_cook_cache *cache;
    terra_cook_split *split;        /* NULL: the whole cook in this process */
} terra_cook_desc;

typedef struct terra_cook_report {
    terra_cook_grid grid;           /* the plane the tiles were cut on */
    int levels;                     /* depths 0 .. levels - 1 */
    uint64_t tiles;                 /* written (tiles without ground are not) */
    uint64_t samples;               /* source samples cooked (each input's width x height) */
    terra_scenery_cut_info cut;     /* a scenery's cut: welded vertices, walls, collapsed triangles */
    struct {
        uint64_t tiles, vertices, triangles, bytes; /* bytes stored */
        double max_error;           /* the largest geometric error of the meshes, as the pyramid measured */
        double max_quantization;    /* the most a tile's stated error in the index (measured on the
                                       tile as decoded, 16-bit steps and all) passes max_error */
        double max_stated;          /* the largest stated error in the index: at least every finer
                                       depth's (a tile states no less than its children) */
    } level[32];                    /* by depth (0 = finest) */
    uint64_t bytes;                 /* stored payload bytes, all levels */
    uint64_t tiles_reused;          /* copied from the previous archive (the cook cache) */
    uint64_t finest_reused;         /* finest meshes the cache gave back instead of meshing the samples */
    size_t mesh_peak_bytes;         /* the most tile-mesh memory the pyramid held at once */
    double seconds;
} terra_cook_report;

/* Cooks the inputs into desc->output. Errors name the input or the output and the problem; on
 * failure nothing is written at the output (an archive already there is left as it was). report
 * may be NULL. */
TERRA_API terra_status terra_cook(const terra_cook_desc *desc, terra_cook_report *report);

#ifdef __cplusplus
}
#endif
#endif
