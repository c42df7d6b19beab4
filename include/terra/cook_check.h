/* terra check: an independent check of what a cooked archive promises (terra/cook.h).
 *
 * A second implementation on purpose: it reads the archive as any client would (decoded
 * quantized-mesh tiles in world units, never the cook's plane or its measuring code) and checks
 *  1. every tile decodes through terra_archive_check_tile and reads back as written (the decoded
 *     tile encodes to the very bytes stored), its edge lists name exactly the vertices on each side
 *     and its header heights lie in the index entry's range;
 *  2. neighbouring tiles share their border, at the same level and across any two levels (edge
 *     adjacent: a finer tile's side lying on a coarser tile's side): on the shared segment, where
 *     both tiles have ground, every vertex one tile has the other has too, and every border edge
 *     (consecutive vertices along the side) the other has too, so no crack and no T-junction.
 *     Positions compare to 1 mm, or where 16-bit quantization cannot hold a millimetre to one
 *     quantization step of the wider tile (horizontal: its side / 32767; vertical: its
 *     (max - min) / 32767, the larger of the two tiles'); the report says which applied;
 *  3. with sources (rasters): on every valid source sample a tile's triangles cover (inside or on
 *     one, as decoded), the vertical distance from that triangle to the sample is at most the
 *     tile's stated geometric error (index entry) plus 1 mm: the tile a client draws is the
 *     quantized one, so what 16-bit quantization adds must be in the stated error. A sample no
 *     triangle covers but within what quantization moves a vertex (half a 16-bit step along each
 *     axis) of one (the rim moved off it) is held against each such triangle's nearest point, never
 *     its plane beyond it. allow_quantization grants quantization on top (one vertical step plus
 *     the triangle's slope over one horizontal step, reported), for archives whose errors were
 *     measured before encoding. No no-data sample lies under the drawn ground farther from its rim
 *     than quantization moves it: a hole stays a hole;
 *  4. no tile states a smaller geometric error than one of its children (index entries; a client
 *     refines a tile whose error is too large into its children).
 * Where samples lie: local frame, sample (col, row) at x = col * spacing_x, z = row * spacing_y
 * metres (the raster's spacing: terra mesh's --spacing, else its georeferencing, else 1);
 * geographic frame, each sample's centre from the raster's geotransform (EPSG:4326 degrees).
 * Several sources: the cook's overlap rule (terra/cook_io.h) with the sources in the order given
 * (give them in the cook's): a sample with a height is checked only where no source ranked before
 * it (finer, or as fine and given earlier) has data; a no-data sample is a hole only where no other
 * source has data.
 * Scenery meshes (a source whose extension assimp reads; local frame): the ground terra_scenery_read
 * takes (x, z plane, y up); every ground vertex (one of a triangle with area in the plane) under a
 * tile's triangles within the stated error of the nearest of the tile's heights there (a wall gives
 * a point two); every tile triangle with area over ground (its centre inside a ground triangle:
 * a hole stays a hole); where the metadata has a layer table (source.inputs[k].layers of the
 * k-th "scenery" input: name, metres_per_repeat), it equals the scenery's materials, and every
 * vertex's material id names a layer.
 * A wall (two heights over one point) standing on a tile side is laid in one tile only: the border
 * rule there is that the neighbour's ground meets it (a vertex within the wall's heights).
 *
 * libterra-cook; rasters are read with terra_raster_read_isolated. */
/* Threads: terra_cook_check runs on the calling thread alone and starts no threads; separate calls
 * share nothing but the raster reader's child processes (see terra/raster.h). */
#ifndef TERRA_COOK_CHECK_H
#define TERRA_COOK_CHECK_H

#include "terra/archive.h"
#include "terra/raster.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_cook_check_desc {
    const char *archive;
    const terra_raster_desc *sources; /* rasters the archive was cooked from (may be NULL) */
    int source_count;
    const char *raster_reader;        /* terra_raster_read_isolated's reader; NULL: its default */
    bool allow_quantization;          /* stated errors need not include 16-bit quantization */
} terra_cook_check_desc;

/* What was checked at one archive level. */
typedef struct terra_cook_check_level {
    uint64_t tiles, vertices, triangles;
    double stated_error_max;     /* the largest geometric error the index states at this level (m) */
    double measured_error_max;   /* the largest vertical distance to a source sample (m); 0 without sources */
    double quantization_max;     /* the largest that quantization may add at a sample at this level (m):
                                    granted on top of the stated error only with allow_quantization */
    uint64_t samples;            /* source samples checked under this level's triangles */
    uint64_t border_pairs;       /* neighbour pairs whose finer (or either, same level) tile is here */
    uint64_t border_pairs_mm;    /* of these, compared to 1 mm */
    uint64_t border_vertices;    /* vertices matched across those pairs */
    double border_tolerance_max; /* the largest horizontal tolerance used (m; degrees when geographic) */
    double border_vertical_tolerance_max; /* the largest vertical tolerance used (m) */
} terra_cook_check_level;

typedef struct terra_cook_check_report {
    terra_frame frame;
    double tile_size_m;                 /* local frame: the finest tile's side */
    int min_level, max_level;           /* archive levels present (max < min: no tiles) */
    uint64_t tiles;                     /* tiles checked */
    uint64_t holes;                     /* no-data samples in the sources (none may be covered) */
    int layers;                         /* layers in the metadata's table of the first scenery, checked
                                           against its materials (0: the archive has none) */
    terra_cook_check_level level[32];   /* by archive level */
    bool broken;                        /* a promise was broken: the error message names it */
} terra_cook_check_report;

/* Checks the archive; fills *report with what it checked (up to the first broken promise).
 * TERRA_OK when every promise holds. A broken promise: TERRA_E_CORRUPT, report->broken set, and
 * terra_last_error() naming the tile(s), the place and the numbers. Other failures (an archive or
 * source that cannot be read, a projected source raster: TERRA_E_UNSUPPORTED) leave broken false. */
TERRA_API terra_status terra_cook_check(const terra_cook_check_desc *desc, terra_cook_check_report *report);

#ifdef __cplusplus
}
#endif
#endif
