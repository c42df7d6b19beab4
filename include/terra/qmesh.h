/* terra qmesh: Cesium quantized-mesh-1.0 tiles, encoded and decoded.
 *
 * The layout is the specification's (github.com/CesiumGS/quantized-mesh): an 88-byte header, the
 * vertex data (u, v, height as zig-zag deltas), the triangle indices (high-water-mark coded, 16-bit
 * or, above 65536 vertices, 32-bit after padding to 4 bytes), the four edge lists, then extensions
 * (uint8 id, uint32 little-endian length, payload). See docs/FORMAT.md for terra's material
 * extension and for the local frame.
 *
 * The decoder is meant for untrusted bytes: it checks every count against the bytes that remain
 * before it allocates, never reads outside the buffer, checks every index against the vertex count
 * and every u, v and height against the specification's 0..32767, and refuses Cesium's older heightmap-1.0 tiles with TERRA_E_FORMAT. Decoding works on raw
 * (already decompressed) bytes; gzip is the io library's job (terra_qmesh_decode_any in
 * terra/archive_io.h accepts both).
 */
/* Threads: nothing here keeps state: decode, encode and the helpers may run on any number of threads at
 * once. A terra_qmesh is plain data: several threads may encode or read one tile, while decode, reorder
 * and free write the tile they are given. */
#ifndef TERRA_QMESH_H
#define TERRA_QMESH_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Extension ids. NORMALS, WATER_MASK and METADATA are Cesium's; MATERIAL is terra's own. */
enum {
    TERRA_QMESH_EXT_NORMALS = 1,    /* "octvertexnormals": 2 unsigned oct bytes per vertex */
    TERRA_QMESH_EXT_WATER_MASK = 2, /* "watermask": 1 byte, or 256 x 256 bytes */
    TERRA_QMESH_EXT_METADATA = 4,   /* "metadata": uint32 JSON length, JSON text */
    TERRA_QMESH_EXT_MATERIAL = 116  /* terra "material": uint8 width (1|2), one id per vertex */
};

/* Bits of terra_qmesh.extensions: which extensions the tile carries. */
enum {
    TERRA_QMESH_HAS_NORMALS = 1u << 0,
    TERRA_QMESH_HAS_WATER_MASK = 1u << 1,
    TERRA_QMESH_HAS_METADATA = 1u << 2,
    TERRA_QMESH_HAS_MATERIAL = 1u << 3,
    TERRA_QMESH_HAS_LEGACY_NORMALS = 1u << 4 /* normals came from the big-endian "vertexnormals" */
};

/* Edge lists, in the file's order. */
enum { TERRA_QMESH_WEST = 0, TERRA_QMESH_SOUTH = 1, TERRA_QMESH_EAST = 2, TERRA_QMESH_NORTH = 3 };

#define TERRA_QMESH_HEADER_SIZE 88
#define TERRA_QMESH_MAX_COORD 32767
#define TERRA_QMESH_WATER_MASK_SIZE 65536 /* 256 x 256 */

/* The 88-byte header. Geographic tiles: ECEF metres (WGS84), horizon point in the ellipsoid's
 * scaled space, as Cesium expects. Local tiles: scenery metres (x east, y up, z), see FORMAT.md. */
typedef struct terra_qmesh_header {
    double center[3];
    float min_height, max_height;
    double sphere_center[3];
    double sphere_radius;
    double horizon[3];
} terra_qmesh_header;

/* One tile. For encoding, the caller fills the fields and owns the arrays; a decoded tile owns
 * them (one allocation) until terra_qmesh_free. Arrays that an extension bit does not announce
 * are NULL. */
typedef struct terra_qmesh {
    terra_qmesh_header header;
    uint32_t vertex_count;
    uint32_t triangle_count;
    uint16_t *u, *v, *h;        /* vertex_count each, 0..32767 (the decoder refuses more, the encoder too) */
    uint32_t *indices;          /* 3 * triangle_count, plain (high-water-mark decoded) */
    uint32_t edge_count[4];     /* west, south, east, north */
    uint32_t *edges[4];
    uint32_t extensions;        /* TERRA_QMESH_HAS_* */
    uint8_t *normals;           /* 2 * vertex_count raw oct bytes (Cesium's unsigned encoding) */
    uint8_t *water_mask;        /* water_mask_size bytes: 1 or 65536 */
    uint32_t water_mask_size;
    char *metadata;             /* metadata_size bytes of JSON, plus a terminating NUL when decoded */
    uint32_t metadata_size;
    uint16_t *materials;        /* vertex_count material ids */
    uint32_t unknown_extensions;/* extensions skipped because terra does not know their id */
    void *block_;               /* decoder's allocation */
} terra_qmesh;

/* Decoder options; zero means the default. */
typedef struct terra_qmesh_decode_desc {
    /* Extension lengths: 0 = detect (little-endian, as the specification says; if that does not
     * parse, the legacy big-endian "vertexnormals" convention), 1 = little-endian only,
     * 2 = big-endian only (a layer.json that announces "vertexnormals"). */
    int extension_endian;
    /* Refuse tiles with more vertices / triangles than this (0 = 16 M each). */
    uint32_t max_vertices, max_triangles;
} terra_qmesh_decode_desc;

/* Decodes `size` bytes into *out (zeroed first). desc may be NULL. On failure *out holds nothing
 * to free. Errors: TERRA_E_FORMAT (not quantized-mesh: heightmap-1.0, gzip, too short),
 * TERRA_E_CORRUPT (counts, indices or extensions that do not fit), TERRA_E_CAPACITY (over the
 * limits in desc), TERRA_E_NOMEM. */
TERRA_API terra_status terra_qmesh_decode(const uint8_t *data, size_t size, const terra_qmesh_decode_desc *desc,
                                terra_qmesh *out);
TERRA_API void terra_qmesh_free(terra_qmesh *mesh);

/* True when the bytes look like a heightmap-1.0 tile (65 x 65 heights, child mask, water mask). */
TERRA_API bool terra_qmesh_is_heightmap(const uint8_t *data, size_t size);

/* Largest number of bytes terra_qmesh_encode can write for this mesh (0 if the counts overflow). */
TERRA_API size_t terra_qmesh_encoded_size(const terra_qmesh *mesh);

/* Encodes `mesh` into out[0..capacity); *written receives the byte count. Vertices must be in
 * first-use order (the order the triangle list first names them, unreferenced vertices last):
 * high-water-mark coding needs it; terra_qmesh_reorder puts a mesh in that order. Writes the
 * extensions its bits announce except the legacy normals (never written; normals are written as
 * octvertexnormals). Errors: TERRA_E_INVALID (index out of range, not first-use order, u, v or
 * height over 32767, bad water mask size), TERRA_E_CAPACITY. */
TERRA_API terra_status terra_qmesh_encode(const terra_qmesh *mesh, uint8_t *out, size_t capacity, size_t *written);

/* Permutes the vertices of `mesh` (and its normals, materials, indices and edges) in place into
 * first-use order. If remap is not NULL it receives, for every old vertex, its new index. */
TERRA_API terra_status terra_qmesh_reorder(terra_qmesh *mesh, uint32_t *remap);

/* Cesium's oct encoding of a unit vector into two unsigned bytes, and back. */
TERRA_API void terra_qmesh_oct_encode(const double n[3], uint8_t out[2]);
TERRA_API void terra_qmesh_oct_decode(const uint8_t in[2], double n[3]);

/* ---- geographic frame helpers (WGS84) -------------------------------------------------------- */

#define TERRA_WGS84_A 6378137.0
#define TERRA_WGS84_B 6356752.3142451793

/* Longitude, latitude (radians) and height above the ellipsoid (m) to ECEF metres. */
TERRA_API void terra_qmesh_geodetic_to_ecef(double lon_rad, double lat_rad, double height, double out[3]);
/* The unit ellipsoid normal (the "up" direction) at a longitude and latitude, in ECEF. */
TERRA_API void terra_qmesh_geodetic_up(double lon_rad, double lat_rad, double out[3]);

/* Fills the header of a geographic tile from its vertices' ECEF positions (n x 3 doubles):
 * bounding sphere around them, horizon occlusion point in scaled space (Cesium's
 * EllipsoidalOccluder), min/max heights given, center given. */
TERRA_API void terra_qmesh_header_geographic(terra_qmesh_header *hdr, const double *ecef, size_t n, const double center[3],
                                   double min_height, double max_height);
/* Fills the header of a local tile (scenery metres): center, min/max heights, bounding sphere;
 * the horizon occlusion point is set to the sphere centre (no ellipsoid to hide behind). */
TERRA_API void terra_qmesh_header_local(terra_qmesh_header *hdr, const double *xyz, size_t n, double min_height,
                              double max_height);

/* Tile bounds of a geographic (EPSG:4326, TMS) tile: two root tiles at level 0. Degrees. */
TERRA_API void terra_qmesh_geographic_tile_bounds(int level, int32_t x, int32_t y, double *west, double *south, double *east,
                                        double *north);

#ifdef __cplusplus
}
#endif
#endif
