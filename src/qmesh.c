/* quantized-mesh-1.0: decoder (safe on untrusted input) and encoder. See terra/qmesh.h. */
#include "terra/qmesh.h"

#include <math.h>
#include <string.h>

/* ---- little-endian access --------------------------------------------------------------------- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint32_t rd32be(const uint8_t *p) {
    return (uint32_t)p[3] | ((uint32_t)p[2] << 8) | ((uint32_t)p[1] << 16) | ((uint32_t)p[0] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static double rdf64(const uint8_t *p) {
    uint64_t b = rd64(p);
    double d;
    memcpy(&d, &b, 8);
    return d;
}
static float rdf32(const uint8_t *p) {
    uint32_t b = rd32(p);
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wrf64(uint8_t *p, double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    wr32(p, (uint32_t)b);
    wr32(p + 4, (uint32_t)(b >> 32));
}
static void wrf32(uint8_t *p, float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    wr32(p, b);
}

static uint16_t zigzag_decode(uint16_t v) { return (uint16_t)((v >> 1) ^ (uint16_t)(-(int)(v & 1))); }
static uint16_t zigzag_encode(uint16_t delta) {
    int16_t d;
    memcpy(&d, &delta, 2); /* two's complement view of the 16-bit difference */
    return (uint16_t)(((uint16_t)d << 1) ^ (uint16_t)(d >> 15));
}

/* ---- heightmap-1.0 --------------------------------------------------------------------------- */

/* heightmap-1.0: 65 x 65 uint16 heights, a child mask byte, then a water mask (1 or 65536 bytes)
 * that may be absent. Those are the only sizes such a tile can have. */
bool terra_qmesh_is_heightmap(const uint8_t *data, size_t size) {
    (void)data;
    const size_t heights = 65 * 65 * 2;
    return size == heights + 1 || size == heights + 2 || size == heights + 1 + TERRA_QMESH_WATER_MASK_SIZE;
}

/* ---- decoding ----------------------------------------------------------------------------------- */

/* Where each part lies in the input, found before anything is allocated. */
typedef struct layout {
    size_t vertex_pos, index_pos, edge_pos[4];
    uint32_t vc, tc, ec[4];
    unsigned bpi; /* bytes per index */
    size_t normals_pos, water_pos, meta_pos, mat_pos;
    uint32_t water_size, meta_size, mat_width;
    uint32_t ext_bits, unknown;
} layout;

static terra_status parse_extensions(const uint8_t *d, size_t size, size_t pos, bool big_endian, layout *L) {
    L->ext_bits = 0;
    L->unknown = 0;
    while (pos < size) {
        if (size - pos < 5)
            return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: %zu stray bytes after the last extension", size - pos);
        uint8_t id = d[pos];
        uint32_t len = big_endian ? rd32be(d + pos + 1) : rd32(d + pos + 1);
        pos += 5;
        if (len > size - pos)
            return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: extension %u claims %u bytes, %zu remain", id, len,
                              size - pos);
        switch (id) {
        case TERRA_QMESH_EXT_NORMALS:
            if ((uint64_t)len != 2ull * L->vc)
                return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: normals extension of %u bytes for %u vertices",
                                  len, L->vc);
            if (!(L->ext_bits & TERRA_QMESH_HAS_NORMALS)) {
                L->ext_bits |= TERRA_QMESH_HAS_NORMALS | (big_endian ? TERRA_QMESH_HAS_LEGACY_NORMALS : 0);
                L->normals_pos = pos;
            }
            break;
        case TERRA_QMESH_EXT_WATER_MASK:
            if (len != 1 && len != TERRA_QMESH_WATER_MASK_SIZE)
                return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: water mask of %u bytes (1 or 65536 expected)", len);
            if (!(L->ext_bits & TERRA_QMESH_HAS_WATER_MASK)) {
                L->ext_bits |= TERRA_QMESH_HAS_WATER_MASK;
                L->water_pos = pos;
                L->water_size = len;
            }
            break;
        case TERRA_QMESH_EXT_METADATA: {
            if (len < 4) return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: metadata extension of %u bytes", len);
            uint32_t jl = big_endian ? rd32be(d + pos) : rd32(d + pos);
            if (jl > len - 4)
                return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: metadata JSON of %u bytes in an extension of %u",
                                  jl, len);
            if (!(L->ext_bits & TERRA_QMESH_HAS_METADATA)) {
                L->ext_bits |= TERRA_QMESH_HAS_METADATA;
                L->meta_pos = pos + 4;
                L->meta_size = jl;
            }
            break;
        }
        case TERRA_QMESH_EXT_MATERIAL: {
            uint32_t w = len ? d[pos] : 0;
            if ((w != 1 && w != 2) || (uint64_t)len != 1ull + (uint64_t)w * L->vc)
                return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: material extension of %u bytes for %u vertices",
                                  len, L->vc);
            if (!(L->ext_bits & TERRA_QMESH_HAS_MATERIAL)) {
                L->ext_bits |= TERRA_QMESH_HAS_MATERIAL;
                L->mat_pos = pos + 1;
                L->mat_width = w;
            }
            break;
        }
        default:
            L->unknown++;
            break;
        }
        pos += len;
    }
    return TERRA_OK;
}

static terra_status parse_layout(const uint8_t *d, size_t size, const terra_qmesh_decode_desc *desc, layout *L,
                                 size_t *ext_pos) {
    uint32_t max_v = desc && desc->max_vertices ? desc->max_vertices : 16u << 20;
    uint32_t max_t = desc && desc->max_triangles ? desc->max_triangles : 16u << 20;
    size_t pos = TERRA_QMESH_HEADER_SIZE;
    if (size < pos + 4)
        return terra_fail(TERRA_E_FORMAT, "quantized-mesh: %zu bytes is too short for a tile (at least 92)", size);
    L->vc = rd32(d + pos);
    pos += 4;
    if (L->vc > max_v)
        return terra_fail(TERRA_E_CAPACITY, "quantized-mesh: %u vertices, over the limit of %u", L->vc, max_v);
    if ((uint64_t)L->vc * 6 > size - pos)
        return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: %u vertices need %llu bytes, %zu remain", L->vc,
                          (unsigned long long)L->vc * 6, size - pos);
    L->vertex_pos = pos;
    pos += (size_t)L->vc * 6;
    L->bpi = L->vc > 65536 ? 4 : 2;
    if (pos % L->bpi) pos += L->bpi - pos % L->bpi;
    if (pos > size || size - pos < 4)
        return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: truncated before the triangle count");
    L->tc = rd32(d + pos);
    pos += 4;
    if (L->tc > max_t)
        return terra_fail(TERRA_E_CAPACITY, "quantized-mesh: %u triangles, over the limit of %u", L->tc, max_t);
    if ((uint64_t)L->tc * 3 * L->bpi > size - pos)
        return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: %u triangles need %llu bytes, %zu remain", L->tc,
                          (unsigned long long)L->tc * 3 * L->bpi, size - pos);
    L->index_pos = pos;
    pos += (size_t)L->tc * 3 * L->bpi;
    static const char *names[4] = {"west", "south", "east", "north"};
    for (int e = 0; e < 4; e++) {
        if (size - pos < 4) return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: truncated before the %s edge", names[e]);
        L->ec[e] = rd32(d + pos);
        pos += 4;
        if ((uint64_t)L->ec[e] * L->bpi > size - pos)
            return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: %s edge of %u vertices does not fit", names[e], L->ec[e]);
        L->edge_pos[e] = pos;
        pos += (size_t)L->ec[e] * L->bpi;
    }
    *ext_pos = pos;
    return TERRA_OK;
}

static uint32_t rd_index(const uint8_t *p, unsigned bpi) { return bpi == 4 ? rd32(p) : rd16(p); }

terra_status terra_qmesh_decode(const uint8_t *d, size_t size, const terra_qmesh_decode_desc *desc, terra_qmesh *out) {
    memset(out, 0, sizeof *out);
    if (!d && size) return terra_fail(TERRA_E_INVALID, "quantized-mesh: NULL data");
    layout L;
    memset(&L, 0, sizeof L);
    size_t ext_pos = 0;
    terra_status st = parse_layout(d, size, desc, &L, &ext_pos);
    int endian = desc ? desc->extension_endian : 0;
    if (st == TERRA_OK) {
        st = parse_extensions(d, size, ext_pos, endian == 2, &L);
        /* Detection: the legacy "vertexnormals" tiles have big-endian extension lengths, which do
         * not parse as little-endian ones. If big-endian parses, take it; otherwise parse the
         * little-endian way again so the error message describes the specification's layout. */
        if (st == TERRA_E_CORRUPT && endian == 0) {
            if (parse_extensions(d, size, ext_pos, true, &L) == TERRA_OK) st = TERRA_OK;
            else (void)parse_extensions(d, size, ext_pos, false, &L);
        }
    }
    bool hm = terra_qmesh_is_heightmap(d, size);
    if (hm && (st != TERRA_OK || L.vc < 3 || L.tc == 0))
        return terra_fail(TERRA_E_FORMAT,
                          "this is a heightmap-1.0 tile (%zu bytes: 65x65 heights, child and water masks), not "
                          "quantized-mesh-1.0; terra reads only quantized-mesh",
                          size);
    /* gzip's magic is only a diagnosis: a tile's CenterX may begin with those two bytes too */
    if (st != TERRA_OK && size >= 2 && d[0] == 0x1f && d[1] == 0x8b)
        return terra_fail(TERRA_E_FORMAT, "quantized-mesh: the data is gzip-compressed; decompress it first");
    if (st != TERRA_OK) return st;

    /* Everything fits: one allocation for every array. */
    size_t n_edges = (size_t)L.ec[0] + L.ec[1] + L.ec[2] + L.ec[3];
    size_t bytes = (size_t)L.vc * 3 * 2 + (size_t)L.tc * 3 * 4 + n_edges * 4;
    bytes = (bytes + 7) & ~(size_t)7;
    size_t off_mat = bytes;
    if (L.ext_bits & TERRA_QMESH_HAS_MATERIAL) bytes += (size_t)L.vc * 2;
    size_t off_norm = bytes;
    if (L.ext_bits & TERRA_QMESH_HAS_NORMALS) bytes += (size_t)L.vc * 2;
    size_t off_water = bytes;
    if (L.ext_bits & TERRA_QMESH_HAS_WATER_MASK) bytes += L.water_size;
    size_t off_meta = bytes;
    if (L.ext_bits & TERRA_QMESH_HAS_METADATA) bytes += (size_t)L.meta_size + 1;
    uint8_t *block = terra_alloc(bytes ? bytes : 1);
    if (!block) return terra_fail(TERRA_E_NOMEM, "quantized-mesh: out of memory for %zu bytes", bytes);
    uint32_t *idx = (uint32_t *)(void *)block; /* 32-bit arrays first: aligned */
    uint32_t *edge = idx + (size_t)L.tc * 3;
    uint16_t *u = (uint16_t *)(void *)(edge + n_edges);
    uint16_t *v = u + L.vc, *h = v + L.vc;

    /* Vertices: zig-zag deltas, 16-bit wrap-around. */
    const uint8_t *pu = d + L.vertex_pos, *pv = pu + 2 * (size_t)L.vc, *ph = pv + 2 * (size_t)L.vc;
    uint16_t au = 0, av = 0, ah = 0;
    for (uint32_t i = 0; i < L.vc; i++) {
        au = (uint16_t)(au + zigzag_decode(rd16(pu + 2 * (size_t)i)));
        av = (uint16_t)(av + zigzag_decode(rd16(pv + 2 * (size_t)i)));
        ah = (uint16_t)(ah + zigzag_decode(rd16(ph + 2 * (size_t)i)));
        /* The specification's range: a reader that maps u, v onto the tile (a lattice, a texture)
         * would otherwise land up to twice the tile's side beyond it. */
        if ((au | av | ah) > TERRA_QMESH_MAX_COORD) {
            terra_free(block);
            return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: vertex %u has u %u, v %u, height %u; each must be 0..%d", i,
                              au, av, ah, TERRA_QMESH_MAX_COORD);
        }
        u[i] = au;
        v[i] = av;
        h[i] = ah;
    }
    /* Triangles: high-water mark. */
    const uint8_t *pi = d + L.index_pos;
    uint32_t highest = 0;
    for (size_t i = 0; i < (size_t)L.tc * 3; i++) {
        uint32_t code = rd_index(pi + i * L.bpi, L.bpi);
        if (code > highest || highest - code >= L.vc) {
            terra_free(block);
            return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: triangle index %zu is out of range (code %u, mark %u, %u vertices)",
                              i, code, highest, L.vc);
        }
        idx[i] = highest - code;
        if (code == 0) highest++;
    }
    /* Edges: plain indices. */
    uint32_t *ep = edge;
    for (int e = 0; e < 4; e++) {
        out->edges[e] = ep;
        out->edge_count[e] = L.ec[e];
        for (uint32_t i = 0; i < L.ec[e]; i++) {
            uint32_t x = rd_index(d + L.edge_pos[e] + (size_t)i * L.bpi, L.bpi);
            if (x >= L.vc) {
                terra_free(block);
                return terra_fail(TERRA_E_CORRUPT, "quantized-mesh: edge %d names vertex %u of %u", e, x, L.vc);
            }
            ep[i] = x;
        }
        ep += L.ec[e];
    }
    terra_qmesh_header *H = &out->header;
    for (int k = 0; k < 3; k++) {
        H->center[k] = rdf64(d + 8 * k);
        H->sphere_center[k] = rdf64(d + 32 + 8 * k);
        H->horizon[k] = rdf64(d + 64 + 8 * k);
    }
    H->min_height = rdf32(d + 24);
    H->max_height = rdf32(d + 28);
    H->sphere_radius = rdf64(d + 56);

    out->vertex_count = L.vc;
    out->triangle_count = L.tc;
    out->u = u;
    out->v = v;
    out->h = h;
    out->indices = idx;
    out->extensions = L.ext_bits;
    out->unknown_extensions = L.unknown;
    if (L.ext_bits & TERRA_QMESH_HAS_MATERIAL) {
        uint16_t *m = (uint16_t *)(void *)(block + off_mat);
        for (uint32_t i = 0; i < L.vc; i++)
            m[i] = L.mat_width == 2 ? rd16(d + L.mat_pos + 2 * (size_t)i) : d[L.mat_pos + i];
        out->materials = m;
    }
    if (L.ext_bits & TERRA_QMESH_HAS_NORMALS) {
        out->normals = block + off_norm;
        memcpy(out->normals, d + L.normals_pos, (size_t)L.vc * 2);
    }
    if (L.ext_bits & TERRA_QMESH_HAS_WATER_MASK) {
        out->water_mask = block + off_water;
        out->water_mask_size = L.water_size;
        memcpy(out->water_mask, d + L.water_pos, L.water_size);
    }
    if (L.ext_bits & TERRA_QMESH_HAS_METADATA) {
        out->metadata = (char *)block + off_meta;
        out->metadata_size = L.meta_size;
        memcpy(out->metadata, d + L.meta_pos, L.meta_size);
        out->metadata[L.meta_size] = 0;
    }
    out->block_ = block;
    return TERRA_OK;
}

void terra_qmesh_free(terra_qmesh *mesh) {
    if (!mesh) return;
    terra_free(mesh->block_);
    memset(mesh, 0, sizeof *mesh);
}

/* ---- encoding ------------------------------------------------------------------------------------ */

size_t terra_qmesh_encoded_size(const terra_qmesh *m) {
    uint64_t vc = m->vertex_count, tc = m->triangle_count;
    uint64_t bpi = vc > 65536 ? 4 : 2;
    uint64_t n = TERRA_QMESH_HEADER_SIZE + 4 + vc * 6 + 2 /* padding */ + 4 + tc * 3 * bpi;
    for (int e = 0; e < 4; e++) n += 4 + (uint64_t)m->edge_count[e] * bpi;
    if (m->extensions & TERRA_QMESH_HAS_NORMALS) n += 5 + 2 * vc;
    if (m->extensions & TERRA_QMESH_HAS_WATER_MASK) n += 5 + m->water_mask_size;
    if (m->extensions & TERRA_QMESH_HAS_METADATA) n += 9 + (uint64_t)m->metadata_size;
    if (m->extensions & TERRA_QMESH_HAS_MATERIAL) n += 6 + 2 * vc;
    if (n > (uint64_t)SIZE_MAX / 2) return 0;
    return (size_t)n;
}

static terra_status check_first_use(const terra_qmesh *m) {
    uint32_t highest = 0;
    for (size_t i = 0; i < (size_t)m->triangle_count * 3; i++) {
        uint32_t x = m->indices[i];
        if (x >= m->vertex_count)
            return terra_fail(TERRA_E_INVALID, "qmesh encode: index %zu names vertex %u of %u", i, x, m->vertex_count);
        if (x > highest)
            return terra_fail(TERRA_E_INVALID,
                              "qmesh encode: vertex %u is used before vertex %u; vertices must be in first-use order "
                              "(terra_qmesh_reorder)",
                              x, highest);
        if (x == highest) highest++;
    }
    return TERRA_OK;
}

terra_status terra_qmesh_encode(const terra_qmesh *m, uint8_t *out, size_t capacity, size_t *written) {
    *written = 0;
    size_t need = terra_qmesh_encoded_size(m);
    if (!need) return terra_fail(TERRA_E_INVALID, "qmesh encode: counts overflow");
    if (m->vertex_count && (!m->u || !m->v || !m->h))
        return terra_fail(TERRA_E_INVALID, "qmesh encode: missing vertex arrays");
    if (m->triangle_count && !m->indices) return terra_fail(TERRA_E_INVALID, "qmesh encode: missing indices");
    terra_status st = check_first_use(m);
    if (st) return st;
    for (uint32_t i = 0; i < m->vertex_count; i++)
        if ((m->u[i] | m->v[i] | m->h[i]) > TERRA_QMESH_MAX_COORD)
            return terra_fail(TERRA_E_INVALID, "qmesh encode: vertex %u has u %u, v %u, height %u; each must be 0..%d", i,
                              m->u[i], m->v[i], m->h[i], TERRA_QMESH_MAX_COORD);
    for (int e = 0; e < 4; e++)
        for (uint32_t i = 0; i < m->edge_count[e]; i++)
            if (m->edges[e][i] >= m->vertex_count)
                return terra_fail(TERRA_E_INVALID, "qmesh encode: edge %d names vertex %u of %u", e, m->edges[e][i],
                                  m->vertex_count);
    if ((m->extensions & TERRA_QMESH_HAS_NORMALS) && !m->normals)
        return terra_fail(TERRA_E_INVALID, "qmesh encode: normals announced but missing");
    if ((m->extensions & TERRA_QMESH_HAS_WATER_MASK) &&
        (!m->water_mask || (m->water_mask_size != 1 && m->water_mask_size != TERRA_QMESH_WATER_MASK_SIZE)))
        return terra_fail(TERRA_E_INVALID, "qmesh encode: water mask must be 1 or 65536 bytes");
    if ((m->extensions & TERRA_QMESH_HAS_METADATA) && m->metadata_size && !m->metadata)
        return terra_fail(TERRA_E_INVALID, "qmesh encode: metadata announced but missing");
    if ((m->extensions & TERRA_QMESH_HAS_MATERIAL) && !m->materials)
        return terra_fail(TERRA_E_INVALID, "qmesh encode: materials announced but missing");
    if (capacity < need)
        return terra_fail(TERRA_E_CAPACITY, "qmesh encode: needs up to %zu bytes, %zu given", need, capacity);

    const terra_qmesh_header *H = &m->header;
    uint8_t *p = out;
    for (int k = 0; k < 3; k++) wrf64(p + 8 * k, H->center[k]);
    wrf32(p + 24, H->min_height);
    wrf32(p + 28, H->max_height);
    for (int k = 0; k < 3; k++) wrf64(p + 32 + 8 * k, H->sphere_center[k]);
    wrf64(p + 56, H->sphere_radius);
    for (int k = 0; k < 3; k++) wrf64(p + 64 + 8 * k, H->horizon[k]);
    size_t pos = TERRA_QMESH_HEADER_SIZE;
    uint32_t vc = m->vertex_count;
    wr32(out + pos, vc);
    pos += 4;
    const uint16_t *arr[3] = {m->u, m->v, m->h};
    for (int a = 0; a < 3; a++) {
        uint16_t prev = 0;
        for (uint32_t i = 0; i < vc; i++) {
            wr16(out + pos, zigzag_encode((uint16_t)(arr[a][i] - prev)));
            prev = arr[a][i];
            pos += 2;
        }
    }
    unsigned bpi = vc > 65536 ? 4 : 2;
    while (pos % bpi) out[pos++] = 0;
    wr32(out + pos, m->triangle_count);
    pos += 4;
    uint32_t highest = 0;
    for (size_t i = 0; i < (size_t)m->triangle_count * 3; i++) {
        uint32_t x = m->indices[i], code = highest - x;
        if (x == highest) highest++;
        if (bpi == 4) wr32(out + pos, code);
        else wr16(out + pos, (uint16_t)code);
        pos += bpi;
    }
    for (int e = 0; e < 4; e++) {
        wr32(out + pos, m->edge_count[e]);
        pos += 4;
        for (uint32_t i = 0; i < m->edge_count[e]; i++) {
            if (bpi == 4) wr32(out + pos, m->edges[e][i]);
            else wr16(out + pos, (uint16_t)m->edges[e][i]);
            pos += bpi;
        }
    }
    if (m->extensions & TERRA_QMESH_HAS_NORMALS) {
        out[pos] = TERRA_QMESH_EXT_NORMALS;
        wr32(out + pos + 1, 2 * vc);
        memcpy(out + pos + 5, m->normals, 2 * (size_t)vc);
        pos += 5 + 2 * (size_t)vc;
    }
    if (m->extensions & TERRA_QMESH_HAS_WATER_MASK) {
        out[pos] = TERRA_QMESH_EXT_WATER_MASK;
        wr32(out + pos + 1, m->water_mask_size);
        memcpy(out + pos + 5, m->water_mask, m->water_mask_size);
        pos += 5 + m->water_mask_size;
    }
    if (m->extensions & TERRA_QMESH_HAS_METADATA) {
        out[pos] = TERRA_QMESH_EXT_METADATA;
        wr32(out + pos + 1, 4 + m->metadata_size);
        wr32(out + pos + 5, m->metadata_size);
        if (m->metadata_size) memcpy(out + pos + 9, m->metadata, m->metadata_size);
        pos += 9 + (size_t)m->metadata_size;
    }
    if (m->extensions & TERRA_QMESH_HAS_MATERIAL) {
        uint16_t maxid = 0;
        for (uint32_t i = 0; i < vc; i++)
            if (m->materials[i] > maxid) maxid = m->materials[i];
        uint32_t w = maxid > 255 ? 2 : 1;
        out[pos] = TERRA_QMESH_EXT_MATERIAL;
        wr32(out + pos + 1, 1 + w * vc);
        out[pos + 5] = (uint8_t)w;
        pos += 6;
        for (uint32_t i = 0; i < vc; i++) {
            if (w == 2) wr16(out + pos, m->materials[i]);
            else out[pos] = (uint8_t)m->materials[i];
            pos += w;
        }
    }
    *written = pos;
    return TERRA_OK;
}

terra_status terra_qmesh_reorder(terra_qmesh *m, uint32_t *remap_out) {
    uint32_t vc = m->vertex_count;
    size_t ni = (size_t)m->triangle_count * 3;
    for (size_t i = 0; i < ni; i++)
        if (m->indices[i] >= vc)
            return terra_fail(TERRA_E_INVALID, "qmesh reorder: index %zu names vertex %u of %u", i, m->indices[i], vc);
    for (int e = 0; e < 4; e++)
        for (uint32_t i = 0; i < m->edge_count[e]; i++)
            if (m->edges[e][i] >= vc) return terra_fail(TERRA_E_INVALID, "qmesh reorder: edge vertex out of range");
    uint32_t *remap = terra_alloc((size_t)vc * sizeof *remap + 1);
    uint16_t *tmp = terra_alloc((size_t)vc * 2 * sizeof *tmp + 1);
    if (!remap || !tmp) {
        terra_free(remap);
        terra_free(tmp);
        return terra_fail(TERRA_E_NOMEM, "qmesh reorder: out of memory");
    }
    for (uint32_t i = 0; i < vc; i++) remap[i] = UINT32_MAX;
    uint32_t next = 0;
    for (size_t i = 0; i < ni; i++)
        if (remap[m->indices[i]] == UINT32_MAX) remap[m->indices[i]] = next++;
    for (uint32_t i = 0; i < vc; i++)
        if (remap[i] == UINT32_MAX) remap[i] = next++;
    uint16_t *arrs[4] = {m->u, m->v, m->h, m->materials};
    for (int a = 0; a < 4; a++) {
        if (!arrs[a]) continue;
        for (uint32_t i = 0; i < vc; i++) tmp[remap[i]] = arrs[a][i];
        memcpy(arrs[a], tmp, (size_t)vc * sizeof *tmp);
    }
    if (m->normals) {
        uint8_t *t8 = (uint8_t *)tmp;
        for (uint32_t i = 0; i < vc; i++) {
            t8[2 * (size_t)remap[i]] = m->normals[2 * (size_t)i];
            t8[2 * (size_t)remap[i] + 1] = m->normals[2 * (size_t)i + 1];
        }
        memcpy(m->normals, t8, (size_t)vc * 2);
    }
    for (size_t i = 0; i < ni; i++) m->indices[i] = remap[m->indices[i]];
    for (int e = 0; e < 4; e++)
        for (uint32_t i = 0; i < m->edge_count[e]; i++) m->edges[e][i] = remap[m->edges[e][i]];
    if (remap_out) memcpy(remap_out, remap, (size_t)vc * sizeof *remap);
    terra_free(remap);
    terra_free(tmp);
    return TERRA_OK;
}

/* ---- Cesium's oct encoding (AttributeCompression.octEncode with 255 steps) ----------------------- */

static double sign_nz(double v) { return v < 0 ? -1.0 : 1.0; }
static uint8_t to_snorm255(double v) {
    double c = v < -1 ? -1 : (v > 1 ? 1 : v);
    return (uint8_t)lround((c * 0.5 + 0.5) * 255.0);
}

void terra_qmesh_oct_encode(const double n[3], uint8_t out[2]) {
    double l1 = fabs(n[0]) + fabs(n[1]) + fabs(n[2]);
    if (!(l1 > 0)) {
        out[0] = out[1] = 128;
        return;
    }
    double x = n[0] / l1, y = n[1] / l1;
    if (n[2] < 0) {
        double ox = (1.0 - fabs(y)) * sign_nz(x), oy = (1.0 - fabs(x)) * sign_nz(y);
        x = ox;
        y = oy;
    }
    out[0] = to_snorm255(x);
    out[1] = to_snorm255(y);
}

void terra_qmesh_oct_decode(const uint8_t in[2], double n[3]) {
    double x = in[0] / 255.0 * 2.0 - 1.0, y = in[1] / 255.0 * 2.0 - 1.0;
    double z = 1.0 - (fabs(x) + fabs(y));
    if (z < 0) {
        double ox = (1.0 - fabs(y)) * sign_nz(x), oy = (1.0 - fabs(x)) * sign_nz(y);
        x = ox;
        y = oy;
    }
    double len = sqrt(x * x + y * y + z * z);
    n[0] = x / len;
    n[1] = y / len;
    n[2] = z / len;
}
