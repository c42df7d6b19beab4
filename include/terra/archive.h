/* terra archive: many tiles in one file, found by where they sit in the quadtree.
 *
 * Layout (all integers little-endian; docs/FORMAT.md has the full description):
 *   header   64 bytes: magic "TERRAARC", format version, flags (frame), tile count, offsets, sizes,
 *            a CRC-32C over the header and the metadata block
 *   metadata JSON (bounds, frame, levels, error per level, the source's manifest)
 *   index    tile_count fixed 48-byte entries sorted by terra_archive_order(key): face, level, then
 *            the Morton (Z-order) code of x, y, so neighbours sit together
 *   payloads each tile compressed on its own (gzip or zstd), referenced by its entry
 *
 * The reader is in the core (no decompression here: it hands out stored bytes and says how they
 * are compressed; terra/archive_io.h decompresses and writes archives). A terra_archive is
 * immutable after terra_archive_open: any number of threads may look up and read through one
 * reader at once (mmap, or pread with explicit offsets; there is no shared cursor).
 */
/* Threads: terra_archive_close must not overlap any other use of the archive; the bytes
 * terra_archive_view_stored hands out live until then. The format functions (order, crc32c, pack and
 * unpack) are pure. */
#ifndef TERRA_ARCHIVE_H
#define TERRA_ARCHIVE_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 added packed tiles (TERRA_COMPRESS_PACKED); a version 1 archive holding one is damaged.
 * Writers write version 2; readers read both. */
#define TERRA_ARCHIVE_VERSION 2
#define TERRA_ARCHIVE_VERSION_MIN 1
#define TERRA_ARCHIVE_MAGIC "TERRAARC"
#define TERRA_ARCHIVE_HEADER_SIZE 64
#define TERRA_ARCHIVE_ENTRY_SIZE 48
#define TERRA_ARCHIVE_MAX_METADATA (16u << 20)
/* The largest raw (decompressed) size an entry may state. terra bake's largest tile (256 x 256
 * cells, normals, materials) is about 2.2 MB, Cesium's tiles are well under 1 MB; the cap bounds
 * what any reader inflates or allocates for one tile, whatever an archive claims (a stored tile of
 * 260 kB can inflate to 256 MB). */
#define TERRA_ARCHIVE_MAX_RAW_SIZE (32u << 20)
/* The largest height (m, either sign) an entry may state: far past any planet's relief (Earth's runs
 * from -11 km to 9 km), far inside a float, so that ranges and their quantization steps stay finite. */
#define TERRA_ARCHIVE_MAX_HEIGHT 1e7f

typedef enum terra_compression {
    TERRA_COMPRESS_NONE = 0,
    TERRA_COMPRESS_GZIP = 1, /* RFC 1952: a server can send it as Content-Encoding: gzip */
    TERRA_COMPRESS_ZSTD = 2,
    /* terra's tile codec (terra/tile_codec.h): readers hand out the quantized-mesh it unpacks to.
     * Only in archives of format version 2. */
    TERRA_COMPRESS_PACKED = 3
} terra_compression;

/* The frame of an archive's tiles (header flags, bits 0..1). */
typedef enum terra_frame {
    TERRA_FRAME_LOCAL = 0,      /* scenery metres; keys are terra's: level 0 finest, signed x, y */
    TERRA_FRAME_GEOGRAPHIC = 1  /* EPSG:4326, TMS: key level = Cesium zoom (0 = the two roots), x, y */
} terra_frame;

/* One index entry. */
typedef struct terra_archive_entry {
    terra_tile_key key;
    uint64_t offset;        /* absolute file offset of the stored payload */
    uint32_t size;          /* stored (compressed) bytes */
    uint32_t raw_size;      /* bytes after decompression (= size when stored uncompressed), at most
                               TERRA_ARCHIVE_MAX_RAW_SIZE */
    uint8_t compression;    /* terra_compression */
    uint8_t flags;          /* reserved, 0 */
    float geometric_error;  /* metres the tile departs from the finest mesh, >= 0 */
    float longest_edge;     /* metres, the tile's longest triangle edge, >= 0 */
    float min_height, max_height; /* these four finite, min_height <= max_height, both within
                                     +-TERRA_ARCHIVE_MAX_HEIGHT */
    uint32_t checksum;      /* CRC-32C over the packed entry (all but this field), then the payload */
} terra_archive_entry;

/* What the header and metadata say. */
typedef struct terra_archive_info {
    uint32_t version;
    uint32_t flags;
    terra_frame frame;
    uint64_t tile_count;
    uint64_t index_offset, data_offset, file_size;
    const char *metadata;   /* NUL-terminated JSON, owned by the reader */
    uint32_t metadata_size;
} terra_archive_info;

typedef struct terra_archive terra_archive;

typedef struct terra_archive_open_desc {
    bool use_pread; /* read with pread instead of mapping the file */
} terra_archive_open_desc;

/* Where an archive's bytes come from when they are not a local file (an archive over HTTP range
 * requests: terra/http.h). read copies n bytes at offset into buf, or fails with a message set by
 * terra_fail; it is called from several threads at once. close (may be NULL) frees user. */
typedef struct terra_archive_reader {
    void *user;
    uint64_t size; /* the archive's bytes in all */
    terra_status (*read)(void *user, uint64_t offset, void *buf, size_t n);
    void (*close)(void *user);
    /* may be NULL: asks for n bytes at offset to be read ahead and returns at once; false when
     * they will not be (terra_archive_prefetch) */
    bool (*prefetch)(void *user, uint64_t offset, size_t n);
} terra_archive_reader;

/* Opens an archive. Refuses another format version with TERRA_E_VERSION (naming both versions),
 * a damaged header or metadata with TERRA_E_CORRUPT, a file of the wrong size (truncated, or with
 * bytes appended) with TERRA_E_CORRUPT. desc may be NULL. A path that is an http:// or https://
 * URL is opened through the opener terra_archive_set_url_opener installed (TERRA_E_UNSUPPORTED
 * when there is none). */
TERRA_API terra_status terra_archive_open(const char *path, const terra_archive_open_desc *desc, terra_archive **out);
/* Opens an archive whose bytes `reader` gives (name names it in messages); the archive owns the
 * reader from then on, and closes it on failure too. The same checks as terra_archive_open. */
TERRA_API terra_status terra_archive_open_reader(const char *name, const terra_archive_reader *reader, terra_archive **out);
/* What terra_archive_open does with a URL, process-wide: fills *reader for url or fails with a
 * message. NULL removes it. Set it before any archive is opened (terra_http_register does). */
typedef terra_status (*terra_archive_url_opener)(const char *url, terra_archive_reader *reader);
TERRA_API void terra_archive_set_url_opener(terra_archive_url_opener opener);
/* Whether path is an http:// or https:// URL. */
TERRA_API bool terra_archive_path_is_url(const char *path);
/* Copies n bytes of the archive file at offset into buf (for serving the file itself):
 * TERRA_E_CORRUPT past the end, TERRA_E_IO when the read fails. */
TERRA_API terra_status terra_archive_read_bytes(const terra_archive *a, uint64_t offset, void *buf, size_t n);
TERRA_API void terra_archive_close(terra_archive *a);
TERRA_API const terra_archive_info *terra_archive_get_info(const terra_archive *a);
/* The path the archive was opened from (for messages). */
TERRA_API const char *terra_archive_path(const terra_archive *a);
/* How messages name tile `key` of `a`, so that a user can look it up: in the geographic frame
 * "tile z/x/y" (the key is Cesium's TMS z/x/y, which terra export, serve and info --tile use); in the
 * local frame terra's key, "tile (level L, x X, y Y)" (level 0 the finest), and with zxy (may be
 * NULL; the tile's z, x, y as terra_tms_from_key gives them) "tile z/x/y (level L, x X, y Y)". A face
 * other than 0 is named too. Writes at most n bytes to buf (TERRA_ARCHIVE_NAME_SIZE holds any
 * name) and returns buf. */
#define TERRA_ARCHIVE_NAME_SIZE 128
TERRA_API const char *terra_archive_tile_name(const terra_archive *a, terra_tile_key key, const int64_t *zxy, char *buf,
                                              size_t n);

/* Entry i of the index (0 .. tile_count-1, in index order). TERRA_E_CORRUPT when its ranges or
 * values are impossible: payload outside the file, unknown compression, flags or reserved bytes not
 * 0, a raw size over TERRA_ARCHIVE_MAX_RAW_SIZE (or, uncompressed, other than the stored size), a
 * negative or non-finite error or longest edge, heights not finite or beyond
 * TERRA_ARCHIVE_MAX_HEIGHT, min_height > max_height (the checksum is checked when the payload is
 * read). */
TERRA_API terra_status terra_archive_entry_at(const terra_archive *a, uint64_t i, terra_archive_entry *out);
/* Entry i from its 48 bytes, read by the caller (a pass over the whole index reads it a block at a
 * time with terra_archive_read_bytes): unpacked and checked as terra_archive_entry_at does. */
TERRA_API terra_status terra_archive_entry_from(const terra_archive *a, uint64_t i, const uint8_t *raw, terra_archive_entry *out);
/* Binary search for a tile: TERRA_OK, TERRA_E_NOT_FOUND, or TERRA_E_CORRUPT. Reads O(log n)
 * entries and nothing else. */
TERRA_API terra_status terra_archive_find(const terra_archive *a, terra_tile_key key, terra_archive_entry *out);
/* Copies the stored payload of `e` into buf (capacity >= e->size) and checks its checksum:
 * TERRA_E_CORRUPT (checksum, range) names the tile. */
TERRA_API terra_status terra_archive_read_stored(const terra_archive *a, const terra_archive_entry *e, void *buf, size_t capacity);
/* The stored payload of `e` in place (mapped readers only; NULL otherwise), checksum checked. */
TERRA_API terra_status terra_archive_view_stored(const terra_archive *a, const terra_archive_entry *e, const uint8_t **data);
/* Asks the system to read the stored payload of `e` ahead (the pages of a mapped file, the file
 * range otherwise, the reader's prefetch for a reader) and returns at once: a hint, nothing is
 * checked here; false when the entry's range lies outside the file or nothing will be read ahead. */
TERRA_API bool terra_archive_prefetch(const terra_archive *a, const terra_archive_entry *e);
/* Checks how every tile is stored: entries (order, ranges, values) and checksums, without
 * decompressing or decoding anything. *bad receives the number of damaged tiles; returns
 * TERRA_E_CORRUPT if there was any. terra_archive_verify_tiles (terra/archive_io.h) also decodes
 * every tile with the rules the readers apply; terra info --verify runs that. */
TERRA_API terra_status terra_archive_verify(const terra_archive *a, uint64_t *bad);

/* ---- format pieces shared with the writer --------------------------------------------------- */

/* The index order: face (3 bits), level (5 bits), then Morton code of x, y (offset binary). */
TERRA_API uint64_t terra_archive_order(terra_tile_key key);
TERRA_API terra_tile_key terra_archive_key_from_order(uint64_t order);

/* CRC-32C (Castagnoli). Start with crc = 0. */
TERRA_API uint32_t terra_crc32c(uint32_t crc, const void *data, size_t n);

TERRA_API void terra_archive_entry_pack(const terra_archive_entry *e, uint8_t *out /* 48 bytes */);
TERRA_API void terra_archive_entry_unpack(const uint8_t *in /* 48 bytes */, terra_archive_entry *e);
/* The checksum an entry must carry for this payload. */
TERRA_API uint32_t terra_archive_entry_checksum(const terra_archive_entry *e, const void *payload);

/* Packs a header (crc computed over it and the metadata). */
TERRA_API void terra_archive_header_pack(const terra_archive_info *info, const char *metadata, uint8_t *out /* 64 bytes */);

TERRA_API const char *terra_compression_name(terra_compression c);
TERRA_API const char *terra_frame_name(terra_frame f);

#ifdef __cplusplus
}
#endif
#endif
