/* terra tile codec: a quantized-mesh-1.0 tile packed into fewer bytes, and back, losslessly.
 *
 * What archives store as compression "packed" (TERRA_COMPRESS_PACKED; docs/FORMAT.md). Unpacking
 * gives back the very bytes that were packed, so every reader hands clients plain
 * quantized-mesh-1.0. A packed tile is one version byte, then one zstd frame holding the tile's
 * header and counts, the triangles in meshoptimizer's index codec (plus how each triangle was
 * turned, when the codec turned it), each vertex's u, v, height, normal and material as the
 * difference from a prediction made out of the vertices already decoded (the parallelogram across
 * the edge the triangle shares with an earlier one), the edge lists (nothing when they are what
 * the tile's border vertices predict), the water mask and metadata.
 *
 * Packing works on tiles that terra_qmesh_encode writes byte for byte (everything terra cooks and
 * bakes); a tile it would write differently (unknown extensions, legacy normals, other padding) is
 * refused with TERRA_E_UNSUPPORTED and is stored otherwise. Unpacking is meant for untrusted bytes:
 * nothing is read outside the input, nothing larger than max_out is produced or allocated.
 *
 * The codec packs best when triangles come in vertex-cache order (meshopt_optimizeVertexCache)
 * and vertices in first-use order, as the quantized-mesh encoder requires anyway:
 * terra_tile_codec_order puts a tile in that order.
 */
/* Threads: pack and unpack keep no state (each call has its own zstd context): any number may run at
 * once. terra_tile_codec_order rewrites the mesh it is given. */
#ifndef TERRA_TILE_CODEC_H
#define TERRA_TILE_CODEC_H

#include "terra/qmesh.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_TILE_CODEC_VERSION 1

/* Packs the quantized-mesh tile qm[0..n) into a new buffer (*out, terra_free). level: zstd level,
 * 0 = 15 (19 packs a cooked St Helens 0.5 % smaller for 10 % more of the cook's time). The result
 * is checked: it unpacks to qm exactly. TERRA_E_UNSUPPORTED when qm is not a tile
 * terra_qmesh_encode writes byte for byte; the decoder's errors when qm is not quantized-mesh. */
TERRA_API terra_status terra_tile_codec_pack(const uint8_t *qm, size_t n, int level, uint8_t **out, size_t *out_n);

/* Unpacks into a new buffer (*out, terra_free) holding the quantized-mesh bytes. Refuses a tile
 * that would be larger than max_out with TERRA_E_CAPACITY, damaged input with TERRA_E_CORRUPT,
 * another codec version with TERRA_E_VERSION. */
TERRA_API terra_status terra_tile_codec_unpack(const uint8_t *packed, size_t n, size_t max_out, uint8_t **out, size_t *out_n);

/* Reorders a tile's triangles for the vertex cache (meshoptimizer), then its vertices (with their
 * normals, materials, indices and edges) into first-use order: the order terra_tile_codec_pack
 * packs smallest. The surface is the same (same triangles, same winding). */
TERRA_API terra_status terra_tile_codec_order(terra_qmesh *mesh);

#ifdef __cplusplus
}
#endif
#endif
