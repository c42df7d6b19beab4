/* libterra-io internal: what the archive's readers share: the metadata's names of quantized-mesh
 * extensions (one table for the writer, the validation in io/archive_validate.c and layer.json),
 * tile names in messages, the index read a block at a time, and the one tile check. */
#ifndef TERRA_IO_ARCHIVE_RULES_H
#define TERRA_IO_ARCHIVE_RULES_H

#include "terra/archive_io.h"

#include <stdint.h>

/* The TERRA_QMESH_HAS_* bit of an extension named in the metadata ("octvertexnormals", "watermask",
 * "metadata", "terra-material"); 0 for a name terra does not know. */
uint32_t arc_extension_bit(const char *name);
/* The metadata's name of the lowest TERRA_QMESH_HAS_* bit set in bits ("unknown" for none of them). */
const char *arc_extension_name(uint32_t bits);

/* The levels of a local-frame archive that render, fly and view draw at most
 * (terra_select_desc_resolve's limit); the archive source and mesh refuse more by name. */
#define ARC_DRAWN_LEVELS 24

/* terra_archive_tile_name with z/x/y as `names` maps the key (NULL, or a key outside the z/x/y
 * tree: terra's key alone). */
const char *arc_tile_name(const terra_archive *a, const terra_tms_map *names, terra_tile_key k,
                          char out[TERRA_ARCHIVE_NAME_SIZE]);

/* The index read 1365 entries (64 KiB) at a time, not one read an entry: zero it, then
 * arc_block_entry gives entry i (terra_archive_entry_from), reading the block that holds it when
 * it is not the one held. TERRA_E_CORRUPT: entry i is damaged (the pass may go on); TERRA_E_IO or
 * TERRA_E_NOMEM: the read failed. */
#define ARC_BLOCK 1365
typedef struct arc_block {
    uint64_t first, count;
    uint8_t raw[ARC_BLOCK * TERRA_ARCHIVE_ENTRY_SIZE];
} arc_block;
terra_status arc_block_entry(const terra_archive *a, arc_block *b, uint64_t i, terra_archive_entry *e);

/* terra_archive_check_tile naming the tile by `names` (as arc_tile_name), handing back the bytes
 * checked when bytes is not NULL: the payload as stored (as_stored) or decompressed, *bytes_n long
 * (terra_free). */
terra_status arc_check_tile(const terra_archive *a, const terra_archive_entry *e, const terra_tile_rules *rules,
                            const terra_tms_map *names, terra_qmesh *mesh, uint32_t *grid_vertex, bool as_stored,
                            uint8_t **bytes, size_t *bytes_n);
/* The lattice rule of n cells alone, on a tile already decoded (named as arc_tile_name names it). */
terra_status arc_check_grid(const terra_archive *a, const terra_archive_entry *e, const terra_tms_map *names,
                            const terra_qmesh *m, uint32_t n);

#endif
