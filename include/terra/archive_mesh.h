/* libterra-io: an archive's own tiles, drawn as they were cooked (or baked).
 *
 * The archive source (archive_io.h) turns a grid archive back into heights that the renderer
 * meshes again. This loader instead hands the renderer each tile's own triangles, TIN or grid
 * alike, as terra_tile_mesh (tile_mesh.h): tiles are read, decompressed and decoded on the
 * streamer's pool workers, several at once, into its buffers (terra_stream_desc.make), and drawn by screen-space error, the
 * error of each tile read from the index before the tile is loaded (terra_select_desc.tile_error).
 * Skirts, hung from each tile's outer sides, hide what 16-bit quantization leaves between
 * neighbours of different levels (their border vertices are shared by construction, to one
 * quantization step of the wider tile: see terra/cook_check.h): each is as deep as the tile's
 * height step plus four horizontal steps of slope 4, at least 0.5 m.
 *
 * A local-frame archive only (terra cook's local frame, terra bake's); geographic archives are
 * refused with TERRA_E_UNSUPPORTED naming the file.
 */
/* Threads: open and close on one thread; the tile_error callback runs on the thread running the
 * selection. Decoding runs on the streamer's pool workers and reads the archive through its
 * thread-safe reader; terra_archive_mesh_decode and the source may be called from any thread. */
#ifndef TERRA_ARCHIVE_MESH_H
#define TERRA_ARCHIVE_MESH_H

#include "terra/stream.h"
#include "terra/tile_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_archive_mesh_desc {
    double latency_ms;  /* each decode waits this long first (tests: tiles arriving late); 0 = none */
} terra_archive_mesh_desc;

typedef struct terra_archive_mesh_info {
    double tile0_size;          /* a level-0 tile's side, metres */
    int levels;                 /* 0 .. levels-1 present */
    double bounds[4];           /* min x, min z, max x, max z (metres) */
    float min_height, max_height;
    bool tin;                   /* irregular tiles (terra cook); false: grids (terra bake) */
    uint64_t tiles;
    size_t tile_bytes;          /* the largest decoded tile can take (2 x the largest raw tile + 64) */
} terra_archive_mesh_info;

typedef struct terra_archive_mesh terra_archive_mesh;

/* desc may be NULL; info may be NULL. */
TERRA_API terra_status terra_archive_mesh_open(const char *path, const terra_archive_mesh_desc *desc,
                                               terra_archive_mesh **out, terra_archive_mesh_info *info);
/* What terra_archive_mesh_open's info said. */
TERRA_API void terra_archive_mesh_get_info(const terra_archive_mesh *m, terra_archive_mesh_info *info);
/* Tiles read ahead so far: when a worker has decoded a tile it asks the system for the payloads
 * of the tile's children (terra_archive_prefetch), which the view asks for next as it nears them. */
TERRA_API uint64_t terra_archive_mesh_prefetched(const terra_archive_mesh *m);
/* After the streamer using it is destroyed. */
TERRA_API void terra_archive_mesh_close(terra_archive_mesh *m);
/* The archive as a source: height ranges from the index (each tile's range with its
 * descendants'), for selection; heights from the finest tile under a point (interpolated in the
 * first triangle, in index order, that holds it; at the nearest vertex in a hole; points past the
 * area clamped to its edge), a decode per tile and the last 8 tiles kept with their triangles binned
 * (~140 ns a point when warm): for queries (an eye above the ground, a body), not for meshing. Lives
 * as long as m. */
TERRA_API const terra_source *terra_archive_mesh_source(const terra_archive_mesh *m);
/* Points a stream description at the archive: its source, the tiles its pool makes (make,
 * make_bytes; no loader of the caller's), the selection's levels, level-0 tile size and bounds, and
 * tile_error (screen-space error selection). The rest of desc (tau, the view, capacities, budget,
 * the pool) stays the caller's. */
TERRA_API void terra_archive_mesh_stream_desc(terra_archive_mesh *m, terra_stream_desc *desc);
/* The tile's geometric error from the index, or -1 when the archive has no such tile (user = m). */
TERRA_API float terra_archive_mesh_tile_error(void *user, terra_tile_key key);
/* Reads and decodes one tile into buffer[capacity] as a terra_tile_mesh; *bytes receives its size.
 * TERRA_E_NOT_FOUND, TERRA_E_CAPACITY, or the archive's TERRA_E_CORRUPT naming the file and tile. */
TERRA_API terra_status terra_archive_mesh_decode(const terra_archive_mesh *m, terra_tile_key key, void *buffer,
                                                 size_t capacity, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
