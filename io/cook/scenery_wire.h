/* What terra-scenery (tools/terra_scenery.c) hands terra_scenery_read_isolated
 * (io/cook/scenery_client.c) over its stdout: a terra_scenery_wire header, then the arrays -
 * positions (3 doubles a vertex), materials (uint16 a vertex), triangles (3 uint32 each) - then
 * for each layer its tint (3 floats), metres_per_repeat (double), triangles (uint64) and name,
 * for each left-out node its reason (uint32), triangles (uint64) and name, for each file its
 * presence (uint8) and path; a name or path is a uint32 length and its bytes. Both ends are built
 * together, so values go as the machine holds them; the magic and size catch another build. A
 * failure is the message on stderr and exit status 64 + the terra_status (io/child.h). */
#ifndef TERRA_SCENERY_WIRE_H
#define TERRA_SCENERY_WIRE_H

#include "terra/scenery.h"

#define TERRA_SCENERY_WIRE_MAGIC 0x54534357u /* "TSCW" */

typedef struct terra_scenery_wire {
    uint32_t magic;
    uint32_t size;              /* sizeof(terra_scenery_wire) */
    uint64_t vertex_count, triangle_count, layer_count, left_out_count, file_count;
    uint64_t degenerate, duplicate, not_triangles, out_of_range;
} terra_scenery_wire;

/* Writes s to fd as above: false when the reader is gone. */
TERRA_INTERNAL bool terra_scenery_send(int fd, const terra_scenery *s);

#endif
