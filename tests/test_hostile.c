/* Hostile archives: every checksum valid, the contents hostile, and every terra reader agreeing with
 * `terra info --verify` on each, archive by archive.
 *
 * Tiles: a generator takes one honest bake (local frame, grid tiles, two levels) and changes what
 * one tile (or every tile) holds: shifted lattices (u or v in 32768..65534), off-grid and doubled
 * vertices, another grid, no grid, huge and negative counts, bad indices and edges, truncated and
 * padded payloads, broken extensions, header and index values that are not finite or not a range,
 * decompression bombs and raw sizes that lie; each in every compression and in a fine tile and in
 * the coarsest (the one the rules are read from).
 * The archive as a whole (assembled byte by byte): metadata that is not JSON, empty, nested 100,000
 * deep, not an object, with bytes after it, a NUL after it or inside it (a member only cJSON's full
 * parse sees), bounds given twice, name given twice (in another case: layer.json reads it);
 * tile_size_m negative, a string, 1e-300, 1e308 or missing; bounds inverted, of three numbers, of
 * strings, an object, at 1e15 m, beyond the tiles or missing; a frame, mesh kind or extension list that lies; levels missing
 * between the coarsest and the finest or at the finest; no tiles; a tile at x = y = 2^27 - 1, on
 * face 3, at level 31; entry heights of +-3e38, a negative error or edge, entry or header flags
 * 0xff; a TIN archive whose metadata is not JSON; geographic keys and bounds out of range; a tile
 * above the coarsest level far outside the bounds (the rules must not come from it); bounds that
 * hold none of the tiles (the validation found a fuzzer's out-of-bounds read there). And the
 * tolerated (docs/FORMAT.md): members and extension names terra does not know, extensions the
 * metadata does not list, errors below a child's, counts the index contradicts, grids called
 * "tin", 25 levels (render, fly and view refuse them by name), a sparse TIN archive (a diagonal
 * line of tiles), an honest TIN archive and an honest geographic one; and a diagonal strip of
 * ground cooked by terra cook.
 *
 * Each product has one verdict, and the test asserts that each of these gives it, without a crash,
 * a hang or a flood of messages:
 *   - terra_archive_verify_tiles (each problem reported once, naming the tile or the metadata) and
 *     `terra info --verify` (exit status, a bounded number of lines, the problem named),
 *   - the drawing reader in-process: the archive source sampled over the whole area on every level
 *     (grids), the archive mesh decoding every tile (TINs), the planet's overlay (geographic),
 *   - `terra render --archive` (geographic: --planet --archive): exit status, and a picture of the
 *     ground when it draws,
 *   - `terra export`: exit status; nothing written when it refuses, every tile that layer.json lists
 *     and nothing else when it exports,
 *   - terra serve's opening (terra_archive_validate, what gen_open calls): it refuses what is wrong
 *     with the metadata, the index or the coarsest tile; a hostile fine tile is refused when asked for
 *     (send_tile holds each tile to the archive's rules: 500), as by every reader that decodes it.
 * Plain reading (terra_archive_read_entry + terra_qmesh_decode, as serve sends tiles) must refuse
 * whatever is not quantized-mesh and never crash. A last archive has 100,000 bad tiles: its
 * messages stay bounded.
 *
 * `test_hostile --write DIR` writes the products (small ones only) and nothing else: the fuzz seed
 * corpus (fuzz/run.sh). */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/archive_mesh.h"
#include "terra/bake.h"
#include "terra/io.h"
#include "terra/planet.h"

#include <cjson/cJSON.h>
#include <dirent.h>

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
#define ARCHIVE (-2)
#define BOMB_BYTES ((size_t)40 << 20) /* more than TERRA_ARCHIVE_MAX_RAW_SIZE */
#define SPARSE_SIDE 64 /* the sparse TIN archive's line of level-0 tiles */
#define SPARSE_TILES (2 * SPARSE_SIDE) /* room for its tiles, and any assembled archive's */

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

/* Tile t as a valid quantized-mesh tile of two triangles (a TIN, not a grid), its heights the
 * entry's range. */
static buf quad_tile(int t) {
    uint16_t qu[4] = {0, 32767, 0, 32767}, qv[4] = {0, 0, 32767, 32767}, qh[4] = {0, 100, 200, 300};
    uint32_t idx[6] = {0, 1, 2, 2, 1, 3}, w[2] = {0, 2}, s[2] = {0, 1}, e[2] = {1, 3}, n[2] = {2, 3};
    terra_qmesh q = {.vertex_count = 4, .triangle_count = 2, .u = qu, .v = qv, .h = qh, .indices = idx,
                     .edge_count = {2, 2, 2, 2}, .edges = {w, s, e, n}};
    double xyz[12] = {0, 0, 0, 64, 0, 0, 0, 0, 64, 64, 0, 64};
    terra_qmesh_header_local(&q.header, xyz, 4, infos[t].min_height, infos[t].max_height);
    return encode(&q);
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
    /* the archive as a whole, assembled byte by byte: one product each, tiles stored uncompressed */
    K_META_NOT_JSON, K_ASSEMBLED = K_META_NOT_JSON, K_META_EMPTY, K_META_DEEP, K_META_NOT_OBJECT, K_META_TRAILING,
    K_META_TWICE, K_SIZE_NEGATIVE, K_SIZE_STRING, K_SIZE_TINY, K_SIZE_HUGE, K_SIZE_MISSING, K_BOUNDS_INVERTED,
    K_BOUNDS_THREE, K_BOUNDS_STRINGS, K_BOUNDS_OBJECT, K_BOUNDS_FAR, K_BOUNDS_UNCOVERED, K_BOUNDS_MISSING,
    K_FRAME_OTHER, K_MESH_UNKNOWN, K_EXT_NOT_LIST, K_EXT_NOT_CARRIED, K_LEVEL_GAP, K_LEVEL0_MISSING, K_NO_TILES,
    K_TILE_FAR, K_FACE3, K_LEVEL31, K_HEIGHT_HIGH, K_HEIGHT_LOW, K_ERROR_NEGATIVE, K_EDGE_NEGATIVE, K_ENTRY_FLAGS,
    K_HEADER_FLAGS, K_TIN_META_NOT_JSON, K_GEO_KEY_OUTSIDE, K_GEO_BOUNDS, K_META_NUL_INSIDE, K_META_NUL_END,
    K_NAME_TWICE, K_FAR_COARSEST, K_ALL_OUTSIDE,
    /* tolerated: every reader takes them (but K_LEVELS_25, which render, fly and view refuse by name) */
    K_UNKNOWN_MEMBER, K_TOLERATED = K_UNKNOWN_MEMBER, K_EXT_UNKNOWN, K_EXT_UNLISTED, K_ERRORS_INVERTED, K_COUNTS_LIE,
    K_MESH_TIN_ON_GRID, K_LEVELS_25, K_TIN_HONEST, K_SPARSE_TIN, K_GEO_HONEST, K_HONEST,
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
    "entry_edge_inf",
    "meta_not_json", "meta_empty", "meta_deep", "meta_not_object", "meta_trailing", "meta_twice", "size_negative",
    "size_string", "size_tiny", "size_huge", "size_missing", "bounds_inverted", "bounds_three", "bounds_strings",
    "bounds_object", "bounds_far", "bounds_uncovered", "bounds_missing", "frame_other", "mesh_unknown", "ext_not_list",
    "ext_not_carried", "level_gap", "level0_missing", "no_tiles", "tile_far", "face3", "level31", "height_high",
    "height_low", "error_negative", "edge_negative", "entry_flags", "header_flags", "tin_meta_not_json",
    "geo_key_outside", "geo_bounds", "meta_nul_inside", "meta_nul_end", "name_twice", "far_coarsest", "all_outside",
    "unknown_member", "ext_unknown", "ext_unlisted", "errors_inverted", "counts_lie", "mesh_tin_on_grid", "levels_25",
    "tin_honest", "sparse_tin", "geo_honest", "honest"};

/* What verify says of an assembled product: a problem (refused), or a note (tolerated; NULL: none). */
static const char *says[K_KINDS] = {
    [K_META_NOT_JSON] = "is not JSON", [K_META_EMPTY] = "(0 bytes) is not JSON", [K_META_DEEP] = "stops being JSON at byte 1000",
    [K_META_NOT_OBJECT] = "not a JSON object", [K_META_TRAILING] = "is not JSON: a NUL byte at byte",
    [K_META_TWICE] = "appears 2 times",
    [K_SIZE_NEGATIVE] = "tile_size_m is -64,", [K_SIZE_STRING] = "tile_size_m is \"64\"", [K_SIZE_TINY] = "tile_size_m is 1e-300",
    [K_SIZE_HUGE] = "tile_size_m is 1e+308", [K_SIZE_MISSING] = "tile_size_m is nothing",
    [K_BOUNDS_INVERTED] = "are not x0 < x1", [K_BOUNDS_THREE] = "not four finite numbers",
    [K_BOUNDS_STRINGS] = "not four finite numbers", [K_BOUNDS_OBJECT] = "not four finite numbers",
    [K_BOUNDS_FAR] = "reach past", [K_BOUNDS_UNCOVERED] = "level 0 holds 4 tiles where the bounds need 6",
    [K_BOUNDS_MISSING] = "lacks bounds", [K_FRAME_OTHER] = "frame is \"geographic\"", [K_MESH_UNKNOWN] = "mesh is \"voxel\"",
    [K_EXT_NOT_LIST] = "extensions is \"octvertexnormals\"", [K_EXT_NOT_CARRIED] = "lacks the watermask extension",
    [K_LEVEL_GAP] = "level 1 holds no tiles", [K_LEVEL0_MISSING] = "level 0 holds no tiles", [K_NO_TILES] = "holds no tiles",
    [K_TILE_FAR] = "outside the bounds", [K_FACE3] = "on face 3", [K_LEVEL31] = "levels 2 to 30 hold no tiles",
    [K_HEIGHT_HIGH] = "beyond the", [K_HEIGHT_LOW] = "beyond the", [K_ERROR_NEGATIVE] = "negative, where both are lengths",
    [K_EDGE_NEGATIVE] = "negative, where both are lengths", [K_ENTRY_FLAGS] = "flags 0xff", [K_HEADER_FLAGS] = "header flags 0xff",
    [K_TIN_META_NOT_JSON] = "is not JSON", [K_GEO_KEY_OUTSIDE] = "outside level 1's 4 x 2 tiles",
    [K_GEO_BOUNDS] = "not west < east", [K_META_NUL_INSIDE] = "is not JSON: a NUL byte at byte",
    [K_META_NUL_END] = "is not JSON: a NUL byte at byte", [K_NAME_TWICE] = "member \"name\" appears 2 times",
    [K_FAR_COARSEST] = "outside the bounds", [K_ALL_OUTSIDE] = "outside the bounds",
    [K_LEVELS_25] = "25 levels, exported and served as they are", [K_UNKNOWN_MEMBER] = "\"x_producer\" is not one terra reads",
    [K_EXT_UNKNOWN] = "extension \"x-future\", which terra does not know", [K_ERRORS_INVERTED] = "larger geometric error than",
    [K_COUNTS_LIE] = "metadata says tile_count 99"};

/* Kinds that are quantized-mesh all the same (plain decoding accepts them; the archive's rules do not). */
static bool plain_decodes(int kind) {
    return kind == K_OFF_GRID || kind == K_DOUBLED || kind == K_OTHER_GRID || kind == K_NOT_GRID ||
           (kind >= K_HDR_MIN_NAN && kind <= K_HDR_OUTSIDE_INDEX);
}
/* Kinds caught by the index entry (terra_archive_entry_at) before any payload is read. */
static bool entry_kind(int kind) {
    return kind == K_RAW_OVER_CAP || kind == K_GZIP_BOMB_OVER_CAP || kind == K_NONE_RAW_LIE ||
           (kind >= K_ENTRY_ERROR_NAN && kind < K_ASSEMBLED);
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
    case K_NOT_GRID: /* a valid quantized-mesh tile: two triangles */
        terra_free(b.p);
        b = quad_tile(t);
        break;
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
    int kind, target; /* target: the tile changed, ALL, or ARCHIVE (an assembled product) */
    terra_compression c;
    char name[80];
} product;

static void write_assembled(int kind, const char *path);

/* Writes product p at path: the honest tiles but the target, which is changed as p says (assembled
 * products: the archive as that kind says). */
static terra_status write_product(const product *p, const char *path) {
    if (p->target == ARCHIVE) {
        write_assembled(p->kind, path);
        return TERRA_OK;
    }
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
    for (int k = K_ASSEMBLED; k < K_HONEST; k++) {
        out[n] = (product){.kind = k, .target = ARCHIVE, .c = TERRA_COMPRESS_NONE};
        snprintf(out[n++].name, sizeof out->name, "%s", kind_names[k]);
    }
    for (int k = 0; k < K_ASSEMBLED; k++) {
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

/* ---- archives assembled byte by byte ------------------------------------------------------------- */

typedef struct piece {
    terra_tile_key key;
    buf raw; /* stored uncompressed */
    terra_archive_tile_info info;
    uint8_t flags;
} piece;

static int cmp_piece(const void *a, const void *b) {
    const uint64_t x = terra_archive_order(((const piece *)a)->key), y = terra_archive_order(((const piece *)b)->key);
    return (x > y) - (x < y);
}

/* An archive of header flags `flags`, metadata meta[0..meta_n) and the pieces in index order, every
 * checksum right. */
static void assemble(const char *path, uint32_t flags, const char *meta, size_t meta_n, piece *p, int n) {
    qsort(p, (size_t)n, sizeof *p, cmp_piece);
    terra_archive_info I = {.version = TERRA_ARCHIVE_VERSION, .flags = flags, .tile_count = (uint64_t)n,
                            .metadata_size = (uint32_t)meta_n};
    I.index_offset = TERRA_ARCHIVE_HEADER_SIZE + meta_n;
    I.file_size = I.data_offset = I.index_offset + (uint64_t)n * TERRA_ARCHIVE_ENTRY_SIZE;
    for (int i = 0; i < n; i++) I.file_size += p[i].raw.n;
    uint8_t b[TERRA_ARCHIVE_HEADER_SIZE];
    terra_archive_header_pack(&I, meta, b);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(b, 1, sizeof b, f) == sizeof b && fwrite(meta, 1, meta_n, f) == meta_n;
    for (int i = 0, at = 0; ok && i < n; at += (int)p[i++].raw.n) {
        const terra_archive_tile_info *t = &p[i].info;
        terra_archive_entry e = {.key = p[i].key, .offset = I.data_offset + (uint64_t)at, .size = (uint32_t)p[i].raw.n,
                                 .raw_size = (uint32_t)p[i].raw.n, .flags = p[i].flags, .geometric_error = t->geometric_error,
                                 .longest_edge = t->longest_edge, .min_height = t->min_height, .max_height = t->max_height};
        e.checksum = terra_archive_entry_checksum(&e, p[i].raw.p);
        terra_archive_entry_pack(&e, b);
        ok = fwrite(b, 1, TERRA_ARCHIVE_ENTRY_SIZE, f) == TERRA_ARCHIVE_ENTRY_SIZE;
    }
    for (int i = 0; ok && i < n; i++) ok = fwrite(p[i].raw.p, 1, p[i].raw.n, f) == p[i].raw.n;
    if (!f || fclose(f) != 0 || !ok) {
        fprintf(stderr, "test_hostile: cannot write %s\n", path);
        exit(1);
    }
}

static void set_member(cJSON *m, const char *name, cJSON *value) {
    cJSON_DeleteItemFromObjectCaseSensitive(m, name);
    if (value) cJSON_AddItemToObject(m, name, value);
}

/* The archive an assembled kind is: the honest tiles (as TINs, or keyed as geographic tiles) and
 * the honest metadata (terra's writer's), then the one change the kind names. */
static void write_assembled(int kind, const char *path) {
    static char *honest_meta; /* what the writer writes for the honest tiles */
    if (!honest_meta) {
        terra_archive *a;
        const product h = {.kind = K_HONEST, .target = FINE, .c = TERRA_COMPRESS_NONE};
        if (write_product(&h, path) || terra_archive_open(path, NULL, &a)) exit(1);
        const char *m = terra_archive_get_info(a)->metadata;
        honest_meta = terra_alloc(strlen(m) + 1);
        memcpy(honest_meta, m, strlen(m) + 1);
        terra_archive_close(a);
    }
    const bool tin = kind == K_TIN_META_NOT_JSON || kind == K_TIN_HONEST || kind == K_SPARSE_TIN;
    const bool geo = kind == K_GEO_KEY_OUTSIDE || kind == K_GEO_BOUNDS || kind == K_GEO_HONEST;
    /* geographic: the two roots, three of the eastern root's children */
    const terra_tile_key geo_keys[NTILES] = {terra_tile_key_make(0, 0, 0, 0), terra_tile_key_make(0, 0, 1, 0),
                                             terra_tile_key_make(0, 1, 2, 0), terra_tile_key_make(0, 1, 3, 0),
                                             terra_tile_key_make(0, 1, 2, 1)};
    piece p[SPARSE_TILES];
    int n = 0;
    for (int t = 0; t < NTILES && kind != K_SPARSE_TIN; t++)
        p[n++] = (piece){geo ? geo_keys[t] : keys[t], tin ? quad_tile(t) : tiles[t], infos[t], 0};
    /* a diagonal line of level-0 tiles and their ancestors, as terra cook leaves a strip of ground:
     * each level spread over its side squared of places */
    for (int l = 0; kind == K_SPARSE_TIN && (SPARSE_SIDE >> l); l++)
        for (int i = 0; i < (SPARSE_SIDE >> l); i++)
            p[n++] = (piece){terra_tile_key_make(0, l, i, i), quad_tile(COARSE), infos[COARSE], 0};
    /* one tile more on each level from 2 to 24 over the archive's ground: 25 levels */
    for (int l = 2; kind == K_LEVELS_25 && l < 25; l++)
        p[n++] = (piece){terra_tile_key_make(0, l, 0, 0), tiles[COARSE], infos[COARSE], 0};
    cJSON *m = cJSON_Parse(honest_meta);
    if (tin) set_member(m, "mesh", cJSON_CreateString("tin")), set_member(m, "extensions", cJSON_CreateArray());
    if (kind == K_SPARSE_TIN) /* the centre, where terra render looks, inside a tile of the line */
        set_member(m, "bounds", cJSON_Parse("[0,0,4064,4064]"));
    if (kind == K_SPARSE_TIN || kind == K_LEVELS_25) /* the counts the index has */
        set_member(m, "tile_count", cJSON_CreateNumber(n)),
            set_member(m, "max_level", cJSON_CreateNumber(terra_tile_key_level(p[n - 1].key)));
    if (geo) {
        set_member(m, "frame", cJSON_CreateString("geographic"));
        set_member(m, "bounds", cJSON_Parse(kind == K_GEO_BOUNDS ? "[200,-90,10,90]" : "[0,-90,180,90]"));
        set_member(m, "tile_size_m", NULL);
    }
    uint32_t flags = geo ? TERRA_FRAME_GEOGRAPHIC : TERRA_FRAME_LOCAL;
    const char *text = NULL; /* metadata that is not cJSON's printing of m */
    size_t text_n = 0;
    static char deep[200001];
    switch (kind) {
    case K_META_EMPTY: text = ""; break;
    case K_META_DEEP:
        memset(deep, '[', 100000), memset(deep + 100000, ']', 100000);
        text = deep, text_n = 200000;
        break;
    case K_META_NOT_OBJECT: text = "[1,2,3]"; break;
    case K_META_TWICE: cJSON_AddItemToObject(m, "bounds", cJSON_CreateString("x")); break;
    case K_SIZE_NEGATIVE: set_member(m, "tile_size_m", cJSON_CreateNumber(-64)); break;
    case K_SIZE_STRING: set_member(m, "tile_size_m", cJSON_CreateString("64")); break;
    case K_SIZE_TINY: set_member(m, "tile_size_m", cJSON_CreateNumber(1e-300)); break;
    case K_SIZE_HUGE: set_member(m, "tile_size_m", cJSON_CreateNumber(1e308)); break;
    case K_SIZE_MISSING: set_member(m, "tile_size_m", NULL); break;
    case K_BOUNDS_INVERTED: set_member(m, "bounds", cJSON_Parse("[128,128,0,0]")); break;
    case K_BOUNDS_THREE: set_member(m, "bounds", cJSON_Parse("[0,0,128]")); break;
    case K_BOUNDS_STRINGS: set_member(m, "bounds", cJSON_Parse("[\"0\",\"0\",\"128\",\"128\"]")); break;
    case K_BOUNDS_OBJECT: set_member(m, "bounds", cJSON_Parse("{\"x0\":0,\"z0\":0,\"x1\":128,\"z1\":128}")); break;
    case K_BOUNDS_FAR: set_member(m, "bounds", cJSON_Parse("[0,0,1e15,1e15]")); break;
    case K_BOUNDS_UNCOVERED: set_member(m, "bounds", cJSON_Parse("[0,0,192,128]")); break;
    case K_BOUNDS_MISSING: set_member(m, "bounds", NULL); break;
    case K_FRAME_OTHER: set_member(m, "frame", cJSON_CreateString("geographic")); break;
    case K_MESH_UNKNOWN: set_member(m, "mesh", cJSON_CreateString("voxel")); break;
    case K_EXT_NOT_LIST: set_member(m, "extensions", cJSON_CreateString("octvertexnormals")); break;
    case K_EXT_NOT_CARRIED: cJSON_AddItemToArray(cJSON_GetObjectItem(m, "extensions"), cJSON_CreateString("watermask")); break;
    case K_LEVEL_GAP: p[COARSE].key = terra_tile_key_make(0, 2, 0, 0); break;
    case K_LEVEL0_MISSING: p[0] = p[COARSE], n = 1; break;
    case K_NO_TILES: n = 0; break;
    case K_TILE_FAR: p[n++] = (piece){terra_tile_key_make(0, 0, TERRA_TILE_COORD_MAX, TERRA_TILE_COORD_MAX), tiles[FINE], infos[FINE], 0}; break;
    case K_FACE3: p[n++] = (piece){terra_tile_key_make(3, 0, 0, 0), tiles[FINE], infos[FINE], 0}; break;
    case K_LEVEL31: p[n++] = (piece){terra_tile_key_make(0, 31, 0, 0), tiles[COARSE], infos[COARSE], 0}; break;
    case K_HEIGHT_HIGH: p[FINE].info.max_height = 3e38f; break;
    case K_HEIGHT_LOW: p[FINE].info.min_height = -3e38f; break;
    case K_ERROR_NEGATIVE: p[FINE].info.geometric_error = -1; break;
    case K_EDGE_NEGATIVE: p[FINE].info.longest_edge = -1; break;
    case K_ENTRY_FLAGS: p[FINE].flags = 0xff; break;
    case K_HEADER_FLAGS: flags = 0xff; break;
    case K_FAR_COARSEST: /* above the coarsest level, far outside the bounds: a grid of other cells */
        p[n++] = (piece){terra_tile_key_make(0, 2, 1000, 1000), other_grid[COARSE], infos[COARSE], 0};
        break;
    case K_ALL_OUTSIDE: set_member(m, "bounds", cJSON_Parse("[100000,100000,100128,100128]")); break; /* no tile placed */
    case K_GEO_KEY_OUTSIDE: p[n++] = (piece){terra_tile_key_make(0, 1, 9, 0), tiles[FINE], infos[FINE], 0}; break;
    case K_UNKNOWN_MEMBER: cJSON_AddItemToObject(m, "x_producer", cJSON_Parse("{\"note\":\"hello\"}")); break;
    case K_EXT_UNKNOWN: cJSON_AddItemToArray(cJSON_GetObjectItem(m, "extensions"), cJSON_CreateString("x-future")); break;
    case K_EXT_UNLISTED: set_member(m, "extensions", cJSON_CreateArray()); break;
    case K_ERRORS_INVERTED: /* the coarse tile exact, the fine ones 5 m off */
        for (int t = 0; t < NTILES; t++) p[t].info.geometric_error = t == COARSE ? 0 : 5;
        break;
    case K_COUNTS_LIE: set_member(m, "tile_count", cJSON_CreateNumber(99)), set_member(m, "max_level", cJSON_CreateNumber(7)); break;
    case K_NAME_TWICE: cJSON_AddItemToObject(m, "Name", cJSON_CreateString("another")); break;
    case K_META_NUL_INSIDE: set_member(m, "mesh", NULL); break; /* said after a NUL, below */
    case K_MESH_TIN_ON_GRID: set_member(m, "mesh", cJSON_CreateString("tin")); break;
    default: break;
    }
    char *printed = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    if (!text) text = printed, text_n = strlen(printed);
    else if (!text_n) text_n = strlen(text);
    if (kind == K_META_NOT_JSON || kind == K_TIN_META_NOT_JSON) text_n /= 2; /* cut in the middle */
    char *trailing = NULL;
    if (kind == K_META_TRAILING || kind == K_META_NUL_END || kind == K_META_NUL_INSIDE) {
        /* JSON, a NUL, and more; or a NUL after it; or a member after a NUL inside the object, which
         * cJSON skips as white space where readers stopping at the NUL never see it */
        static const char *after[3] = {"\0{}", "\0", "\0,\"mesh\":\"tin\"}"};
        const char *tail = after[kind == K_META_TRAILING ? 0 : kind == K_META_NUL_END ? 1 : 2];
        const size_t tail_n = kind == K_META_TRAILING ? 3 : kind == K_META_NUL_END ? 1 : strlen(tail + 1) + 1;
        if (kind == K_META_NUL_INSIDE) text_n--; /* the closing brace comes after the NUL */
        trailing = malloc(text_n + tail_n);
        memcpy(trailing, text, text_n), memcpy(trailing + text_n, tail, tail_n);
        text = trailing, text_n += tail_n;
    }
    assemble(path, flags, text, text_n, p, n);
    free(trailing);
    cJSON_free(printed);
    for (int t = 0; tin && t < n; t++) terra_free(p[t].raw.p);
}

/* ---- the readers ----------------------------------------------------------------------------------- */

typedef struct reports {
    int calls, notes;
    bool named_target;   /* a problem names the target tile */
    terra_tile_key target;
    const char *says;    /* when not NULL: whether a problem or a note says it */
    bool said;
} reports;

static void on_report(void *user, uint64_t index, const terra_archive_entry *e, terra_status st, const char *problem) {
    (void)index;
    reports *r = user;
    r->calls++;
    r->notes += st == TERRA_OK;
    char name[64]; /* local tiles: "tile z/x/y (level L, x X, y Y)", or without z/x/y */
    snprintf(name, sizeof name, "(level %d, x %d, y %d)", terra_tile_key_level(r->target), terra_tile_key_x(r->target),
             terra_tile_key_y(r->target));
    if (st != TERRA_OK && strstr(problem, name) && (!e || e->key == r->target)) r->named_target = true;
    if (r->says && strstr(problem, r->says)) r->said = true;
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

/* The archive mesh (TIN archives) decoding every tile of the index; true when it refused one. */
static bool mesh_refuses(const char *path, char *why, size_t why_n) {
    terra_archive_mesh *m = NULL;
    terra_archive_mesh_info info;
    terra_archive *a = NULL;
    terra_status st = terra_archive_mesh_open(path, NULL, &m, &info);
    if (st == TERRA_OK) st = terra_archive_open(path, NULL, &a);
    void *tile = st == TERRA_OK ? terra_alloc(info.tile_bytes) : NULL;
    for (uint64_t i = 0; st == TERRA_OK && i < terra_archive_get_info(a)->tile_count; i++) {
        terra_archive_entry e;
        size_t bytes;
        st = terra_archive_entry_at(a, i, &e);
        if (st == TERRA_OK) st = terra_archive_mesh_decode(m, e.key, tile, info.tile_bytes, &bytes);
    }
    if (st) snprintf(why, why_n, "%s", terra_last_error());
    terra_free(tile);
    terra_archive_close(a);
    terra_archive_mesh_close(m);
    return st != TERRA_OK;
}

/* What terra render --archive draws with, in-process: the archive source (grids), the archive mesh
 * (TINs), the planet's overlay (geographic archives). True when it refused; why says why. */
static bool draw_refuses(const char *path, char *why, size_t why_n) {
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) {
        snprintf(why, why_n, "%s", terra_last_error());
        return true;
    }
    const bool geo = terra_archive_get_info(a)->frame == TERRA_FRAME_GEOGRAPHIC, tin = terra_archive_is_tin(a);
    terra_geo_grid *g = NULL;
    int level;
    const bool geo_refused = geo && terra_geo_grid_from_archive(a, 64, &g, &level) != TERRA_OK;
    if (geo_refused) snprintf(why, why_n, "%s", terra_last_error());
    terra_geo_grid_destroy(g);
    terra_archive_close(a);
    if (geo) return geo_refused;
    return tin ? mesh_refuses(path, why, why_n) : source_refuses(path, why, why_n);
}

/* Runs a command line with its output in dir/out.txt and dir/err.txt: the exit status, 128 when
 * killed, -1 when TERRA_BIN is not set. */
static int run(const char *fmt, const char *a1, const char *a2) {
    const char *bin = getenv("TERRA_BIN");
    if (!bin) return -1;
    const char *asan = getenv("ASAN_OPTIONS");
    char line[2000], cmd[3000];
    snprintf(line, sizeof line, fmt, a1, a2);
    /* LeakSanitizer's exit scan trips on Mesa's driver (see tests/cli_render.sh) */
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS='%s%sdetect_leaks=0' timeout 120 '%s' %s >'%s/out.txt' 2>'%s/err.txt'",
             asan ? asan : "", asan ? ":" : "", bin, line, dir, dir);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* What the last run wrote: lines on stderr, and whether stdout or stderr holds `what`. */
static int err_lines(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    FILE *f = fopen(path, "r");
    int lines = 0;
    for (int c; f && (c = fgetc(f)) != EOF;) lines += c == '\n';
    if (f) fclose(f);
    return lines;
}
static bool output_has(const char *what) {
    bool has = false;
    for (int k = 0; k < 2 && !has; k++) {
        char path[300], line[4096];
        snprintf(path, sizeof path, "%s/%s", dir, k ? "err.txt" : "out.txt");
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) has = has || strstr(line, what);
        if (f) fclose(f);
    }
    return has;
}

/* The .terrain files under path. */
static int count_tiles(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char sub[1200];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        const size_t len = strlen(e->d_name);
        n += len > 8 && !strcmp(e->d_name + len - 8, ".terrain") ? 1 : count_tiles(sub);
    }
    if (d) closedir(d);
    return n;
}

/* An export in out: layer.json's available rectangles list `tiles` tiles, each a file that decodes
 * as quantized-mesh, and the tree holds no other tile. */
static bool export_complete(const char *out, uint64_t tiles, char *why, size_t why_n) {
    char path[1200];
    snprintf(path, sizeof path, "%s/layer.json", out);
    uint8_t *text;
    size_t n;
    if (terra_io_read_file(path, 1u << 24, &text, &n) != TERRA_OK) {
        snprintf(why, why_n, "no layer.json: %s", terra_last_error());
        return false;
    }
    cJSON *j = cJSON_ParseWithLength((const char *)text, n);
    terra_free(text);
    uint64_t listed = 0, good = 0;
    int z = 0;
    const cJSON *zoom, *r;
    cJSON_ArrayForEach(zoom, cJSON_GetObjectItem(j, "available")) {
        cJSON_ArrayForEach(r, zoom) {
            const int x0 = cJSON_GetObjectItem(r, "startX")->valueint, x1 = cJSON_GetObjectItem(r, "endX")->valueint;
            const int y0 = cJSON_GetObjectItem(r, "startY")->valueint, y1 = cJSON_GetObjectItem(r, "endY")->valueint;
            for (int y = y0; y <= y1 && listed < 1000; y++)
                for (int x = x0; x <= x1 && listed < 1000; x++, listed++) {
                    uint8_t *raw;
                    size_t rn;
                    terra_qmesh q;
                    snprintf(path, sizeof path, "%s/%d/%d/%d.terrain", out, z, x, y);
                    if (terra_io_read_file(path, 1u << 26, &raw, &rn) != TERRA_OK) continue;
                    if (terra_qmesh_decode_any(raw, rn, NULL, &q) == TERRA_OK) good++, terra_qmesh_free(&q);
                    terra_free(raw);
                }
        }
        z++;
    }
    cJSON_Delete(j);
    const int files = count_tiles(out);
    snprintf(why, why_n, "layer.json lists %llu tiles, %llu of them files that decode; %d files; %llu tiles archived",
             (unsigned long long)listed, (unsigned long long)good, files, (unsigned long long)tiles);
    return listed == tiles && good == tiles && (uint64_t)files == tiles;
}

/* A picture of the ground: most pixels are not the clear colour (255, 0, 255). */
static bool picture_of_ground(const char *png) {
    uint8_t *rgba;
    int w, h;
    if (terra_io_read_png(png, &rgba, &w, &h) != TERRA_OK) return false;
    int ground = 0;
    for (int i = 0; i < w * h; i++) ground += !(rgba[4 * i] == 255 && rgba[4 * i + 1] == 0 && rgba[4 * i + 2] == 255);
    terra_free(rgba);
    return ground > w * h / 2;
}

static bool render_runs; /* terra render draws the honest archive here (TERRA_BIN set, EGL there) */
static int products_agreed, products_accepted, render_count;

static bool is_geo(int kind) { return kind == K_GEO_KEY_OUTSIDE || kind == K_GEO_BOUNDS || kind == K_GEO_HONEST; }
static bool accepted(int kind) { return kind >= K_TOLERATED; }
/* Whether render, fly and view draw it: what verify accepts, but 25 levels (refused by name). */
static bool drawn(int kind) { return accepted(kind) && kind != K_LEVELS_25; }
/* Whether terra serve opens it: what is wrong lies in a fine tile's contents, which serve checks when
 * the tile is asked for (the metadata, the index and the coarsest tile when it opens the archive). */
static bool serve_opens(const product *p) {
    return accepted(p->kind) || (p->kind < K_ASSEMBLED && !entry_kind(p->kind) && p->target == FINE);
}

/* Every reader gives the product's verdict (accepted kinds: taken; the others: refused), verify and
 * terra info --verify say what the kind says (or name the changed tile), and none floods. */
static void agree(const product *p, const char *path, const char *tile) {
    const bool want = accepted(p->kind);
    const char *what = says[p->kind] ? says[p->kind] : tile;
    /* terra_archive_verify_tiles */
    terra_archive *a = NULL;
    reports r = {.says = what};
    uint64_t bad = 0;
    bool verified = terra_archive_open(path, NULL, &a) == TERRA_OK &&
                    terra_archive_verify_tiles(a, on_report, &r, &bad) == TERRA_OK;
    const bool opened = a != NULL;
    const uint64_t tile_count = opened ? terra_archive_get_info(a)->tile_count : 0;
    CHECK(verified == want && (!opened || bad == (uint64_t)(r.calls - r.notes)) &&
              (!opened || r.said || !says[p->kind]),
          "%s: verify %s (%llu problems, %d notes; says \"%s\": %d)", p->name, verified ? "accepts" : "refuses",
          (unsigned long long)bad, r.notes, what, (int)r.said);
    CHECK(!want || !says[p->kind] || r.said, "%s: no note says \"%s\"", p->name, what);
    CHECK(!want || says[p->kind] || r.notes == 0, "%s: %d notes where none was due", p->name, r.notes);
    if (p->kind == K_FAR_COARSEST) { /* the rules alone come from the tile the validation reads them from */
        terra_tile_rules rules = {0};
        CHECK(terra_archive_tile_rules(a, &rules) == TERRA_OK && rules.grid_cells == CELLS,
              "%s: terra_archive_tile_rules read %d cells, not the coarsest placed tile's %d", p->name, rules.grid_cells,
              CELLS);
    }
    terra_archive_close(a);
    /* terra serve's opening: pread, then the validation every reader runs */
    terra_archive_open_desc od = {.use_pread = true};
    a = NULL;
    terra_archive_layout layout;
    const bool serve = terra_archive_open(path, &od, &a) == TERRA_OK && terra_archive_validate(a, NULL, NULL, &layout) == TERRA_OK;
    CHECK(serve == serve_opens(p), "%s: serve's opening %s it", p->name, serve ? "takes" : "refuses");
    if (serve && !want) { /* it opens, but the hostile fine tile is not sent: the check send_tile runs refuses it */
        terra_archive_entry e;
        CHECK(terra_archive_find(a, keys[FINE], &e) == TERRA_OK &&
                  terra_archive_check_tile(a, &e, &layout.rules, NULL, NULL) != TERRA_OK,
              "%s: serve would send the hostile tile", p->name);
    }
    terra_archive_close(a);
    /* the drawing reader, in-process: it refuses what it cannot draw by name */
    char why[512] = "";
    const bool draws = !draw_refuses(path, why, sizeof why);
    CHECK(draws == drawn(p->kind) && (draws || !want || strstr(why, "terra draws 24 at most")),
          "%s: the drawing reader %s it%s%s", p->name, draws ? "draws" : "refuses", why[0] ? ": " : "", why);
    /* terra info --verify */
    int rc = run("info --verify '%s'%s", path, "");
    if (rc != -1) {
        const int lines = err_lines();
        CHECK(rc == (want ? 0 : 1) && lines <= 12 && (want ? lines == 0 : lines >= 1) && output_has(what) &&
                  !(p->kind == K_TIN_META_NOT_JSON && output_has("grid")),
              "%s: terra info --verify: exit %d, %d lines, says \"%s\": %d", p->name, rc, lines, what, (int)output_has(what));
    }
    /* terra export: all or nothing */
    char out[400];
    snprintf(out, sizeof out, "%s/tree", dir);
    rc = run("export '%s' '%s'", path, out);
    if (rc != -1) {
        struct stat sb;
        CHECK(rc == (want ? 0 : 1) && err_lines() <= 12, "%s: terra export: exit %d, %d lines", p->name, rc, err_lines());
        if (want) CHECK(export_complete(out, tile_count, why, sizeof why), "%s: export: %s", p->name, why);
        else CHECK(stat(out, &sb) != 0, "%s: terra export refused it but wrote %s", p->name, out);
        char cmd[500];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
        if (system(cmd) != 0) CHECK(0, "rm %s", out);
    }
    /* terra render: what it draws is a picture of the ground */
    if (render_runs) {
        char png[400];
        snprintf(png, sizeof png, "%s/render.png", dir);
        unlink(png);
        rc = is_geo(p->kind) ? run("render --planet --archive '%s' -o '%s' --size 64x48 --clear 255,0,255", path, png)
                             : run("render --archive '%s' -o '%s' --size 96x64 --above 30 --pitch -89 --clear 255,0,255", path, png);
        render_count++;
        const int lines = err_lines();
        CHECK(rc == (drawn(p->kind) ? 0 : 1) && lines <= 12 && (drawn(p->kind) ? picture_of_ground(png) : lines >= 1),
              "%s: terra render: exit %d, %d lines", p->name, rc, lines);
    }
}
/* A product of the tiles: the changed tile is reported once, by name, by verify (every tile, when
 * all are changed); the storage check alone sees entry damage only; the one check readers decode
 * through refuses the tile; plain reading refuses whatever is not quantized-mesh. */
static void check_tiles(const product *p, const char *path) {
    const terra_tile_key target = keys[p->target == ALL ? COARSE : p->target];
    for (int mode = 0; mode < 2; mode++) {
        terra_archive *a;
        terra_archive_open_desc od = {.use_pread = mode == 1};
        if (terra_archive_open(path, &od, &a) != TERRA_OK) {
            CHECK(0, "%s: does not open: %s", p->name, terra_last_error());
            return;
        }
        reports r = {.target = target};
        uint64_t bad = 0;
        terra_status st = terra_archive_verify_tiles(a, on_report, &r, &bad);
        /* a coarsest tile of another grid: refused itself (its heights lie outside its entry's range),
         * or it makes the others wrong */
        const bool others = p->kind == K_OTHER_GRID && p->target == COARSE;
        CHECK(st != TERRA_OK && bad >= 1 && (uint64_t)r.calls == bad && (r.named_target || others) &&
                  (p->target == ALL ? bad == NTILES : others ? (bad == 1 && r.named_target) || bad >= NTILES - 1 : bad == 1),
              "%s: verify: status %d, %llu bad, %d reports, named %d", p->name, (int)st, (unsigned long long)bad, r.calls,
              (int)r.named_target);
        uint64_t bad_storage = 0;
        st = terra_archive_verify(a, &bad_storage);
        CHECK((st != TERRA_OK) == entry_kind(p->kind), "%s: storage verify %d", p->name, (int)st);
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
}

static void check_product(const product *p, const char *path) {
    const int failures_before = check_failures_;
    char tile[64] = "";
    if (p->target != ARCHIVE) {
        const terra_tile_key t = keys[p->target == ALL ? COARSE : p->target];
        snprintf(tile, sizeof tile, "(level %d, x %d, y %d)", terra_tile_key_level(t), terra_tile_key_x(t),
                 terra_tile_key_y(t));
        if (p->kind == K_OTHER_GRID && p->target == COARSE) snprintf(tile, sizeof tile, "tile ");
        check_tiles(p, path);
    }
    agree(p, path, tile);
    if (check_failures_ == failures_before) products_agreed++;
    products_accepted += accepted(p->kind);
}

/* The honest archive: every reader takes it, with nothing to say; and whether terra render draws
 * here (no EGL: its verdicts are left out, with a message). */
static void test_honest(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/honest.terra", dir);
    const product p = {.kind = K_HONEST, .target = FINE, .c = TERRA_COMPRESS_GZIP, .name = "honest"};
    CHECK(write_product(&p, path) == TERRA_OK, "%s", terra_last_error());
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    terra_tile_rules rules;
    terra_archive_layout layout;
    CHECK(terra_archive_tile_rules(a, &rules) == TERRA_OK && rules.grid_cells == CELLS, "rules %d: %s", rules.grid_cells,
          terra_last_error());
    CHECK(terra_archive_validate(a, NULL, NULL, &layout) == TERRA_OK && layout.rules.grid_cells == CELLS &&
              layout.rules.extensions == (TERRA_QMESH_HAS_NORMALS | TERRA_QMESH_HAS_MATERIAL) && layout.max_level == 1 &&
              layout.tile_size_m == 64 && layout.bounds[2] == 128 && !layout.tin,
          "layout: %s", terra_last_error());
    terra_archive_close(a);
    char png[300];
    snprintf(png, sizeof png, "%s/render.png", dir);
    render_runs = run("render --archive '%s' -o '%s' --size 96x64 --above 30 --pitch -89 --clear 255,0,255", path, png) == 0;
    if (!render_runs) printf("     terra render left out: it cannot draw the honest archive here (no TERRA_BIN, or no EGL)\n");
    agree(&p, path, "");
}

static void test_products(void) {
    static product ps[600];
    const int n = make_products(ps);
    char path[400];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s.terra", dir, ps[i].name);
        const terra_status st = write_product(&ps[i], path);
        CHECK(st == TERRA_OK, "%s: not written: %s", ps[i].name, terra_last_error());
        if (st) continue;
        const int before = check_failures_;
        check_product(&ps[i], path);
        if (check_failures_ == before) unlink(path);
    }
    printf("     %d hostile archives: verify accepts %d (tolerated), refuses %d; every reader agrees with it on %d "
           "(terra render on %d)\n", n, products_accepted, n - products_accepted, products_agreed, render_count);
    CHECK(products_agreed == n);
}

/* What terra cook writes for sparse ground: a diagonal strip of data, no data elsewhere, cooked in
 * the local frame. Its levels spread over many more places than they hold tiles (the cook leaves out
 * tiles with no ground), and every reader takes it: verify, serve's opening, the archive mesh,
 * export and render. */
static void test_sparse_cook(void) {
    enum { N = 256 };
    char asc[300], path[300], line[1000];
    snprintf(asc, sizeof asc, "%s/strip.asc", dir);
    snprintf(path, sizeof path, "%s/strip.terra", dir);
    FILE *f = fopen(asc, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "ncols %d\nnrows %d\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n", N, N);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) fprintf(f, "%d%c", abs(r - c) < 16 ? 100 + (r * 7 + c * 3) % 50 : -9999, c + 1 < N ? ' ' : '\n');
    CHECK(fclose(f) == 0);
    snprintf(line, sizeof line, "cook '%s' -o '%s' --frame local --spacing 2 --tile-size 4 --no-cache -q", asc, path);
    const int rc = run("%s%s", line, "");
    if (rc == -1) {
        printf("     left out: no TERRA_BIN to cook with\n");
        return;
    }
    CHECK(rc == 0, "terra cook: exit %d", rc);
    terra_archive *a;
    terra_archive_layout layout;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_archive_validate(a, NULL, NULL, &layout) == TERRA_OK, "%s", terra_last_error());
    /* sparse: level 0 spans many times the places it has tiles (more than 4 a tile and 64) */
    const terra_archive_level *l0 = &layout.levels[0];
    const double span = (double)(l0->x1 - l0->x0 + 1) * (double)(l0->y1 - l0->y0 + 1);
    CHECK(span > 4.0 * (double)l0->tiles + 64, "level 0: %llu tiles over %g places", (unsigned long long)l0->tiles, span);
    printf("     cooked strip: %llu tiles, level 0's %llu spread over %g places\n",
           (unsigned long long)terra_archive_get_info(a)->tile_count, (unsigned long long)l0->tiles, span);
    terra_archive_close(a);
    const product p = {.kind = K_TIN_HONEST, .target = ARCHIVE, .name = "sparse_cooked"};
    agree(&p, path, "");
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
    const int rc = run("info --verify '%s'%s", path, "");
    CHECK(rc == -1 || (rc == 1 && output_has("100000 of 100000 tiles bad") && err_lines() <= 50),
          "terra info --verify: exit %d, %d lines (bounded?)", rc, err_lines());
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
    product honest = {.kind = K_HONEST, .target = FINE, .c = TERRA_COMPRESS_NONE};
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
    RUN(test_sparse_cook);
    RUN(test_many_bad_tiles);
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    for (int i = 0; i < NTILES; i++) terra_free(tiles[i].p), terra_free(other_grid[i].p);
    return rc;
}
