/* terra source: the ground as a function of (x, z).
 *
 * A source answers heights (metres, y up) and optional surface ids over a regular lattice, and a
 * conservative height range over any rectangle. Sampling is batched: one call fills a whole grid.
 *
 * The lattice rule: sample (i, j) of a grid call lies at
 *     x = (double)(ix0 + i) * spacing,   z = (double)(iz0 + j) * spacing
 * computed exactly that way. Two calls that name the same lattice point with the same spacing, or
 * with spacings that differ by a power of two, therefore ask for the same (x, z) bit for bit, and a
 * deterministic source answers the same height: neighbouring tiles and tiles of different levels
 * agree exactly where they share samples.
 */
/* Threads: terra calls a source's callbacks from several threads at once with the same user pointer:
 * the streamer's pool workers (its default loader, terra_gl_scene's too), terra_bake's threads, ground
 * queries on whatever threads make them, and selection on the thread updating a streamer. Every
 * terra_source_sample also asks height_range on its own thread. So every callback but destroy must be
 * safe to call concurrently; a callback that fails calls terra_fail on the thread it runs on.
 * terra_source_* add no state of their own. terra_source_destroy must not overlap any use of the
 * source. The default world is immutable once created: any number of threads may sample it. */
#ifndef TERRA_SOURCE_H
#define TERRA_SOURCE_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Surface ids: a small integer naming what the ground is. 0 means "no surface named here". */
typedef uint8_t terra_surface;
enum {
    TERRA_SURFACE_NONE = 0,
    TERRA_SURFACE_GRASS = 1,
    TERRA_SURFACE_ROCK = 2,
    TERRA_SURFACE_SNOW = 3,
    TERRA_SURFACE_SAND = 4,
    TERRA_SURFACE_WATER = 5, /* the planet's seas */
    TERRA_SURFACE_FIRST_USER = 16 /* ids from here on are the user's */
};

/* A grid request: nx × nz samples of the lattice above. Outputs are row-major (j rows of nx),
 * row stride nx. `surfaces` may be NULL when surface ids are not wanted. */
typedef struct terra_grid_request {
    int64_t ix0, iz0;
    double spacing;
    int nx, nz;
} terra_grid_request;

/* A source described by callbacks; all take the user pointer. At least one of height_at and
 * sample_grid is required. Missing pieces are filled in:
 *  - sample_grid from height_at (+ surface_at), one call per point;
 *  - height_range from min_height/max_height (a global bound, which must then be given: a source
 *    with neither, or with both 0, is refused);
 *  - surface_at absent: every sample is TERRA_SURFACE_NONE. */
typedef struct terra_source_desc {
    float (*height_at)(void *user, double x, double z);
    terra_surface (*surface_at)(void *user, double x, double z);
    /* Fill heights[nx*nz] (and surfaces, if not NULL). Return TERRA_OK or an error. */
    terra_status (*sample_grid)(void *user, const terra_grid_request *req, float *heights, terra_surface *surfaces);
    /* A conservative range of the heights over [x0,x1] × [z0,z1]: *lo <= every height <= *hi. */
    terra_status (*height_range)(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi);
    void (*destroy)(void *user); /* called by terra_source_destroy, may be NULL */
    void *user;
    float min_height, max_height; /* global bound, used when height_range is NULL */
    const char *name;             /* for messages; may be NULL */
} terra_source_desc;

typedef struct terra_source terra_source;

/* Creates a source from callbacks. Fails with TERRA_E_INVALID naming the missing piece. The range
 * is a promise the rest of terra builds on (selection refines only where the ground may come near
 * the eye): terra_source_sample and terra_source_height fail with TERRA_E_SOURCE, naming the point,
 * on a height that is not finite or lies outside the range the source states there. */
TERRA_API terra_status terra_source_create(const terra_source_desc *desc, terra_source **out);
TERRA_API void terra_source_destroy(terra_source *src);
TERRA_API const char *terra_source_name(const terra_source *src);

/* Samples a grid. Heights are checked: a NaN or infinite height fails with TERRA_E_SOURCE
 * naming the point. */
TERRA_API terra_status terra_source_sample(const terra_source *src, const terra_grid_request *req, float *heights,
                                 terra_surface *surfaces);
/* One point; needs height_at (TERRA_E_UNSUPPORTED for grid-only sources). */
TERRA_API terra_status terra_source_height(const terra_source *src, double x, double z, float *height);
/* What height_at / surface_at give at (x, z), unchecked: for sources built on another one, whose
 * own results terra checks. NaN (TERRA_SURFACE_NONE) where the source has no such callback. */
TERRA_API float terra_source_height_raw(const terra_source *src, double x, double z);
TERRA_API terra_surface terra_source_surface_raw(const terra_source *src, double x, double z);
/* Conservative height range over a rectangle; an inverted or NaN range fails with TERRA_E_SOURCE. */
TERRA_API terra_status terra_source_height_range(const terra_source *src, double x0, double z0, double x1, double z1, float *lo,
                                       float *hi);

/* ---- the built-in default world ----------------------------------------------------------------
 * Deterministic from a seed and unbounded in every direction: mountain ranges with sharp ridges and
 * valleys between them, rolling hills, plains, lake bowls, and surfaces by height and slope
 * (sand by the water, grass, rock on steep faces, snow high up). Heights lie within
 * [TERRA_WORLD_MIN_HEIGHT, TERRA_WORLD_MAX_HEIGHT]. Its height_range is computed by interval
 * arithmetic on the noise lattice, so it is conservative and tight for small rectangles. */
#define TERRA_WORLD_MIN_HEIGHT (-450.0f)
#define TERRA_WORLD_MAX_HEIGHT (3200.0f)
#define TERRA_WORLD_LAKE_LEVEL 40.0f
/* The world's extent: points with |x| or |z| (divided by the scale) past 2^50 m have no height
 * (its lattice arithmetic would overflow): height_at gives NaN there and sample_grid fails with
 * TERRA_E_INVALID; a height range reaching past it is the whole [MIN, MAX]. */
#define TERRA_WORLD_EXTENT 1125899906842624.0
#define TERRA_WORLD_MIN_SCALE 1e-6
#define TERRA_WORLD_MAX_SCALE 1e6

typedef struct terra_world_desc {
    uint64_t seed;      /* 0 is a valid seed */
    double scale;       /* horizontal scale factor, TERRA_WORLD_MIN_SCALE..MAX_SCALE; 0 = 1 */
} terra_world_desc;

TERRA_API terra_status terra_world_create(const terra_world_desc *desc, terra_source **out);

/* ---- the default world's noise, for sources built on it (script built-ins: script.h) ------------
 * Value noise on a unit lattice, smooth and deterministic from the seed, for |x|, |z| up to
 * TERRA_WORLD_EXTENT (NaN past it). terra_noise lies in [-1, 1]. terra_fbm sums `octaves` (1 to
 * TERRA_NOISE_MAX_OCTAVES) of it, each `lacunarity` times finer and `gain` times weaker than the one
 * before and turned by an angle of its own, divided by the sum of the weights: in [-1, 1].
 * terra_ridged sums (1 - |noise|)^2 the same way: in [0, 1]. Octaves outside 1..16 are clamped. */
#define TERRA_NOISE_MAX_OCTAVES 16
TERRA_API float terra_noise(uint64_t seed, double x, double z);
TERRA_API float terra_fbm(uint64_t seed, double x, double z, int octaves, double lacunarity, double gain);
TERRA_API float terra_ridged(uint64_t seed, double x, double z, int octaves, double lacunarity, double gain);

#ifdef __cplusplus
}
#endif
#endif
