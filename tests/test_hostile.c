/* Hostile archives: every checksum valid, the contents hostile. A generator takes one honest bake
 * (local frame, grid tiles, two levels) and changes what one tile (or every tile) holds: shifted
 * lattices (u or v in 32768..65534), off-grid and doubled vertices, another grid, no grid, huge and
 * negative counts, bad indices and edges, truncated and padded payloads, broken extensions, header
 * and index values that are not finite or not a range, decompression bombs and raw sizes that lie;
 * each in every compression and in a fine tile and in the coarsest (the one the rules are read
 * from). Every product must be refused by every reader, without a crash, a hang or a flood of
 * messages:
 *   - terra_archive_verify_tiles (one report per bad tile, naming it) and `terra info --verify`
 *     (exit 1, a bounded number of lines, the tile named),
 *   - terra_archive_check_tile with the archive's rules (what every reader decodes through),
 *   - the archive source, sampled over the whole area on every level,
 *   - `terra render --archive` (headless, a few products: it fails once, exit 1, a few lines),
 * and plain reading (terra_archive_read_entry + terra_qmesh_decode, as export and serve read) must
 * refuse whatever is not quantized-mesh and never crash. A last archive has 100,000 bad tiles: its
 * messages stay bounded.
 *
 * `test_hostile --write DIR` writes the products (small ones only) and nothing else: the fuzz seed
 * corpus (fuzz/run.sh). */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/bake.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define CELLS 16
#define NTILES 5 /* level 0: 2 x 2 tiles, level 1: one */
#define FINE 1   /* the tile changed in "fine" products (a level-0 tile) */
#define COARSE 4 /* the coarsest tile: the archive's rules are read from it */
#define ALL (-1)
#define BOMB_BYTES ((size_t)40 << 20) /* more than TERRA_ARCHIVE_MAX_RAW_SIZE */

static char dir[256];

/* ---- the honest tiles ------------------------------------------------------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static terra_tile_key keys[NTILES];
static buf tiles[NTILES];     /* encoded, uncompressed */
static buf other_grid[NTILES]; /* the same tiles as grids of 2 * CELLS cells */
static terra_archive_tile_info infos[NTILES];
static terra_bake_desc bake_desc; /* resolved */

static buf encode(const terra_qmesh *m) {
    buf b = {terra_alloc(terra_qmesh_encoded_size(m)), 0};
    if (!b.p || terra_qmesh_encode(m, b.p, terra_qmesh_encoded_size(m), &b.n) != TERRA_OK) {
        fprintf(stderr, "test_hostile: cannot encode a tile: %s\n", terra_last_error());
        exit(1);
    }
    return b;
}

static void make_tiles(void) {
    terra_source *world;
    if (terra_world_create(&(terra_world_desc){.seed = 5}, &world) != TERRA_OK) exit(1);
    terra_bake_desc in = {.frame = TERRA_FRAME_LOCAL, .levels = 2, .cells = CELLS, .tile0_size = 64,
                          .area = {0, 0, 128, 128}, .threads = 1, .compression = TERRA_COMPRESS_GZIP};
    terra_bake_desc in2 = in;
    in2.cells = 2 * CELLS;
    terra_bake_desc d2;
    terra_tile_key *k;
    size_t count;
    if (terra_bake_desc_resolve(&in, &bake_desc) || terra_bake_desc_resolve(&in2, &d2) ||
        terra_bake_keys(&bake_desc, &k, &count) || count != NTILES) {
        fprintf(stderr, "test_hostile: bake setup: %s\n", terra_last_error());
        exit(1);
    }
    memcpy(keys, k, sizeof keys);
    terra_free(k);
    terra_bake_tile t = {0};
    for (int i = 0; i < NTILES; i++) {
        if (terra_bake_tile_build(world, &bake_desc, keys[i], false, &t)) exit(1);
        tiles[i] = encode(&t.mesh);
        infos[i] = t.info;
        if (terra_bake_tile_build(world, &d2, keys[i], false, &t)) exit(1);
        other_grid[i] = encode(&t.mesh);
    }
    terra_bake_tile_free(&t);
    terra_source_destroy(world);
}

/* ---- byte surgery on an encoded tile ------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void wrf32(uint8_t *p, float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    wr32(p, b);
}
static void wrf64(uint8_t *p, double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    wr32(p, (uint32_t)b), wr32(p + 4, (uint32_t)(b >> 32));
}
static uint16_t zz(uint16_t delta) {
    int16_t d;
    memcpy(&d, &delta, 2);
    return (uint16_t)(((uint16_t)d << 1) ^ (uint16_t)(d >> 15));
}

/* Where the parts of an encoded tile (16-bit indices) lie. */
typedef struct parts {
    uint32_t vc, tc;
    size_t vertices, tc_at, indices, edges, ext;
} parts;
static parts parts_of(const buf *b) {
    parts p = {.vc = rd32(b->p + 88), .vertices = 92};
    p.tc_at = 92 + 6 * (size_t)p.vc;
    p.tc = rd32(b->p + p.tc_at);
    p.indices = p.tc_at + 4;
    p.edges = p.indices + 6 * (size_t)p.tc;
    size_t at = p.edges;
    for (int e = 0; e < 4; e++) at += 4 + 2 * (size_t)rd32(b->p + at);
    p.ext = at;
    return p;
}

/* Rewrites the vertex block of b from u, v, h (zig-zag deltas, as the encoder writes them). */
static void put_vertices(buf *b, const uint16_t *u, const uint16_t *v, const uint16_t *h, uint32_t vc) {
    const uint16_t *arr[3] = {u, v, h};
    for (int a = 0; a < 3; a++) {
        uint16_t prev = 0;
        for (uint32_t i = 0; i < vc; i++) {
            wr16(b->p + 92 + 2 * ((size_t)a * vc + i), zz((uint16_t)(arr[a][i] - prev)));
            prev = arr[a][i];
        }
    }
}

/* ---- the products ----------------------------------------------------------------------------------- */

enum {
    /* payload changes: every compression, a fine and the coarsest tile */
    K_SHIFT_V_ALL, K_SHIFT_U_ALL, K_SHIFT_V, K_V_65534, K_U_32768, K_OFF_GRID, K_DOUBLED, K_H_OVER,
    K_OTHER_GRID, K_NOT_GRID, K_HDR_MIN_NAN, K_HDR_MAX_INF, K_HDR_CENTER_NAN, K_HDR_RADIUS, K_HDR_HORIZON_INF,
    K_HDR_MIN_GT_MAX, K_HDR_OUTSIDE_INDEX, K_VC_HUGE, K_VC_OVER_LIMIT, K_VC_MINUS_ONE, K_VC_ZERO, K_TC_HUGE,
    K_EDGE_COUNT_HUGE, K_INDEX_FIRST, K_INDEX_LAST, K_EDGE_BAD, K_TRUNCATED, K_STRAY_BYTES, K_EXT_LENGTH,
    K_MATERIAL_WIDTH, K_GARBAGE, K_EMPTY, K_HEIGHTMAP, K_GZIP_INSIDE,
    K_PAYLOAD_KINDS,
    /* stored sizes and index entries: one compression each */
    K_RAW_PLUS_ONE = K_PAYLOAD_KINDS, K_RAW_MINUS_ONE, K_RAW_ZERO, K_RAW_AT_CAP, K_RAW_OVER_CAP, K_NONE_RAW_LIE,
    K_GZIP_BOMB, K_GZIP_BOMB_OVER_CAP, K_ZSTD_BOMB, K_ZSTD_NO_SIZE, K_ENTRY_ERROR_NAN, K_ENTRY_MIN_INF,
    K_ENTRY_MIN_GT_MAX, K_ENTRY_EDGE_INF,
    K_KINDS
};

static const char *kind_names[K_KINDS] = {
    "shift_v_all", "shift_u_all", "shift_v", "v_65534", "u_32768", "off_grid", "doubled_vertex", "height_over",
    "other_grid", "not_grid", "hdr_min_nan", "hdr_max_inf", "hdr_center_nan", "hdr_radius_neg", "hdr_horizon_inf",
    "hdr_min_gt_max", "hdr_outside_index", "vc_huge", "vc_over_limit", "vc_minus_one", "vc_zero", "tc_huge",
    "edge_count_huge", "index_first", "index_last", "edge_bad", "truncated", "stray_bytes", "ext_length",
    "material_width", "garbage", "empty", "heightmap", "gzip_inside",
    "raw_plus_one", "raw_minus_one", "raw_zero", "raw_at_cap", "raw_over_cap", "none_raw_lie", "gzip_bomb",
    "gzip_bomb_over_cap", "zstd_bomb", "zstd_no_size", "entry_error_nan", "entry_min_inf", "entry_min_gt_max",
    "entry_edge_inf"};

/* Kinds that are quantized-mesh all the same (plain decoding accepts them; the archive's rules do not). */
static bool plain_decodes(int kind) {
    return kind == K_OFF_GRID || kind == K_DOUBLED || kind == K_OTHER_GRID || kind == K_NOT_GRID ||
           (kind >= K_HDR_MIN_NAN && kind <= K_HDR_OUTSIDE_INDEX);
}
/* Kinds caught by the index entry (terra_archive_entry_at) before any payload is read. */
static bool entry_kind(int kind) {
    return kind == K_RAW_OVER_CAP || kind == K_GZIP_BOMB_OVER_CAP || kind == K_NONE_RAW_LIE ||
           (kind >= K_ENTRY_ERROR_NAN && kind < K_KINDS);
}

/* The changed (uncompressed) payload of tile t for a payload kind. */
static buf mutate(int kind, int t) {
    buf b = {terra_alloc(tiles[t].n + 64), tiles[t].n};
    memcpy(b.p, tiles[t].p, tiles[t].n);
    parts P = parts_of(&b);
    terra_qmesh m;
    if (terra_qmesh_decode(tiles[t].p, tiles[t].n, NULL, &m) != TERRA_OK) exit(1);
    const uint32_t vc = m.vertex_count;
    uint16_t *u = m.u, *v = m.v, *h = m.h; /* changed in place, written back below */
    uint32_t off = 0; /* a vertex inside the tile with u < 32767 */
    while (off < vc && (u[off] == 0 || u[off] == 32767)) off++;
    bool vertices = true;
    switch (kind) {
    case K_SHIFT_V_ALL: case K_SHIFT_V:
        for (uint32_t i = 0; i < vc; i++) v[i] = (uint16_t)(v[i] + 32767);
        break;
    case K_SHIFT_U_ALL:
        for (uint32_t i = 0; i < vc; i++) u[i] = (uint16_t)(u[i] + 32767);
        break;
    case K_V_65534: v[vc / 2] = 65534; break; /* lattice row 2n: passes an off-grid round trip */
    case K_U_32768: u[vc - 1] = 32768; break;
    case K_OFF_GRID: u[off] = (uint16_t)(u[off] + 1); break;
    case K_DOUBLED: u[off] = u[0], v[off] = v[0]; break; /* one point twice, another missing */
    case K_H_OVER: h[3] = 40000; break;
    default: vertices = false;
    }
    if (vertices) put_vertices(&b, u, v, h, vc);
    const float emax = infos[t].max_height;
    terra_qmesh_free(&m);
    switch (kind) {
    case K_OTHER_GRID:
        terra_free(b.p);
        b.n = other_grid[t].n;
        b.p = terra_alloc(b.n);
        memcpy(b.p, other_grid[t].p, b.n);
        break;
    case K_NOT_GRID: { /* a valid quantized-mesh tile: two triangles */
        uint16_t qu[4] = {0, 32767, 0, 32767}, qv[4] = {0, 0, 32767, 32767}, qh[4] = {0, 100, 200, 300};
        uint32_t idx[6] = {0, 1, 2, 2, 1, 3}, w[2] = {0, 2}, s[2] = {0, 1}, e[2] = {1, 3}, n[2] = {2, 3};
        terra_qmesh q = {.vertex_count = 4, .triangle_count = 2, .u = qu, .v = qv, .h = qh, .indices = idx,
                         .edge_count = {2, 2, 2, 2}, .edges = {w, s, e, n}};
        double xyz[12] = {0, 0, 0, 64, 0, 0, 0, 0, 64, 64, 0, 64};
        terra_qmesh_header_local(&q.header, xyz, 4, infos[t].min_height, infos[t].max_height);
        terra_free(b.p);
        b = encode(&q);
        break;
    }
    case K_HDR_MIN_NAN: wrf32(b.p + 24, NAN); break;
    case K_HDR_MAX_INF: wrf32(b.p + 28, INFINITY); break;
    case K_HDR_CENTER_NAN: wrf64(b.p + 8, NAN); break;
    case K_HDR_RADIUS: wrf64(b.p + 56, -HUGE_VAL); break;
    case K_HDR_HORIZON_INF: wrf64(b.p + 80, HUGE_VAL); break;
    case K_HDR_MIN_GT_MAX: wrf32(b.p + 24, emax + 1), wrf32(b.p + 28, emax); break;
    case K_HDR_OUTSIDE_INDEX: wrf32(b.p + 28, emax + 100); break;
    case K_VC_HUGE: wr32(b.p + 88, 2880154539u); break;
    case K_VC_OVER_LIMIT: wr32(b.p + 88, (16u << 20) + 1); break;
    case K_VC_MINUS_ONE: wr32(b.p + 88, P.vc - 1); break;
    case K_VC_ZERO: wr32(b.p + 88, 0); break;
    case K_TC_HUGE: wr32(b.p + P.tc_at, 0xfffffff0u); break;
    case K_EDGE_COUNT_HUGE: wr32(b.p + P.edges, 0x7fffffffu); break;
    case K_INDEX_FIRST: wr16(b.p + P.indices, 1); break;               /* code above the high-water mark */
    case K_INDEX_LAST: wr16(b.p + P.edges - 2, 0xffff); break;
    case K_EDGE_BAD: wr16(b.p + P.edges + 4, P.vc); break;             /* first west edge vertex: one past */
    case K_TRUNCATED: b.n = P.edges; break;
    case K_STRAY_BYTES: memcpy(b.p + b.n, "\x01\x02\x03", 3), b.n += 3; break;
    case K_EXT_LENGTH: wr32(b.p + P.ext + 1, 0x00ffffffu); break;      /* normals: more than remains */
    case K_MATERIAL_WIDTH: { /* the material extension follows the normals */
        size_t at = P.ext + 5 + rd32(b.p + P.ext + 1);
        b.p[at + 5] = 3;
        break;
    }
    case K_GARBAGE: {
        unsigned long long s = 77 + (unsigned long long)t;
        for (size_t i = 0; i < b.n; i++) b.p[i] = (uint8_t)test_rand_u64(&s);
        b.p[0] = 0; /* not gzip */
        break;
    }
    case K_EMPTY: b.n = 0; break;
    case K_HEIGHTMAP: /* a heightmap-1.0 tile's size: 65 x 65 heights, child mask, water mask */
        terra_free(b.p);
        b.n = 65 * 65 * 2 + 2;
        b.p = terra_calloc(1, b.n);
        break;
    case K_GZIP_INSIDE: {
        uint8_t *z;
        size_t zn;
        if (terra_compress(TERRA_COMPRESS_GZIP, 0, tiles[t].p, tiles[t].n, &z, &zn)) exit(1);
        terra_free(b.p);
        b.p = z, b.n = zn;
        break;
    }
    default: break;
    }
    return b;
}

/* gzip of `head` followed by `zeros` zero bytes, streamed (no buffer of their size). */
static buf gzip_bomb(const buf *head, size_t zeros) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
    static uint8_t chunk[1 << 20];
    size_t cap = 1 << 20, n = 0;
    uint8_t *out = terra_alloc(cap);
    size_t left = zeros;
    bool head_done = !head;
    for (;;) {
        int flush = Z_NO_FLUSH;
        if (!head_done) {
            z.next_in = head->p, z.avail_in = (uInt)head->n, head_done = true;
        } else {
            size_t k = left < sizeof chunk ? left : sizeof chunk;
            z.next_in = chunk, z.avail_in = (uInt)k, left -= k;
            if (!left) flush = Z_FINISH;
        }
        int r;
        do {
            if (cap - n < 65536) out = terra_realloc(out, cap *= 2);
            z.next_out = out + n, z.avail_out = (uInt)(cap - n);
            r = deflate(&z, flush);
            n = cap - z.avail_out;
        } while (z.avail_in || (flush == Z_FINISH && r != Z_STREAM_END));
        if (flush == Z_FINISH) break;
    }
    deflateEnd(&z);
    return (buf){out, n};
}

/* zstd frame of `zeros` zero bytes; content_size: whether the frame states its size. */
static buf zstd_frame(const buf *src, size_t zeros, bool content_size) {
    const size_t n = src ? src->n : zeros;
    uint8_t *in = src ? src->p : terra_calloc(1, zeros);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
    buf b = {terra_alloc(ZSTD_compressBound(n)), 0};
    b.n = ZSTD_compress2(c, b.p, ZSTD_compressBound(n), in, n);
    ZSTD_freeCCtx(c);
    if (!src) terra_free(in);
    if (ZSTD_isError(b.n)) exit(1);
    return b;
}

/* Re-seals index entry `i` of the archive at path after `fix` changed it (checksum recomputed). */
static void patch_entry(const char *path, int kind, terra_tile_key key) {
    uint8_t *d;
    size_t n;
    if (terra_io_read_file(path, 1u << 30, &d, &n)) exit(1);
    const uint64_t count = rd32(d + 16), index = rd32(d + 24);
    for (uint64_t i = 0; i < count; i++) {
        uint8_t *p = d + index + i * TERRA_ARCHIVE_ENTRY_SIZE;
        terra_archive_entry e;
        terra_archive_entry_unpack(p, &e);
        if (e.key != key) continue;
        switch (kind) {
        case K_RAW_OVER_CAP: e.raw_size = TERRA_ARCHIVE_MAX_RAW_SIZE + 1; break;
        case K_GZIP_BOMB_OVER_CAP: e.raw_size = (uint32_t)BOMB_BYTES; break;
        case K_NONE_RAW_LIE: e.raw_size = e.size + 10; break;
        case K_ENTRY_ERROR_NAN: e.geometric_error = NAN; break;
        case K_ENTRY_MIN_INF: e.min_height = -INFINITY; break;
        case K_ENTRY_MIN_GT_MAX: e.min_height = e.max_height + 1; break;
        case K_ENTRY_EDGE_INF: e.longest_edge = INFINITY; break;
        default: break;
        }
        e.checksum = terra_archive_entry_checksum(&e, d + e.offset);
        terra_archive_entry_pack(&e, p);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f)) exit(1);
    terra_free(d);
}

typedef struct product {
    int kind, target; /* target: the tile changed, or ALL */
    terra_compression c;
    char name[80];
} product;

/* Writes product p at path: the honest tiles but the target, which is changed as p says. */
static terra_status write_product(const product *p, const char *path) {
    terra_archive_write_desc wd = {.frame = TERRA_FRAME_LOCAL, .compression = p->c, .tile_size_m = 64,
                                   .bounds = {0, 0, 128, 128}, .qmesh_extensions = TERRA_QMESH_HAS_NORMALS | TERRA_QMESH_HAS_MATERIAL};
    terra_archive_writer *w;
    terra_status st = terra_archive_writer_create(path, &wd, &w);
    if (st) return st;
    for (int t = 0; t < NTILES && !st; t++) {
        const bool changed = p->target == ALL || p->target == t;
        buf raw = changed && p->kind < K_PAYLOAD_KINDS ? mutate(p->kind, t) : tiles[t];
        buf stored = {0};
        uint32_t raw_size = (uint32_t)raw.n;
        terra_compression c = p->c;
        if (changed && p->kind == K_GZIP_BOMB) {
            stored = gzip_bomb(&raw, BOMB_BYTES), c = TERRA_COMPRESS_GZIP; /* raw size: the tile's */
        } else if (changed && p->kind == K_GZIP_BOMB_OVER_CAP) {
            stored = gzip_bomb(NULL, BOMB_BYTES), c = TERRA_COMPRESS_GZIP; /* raw size patched below */
        } else if (changed && p->kind == K_ZSTD_BOMB) {
            stored = zstd_frame(NULL, BOMB_BYTES, true), c = TERRA_COMPRESS_ZSTD;
        } else if (changed && p->kind == K_ZSTD_NO_SIZE) {
            stored = zstd_frame(&raw, 0, false), c = TERRA_COMPRESS_ZSTD;
        } else if (c != TERRA_COMPRESS_NONE) {
            if (terra_compress(c, 0, raw.p, raw.n, &stored.p, &stored.n)) exit(1);
        }
        if (changed && p->kind == K_RAW_PLUS_ONE) raw_size++;
        if (changed && p->kind == K_RAW_MINUS_ONE) raw_size--;
        if (changed && p->kind == K_RAW_ZERO) raw_size = 0;
        if (changed && p->kind == K_RAW_AT_CAP) raw_size = TERRA_ARCHIVE_MAX_RAW_SIZE;
        st = c == TERRA_COMPRESS_NONE
                 ? terra_archive_writer_add_stored(w, keys[t], raw.p, raw.n, raw_size, c, &infos[t])
                 : terra_archive_writer_add_stored(w, keys[t], stored.p, stored.n, raw_size, c, &infos[t]);
        if (raw.p != tiles[t].p) terra_free(raw.p);
        terra_free(stored.p);
    }
    if (st) {
        terra_archive_writer_abort(w);
        return st;
    }
    st = terra_archive_writer_finish(w);
    if (!st && entry_kind(p->kind)) patch_entry(path, p->kind, keys[p->target]);
    return st;
}

static int make_products(product *out) {
    int n = 0;
    for (int k = 0; k < K_KINDS; k++) {
        const bool all = k == K_SHIFT_V_ALL || k == K_SHIFT_U_ALL;
        for (int ti = 0; ti < (all ? 1 : 2); ti++) {
            const int target = all ? ALL : ti ? COARSE : FINE;
            for (int c = 0; c < 3; c++) {
                terra_compression cmp = (terra_compression)c;
                if (k >= K_PAYLOAD_KINDS) { /* one compression each */
                    if (c) break;
                    cmp = k == K_NONE_RAW_LIE                                       ? TERRA_COMPRESS_NONE
                          : k == K_RAW_ZERO || k == K_ZSTD_BOMB || k == K_ZSTD_NO_SIZE ? TERRA_COMPRESS_ZSTD
                                                                                       : TERRA_COMPRESS_GZIP;
                }
                product *p = &out[n++];
                *p = (product){.kind = k, .target = target, .c = cmp};
                snprintf(p->name, sizeof p->name, "%s_%s_%s", kind_names[k], all ? "all" : ti ? "coarse" : "fine",
                         terra_compression_name(cmp));
            }
        }
    }
    return n;
}

/* ---- the readers ----------------------------------------------------------------------------------- */

typedef struct reports {
    int calls;
    bool named_target;
    terra_tile_key target;
} reports;

static void on_report(void *user, uint64_t index, const terra_archive_entry *e, terra_status st, const char *problem) {
    (void)index;
    reports *r = user;
    r->calls++;
    char name[64];
    snprintf(name, sizeof name, "tile %d/%d/%d", terra_tile_key_level(r->target), terra_tile_key_x(r->target),
             terra_tile_key_y(r->target));
    if (st != TERRA_OK && strstr(problem, name) && (!e || e->key == r->target)) r->named_target = true;
}

/* Samples the whole area on every level; true when the source refused something. */
static bool source_refuses(const char *path, char *why, size_t why_n) {
    terra_source *src;
    if (terra_archive_source_create(path, &src, NULL) != TERRA_OK) {
        snprintf(why, why_n, "%s", terra_last_error());
        return true;
    }
    bool refused = false;
    static float h[40 * 40];
    static terra_surface s[40 * 40];
    for (int L = 0; L < 2; L++) {
        const int pts = 128 / (4 << L) + 1;
        terra_grid_request r = {.ix0 = -1, .iz0 = -1, .spacing = 4.0 * (1 << L), .nx = pts + 2, .nz = pts + 2};
        if (terra_source_sample(src, &r, h, s) != TERRA_OK) refused = true, snprintf(why, why_n, "%s", terra_last_error());
    }
    float lo, hi, y;
    (void)terra_source_height_range(src, -10, -10, 1e6, 1e6, &lo, &hi); /* bounded by the tiles, not the area */
    (void)terra_source_height(src, 13, 17, &y);
    terra_source_destroy(src);
    return refused;
}

/* Runs `terra info --verify path`: its exit status, the lines it wrote to stderr, and whether
 * they name `tile`. -1 when TERRA_BIN is not set. */
static int cli_verify(const char *path, const char *tile, int *lines, bool *named) {
    const char *bin = getenv("TERRA_BIN");
    *lines = 0, *named = false;
    if (!bin) return -1;
    char err[300], cmd[1200];
    snprintf(err, sizeof err, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "'%s' info --verify '%s' >/dev/null 2>'%s'", bin, path, err);
    int rc = system(cmd);
    FILE *f = fopen(err, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        (*lines)++;
        if (strstr(line, tile)) *named = true;
    }
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void test_honest(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/honest.terra", dir);
    product p = {.kind = K_KINDS, .target = FINE, .c = TERRA_COMPRESS_GZIP};
    CHECK(write_product(&p, path) == TERRA_OK, "%s", terra_last_error());
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    uint64_t bad = 1;
    terra_tile_rules rules;
    CHECK(terra_archive_tile_rules(a, &rules) == TERRA_OK && rules.grid_cells == CELLS, "rules %d: %s", rules.grid_cells,
          terra_last_error());
    CHECK(terra_archive_verify_tiles(a, NULL, NULL, &bad) == TERRA_OK && bad == 0, "%s", terra_last_error());
    terra_archive_close(a);
    char why[512] = "";
    CHECK(!source_refuses(path, why, sizeof why), "the honest archive refused: %s", why);
    int lines;
    bool named;
    int rc = cli_verify(path, "", &lines, &named);
    CHECK(rc == -1 || (rc == 0 && lines == 0), "terra info --verify: exit %d, %d lines", rc, lines);
}

static int products_refused, cli_runs;

static void check_product(const product *p, const char *path) {
    const terra_tile_key target = keys[p->target == ALL ? COARSE : p->target];
    char tile[64];
    snprintf(tile, sizeof tile, "tile %d/%d/%d", terra_tile_key_level(target), terra_tile_key_x(target),
             terra_tile_key_y(target));
    const int failures_before = check_failures_;
    for (int mode = 0; mode < 2; mode++) {
        terra_archive *a;
        terra_archive_open_desc od = {.use_pread = mode == 1};
        if (terra_archive_open(path, &od, &a) != TERRA_OK) {
            CHECK(0, "%s: does not open: %s", p->name, terra_last_error());
            return;
        }
        /* verify: the changed tile reported once, by name (every tile, when all are changed) */
        reports r = {.target = target};
        uint64_t bad = 0;
        terra_status st = terra_archive_verify_tiles(a, on_report, &r, &bad);
        /* a coarsest tile of another grid makes the others wrong instead */
        const bool others = p->kind == K_OTHER_GRID && p->target == COARSE;
        CHECK(st != TERRA_OK && bad >= 1 && (uint64_t)r.calls == bad && (r.named_target || others) &&
                  (p->target == ALL ? bad == NTILES : others ? bad >= NTILES - 1 : bad == 1),
              "%s: verify: status %d, %llu bad, %d reports, named %d", p->name, (int)st, (unsigned long long)bad, r.calls,
              (int)r.named_target);
        /* the storage check alone: entry damage only (payloads have valid checksums) */
        uint64_t bad_storage = 0;
        st = terra_archive_verify(a, &bad_storage);
        CHECK((st != TERRA_OK) == entry_kind(p->kind), "%s: storage verify %d", p->name, (int)st);
        /* the one check readers decode through, and plain reading */
        terra_tile_rules rules = {0};
        terra_status rst = terra_archive_tile_rules(a, &rules);
        terra_archive_entry e;
        terra_status fst = terra_archive_find(a, target, &e);
        if (fst == TERRA_OK) {
            terra_qmesh m;
            uint32_t gv[(2 * CELLS + 1) * (2 * CELLS + 1)];
            st = rst ? rst : terra_archive_check_tile(a, &e, &rules, &m, rules.grid_cells == CELLS ? gv : NULL);
            CHECK(st != TERRA_OK, "%s: check_tile accepted the tile", p->name);
            if (st == TERRA_OK) terra_qmesh_free(&m);
            uint8_t *raw;
            size_t n;
            st = terra_archive_read_entry(a, &e, &raw, &n);
            if (st == TERRA_OK) {
                st = terra_qmesh_decode(raw, n, NULL, &m);
                if (st == TERRA_OK) terra_qmesh_free(&m);
                terra_free(raw);
            }
            CHECK(st != TERRA_OK || plain_decodes(p->kind), "%s: plain read + decode accepted it", p->name);
        } else {
            CHECK(entry_kind(p->kind), "%s: find: %s", p->name, terra_last_error());
        }
        terra_archive_close(a);
    }
    char why[512] = "";
    CHECK(source_refuses(path, why, sizeof why), "%s: the archive source drew it", p->name);
    int lines;
    bool named;
    int rc = cli_verify(path, p->kind == K_OTHER_GRID && p->target == COARSE ? "tile 0/" : tile, &lines, &named);
    if (rc != -1) cli_runs++;
    CHECK(rc == -1 || (rc == 1 && named && lines >= 1 && lines <= 12), "%s: terra info --verify: exit %d, %d lines, named %d",
          p->name, rc, lines, (int)named);
    if (check_failures_ == failures_before) products_refused++;
}

static void test_products(void) {
    static product ps[512];
    int n = make_products(ps);
    char path[400];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s.terra", dir, ps[i].name);
        terra_status st = write_product(&ps[i], path);
        CHECK(st == TERRA_OK, "%s: not written: %s", ps[i].name, terra_last_error());
        if (st) continue;
        int before = check_failures_;
        check_product(&ps[i], path);
        if (check_failures_ == before) unlink(path);
    }
    printf("     %d hostile archives, %d refused by every reader (%d terra info runs)\n", n, products_refused, cli_runs);
    CHECK(products_refused == n);
}

/* `terra render --archive` (headless) on one product: exit status and stderr lines. */
static int cli_render(const char *path, int *lines) {
    const char *bin = getenv("TERRA_BIN");
    const char *asan = getenv("ASAN_OPTIONS");
    char err[300], png[300], cmd[2000];
    snprintf(err, sizeof err, "%s/render_err.txt", dir);
    snprintf(png, sizeof png, "%s/render.png", dir);
    /* LeakSanitizer's exit scan trips on Mesa's driver (see tests/cli_render.sh) */
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS='%s%sdetect_leaks=0' timeout 60 '%s' render --archive '%s' -o '%s' --size 96x64 "
             "--above 30 --pitch -89 >/dev/null 2>'%s'", asan ? asan : "", asan ? ":" : "", bin, path, png, err);
    int rc = system(cmd);
    *lines = 0;
    FILE *f = fopen(err, "r");
    for (int c; f && (c = fgetc(f)) != EOF;) *lines += c == '\n';
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* The drawing command on a few products: each fails once, exit 1, a few lines, no hang. Skipped
 * (with a message) where the honest archive cannot be drawn: no TERRA_BIN or no EGL. */
static void test_render(void) {
    if (!getenv("TERRA_BIN")) {
        printf("     skipped: TERRA_BIN not set\n");
        return;
    }
    char path[400];
    snprintf(path, sizeof path, "%s/honest_render.terra", dir);
    product honest = {.kind = K_KINDS, .target = FINE, .c = TERRA_COMPRESS_GZIP};
    int lines;
    if (write_product(&honest, path) != TERRA_OK || cli_render(path, &lines) != 0) {
        printf("     skipped: terra render cannot draw the honest archive here (no EGL?)\n");
        return;
    }
    static const product some[] = {
        {K_SHIFT_V_ALL, ALL, TERRA_COMPRESS_GZIP, "render_shift_v_all"}, {K_V_65534, FINE, TERRA_COMPRESS_NONE, "render_v_65534"},
        {K_OFF_GRID, FINE, TERRA_COMPRESS_ZSTD, "render_off_grid"},     {K_DOUBLED, COARSE, TERRA_COMPRESS_GZIP, "render_doubled"},
        {K_VC_HUGE, FINE, TERRA_COMPRESS_GZIP, "render_vc_huge"},       {K_GZIP_BOMB, FINE, TERRA_COMPRESS_GZIP, "render_bomb"},
        {K_RAW_PLUS_ONE, FINE, TERRA_COMPRESS_GZIP, "render_raw_lie"},  {K_HDR_MIN_NAN, FINE, TERRA_COMPRESS_NONE, "render_nan"},
        {K_NOT_GRID, COARSE, TERRA_COMPRESS_NONE, "render_not_grid"},   {K_ENTRY_MIN_INF, FINE, TERRA_COMPRESS_GZIP, "render_entry"}};
    for (size_t i = 0; i < sizeof some / sizeof *some; i++) {
        snprintf(path, sizeof path, "%s/%s.terra", dir, some[i].name);
        CHECK(write_product(&some[i], path) == TERRA_OK, "%s", terra_last_error());
        int rc = cli_render(path, &lines);
        CHECK(rc == 1 && lines >= 1 && lines <= 12, "%s: terra render: exit %d, %d lines", some[i].name, rc, lines);
    }
}

/* 100,000 bad tiles: half with damaged index entries, half with payloads that are not tiles. The
 * reports come once per tile; the command's messages stay bounded. */
static void test_many_bad_tiles(void) {
    enum { MANY = 100000 };
    char path[300];
    snprintf(path, sizeof path, "%s/many.terra", dir);
    terra_archive_write_desc wd = {.frame = TERRA_FRAME_LOCAL, .compression = TERRA_COMPRESS_NONE, .tile_size_m = 64,
                                   .bounds = {0, 0, 64 * 400, 64 * 250}};
    terra_archive_writer *w;
    CHECK(terra_archive_writer_create(path, &wd, &w) == TERRA_OK);
    uint8_t junk[40];
    memset(junk, 0x5a, sizeof junk);
    for (int i = 0; i < MANY; i++)
        CHECK(terra_archive_writer_add_stored(w, terra_tile_key_make(0, 0, i % 400, i / 400), junk, sizeof junk,
                                              sizeof junk, TERRA_COMPRESS_NONE, NULL) == TERRA_OK);
    CHECK(terra_archive_writer_finish(w) == TERRA_OK, "%s", terra_last_error());
    /* every other entry: a non-finite error */
    uint8_t *d;
    size_t n;
    CHECK(terra_io_read_file(path, 1u << 30, &d, &n) == TERRA_OK);
    const uint64_t index = rd32(d + 24);
    for (int i = 0; i < MANY; i += 2) {
        terra_archive_entry e;
        uint8_t *p = d + index + (uint64_t)i * TERRA_ARCHIVE_ENTRY_SIZE;
        terra_archive_entry_unpack(p, &e);
        e.geometric_error = NAN;
        e.checksum = terra_archive_entry_checksum(&e, d + e.offset);
        terra_archive_entry_pack(&e, p);
    }
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n && fclose(f) == 0);
    terra_free(d);
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    reports r = {.target = 0};
    uint64_t bad = 0;
    CHECK(terra_archive_verify_tiles(a, on_report, &r, &bad) == TERRA_E_CORRUPT && bad == MANY && r.calls == MANY,
          "%llu bad, %d reports", (unsigned long long)bad, r.calls);
    terra_archive_close(a);
    char why[512];
    CHECK(source_refuses(path, why, sizeof why));
    int lines;
    bool named;
    int rc = cli_verify(path, "100000 of 100000 tiles bad", &lines, &named);
    CHECK(rc == -1 || (rc == 1 && named && lines <= 50), "terra info --verify: exit %d, %d lines (bounded?)", rc, lines);
    unlink(path);
}

/* The fuzz seed corpus: every product small enough to seed a fuzzer. */
static int write_seeds(const char *out) {
    static product ps[512];
    int n = make_products(ps), written = 0;
    char path[600];
    for (int i = 0; i < n; i++) {
        int k = ps[i].kind;
        if (k == K_GZIP_BOMB || k == K_GZIP_BOMB_OVER_CAP || k == K_ZSTD_BOMB) continue;
        snprintf(path, sizeof path, "%s/hostile_%s.terra", out, ps[i].name);
        if (write_product(&ps[i], path) == TERRA_OK) written++;
    }
    product honest = {.kind = K_KINDS, .target = FINE, .c = TERRA_COMPRESS_NONE};
    snprintf(path, sizeof path, "%s/honest_none.terra", out);
    if (write_product(&honest, path) == TERRA_OK) written++;
    printf("test_hostile: %d archives in %s\n", written, out);
    return written ? 0 : 1;
}

int main(int argc, char **argv) {
    make_tiles();
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_seeds(argv[2]);
    snprintf(dir, sizeof dir, "hostile_test_%ld", (long)getpid());
    mkdir(dir, 0755);
    RUN(test_honest);
    RUN(test_products);
    RUN(test_many_bad_tiles);
    RUN(test_render);
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    for (int i = 0; i < NTILES; i++) terra_free(tiles[i].p), terra_free(other_grid[i].p);
    return rc;
}
