/* libterra-io internal: what a local-frame archive's metadata and index say about its tiles, laid
 * out per level for O(1) questions (is a tile there, its height range with its descendants', its
 * geometric error), as the archive source and the archive mesh loader both ask them. */
#ifndef TERRA_IO_ARCHIVE_INDEX_H
#define TERRA_IO_ARCHIVE_INDEX_H

#include "terra/archive_io.h"

typedef struct arc_level {
    int32_t x0, y0, nx, ny; /* tiles present span [x0, x0+nx) x [y0, y0+ny) */
    float *lo, *hi;         /* nx*ny: the tile's range and its descendants'; lo > hi where absent */
    float *err;             /* nx*ny: the tile's geometric error (index entry); -1 where absent */
} arc_level;

typedef struct arc_index {
    const char *path;  /* the archive's, for messages */
    double tile0;      /* metadata tile_size_m: a level-0 tile's side */
    double area[4];    /* metadata bounds: min x, min z, max x, max z */
    int max_level;
    float glo, ghi;    /* over every tile */
    float margin;      /* a quantization step of the widest tile range, and a millimetre */
    uint32_t max_raw;  /* the largest raw (decompressed) tile */
    arc_level lv[32];
} arc_index;

/* Validates the archive (terra_archive_validate: *layout receives what it holds) and lays out its
 * index; TERRA_E_UNSUPPORTED for a geographic archive. Errors name the file and the problem. */
terra_status arc_index_build(const terra_archive *a, terra_archive_layout *layout, arc_index *out);
void arc_index_free(arc_index *x);
bool arc_index_present(const arc_index *x, int level, int64_t tx, int64_t ty);
/* The tile's geometric error, or -1 when absent. */
float arc_index_error(const arc_index *x, terra_tile_key key);
/* The union of the ranges of the tiles over the rectangle (clamped into the area) on the finest
 * level whose tiles are at least as large, each tile's range covering its descendants, widened by
 * the margin; the global range where no tile lies under it. */
void arc_index_range(const arc_index *x, double x0, double z0, double x1, double z1, float *lo, float *hi);

#endif
