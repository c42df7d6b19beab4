/* libterra-cook internal: what terra reads of a scenery itself before assimp sees it
 * (io/cook/scenery_check.c): the declared counts of a PLY or OFF header against the file's size, a
 * glTF's node graph and the URIs of its buffers and images. Pure functions over bytes: no file is
 * opened, nothing of a declared size is allocated (fuzz/fuzz_scenery.c). */
#ifndef TERRA_SCENERY_CHECK_H
#define TERRA_SCENERY_CHECK_H

#include "terra/core.h"

/* The most of a PLY or OFF file's head looked at: its header must end within it. */
#define TERRA_SCENERY_HEAD_MAX ((size_t)1 << 20)

typedef struct terra_scenery_declared {
    /* glTF 2.0: the triangles declared by the primitives (modes TRIANGLES, TRIANGLE_STRIP,
     * TRIANGLE_FAN) of the meshes assimp loads: those of the nodes reached from the default scene,
     * the skins and the animations. */
    uint64_t triangles;
    bool known;                 /* false: not a glTF 2.0, or a reference it could not follow */
    /* glTF: the URIs of its buffers and images (data: ones aside), in the file's order. */
    char **uris;
    size_t uri_count;
} terra_scenery_declared;

TERRA_INTERNAL void terra_scenery_declared_free(terra_scenery_declared *d);

/* How many of the file's first bytes terra_scenery_check_head wants, given its first n (at least
 * min(20, file_size)) and its size: a PLY or OFF file's first TERRA_SCENERY_HEAD_MAX, a .gltf
 * whole, a .glb up to the end of its JSON chunk (at most file_size), 0 for anything else. */
TERRA_INTERNAL uint64_t terra_scenery_head_size(const char *path, const uint8_t *first, size_t n, uint64_t file_size);

/* Checks the first n bytes of a scenery of file_size bytes (n as terra_scenery_head_size says, or
 * less where the file is shorter). TERRA_E_FORMAT / TERRA_E_CORRUPT / TERRA_E_UNSUPPORTED naming
 * path, the place (header line, JSON member, node) and the problem:
 *  - PLY: a header that does not end within TERRA_SCENERY_HEAD_MAX, an element count that is not
 *    a number, elements needing more bytes than follow the header (ASCII: 2 bytes a property,
 *    binary: the sizes of its scalars and list counts; 1 byte an element at least);
 *  - OFF: vertices and faces needing more bytes than follow the counts (2 bytes each);
 *  - glTF (.gltf, .glb, JSON that parses): a child index that is not a node, a node with two
 *    parents, a cycle, a node more than max_depth below a root; a buffer or image URI that is
 *    absolute, has a scheme (data: aside) or climbs out of the scene's folder with "..".
 * declared gets what the file declares (terra_scenery_declared_free, also after an error). */
TERRA_INTERNAL terra_status terra_scenery_check_head(const char *path, const uint8_t *data, size_t n,
                                                     uint64_t file_size, int max_depth,
                                                     terra_scenery_declared *declared);

#endif
