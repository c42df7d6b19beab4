/* libterra-io internal: the metadata's names of quantized-mesh extensions, one table for the
 * writer, the validation (io/archive_validate.c) and layer.json. */
#ifndef TERRA_IO_ARCHIVE_RULES_H
#define TERRA_IO_ARCHIVE_RULES_H

#include <stdint.h>

/* The TERRA_QMESH_HAS_* bit of an extension named in the metadata ("octvertexnormals", "watermask",
 * "metadata", "terra-material"); 0 for a name terra does not know. */
uint32_t arc_extension_bit(const char *name);
/* The metadata's name of the lowest TERRA_QMESH_HAS_* bit set in bits ("unknown" for none of them). */
const char *arc_extension_name(uint32_t bits);

#endif
