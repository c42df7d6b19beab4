/* libterra-io side of qmesh and archive: compression (zlib, zstd), writing archives (temporary
 * file renamed into place, metadata written with cJSON), reading and decompressing tiles, and
 * decoding quantized-mesh files that may be gzipped. */
/* Threads: compression, decompression and decoding keep no state: any number of calls may run at once.
 * The reading and checking functions take a const archive and are as thread-safe as the reader
 * (archive.h). A writer takes terra_archive_writer_add and _add_stored from several threads at once
 * (one mutex; compression happens outside it); create, finish and abort must not overlap anything
 * else on it. An archive source is thread-safe, and its readers on several threads run at once: its
 * cache of decoded tiles takes one mutex for lookups only, never across reading, decompressing or
 * decoding a tile, so each thread decodes the tiles it misses itself; height ranges take none. */
#ifndef TERRA_ARCHIVE_IO_H
#define TERRA_ARCHIVE_IO_H

#include "terra/archive.h"
#include "terra/grid.h"
#include "terra/qmesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- compression ---------------------------------------------------------------------------- */

/* Compresses n bytes into a new buffer (*out, freed with terra_free). level 0 = terra's default
 * (gzip 9, zstd 9, packed: zstd 19 inside). TERRA_COMPRESS_NONE copies. TERRA_COMPRESS_PACKED takes a
 * quantized-mesh tile (terra_tile_codec_pack: TERRA_E_UNSUPPORTED for a tile it cannot reproduce;
 * terra_archive_writer_add then stores that tile in zstd). */
TERRA_API terra_status terra_compress(terra_compression c, int level, const void *src, size_t n, uint8_t **out, size_t *out_n);
/* Decompresses (a packed tile: unpacks to its quantized-mesh bytes) into a new buffer, refusing output larger than max_out (a guard against
 * decompression bombs: nothing past max_out is produced) with TERRA_E_CAPACITY. TERRA_E_CORRUPT on
 * damaged input. */
TERRA_API terra_status terra_decompress(terra_compression c, const void *src, size_t n, size_t max_out, uint8_t **out,
                              size_t *out_n);
TERRA_API bool terra_is_gzip(const void *data, size_t n);
/* Parses "gzip", "zstd", "packed" or "none". */
TERRA_API bool terra_compression_parse(const char *s, terra_compression *out);

/* Decodes a quantized-mesh tile that may be gzipped (as tile servers and files often hold them). */
TERRA_API terra_status terra_qmesh_decode_any(const uint8_t *data, size_t size, const terra_qmesh_decode_desc *desc,
                                    terra_qmesh *out);

/* Reads a whole file (at most max_bytes) into a new buffer. */
TERRA_API terra_status terra_io_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size);

/* ---- archive reading with decompression --------------------------------------------------- */

/* Finds, reads, checks and decompresses one tile: *raw (terra_free) holds the quantized-mesh bytes.
 * Decompression stops at the entry's stated raw size (itself at most TERRA_ARCHIVE_MAX_RAW_SIZE)
 * and must give exactly that many bytes; TERRA_E_CORRUPT otherwise, naming the file and the tile.
 * entry may be NULL. TERRA_E_NOT_FOUND when the archive has no such tile. */
TERRA_API terra_status terra_archive_read_tile(const terra_archive *a, terra_tile_key key, uint8_t **raw, size_t *raw_size,
                                     terra_archive_entry *entry);
/* The same for an entry already found. */
TERRA_API terra_status terra_archive_read_entry(const terra_archive *a, const terra_archive_entry *e, uint8_t **raw,
                                      size_t *raw_size);

/* ---- the rules every reader applies to an archive's tiles ------------------------------------- */

/* A tile of an archive is good when it reads (checksum), decompresses to exactly its stated raw
 * size, decodes as quantized-mesh (counts, indices, edges, u, v and heights in 0..32767: see
 * terra_qmesh_decode) with 3 to TERRA_TILE_MESH_MAX_VERTICES vertices and a triangle at least, its
 * header values are finite (min height <= max height inside the index entry's range, radius >= 0),
 * and it carries the extensions the metadata lists (`extensions`; more are allowed). Archives of
 * regular grid tiles add the lattice rule (grid_cells > 0): (n+1)^2 vertices, each on a point of
 * the n-cell grid (u = round(i * 32767 / n) for i in 0..n, likewise v), every point once. */
typedef struct terra_tile_rules {
    int grid_cells;      /* 0: no lattice rule; else n, a power of two in 2..256 */
    uint32_t extensions; /* TERRA_QMESH_HAS_* every tile carries: those the metadata lists */
} terra_tile_rules;

/* The rules for `a`'s tiles, read by terra_archive_validate's own code (so from the same tile): the
 * extensions its metadata lists, and for local-frame archives of grid tiles (what terra bake writes,
 * what the archive source draws) grid_cells = n, read from the coarsest tile (the first index entry
 * of the coarsest level that reads, in order and in place), which must be a grid of n cells, n a
 * power of two in 2..256. TERRA_E_CORRUPT when the metadata does not say what the tiles are (not a
 * JSON object, an unknown "mesh") or that tile fails the rules, naming the problem. Geographic
 * archives and TIN archives (metadata "mesh": "tin", what terra cook writes): no lattice rule. The
 * archive's other problems do not stop it (terra check reads archives so, and names them itself):
 * terra_archive_validate refuses them, and gives these rules too. */
TERRA_API terra_status terra_archive_tile_rules(const terra_archive *a, terra_tile_rules *out);
/* True when the archive's metadata says its tiles are irregular meshes ("mesh": "tin"). */
TERRA_API bool terra_archive_is_tin(const terra_archive *a);

/* The one check of a tile, shared by every reader (the archive source, terra info --verify): reads
 * entry e's tile, decompresses and decodes it and applies `rules` (NULL: none beyond decoding).
 * Errors (TERRA_E_CORRUPT, TERRA_E_CAPACITY, TERRA_E_IO, TERRA_E_NOMEM) name the file, the tile
 * and the problem. mesh (may be NULL) receives the decoded tile on success (terra_qmesh_free).
 * grid_vertex (may be NULL; else (n+1)^2 entries when rules->grid_cells = n) receives on success
 * the vertex at each grid point (i, j), at j * (n + 1) + i. Thread-safe, like the reader. */
TERRA_API terra_status terra_archive_check_tile(const terra_archive *a, const terra_archive_entry *e, const terra_tile_rules *rules,
                                      terra_qmesh *mesh, uint32_t *grid_vertex);
/* The same check for a server and for tools that name tiles as Cesium does: messages name the tile
 * by `names` (terra_archive_tile_name with its z/x/y; NULL: terra's key alone), and when bytes is not
 * NULL it receives the very bytes checked, *bytes_n long (terra_free): the payload as stored when
 * as_stored (what a server sends with its Content-Encoding), else as decompressed and decoded. No
 * grid_vertex. */
typedef struct terra_tms_map terra_tms_map;
TERRA_API terra_status terra_archive_check_tile_bytes(const terra_archive *a, const terra_archive_entry *e,
                                                      const terra_tile_rules *rules, const terra_tms_map *names,
                                                      terra_qmesh *mesh, bool as_stored, uint8_t **bytes, size_t *bytes_n);

/* ---- the rules every reader applies to an archive as a whole ---------------------------------- */

/* Hears of each problem once: the index entry it is in (TERRA_ARCHIVE_WHOLE for the metadata and
 * the pyramid), the entry (NULL when the entry itself is damaged or there is none), the status and
 * the message (naming the file, the place and the problem). A status of TERRA_OK is a note:
 * something readers tolerate (docs/FORMAT.md), said but not a problem. */
typedef void (*terra_archive_report_fn)(void *user, uint64_t index, const terra_archive_entry *e, terra_status st,
                                        const char *problem);
#define TERRA_ARCHIVE_WHOLE UINT64_MAX

/* The tiles of one level: how many, and their smallest and largest x and y (inclusive). */
typedef struct terra_archive_level {
    uint64_t tiles;
    int32_t x0, y0, x1, y1;
} terra_archive_level;

/* What an archive holds, once terra_archive_validate accepted it. */
typedef struct terra_archive_layout {
    terra_frame frame;
    bool tin;                 /* metadata "mesh": "tin": irregular tiles (no lattice rule) */
    double tile_size_m;       /* local frame: a level-0 tile's side; 0 in the geographic frame */
    bool has_bounds;          /* the metadata gives bounds (always, in the local frame) */
    double bounds[4];         /* local: x0, z0, x1, z1 m; geographic: west, south, east, north degrees */
    int min_level, max_level; /* every level between holds tiles; min_level is 0 */
    terra_tile_rules rules;   /* what each tile must satisfy (terra_archive_check_tile) */
    terra_archive_level levels[32]; /* level by level (none beyond max_level) */
} terra_archive_layout;

/* Checks the archive as a whole, as every reader does when it opens one (the archive source, the
 * archive mesh, export, serve, the planet's overlay; terra info --verify reports it in full), without
 * decoding more than the coarsest tile:
 *  - the metadata: one JSON object, nothing after it, no NUL byte, no member terra writes given
 *    twice; "frame" (when given) the header's; "mesh" "grid" (or absent) or "tin"; "extensions" a
 *    list of names; local frame: "tile_size_m" from 1e-6 m, "bounds" four finite numbers x0 < x1,
 *    z0 < z1 within the tiles' coordinates and 2^44 m; geographic: "bounds" (when given) four
 *    numbers west < east in -180..180, south < north in -90..90; "format" and "tile_format" (when
 *    given) terra's;
 *  - every index entry (terra_archive_entry_at), in strictly increasing order, on face 0, its tile
 *    inside the frame's grid and the bounds (geographic: but the two roots);
 *  - the pyramid: a tile at least; every level from 0 to the coarsest holds tiles and every tile but
 *    the roots (local: the coarsest level; geographic: level 0) has its parent; local frame: the
 *    coarsest tiles at most 2^44 m (what terra draws), the levels laid out whole (each from its
 *    smallest to its largest x and y) within 4 places a tile and 64 a level, or 2^22 places in all;
 *    grids: level 0 covers the bounds and they hold a lattice point;
 *  - the rules of its tiles (terra_archive_tile_rules), from the coarsest tile, which must pass them.
 * Things readers tolerate are notes: members or extension names terra does not know, counts in the
 * metadata that the index contradicts, tiles whose error is below one of their children's; and two
 * that render, fly and view refuse by name (the archive source and mesh), export and serve take:
 * grids of fewer than 16 cells, local archives of more than 24 levels.
 * Messages name tiles by terra_archive_tile_name, with z/x/y once the index reads in order.
 * report (may be NULL) hears of every problem and note; out (may be NULL) receives the layout on
 * success. TERRA_E_CORRUPT (TERRA_E_IO, TERRA_E_NOMEM when reading failed) naming the first problem
 * and how many more there are. */
TERRA_API terra_status terra_archive_validate(const terra_archive *a, terra_archive_report_fn report, void *user,
                                              terra_archive_layout *out);

/* What terra info --verify runs: terra_archive_validate, then every tile its entry leaves readable
 * through terra_archive_check_tile with the archive's rules. report (may be NULL) hears of each
 * problem once (each bad tile once) and of each note; *bad (may be NULL) receives the number of
 * problems. TERRA_E_CORRUPT (TERRA_E_IO when the first failure was a read error) if there is any,
 * naming the count and the first. */
TERRA_API terra_status terra_archive_verify_tiles(const terra_archive *a, terra_archive_report_fn report, void *user, uint64_t *bad);

/* ---- archive writing ------------------------------------------------------------------------ */

typedef struct terra_archive_write_desc {
    terra_frame frame;
    terra_compression compression;   /* 0 (NONE) is allowed; bake uses gzip by default */
    int compression_level;           /* 0 = default */
    double bounds[4];                /* geographic: west, south, east, north degrees; local: x0, z0, x1, z1 m */
    double tile_size_m;              /* local frame: edge of a level-0 tile in metres (metadata only) */
    uint32_t qmesh_extensions;       /* TERRA_QMESH_HAS_* the tiles carry (listed in the metadata) */
    const char *source_json;         /* the source's manifest, JSON text (embedded as "source"), or NULL */
    const char *name;                /* NULL = "terra" */
    /* Irregular (TIN) tiles, as terra cook writes them: metadata "mesh": "tin", and readers apply no
     * lattice rule. false: regular grid tiles ("mesh": "grid"), as terra bake writes them. */
    bool tin;
} terra_archive_write_desc;

/* What the index records about a tile besides where it is. */
typedef struct terra_archive_tile_info {
    float geometric_error, longest_edge, min_height, max_height;
} terra_archive_tile_info;

typedef struct terra_archive_writer terra_archive_writer;

/* Starts an archive at `path`. Nothing appears at `path` until terra_archive_writer_finish
 * succeeds; an existing archive there is left untouched until then. */
TERRA_API terra_status terra_archive_writer_create(const char *path, const terra_archive_write_desc *desc,
                                         terra_archive_writer **out);
/* Compresses and adds one tile (any order; thread-safe: several threads may add at once). */
TERRA_API terra_status terra_archive_writer_add(terra_archive_writer *w, terra_tile_key key, const void *raw, size_t raw_size,
                                      const terra_archive_tile_info *info);
/* A tile's raw bytes as terra_archive_writer_add stores them with compression c (a tile the packed
 * codec cannot reproduce goes to zstd 19): *out (terra_free), *out_n bytes, *used the compression. */
TERRA_API terra_status terra_archive_store_tile(terra_compression c, int level, const void *raw, size_t raw_size,
                                                uint8_t **out, size_t *out_n, terra_compression *used);
/* Adds a payload already compressed with `c` (raw_size is its decompressed size). */
TERRA_API terra_status terra_archive_writer_add_stored(terra_archive_writer *w, terra_tile_key key, const void *stored,
                                             size_t size, uint32_t raw_size, terra_compression c,
                                             const terra_archive_tile_info *info);
/* Sorts the index, writes header, metadata, index and payloads to a temporary file beside the
 * target, and renames it into place. Frees the writer whatever the outcome. TERRA_E_INVALID on
 * duplicate keys. */
TERRA_API terra_status terra_archive_writer_finish(terra_archive_writer *w);
/* Drops everything written; the target path is untouched. Frees the writer. */
TERRA_API void terra_archive_writer_abort(terra_archive_writer *w);

/* ---- a geographic archive on a planet ------------------------------------------------------- */

typedef struct terra_geo_grid terra_geo_grid;
/* Samples a geographic archive's ground into a grid over its bounds (metadata "bounds"; else its
 * deepest tiles' union) for a planet's overlay (planet.h): as finely as its deepest tiles' samples
 * (the cook's tile_units a side), at most max_side samples along the longer side (0 = 2048); each
 * sample the height of the deepest tile's triangle holding it, linear within it (coarser levels fill
 * only what deeper ones leave; a sample none covers takes its covered neighbours' mean, up to four
 * samples out; NaN beyond). *level (may be NULL): the deepest level.
 * Refuses local-frame archives. */
TERRA_API terra_status terra_geo_grid_from_archive(const terra_archive *a, int max_side, terra_geo_grid **out, int *level);

/* ---- Cesium's view of an archive: z/x/y (TMS) and layer.json ------------------------------- */

/* How archive keys map to Cesium's z/x/y. Geographic archives: z = level, x, y as stored. Local
 * archives (level 0 finest, signed x, y): z = top - level, x' = x - x0 * 2^(top - level) (same for
 * y) where top is the coarsest level and (x0, y0) its smallest tile, so the coarsest level's tiles
 * become the roots. */
struct terra_tms_map {
    terra_frame frame;
    int min_level, max_level;
    int32_t x0, y0;
};

TERRA_API terra_status terra_archive_tms_map(const terra_archive *a, terra_tms_map *out);
/* false when the key has no place in the z/x/y tree (outside the coarsest level's tiles). */
TERRA_API bool terra_tms_from_key(const terra_tms_map *m, terra_tile_key key, int *z, int64_t *x, int64_t *y);
TERRA_API bool terra_tms_to_key(const terra_tms_map *m, int z, int64_t x, int64_t y, terra_tile_key *key);

/* A layer.json CesiumJS accepts: tms scheme, available ranges per zoom, the extensions the
 * tiles carry (never "metadata" together with "available": without metadataAvailability that
 * combination crashes CesiumJS 1.140). *out is NUL-terminated JSON (terra_free). */
TERRA_API terra_status terra_archive_layer_json(const terra_archive *a, const terra_tms_map *m, char **out);

/* The Content-Type of the archive's tiles, e.g. "application/vnd.quantized-mesh;extensions=octvertexnormals". */
TERRA_API const char *terra_archive_content_type(const terra_archive *a);

/* ---- an archive as a height source (what `terra render --archive` draws) ---------------------- */

/* What a renderer needs to draw the archive as it was baked: its grid, levels and area. */
typedef struct terra_archive_source_info {
    terra_grid_desc grid;       /* tile0_size (tile_size_m) and cells of the tiles */
    int levels;                 /* levels 0 .. levels-1 are baked */
    double bounds[4];           /* the baked area: min x, min z, max x, max z (metres) */
    float min_height, max_height;
} terra_archive_source_info;

/* Opens a local-frame archive of regular grid tiles (terra bake's) as a source: heights and
 * surfaces at the lattice points of every level, each point from the coarsest level holding it
 * (so the lattice rule of terra/source.h holds across levels and tiles), points outside the area
 * clamped to its edge, height ranges from the index. Requests must use the archive's lattice
 * (spacing tile0 / cells * 2^L). Thread-safe, decoding on every calling thread at once: decoded tiles
 * are kept in a cache found by a hash of the tile key (128 tiles, least recently used evicted first;
 * more only while calls running at that moment hold them), whose lock is held for lookups only.
 * Refuses geographic archives, tiles that are not grids, and archives lacking a level from 0 up
 * (TERRA_E_UNSUPPORTED, naming the file). info may be NULL. */
TERRA_API terra_status terra_archive_source_create(const char *path, terra_source **out, terra_archive_source_info *info);

#ifdef __cplusplus
}
#endif
#endif
