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

#endif
