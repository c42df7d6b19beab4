/* terra tile mesh: an irregular tile (any vertex count) as a loader hands it to a renderer.
 *
 * Grid tiles (grid.h) are all the same size and share one index buffer. A mesh tile carries its
 * own triangles: what an archive of TIN tiles (terra cook) or of grid tiles decodes to. The bytes
 * a loader writes into a streamer's buffer are:
 *
 *     terra_tile_mesh                              header, 40 bytes
 *     terra_tile_mesh_vertex[vertex_count]         10 bytes each
 *     padding to a multiple of 4
 *     uint32_t indices[index_count]                three per triangle, counter-clockwise from +y
 *
 * Positions are quantized as quantized-mesh-1.0 holds them: a vertex lies at
 *     x = u / 32767 * size_x,  z = v / 32767 * size_z,  y = min_height + h / 32767 * (max_height - min_height)
 * relative to the tile's origin (its lower x, lower z corner: key x * side, key y * side). Two
 * tiles of one level therefore place a shared vertex on their common side bit for bit alike in
 * the coordinate across that side (u = 32767 in one, 0 in the other); along the side and in height
 * they may differ by a quantization step, which skirts (skirt_m) hide.
 */
#ifndef TERRA_TILE_MESH_H
#define TERRA_TILE_MESH_H

#include "terra/source.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_TILE_MESH_MAGIC 0x4853454du /* "MESH", little-endian */
#define TERRA_TILE_MESH_MAX_VERTICES (1u << 22)

typedef struct terra_tile_mesh {
    uint32_t magic;               /* TERRA_TILE_MESH_MAGIC */
    uint32_t vertex_count;        /* 3 .. TERRA_TILE_MESH_MAX_VERTICES */
    uint32_t index_count;         /* 3 x triangles, > 0 */
    uint32_t flags;               /* 0 (reserved) */
    float size_x, size_z;         /* metres that u and v 0..32767 span (the tile's side) */
    float min_height, max_height; /* metres that h 0..32767 spans */
    float skirt_m;                /* depth of the skirts hung from the tile's outer sides; 0: none */
    float geometric_error;        /* metres the tile departs from the finest ground (its index entry) */
} terra_tile_mesh;

typedef struct terra_tile_mesh_vertex {
    uint16_t u, v, h;      /* 0..32767 */
    int8_t normal[2];      /* as terra_grid_vertex.normal: octahedral, +y the pole */
    terra_surface surface; /* surface id (terra-material), TERRA_SURFACE_NONE where none */
    uint8_t pad_;          /* 0 */
} terra_tile_mesh_vertex;

/* Bytes of a mesh tile of v vertices and i indices (header, vertices, padding, indices). */
static inline size_t terra_tile_mesh_bytes(uint32_t vertices, uint32_t indices) {
    size_t at = sizeof(terra_tile_mesh) + (size_t)vertices * sizeof(terra_tile_mesh_vertex);
    return ((at + 3) & ~(size_t)3) + (size_t)indices * sizeof(uint32_t);
}
static inline const terra_tile_mesh_vertex *terra_tile_mesh_vertices(const terra_tile_mesh *m) {
    return (const terra_tile_mesh_vertex *)(const void *)(m + 1);
}
static inline const uint32_t *terra_tile_mesh_indices(const terra_tile_mesh *m) {
    size_t at = sizeof(terra_tile_mesh) + (size_t)m->vertex_count * sizeof(terra_tile_mesh_vertex);
    return (const uint32_t *)(const void *)((const uint8_t *)m + ((at + 3) & ~(size_t)3));
}

#ifdef __cplusplus
}
#endif

/* ---- checking a mesh tile and expanding it for drawing ------------------------------------------
 * A renderer draws a mesh tile as terra_grid_vertex and uint32 indices (terra_tile_mesh_expand):
 *  - positions relative to the tile's origin by the formulas above (in double, rounded once to
 *    float: the same for every tile, so u = 32767 in one tile and u = 0 in its neighbour meet bit
 *    for bit when size_x is the tile's side); the morph target is the position itself and the
 *    morph normal the normal (mesh tiles do not morph); level = the key's level;
 *  - a colour 0, 1, 2 per vertex (terra_grid_vertex.colour), different at the three corners of
 *    every triangle, for the barycentric surface blend. A vertex whose triangles need it in more
 *    than one colour is written once per colour (bit-identical but for the colour: at most three
 *    copies). Triangles are coloured growing over shared edges (depth-first), each taking the
 *    colour permutation that reuses the most copies already made, then up to two sweeps move single
 *    triangles to fewer copies: a mesh that can be 3-coloured with every vertex shared (a grid
 *    whose cells are all split alike) gets no copies; grids with random diagonals 29-36%;
 *  - with skirt_m > 0, a skirt: for every triangle edge on the tile's outer side (both ends u = 0,
 *    both u = 32767, both v = 0 or both v = 32767) that no other triangle shares, a vertical quad
 *    of two triangles hanging skirt_m straight down from it. Its upper corners are the edge's own
 *    vertices (the copies its triangle uses), its lower ones copies moved down by skirt_m (y -
 *    skirt_m in float; same normal and surface). Skirts hide the sub-step gaps between neighbours.
 * The tile's triangles come first, in their order and winding, then the skirts' (in edge order);
 * vertices a triangle never uses are left out. */

#include "terra/grid.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Indices a mesh tile may have: six per vertex at most (a planar triangulation has fewer). */
#define TERRA_TILE_MESH_MAX_INDICES (6u * TERRA_TILE_MESH_MAX_VERTICES)

/* What terra_tile_mesh_expand wrote. */
typedef struct terra_tile_mesh_info {
    uint32_t vertices;        /* vertices written: the tile's (with copies), then the skirts' */
    uint32_t indices;         /* indices written: 3 x (triangles + skirt_triangles) */
    uint32_t triangles;       /* the tile's own: index_count / 3 */
    uint32_t skirt_triangles; /* two per outer edge (0 when skirt_m is 0) */
    uint32_t used_vertices;   /* distinct input vertices that some triangle uses */
    uint32_t duplicates;      /* extra copies the colouring made: the tile's vertices written - used_vertices */
} terra_tile_mesh_info;

/* The most terra_tile_mesh_expand can write and needs, for a tile of these counts. */
typedef struct terra_tile_mesh_limits {
    size_t vertices;      /* terra_grid_vertex: min(3 x vertex_count, index_count) + 2 x index_count */
    size_t indices;       /* uint32_t: 7 x index_count */
    size_t scratch_bytes; /* caller-owned working memory */
} terra_tile_mesh_limits;

/* Worst-case sizes for vertex_count and index_count (as a valid header has them; checked).
 * TERRA_E_CORRUPT when the counts break the header's rules (so no size could be trusted). */
TERRA_API terra_status terra_tile_mesh_limits_for(uint32_t vertex_count, uint32_t index_count,
                                                  terra_tile_mesh_limits *out);

/* Checks `bytes` of a mesh tile: TERRA_OK, or TERRA_E_FORMAT (not a mesh tile: another magic),
 * TERRA_E_UNSUPPORTED (reserved flags set) or TERRA_E_CORRUPT naming the broken rule: bytes not
 * what the counts say, vertex_count outside 3 .. TERRA_TILE_MESH_MAX_VERTICES, index_count not a
 * positive multiple of 3 or over TERRA_TILE_MESH_MAX_INDICES, a header value not finite, size_x or
 * size_z not positive, min_height > max_height, skirt_m negative or reaching past a float, a u, v
 * or h over 32767, an index not below vertex_count. Reads nothing outside data[0 .. bytes); data
 * needs no alignment. Pure. */
TERRA_API terra_status terra_tile_mesh_check(const void *data, size_t bytes);

/* Checks the tile (as terra_tile_mesh_check) and expands it for drawing as the comment above
 * says, into vertices[limits.vertices] and indices[limits.indices] with scratch of
 * limits.scratch_bytes (terra_tile_mesh_limits_for of the header's counts; aligned for uint32_t,
 * as malloc's is). `key` gives the vertices' level and names the tile in messages. Allocates
 * nothing; pure otherwise (several threads may expand at once, each with its own arrays). About
 * 0.2 us per triangle on a CI machine (a 64 x 64-cell tile, 8,192 triangles: 1.5 ms). */
TERRA_API terra_status terra_tile_mesh_expand(const void *data, size_t bytes, terra_tile_key key,
                                              terra_grid_vertex *vertices, uint32_t *indices, void *scratch,
                                              terra_tile_mesh_info *info);

#ifdef __cplusplus
}
#endif
#endif
