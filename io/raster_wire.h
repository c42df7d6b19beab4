/* What terra-raster (tools/terra_raster.c) sends terra_raster_read_isolated (io/raster_client.c)
 * through a pipe: this header, then width*height floats. Both ends are built together, so the
 * struct is sent as is; the magic and size catch a reader from another build. */
#ifndef TERRA_RASTER_WIRE_H
#define TERRA_RASTER_WIRE_H

#include "terra/raster.h"

#define TERRA_RASTER_WIRE_MAGIC 0x54524157u /* "TRAW" */

typedef struct terra_raster_wire {
    uint32_t magic;
    uint32_t size;         /* sizeof(terra_raster_wire) */
    terra_raster raster;   /* heights: NULL (they follow) */
} terra_raster_wire;

/* terra_raster_read with the heights counted `copies` times against the memory budget: 1 for a read
 * in the caller's process, 2 for terra-raster (its copy and the caller's are alive at once). */
terra_status terra_raster_read_counted(const terra_raster_desc *desc, int copies, terra_raster *out);

/* TERRA_OK when reading a w x h raster fits the budget: `copies` x 4 bytes a sample plus
 * `working` bytes of buffers. Else TERRA_E_CAPACITY naming the file, its size, the need and the
 * budget. Call before allocating anything of the raster's size. */
terra_status terra_raster_check_budget(const char *path, int w, int h, int copies, size_t working, size_t max_bytes);

/* Scans w x h heights and fills out's size, no-data count and height range: TERRA_E_CORRUPT naming
 * the sample where a height is infinite, TERRA_E_SOURCE when every sample is no-data (NaN). */
terra_status terra_raster_scan_heights(const char *path, const float *hs, int w, int h, terra_raster *out);

/* TERRA_OK when out's georeferencing and spacing put every sample at finite coordinates (the
 * geotransform at the raster's four corners, spacing times its size). Else TERRA_E_UNSUPPORTED
 * naming the file: a mesh written from it would hold infinities. */
terra_status terra_raster_check_extent(const char *path, const terra_raster *out);

/* A PNG that GDAL would read plainly (see io/raster_png.c), read in process with libpng: *handled
 * true with the raster, or with an error that is final (past the memory budget). *handled false:
 * not such a PNG, or it failed; the caller reads it through GDAL, whose answer is then the same. */
terra_status terra_raster_read_png_direct(const terra_raster_desc *desc, terra_raster *out, bool *handled);

#endif
