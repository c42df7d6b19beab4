/* The packed tile codec (terra/tile_codec.h; the layout is in docs/FORMAT.md).
 *
 * The body, before zstd:
 *   88 bytes   the quantized-mesh header, as in the tile
 *   varint     vertex count, triangle count, extension bits (TERRA_QMESH_HAS_*)
 *   uint8      flags: 1 = edge lists as predicted, 2 = triangle turns follow the indices
 *   varint n, n bytes   the indices in meshoptimizer's index codec (none without triangles)
 *   [turns]    one byte per triangle (0..2): how far to turn the decoded triangle back
 *   residuals  u, v, height: vertex_count low bytes, then vertex_count high bytes each (zig-zag of
 *              the value minus its prediction, modulo 2^16); normals: two planes of bytes (modulo
 *              256); materials: low and high planes like u
 *   [edges]    four lists: varint count, varint indices
 *   [water mask: varint size, bytes] [metadata: varint size, bytes]
 * Byte planes keep the bytes that are nearly always 0 together, which zstd then stores in almost
 * nothing.
 *
 * Prediction: triangles are walked in order; a corner naming the next new vertex (first-use order)
 * is predicted from the triangle's other corners already known: across the edge they span, the
 * parallelogram with the earlier triangle that shares that edge (a + b - opposite), else their
 * midpoint; one corner known: its value; none: the previous vertex. The walk needs only the
 * indices, so the decoder repeats it before it reads a single value. Everything is integer
 * arithmetic: the same bytes decode the same on every machine. */
#include "terra/tile_codec.h"
#include "terra/archive_io.h"

#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

enum { FLAG_EDGES_PREDICTED = 1, FLAG_TURNS = 2 };
#define EXT_BITS (TERRA_QMESH_HAS_NORMALS | TERRA_QMESH_HAS_WATER_MASK | TERRA_QMESH_HAS_METADATA | TERRA_QMESH_HAS_MATERIAL)
#define NONE UINT32_MAX

/* ---- growing byte buffer and bounded reader ------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static uint8_t *wb_grow(wbuf *b, size_t more) {
    if (b->oom) return NULL;
    if (b->n + more > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < b->n + more) ncap *= 2;
        uint8_t *np = terra_realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return NULL;
        }
        b->p = np;
        b->cap = ncap;
    }
    uint8_t *at = b->p + b->n;
    b->n += more;
    return at;
}

static void wb_bytes(wbuf *b, const void *src, size_t n) {
    uint8_t *at = wb_grow(b, n);
    if (at && n) memcpy(at, src, n);
}

static void wb_varint(wbuf *b, uint64_t x) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
        x >>= 7;
    } while (x);
    wb_bytes(b, tmp, n);
}

typedef struct {
    const uint8_t *p;
    size_t n, at;
} rbuf;

static const uint8_t *rb_take(rbuf *r, size_t n) {
    if (n > r->n - r->at) return NULL;
    const uint8_t *p = r->p + r->at;
    r->at += n;
    return p;
}

static bool rb_varint(rbuf *r, uint64_t *out) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        const uint8_t *b = rb_take(r, 1);
        if (!b) return false;
        x |= (uint64_t)(*b & 0x7f) << shift;
        if (!(*b & 0x80)) {
            *out = x;
            return true;
        }
    }
    return false;
}

/* A varint that must be at most `max`. */
static bool rb_count(rbuf *r, uint64_t max, uint32_t *out) {
    uint64_t x;
    if (!rb_varint(r, &x) || x > max) return false;
    *out = (uint32_t)x;
    return true;
}

/* ---- the prediction walk ------------------------------------------------------------------- */

/* For vertex k: the two corners it is predicted from and the vertex opposite their edge (NONE
 * where absent). */
typedef struct {
    uint32_t a, b, o;
} pred_ref;

static uint64_t edge_hash(uint32_t from, uint32_t to) {
    uint64_t k = ((uint64_t)from << 32 | to) * 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
}

/* Directed edge -> the third corner of the first triangle that has it. */
typedef struct {
    uint32_t *from, *to, *third;
    size_t mask;
} edge_map;

static bool edge_map_init(edge_map *m, size_t edges) {
    size_t cap = 16;
    while (cap < edges * 2) cap *= 2;
    m->from = terra_alloc(cap * 3 * sizeof *m->from);
    if (!m->from) return false;
    m->to = m->from + cap;
    m->third = m->to + cap;
    m->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) m->from[i] = NONE;
    return true;
}

static void edge_map_put(edge_map *m, uint32_t from, uint32_t to, uint32_t third) {
    for (size_t i = edge_hash(from, to) & m->mask;; i = (i + 1) & m->mask) {
        if (m->from[i] == NONE) {
            m->from[i] = from, m->to[i] = to, m->third[i] = third;
            return;
        }
        if (m->from[i] == from && m->to[i] == to) return;
    }
}

static uint32_t edge_map_get(const edge_map *m, uint32_t from, uint32_t to) {
    for (size_t i = edge_hash(from, to) & m->mask; m->from[i] != NONE; i = (i + 1) & m->mask)
        if (m->from[i] == from && m->to[i] == to) return m->third[i];
    return NONE;
}

/* Fills ref[vc] from the indices. TERRA_E_CORRUPT when the indices are not in first-use order or
 * name a vertex past vc (hostile packed input; a tile that decoded never has either). */
static terra_status prediction_walk(const uint32_t *idx, uint32_t tc, uint32_t vc, pred_ref *ref) {
    edge_map em;
    if (!edge_map_init(&em, (size_t)tc * 3)) return terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    uint32_t next = 0;
    for (uint32_t t = 0; t < tc; t++) {
        const uint32_t *c = idx + 3 * (size_t)t;
        for (int k = 0; k < 3; k++) {
            if (c[k] > next || c[k] >= vc) {
                terra_free(em.from);
                return terra_fail(TERRA_E_CORRUPT, "tile codec: triangle %u names vertex %u, past the next new one (%u of %u)",
                                  t, c[k], next, vc);
            }
            if (c[k] < next) continue;
            /* the corners after this one in winding order, if already known */
            const uint32_t p = c[(k + 1) % 3], q = c[(k + 2) % 3];
            const bool pk = p < next, qk = q < next;
            pred_ref r = {NONE, NONE, NONE};
            if (pk && qk) {
                r.a = p, r.b = q;
                /* this triangle has edge q -> p opposite the new corner; its neighbour has p -> q */
                r.o = edge_map_get(&em, p, q);
            } else if (pk || qk) {
                r.a = pk ? p : q;
            } else if (next > 0) {
                r.a = next - 1;
            }
            ref[next++] = r;
        }
        edge_map_put(&em, c[0], c[1], c[2]);
        edge_map_put(&em, c[1], c[2], c[0]);
        edge_map_put(&em, c[2], c[0], c[1]);
    }
    for (; next < vc; next++) ref[next] = (pred_ref){next ? next - 1 : NONE, NONE, NONE};
    terra_free(em.from);
    return TERRA_OK;
}

/* The prediction of value k of x (0..max) from its reference. */
static uint32_t predict(const pred_ref *r, const uint16_t *x, int32_t max, bool parallelogram) {
    if (r->a == NONE) return 0;
    if (r->b == NONE) return x[r->a];
    if (parallelogram && r->o != NONE) {
        int32_t p = (int32_t)x[r->a] + x[r->b] - x[r->o];
        return (uint32_t)(p < 0 ? 0 : p > max ? max : p);
    }
    return ((uint32_t)x[r->a] + x[r->b]) / 2;
}

static uint16_t zz16(uint16_t d) { return (uint16_t)((d << 1) ^ (uint16_t)-(int16_t)(d >> 15)); }
static uint16_t unzz16(uint16_t z) { return (uint16_t)((z >> 1) ^ (uint16_t)-(z & 1)); }
static uint8_t zz8(uint8_t d) { return (uint8_t)((d << 1) ^ (uint8_t)-(int8_t)(d >> 7)); }
static uint8_t unzz8(uint8_t z) { return (uint8_t)((z >> 1) ^ (uint8_t)-(z & 1)); }

/* Residuals of one 16-bit attribute as a low and a high byte plane. */
static void put_plane16(wbuf *b, const pred_ref *ref, const uint16_t *x, uint32_t vc, int32_t max, bool pgram) {
    uint8_t *lo = wb_grow(b, 2 * (size_t)vc);
    if (!lo) return;
    uint8_t *hi = lo + vc;
    for (uint32_t k = 0; k < vc; k++) {
        uint16_t z = zz16((uint16_t)(x[k] - predict(&ref[k], x, max, pgram)));
        lo[k] = (uint8_t)z;
        hi[k] = (uint8_t)(z >> 8);
    }
}

static bool get_plane16(rbuf *r, const pred_ref *ref, uint16_t *x, uint32_t vc, int32_t max, bool pgram) {
    const uint8_t *lo = rb_take(r, 2 * (size_t)vc);
    if (!lo) return false;
    const uint8_t *hi = lo + vc;
    for (uint32_t k = 0; k < vc; k++)
        x[k] = (uint16_t)(predict(&ref[k], x, max, pgram) + unzz16((uint16_t)(lo[k] | hi[k] << 8)));
    return true;
}

/* Normals: two oct bytes a vertex, predicted by their neighbours' mean, one plane per byte. */
static uint8_t predict_normal(const pred_ref *r, const uint8_t *n, int c) {
    if (r->a == NONE) return 128;
    if (r->b == NONE) return n[2 * r->a + c];
    return (uint8_t)((n[2 * r->a + c] + n[2 * r->b + c]) / 2);
}

/* ---- edges ------------------------------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The edge lists terra's encoders write: the vertices on each side of the tile (u or v at 0 or
 * 32767), west and east by increasing v, south and north by increasing u, ties by index. All four
 * lists into `edges` (vc * 4 at most... callers give 4 * vc), counts into count[4]. */
static terra_status predicted_edges(const terra_qmesh *m, uint32_t *edges, uint32_t count[4]) {
    uint64_t *key = terra_alloc((m->vertex_count ? m->vertex_count : 1) * sizeof *key);
    if (!key) return terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    for (int s = 0; s < 4; s++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < m->vertex_count; i++) {
            const bool ns = s == TERRA_QMESH_WEST || s == TERRA_QMESH_EAST;
            const uint16_t at = ns ? m->u[i] : m->v[i];
            const uint16_t want = s == TERRA_QMESH_WEST || s == TERRA_QMESH_SOUTH ? 0 : TERRA_QMESH_MAX_COORD;
            if (at == want) key[n++] = (uint64_t)(ns ? m->v[i] : m->u[i]) << 32 | i;
        }
        qsort(key, n, sizeof *key, cmp_u64);
        for (uint32_t k = 0; k < n; k++) *edges++ = (uint32_t)key[k];
        count[s] = n;
    }
    terra_free(key);
    return TERRA_OK;
}

static bool edges_as_predicted(const terra_qmesh *m, const uint32_t *pe, const uint32_t pc[4]) {
    for (int s = 0; s < 4; s++) {
        if (m->edge_count[s] != pc[s] || (pc[s] && memcmp(m->edges[s], pe, pc[s] * sizeof *pe))) return false;
        pe += pc[s];
    }
    return true;
}

/* ---- packing ---------------------------------------------------------------------------------- */

/* The meshoptimizer index stream and the turn of each triangle (turn[t] = r: the original triangle
 * is the decoded one started at corner r; meshoptimizer may turn triangles, keeping winding). */
static terra_status pack_indices(wbuf *b, const terra_qmesh *m) {
    const size_t ni = (size_t)m->triangle_count * 3;
    if (!ni) {
        wb_varint(b, 0);
        return TERRA_OK;
    }
    size_t cap = meshopt_encodeIndexBufferBound(ni, m->vertex_count);
    uint8_t *enc = terra_alloc(cap);
    uint32_t *dec = terra_alloc(ni * sizeof *dec);
    uint8_t *turn = terra_alloc(m->triangle_count);
    terra_status st = TERRA_OK;
    if (!enc || !dec || !turn) st = terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    size_t en = st ? 0 : meshopt_encodeIndexBuffer(enc, cap, m->indices, ni);
    if (!st && (!en || meshopt_decodeIndexBuffer(dec, ni, sizeof *dec, enc, en) != 0))
        st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: meshoptimizer cannot code these indices");
    bool turned = false;
    for (uint32_t t = 0; !st && t < m->triangle_count; t++) {
        const uint32_t *o = m->indices + 3 * (size_t)t, *d = dec + 3 * (size_t)t;
        int r = 0;
        while (r < 3 && !(d[r] == o[0] && d[(r + 1) % 3] == o[1] && d[(r + 2) % 3] == o[2])) r++;
        if (r == 3) st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: meshoptimizer changed triangle %u", t);
        turn[t] = (uint8_t)r;
        turned |= r != 0;
    }
    if (!st) {
        b->p[b->n - 1] |= turned ? FLAG_TURNS : 0; /* the flags byte was the last written */
        wb_varint(b, en);
        wb_bytes(b, enc, en);
        if (turned) wb_bytes(b, turn, m->triangle_count);
    }
    terra_free(enc);
    terra_free(dec);
    terra_free(turn);
    return st;
}

static terra_status build_body(const uint8_t *qm, const terra_qmesh *m, wbuf *b) {
    const uint32_t vc = m->vertex_count;
    pred_ref *ref = terra_alloc((vc ? vc : 1) * sizeof *ref);
    uint32_t *pe = terra_alloc((4 * (size_t)vc + 1) * sizeof *pe);
    uint32_t pc[4];
    terra_status st = ref && pe ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    if (!st) st = prediction_walk(m->indices, m->triangle_count, vc, ref);
    if (!st) st = predicted_edges(m, pe, pc);
    if (st) goto done;
    const bool edges_predicted = edges_as_predicted(m, pe, pc);
    wb_bytes(b, qm, TERRA_QMESH_HEADER_SIZE);
    wb_varint(b, vc);
    wb_varint(b, m->triangle_count);
    wb_varint(b, m->extensions & EXT_BITS);
    uint8_t flags = edges_predicted ? FLAG_EDGES_PREDICTED : 0;
    wb_bytes(b, &flags, 1);
    if (b->oom) goto oom;
    st = pack_indices(b, m);
    if (st) goto done;
    put_plane16(b, ref, m->u, vc, TERRA_QMESH_MAX_COORD, true);
    put_plane16(b, ref, m->v, vc, TERRA_QMESH_MAX_COORD, true);
    put_plane16(b, ref, m->h, vc, TERRA_QMESH_MAX_COORD, true);
    if (m->extensions & TERRA_QMESH_HAS_NORMALS) {
        uint8_t *pl = wb_grow(b, 2 * (size_t)vc);
        for (uint32_t k = 0; pl && k < vc; k++)
            for (int c = 0; c < 2; c++)
                pl[c * (size_t)vc + k] = zz8((uint8_t)(m->normals[2 * k + c] - predict_normal(&ref[k], m->normals, c)));
    }
    if (m->extensions & TERRA_QMESH_HAS_MATERIAL) put_plane16(b, ref, m->materials, vc, UINT16_MAX, false);
    if (!edges_predicted)
        for (int s = 0; s < 4; s++) {
            wb_varint(b, m->edge_count[s]);
            for (uint32_t i = 0; i < m->edge_count[s]; i++) wb_varint(b, m->edges[s][i]);
        }
    if (m->extensions & TERRA_QMESH_HAS_WATER_MASK) {
        wb_varint(b, m->water_mask_size);
        wb_bytes(b, m->water_mask, m->water_mask_size);
    }
    if (m->extensions & TERRA_QMESH_HAS_METADATA) {
        wb_varint(b, m->metadata_size);
        wb_bytes(b, m->metadata, m->metadata_size);
    }
    if (!b->oom) goto done;
oom:
    st = terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
done:
    terra_free(ref);
    terra_free(pe);
    return st;
}

/* The largest body a tile of raw_n bytes may have: what pack accepts and unpack inflates. */
static size_t body_limit(size_t raw_n) { return 2 * raw_n + 65536; }

terra_status terra_tile_codec_pack(const uint8_t *qm, size_t n, int level, uint8_t **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    terra_qmesh m;
    terra_status st = terra_qmesh_decode(qm, n, NULL, &m);
    if (st) return st;
    /* only a tile the encoder writes byte for byte can come back byte for byte */
    size_t cap = terra_qmesh_encoded_size(&m), wn = 0;
    uint8_t *re = terra_alloc(cap ? cap : 1);
    if (!re) st = terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    else if ((m.extensions & ~EXT_BITS) || m.unknown_extensions || terra_qmesh_encode(&m, re, cap, &wn) != TERRA_OK ||
             wn != n || memcmp(re, qm, n) != 0)
        st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: the tile is not as terra's encoder writes it (extensions, "
                                             "padding or normals differ): it cannot be packed");
    terra_free(re);
    wbuf b = {0};
    if (!st) st = build_body(qm, &m, &b);
    terra_qmesh_free(&m);
    if (!st && b.n > body_limit(n))
        st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: packing would grow the tile (%zu bytes for %zu)", b.n, n);
    uint8_t *z = NULL;
    size_t zn = 0;
    if (!st) {
        size_t zcap = ZSTD_compressBound(b.n) + 1;
        z = terra_alloc(zcap);
        if (!z) st = terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
        else {
            z[0] = TERRA_TILE_CODEC_VERSION;
            size_t r = ZSTD_compress(z + 1, zcap - 1, b.p, b.n, level ? level : 15);
            if (ZSTD_isError(r)) st = terra_fail(TERRA_E_IO, "tile codec: zstd: %s", ZSTD_getErrorName(r));
            zn = r + 1;
        }
    }
    terra_free(b.p);
    /* the promise is exact: check it here, where a failure can still be stored otherwise */
    uint8_t *back = NULL;
    size_t back_n = 0;
    if (!st) {
        st = terra_tile_codec_unpack(z, zn, n, &back, &back_n);
        if (!st && (back_n != n || memcmp(back, qm, n) != 0))
            st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: the packed tile does not unpack to the tile");
        else if (st && st != TERRA_E_NOMEM) /* out of memory says nothing of the tile: not stored otherwise */
            st = terra_fail(TERRA_E_UNSUPPORTED, "tile codec: the packed tile does not unpack: %s", terra_last_error());
        terra_free(back);
    }
    if (st) {
        terra_free(z);
        return st;
    }
    *out = z;
    *out_n = zn;
    return TERRA_OK;
}

/* ---- unpacking -------------------------------------------------------------------------------- */

#define CORRUPT(what) terra_fail(TERRA_E_CORRUPT, "tile codec: damaged packed tile (%s)", what)

static terra_status unpack_body(rbuf *r, size_t max_out, uint8_t **out, size_t *out_n) {
    const uint8_t *hdr = rb_take(r, TERRA_QMESH_HEADER_SIZE);
    uint32_t vc, tc, ext;
    const uint8_t *flags;
    /* the counts the quantized-mesh output must hold: 6 bytes a vertex, 6 a triangle at least */
    if (!hdr || !rb_count(r, max_out / 6, &vc) || !rb_count(r, max_out / 6, &tc) || !rb_count(r, EXT_BITS, &ext) ||
        !(flags = rb_take(r, 1)) || (*flags & ~(FLAG_EDGES_PREDICTED | FLAG_TURNS)))
        return CORRUPT("header or counts");
    const size_t bpi = vc > 65536 ? 4 : 2;
    /* the least the quantized-mesh tile takes (no padding, no edges, no extensions) */
    if (TERRA_QMESH_HEADER_SIZE + 4 + 6 * (size_t)vc + 4 + 3 * (size_t)tc * bpi + 16 > max_out)
        return terra_fail(TERRA_E_CAPACITY, "tile codec: %u vertices and %u triangles need more than %zu bytes", vc, tc,
                          max_out);
    /* every per-vertex plane is in the body: 6 bytes a vertex at least */
    if (6 * (size_t)vc > r->n - r->at) return CORRUPT("fewer bytes than the vertices need");
    terra_qmesh m;
    memset(&m, 0, sizeof m);
    m.vertex_count = vc;
    m.triangle_count = tc;
    m.extensions = ext;
    const size_t v1 = vc ? vc : 1;
    /* one block: u, v, h, materials (uint16), indices, edges (4 * vc: a vertex sits on at most two
     * sides, and explicit lists are checked against this), references, normals */
    size_t bytes = 4 * v1 * sizeof(uint16_t) + (3 * (size_t)tc + 4 * v1) * sizeof(uint32_t) + v1 * sizeof(pred_ref) + 2 * v1;
    uint8_t *block = terra_alloc(bytes);
    if (!block) return terra_fail(TERRA_E_NOMEM, "tile codec: out of memory for %u vertices", vc);
    m.u = (uint16_t *)block;
    m.v = m.u + v1;
    m.h = m.v + v1;
    uint16_t *mat = m.h + v1;
    m.indices = (uint32_t *)(mat + v1);
    uint32_t *edges = m.indices + 3 * (size_t)tc;
    pred_ref *ref = (pred_ref *)(edges + 4 * v1);
    uint8_t *nrm = (uint8_t *)(ref + v1);
    terra_status st = TERRA_OK;
    uint64_t ilen;
    const uint8_t *ib;
    if (!rb_varint(r, &ilen) || ilen > r->n - r->at || !(ib = rb_take(r, (size_t)ilen)))
        st = CORRUPT("index stream");
    else if (tc && meshopt_decodeIndexBuffer(m.indices, 3 * (size_t)tc, sizeof *m.indices, ib, (size_t)ilen) != 0)
        st = CORRUPT("index codec");
    else if (!tc && ilen)
        st = CORRUPT("indices without triangles");
    if (!st && (*flags & FLAG_TURNS)) {
        const uint8_t *turn = rb_take(r, tc);
        if (!turn) st = CORRUPT("triangle turns");
        for (uint32_t t = 0; !st && t < tc; t++) {
            uint32_t *c = m.indices + 3 * (size_t)t, d[3] = {c[0], c[1], c[2]};
            if (turn[t] > 2) st = CORRUPT("a triangle turn over 2");
            for (int k = 0; !st && k < 3; k++) c[k] = d[(k + turn[t]) % 3];
        }
    }
    if (!st) st = prediction_walk(m.indices, tc, vc, ref);
    if (!st && (!get_plane16(r, ref, m.u, vc, TERRA_QMESH_MAX_COORD, true) ||
                !get_plane16(r, ref, m.v, vc, TERRA_QMESH_MAX_COORD, true) ||
                !get_plane16(r, ref, m.h, vc, TERRA_QMESH_MAX_COORD, true)))
        st = CORRUPT("vertices");
    if (!st && (ext & TERRA_QMESH_HAS_NORMALS)) {
        const uint8_t *pl = rb_take(r, 2 * (size_t)vc);
        if (!pl) st = CORRUPT("normals");
        for (uint32_t k = 0; !st && k < vc; k++)
            for (int c = 0; c < 2; c++)
                nrm[2 * k + c] = (uint8_t)(predict_normal(&ref[k], nrm, c) + unzz8(pl[c * (size_t)vc + k]));
        m.normals = nrm;
    }
    if (!st && (ext & TERRA_QMESH_HAS_MATERIAL)) {
        if (!get_plane16(r, ref, mat, vc, UINT16_MAX, false)) st = CORRUPT("materials");
        m.materials = mat;
    }
    if (!st && (*flags & FLAG_EDGES_PREDICTED)) {
        st = predicted_edges(&m, edges, m.edge_count);
        uint32_t *at = edges;
        for (int s = 0; s < 4; s++) m.edges[s] = at, at += m.edge_count[s];
    } else if (!st) {
        size_t used = 0;
        for (int s = 0; !st && s < 4; s++) {
            if (!rb_count(r, 4 * (uint64_t)v1 - used, &m.edge_count[s])) st = CORRUPT("edge count");
            m.edges[s] = edges + used;
            for (uint32_t i = 0; !st && i < m.edge_count[s]; i++)
                if (!rb_count(r, vc ? vc - 1 : 0, &m.edges[s][i])) st = CORRUPT("edge vertex");
            used += m.edge_count[s];
        }
    }
    const uint8_t *wm = NULL, *meta = NULL;
    if (!st && (ext & TERRA_QMESH_HAS_WATER_MASK) &&
        (!rb_count(r, TERRA_QMESH_WATER_MASK_SIZE, &m.water_mask_size) || !(wm = rb_take(r, m.water_mask_size))))
        st = CORRUPT("water mask");
    if (!st && (ext & TERRA_QMESH_HAS_METADATA) &&
        (!rb_count(r, max_out, &m.metadata_size) || !(meta = rb_take(r, m.metadata_size))))
        st = CORRUPT("metadata");
    if (!st && r->at != r->n) st = CORRUPT("bytes after the tile");
    m.water_mask = (uint8_t *)(uintptr_t)wm;
    m.metadata = (char *)(uintptr_t)meta;
    uint8_t *q = NULL;
    size_t need = st ? 0 : terra_qmesh_encoded_size(&m), wn = 0;
    if (!st && !need) st = terra_fail(TERRA_E_CAPACITY, "tile codec: the tile's counts overflow");
    if (!st && !(q = terra_alloc(need))) st = terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    if (!st) {
        st = terra_qmesh_encode(&m, q, need, &wn);
        if (st == TERRA_E_INVALID || st == TERRA_E_CAPACITY) st = CORRUPT(terra_last_error());
    }
    if (!st && wn > max_out)
        st = terra_fail(TERRA_E_CAPACITY, "tile codec: the tile takes %zu bytes, over the limit of %zu", wn, max_out);
    if (!st) memcpy(q, hdr, TERRA_QMESH_HEADER_SIZE); /* verbatim, whatever bits the doubles hold */
    terra_free(block);
    if (st) {
        terra_free(q);
        return st;
    }
    *out = q;
    *out_n = wn;
    return TERRA_OK;
}

terra_status terra_tile_codec_unpack(const uint8_t *packed, size_t n, size_t max_out, uint8_t **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    if (n < 1) return CORRUPT("empty");
    if (packed[0] != TERRA_TILE_CODEC_VERSION)
        return terra_fail(TERRA_E_VERSION, "tile codec: packed tile of codec version %u, this terra reads version %u",
                          packed[0], TERRA_TILE_CODEC_VERSION);
    unsigned long long bn = ZSTD_getFrameContentSize(packed + 1, n - 1);
    if (bn == ZSTD_CONTENTSIZE_ERROR || bn == ZSTD_CONTENTSIZE_UNKNOWN) return CORRUPT("not a zstd frame with its size");
    if (bn > body_limit(max_out)) return terra_fail(TERRA_E_CAPACITY, "tile codec: a body of %llu bytes, over the limit", bn);
    uint8_t *body = terra_alloc(bn ? (size_t)bn : 1);
    if (!body) return terra_fail(TERRA_E_NOMEM, "tile codec: out of memory");
    size_t got = ZSTD_decompress(body, (size_t)bn, packed + 1, n - 1);
    terra_status st;
    if (ZSTD_isError(got) || got != bn) st = CORRUPT("zstd");
    else {
        rbuf r = {body, (size_t)bn, 0};
        st = unpack_body(&r, max_out, out, out_n);
    }
    terra_free(body);
    return st;
}

/* ---- the codec's preferred order --------------------------------------------------------------- */

terra_status terra_tile_codec_order(terra_qmesh *m) {
    const size_t ni = (size_t)m->triangle_count * 3;
    for (size_t i = 0; i < ni; i++)
        if (m->indices[i] >= m->vertex_count)
            return terra_fail(TERRA_E_INVALID, "tile codec order: index %u of %u vertices", m->indices[i], m->vertex_count);
    uint32_t *tmp = terra_alloc((ni ? ni : 1) * sizeof *tmp);
    if (!tmp) return terra_fail(TERRA_E_NOMEM, "tile codec order: out of memory");
    meshopt_optimizeVertexCache(tmp, m->indices, ni, m->vertex_count);
    memcpy(m->indices, tmp, ni * sizeof *tmp);
    terra_status st = terra_qmesh_reorder(m, NULL);
    /* each triangle started at the corner meshoptimizer's index codec starts it at, so pack stores
     * no turns (turning a triangle can change first-use order: reordered again, twice settles it) */
    size_t cap = meshopt_encodeIndexBufferBound(ni, m->vertex_count);
    uint8_t *enc = st ? NULL : terra_alloc(cap);
    if (!st && !enc) st = terra_fail(TERRA_E_NOMEM, "tile codec order: out of memory");
    for (int pass = 0; !st && ni && pass < 2; pass++) {
        size_t en = meshopt_encodeIndexBuffer(enc, cap, m->indices, ni);
        if (en && meshopt_decodeIndexBuffer(tmp, ni, sizeof *tmp, enc, en) == 0) memcpy(m->indices, tmp, ni * sizeof *tmp);
        st = terra_qmesh_reorder(m, NULL);
    }
    terra_free(enc);
    terra_free(tmp);
    return st;
}
