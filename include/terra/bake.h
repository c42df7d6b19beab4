/* terra bake: a source meshed into quantized-mesh tiles, levels 0..N over an area, in an archive.
 *
 * Every tile is a regular grid of cells x cells cells over the source's lattice, each cell split
 * along the same diagonal as terra/grid.h splits it, with per-vertex normals (octvertexnormals),
 * the source's surface ids (terra's material extension) and the tile's true geometric error: the
 * largest vertical distance between the tile's surface and the finest level's samples inside it.
 *
 * Frames (docs/FORMAT.md):
 *  - local: scenery metres, terra's keys (level 0 finest, side tile0_size * 2^level, tile (L, x, y)
 *    covers x in [x*side, (x+1)*side], z in [y*side, (y+1)*side]); u runs along +x, v along +z;
 *    header fields in scenery metres; normals in scenery axes (y up).
 *  - geographic: EPSG:4326 TMS tiles (two roots at level 0, level = Cesium zoom); the source's (x, z)
 *    plane is laid over longitude and latitude at metres_per_degree (x = lon * k, z = -lat * k);
 *    header fields and normals in WGS84 ECEF, as Cesium expects.
 */
/* Threads: terra_bake runs desc->threads threads of its own, each meshing tiles and calling the
 * source, and returns when all have stopped: the source must be thread-safe (see source.h). A
 * terra_bake_tile carries its scratch, so one tile is used by one thread at a time; several threads
 * may build at once, each with its own terra_bake_tile, and calls the source on its own thread.
 * terra_bake_desc_resolve and terra_bake_keys are pure. */
#ifndef TERRA_BAKE_H
#define TERRA_BAKE_H

#include "terra/archive_io.h"
#include "terra/source.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_bake_desc {
    terra_frame frame;
    int levels;                /* how many levels: 0..levels-1 are baked, 1..25; 0 = 5 */
    int cells;                 /* cells along a tile side, power of two in [2, 256]; 0 = 32 */
    double tile0_size;         /* local: side of a level-0 (finest) tile in metres; 0 = 64 */
    double area[4];            /* local: x0, z0, x1, z1 in metres; all 0 = 0, 0, 1024, 1024 */
    double bounds[4];          /* geographic: west, south, east, north degrees; all 0 = 7, 45, 7.5, 45.5 */
    double metres_per_degree;  /* geographic: 0 = 111319.49 */
    bool no_normals, no_surfaces;
    terra_compression compression; /* NONE (0) is honoured; the CLI defaults to gzip */
    int compression_level;
    int threads;               /* 0 = terra_default_threads() */
    const char *source_json;   /* manifest of the source, embedded in the archive's metadata */
    const char *name;
} terra_bake_desc;

typedef struct terra_bake_stats {
    uint64_t tiles, vertices, triangles, raw_bytes, stored_bytes;
    double seconds;
    double max_error_per_level[32];
} terra_bake_stats;

/* Checks a description and fills in defaults (TERRA_E_INVALID names the broken rule). */
TERRA_API terra_status terra_bake_desc_resolve(const terra_bake_desc *in, terra_bake_desc *out);

/* One tile, meshed: mesh arrays owned by the tile, reused across calls. */
typedef struct terra_bake_tile {
    terra_qmesh mesh;
    terra_archive_tile_info info;
    void *scratch_; /* internal */
} terra_bake_tile;

/* Meshes tile `key` of a resolved description. fine_error: also compute the geometric error against
 * the finest level (slower; otherwise info.geometric_error is 0). */
TERRA_API terra_status terra_bake_tile_build(const terra_source *src, const terra_bake_desc *d, terra_tile_key key,
                                   bool fine_error, terra_bake_tile *t);
TERRA_API void terra_bake_tile_free(terra_bake_tile *t);

/* The keys a description bakes (sorted in archive order). *keys: terra_free. */
TERRA_API terra_status terra_bake_keys(const terra_bake_desc *d, terra_tile_key **keys, size_t *count);

/* Bakes everything into an archive at `path` (temporary file renamed into place). */
TERRA_API terra_status terra_bake(const terra_source *src, const char *path, const terra_bake_desc *desc, terra_bake_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
