/* The packed tile codec: every tile packs and unpacks to the very bytes it was (random meshes of
 * every shape and extension, real tiles from ../shared/data/qm), archives of packed tiles read back
 * as quantized-mesh, and damaged packed bytes are refused without reading outside them. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/tile_codec.h"

#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* A random tile: vertices on a jittered grid (some on the border, some repeated, a few unused),
 * triangles between grid neighbours plus random ones, in first-use order. */
typedef struct {
    terra_qmesh m;
    uint16_t *u, *v, *h, *mat;
    uint8_t *nrm, wm[1];
    uint32_t *idx, *edge;
    char meta[64];
} rtile;

static void rtile_make(rtile *t, unsigned long long *s, bool order) {
    memset(t, 0, sizeof *t);
    const uint32_t side = 2 + (uint32_t)(test_rand_u64(s) % 40), vc = side * side + (uint32_t)(test_rand_u64(s) % 3);
    const uint32_t tc = 2 * (side - 1) * (side - 1) + (uint32_t)(test_rand_u64(s) % 8);
    t->u = malloc(vc * 2), t->v = malloc(vc * 2), t->h = malloc(vc * 2), t->mat = malloc(vc * 2);
    t->nrm = malloc(vc * 2), t->idx = malloc(tc * 12), t->edge = malloc(vc * 16);
    const bool smooth = test_rand_u64(s) % 2;
    for (uint32_t k = 0; k < vc; k++) {
        const uint32_t i = k % side, j = (k / side) % side;
        const bool jitter = i && j && i + 1 < side && j + 1 < side;
        t->u[k] = (uint16_t)(i * 32767 / (side - 1) + (jitter ? test_rand_u64(s) % 50 : 0));
        t->v[k] = (uint16_t)(j * 32767 / (side - 1) + (jitter ? test_rand_u64(s) % 50 : 0));
        t->h[k] = (uint16_t)(smooth ? (i * 300 + j * 200) % 32768 : test_rand_u64(s) % 32768);
        t->mat[k] = (uint16_t)(test_rand_u64(s) % 3 ? 1 : test_rand_u64(s) % 700);
        t->nrm[2 * k] = (uint8_t)test_rand_u64(s), t->nrm[2 * k + 1] = (uint8_t)(100 + test_rand_u64(s) % 50);
    }
    uint32_t n = 0;
    for (uint32_t j = 0; j + 1 < side; j++)
        for (uint32_t i = 0; i + 1 < side; i++) {
            const uint32_t a = j * side + i, b = a + 1, c = a + side, d = c + 1;
            const uint32_t tri[6] = {a, b, d, a, d, c};
            memcpy(t->idx + 3 * n, tri, sizeof tri);
            n += 2;
        }
    for (; n < tc; n++)
        for (int k = 0; k < 3; k++) t->idx[3 * n + k] = (uint32_t)(test_rand_u64(s) % (side * side));
    terra_qmesh *m = &t->m;
    m->vertex_count = vc, m->triangle_count = tc;
    m->u = t->u, m->v = t->v, m->h = t->h, m->indices = t->idx;
    m->extensions = (uint32_t)(test_rand_u64(s) % 16) & ~TERRA_QMESH_HAS_WATER_MASK;
    m->normals = t->nrm, m->materials = t->mat;
    if (test_rand_u64(s) % 4 == 0) m->extensions |= TERRA_QMESH_HAS_WATER_MASK, m->water_mask = t->wm,
                                   m->water_mask_size = 1, t->wm[0] = 255;
    snprintf(t->meta, sizeof t->meta, "{\"available\":[[%u]]}", vc);
    m->metadata = t->meta, m->metadata_size = (uint32_t)strlen(t->meta);
    m->header.min_height = -10, m->header.max_height = 900, m->header.sphere_radius = 5000;
    m->header.center[0] = test_rand_range(s, -1e6, 1e6);
    if (order) CHECK(terra_tile_codec_order(m) == TERRA_OK, "order: %s", terra_last_error());
    else CHECK(terra_qmesh_reorder(m, NULL) == TERRA_OK, "reorder");
    /* edges: the border vertices as terra writes them, or (sometimes) in another order */
    uint32_t *at = t->edge;
    for (int e = 0; e < 4; e++) {
        m->edges[e] = at;
        for (uint32_t k = 0; k < vc; k++) {
            const uint16_t c = e == TERRA_QMESH_WEST || e == TERRA_QMESH_EAST ? m->u[k] : m->v[k];
            if (c == (e == TERRA_QMESH_WEST || e == TERRA_QMESH_SOUTH ? 0 : 32767)) *at++ = k;
        }
        m->edge_count[e] = (uint32_t)(at - m->edges[e]);
    }
    if (test_rand_u64(s) % 3 == 0 && m->edge_count[0] > 1) m->edges[0][0] ^= 1; /* not as predicted */
}

static void rtile_free(rtile *t) {
    free(t->u), free(t->v), free(t->h), free(t->mat), free(t->nrm), free(t->idx), free(t->edge);
}

static uint8_t *encode(const terra_qmesh *m, size_t *n) {
    size_t cap = terra_qmesh_encoded_size(m);
    uint8_t *b = malloc(cap);
    if (terra_qmesh_encode(m, b, cap, n) != TERRA_OK) {
        free(b);
        return NULL;
    }
    return b;
}

/* Packs qm and checks that it unpacks to qm exactly; returns the packed size (0 if refused). */
static size_t round_trip(const uint8_t *qm, size_t n, const char *what) {
    uint8_t *pk = NULL, *back = NULL;
    size_t pn = 0, bn = 0;
    terra_status st = terra_tile_codec_pack(qm, n, 0, &pk, &pn);
    if (st == TERRA_E_UNSUPPORTED) return 0;
    CHECK(st == TERRA_OK, "%s: pack: %s", what, terra_last_error());
    if (st) return 0;
    CHECK(terra_tile_codec_unpack(pk, pn, n, &back, &bn) == TERRA_OK, "%s: unpack: %s", what, terra_last_error());
    CHECK(bn == n && back && !memcmp(back, qm, n), "%s: %zu bytes back for %zu", what, bn, n);
    /* one byte less room than the tile needs is refused */
    uint8_t *small = NULL;
    size_t sn = 0;
    CHECK(terra_tile_codec_unpack(pk, pn, n - 1, &small, &sn) == TERRA_E_CAPACITY && !small, "%s: over max_out", what);
    terra_free(pk);
    terra_free(back);
    return pn;
}

static void test_random_tiles(void) {
    unsigned long long s = 13;
    size_t raw = 0, packed = 0;
    for (int i = 0; i < 300; i++) {
        rtile t;
        rtile_make(&t, &s, i % 2);
        size_t n;
        uint8_t *qm = encode(&t.m, &n);
        CHECK(qm != NULL, "encode %d: %s", i, terra_last_error());
        if (qm) {
            char what[32];
            snprintf(what, sizeof what, "random tile %d", i);
            size_t pn = round_trip(qm, n, what);
            CHECK(pn > 0, "%s refused: %s", what, terra_last_error());
            raw += n, packed += pn;
        }
        free(qm);
        rtile_free(&t);
    }
    CHECK(packed < raw, "packed %zu of %zu bytes", packed, raw);
}

/* An empty tile and one without triangles. */
static void test_degenerate_tiles(void) {
    uint16_t u[2] = {0, 32767}, v[2] = {5, 32767}, h[2] = {0, 7};
    for (uint32_t vc = 0; vc <= 2; vc++) {
        terra_qmesh m;
        memset(&m, 0, sizeof m);
        m.vertex_count = vc, m.u = u, m.v = v, m.h = h;
        size_t n;
        uint8_t *qm = encode(&m, &n);
        CHECK(qm && round_trip(qm, n, "no triangles") > 0, "vc %u: %s", vc, terra_last_error());
        free(qm);
    }
}

/* A plain tile whose CenterX opens with gzip's magic bytes (1 in 65536 of them: the fuzzer found
 * one) is a tile, not gzip: it decodes, packs, and decode_any reads it and its gzipped bytes. */
static void test_gzip_lookalike(void) {
    unsigned long long s = 99;
    rtile t;
    rtile_make(&t, &s, true);
    uint64_t bits;
    memcpy(&bits, &t.m.header.center[0], sizeof bits);
    bits = (bits & ~(uint64_t)0xffff) | 0x8b1f;
    memcpy(&t.m.header.center[0], &bits, sizeof bits);
    size_t n, gn = 0;
    uint8_t *qm = encode(&t.m, &n), *gz = NULL;
    CHECK(qm && qm[0] == 0x1f && qm[1] == 0x8b, "the tile opens with gzip's magic");
    terra_qmesh d;
    CHECK(terra_qmesh_decode(qm, n, NULL, &d) == TERRA_OK && d.vertex_count == t.m.vertex_count, "decode: %s",
          terra_last_error());
    terra_qmesh_free(&d);
    CHECK(terra_qmesh_decode_any(qm, n, NULL, &d) == TERRA_OK && d.triangle_count == t.m.triangle_count,
          "decode_any: %s", terra_last_error());
    terra_qmesh_free(&d);
    CHECK(round_trip(qm, n, "gzip look-alike") > 0, "packed: %s", terra_last_error());
    CHECK(terra_compress(TERRA_COMPRESS_GZIP, 6, qm, n, &gz, &gn) == TERRA_OK, "gzip: %s", terra_last_error());
    CHECK(terra_qmesh_decode_any(gz, gn, NULL, &d) == TERRA_OK && d.vertex_count == t.m.vertex_count,
          "gzipped: %s", terra_last_error());
    terra_qmesh_free(&d);
    /* what is neither (gzip's magic, then garbage) is refused as damaged gzip */
    qm[2] ^= 0xff, qm[9] ^= 0xff, qm[40] = 0xff, qm[41] = 0xff, qm[42] = 0xff, qm[43] = 0xff;
    CHECK(terra_qmesh_decode_any(qm, 48, NULL, &d) != TERRA_OK, "garbage refused");
    terra_free(gz);
    free(qm);
    rtile_free(&t);
}

/* Real tiles: packed as they are when terra's encoder writes them so, else refused; as terra would
 * write them (decoded and encoded again, and in the codec's order) always packed. */
static void test_real_tiles(void) {
    char dir[512];
    const char *subs[] = {"bertt", "cesium-native", "here-qmd", "loadersgl"};
    int tiles = 0;
    for (int d = 0; d < 4; d++) {
        shared_path("data/qm", dir, sizeof dir);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, subs[d]);
        DIR *D = opendir(path);
        if (!D) continue;
        for (struct dirent *de; (de = readdir(D));) {
            if (!strstr(de->d_name, ".terrain")) continue;
            char file[1400];
            snprintf(file, sizeof file, "%s/%s", path, de->d_name);
            uint8_t *data;
            size_t n;
            if (terra_io_read_file(file, 64u << 20, &data, &n)) continue;
            terra_qmesh m;
            if (terra_qmesh_decode_any(data, n, NULL, &m) == TERRA_OK) {
                tiles++;
                round_trip(data, n, file);
                m.extensions &= ~TERRA_QMESH_HAS_LEGACY_NORMALS;
                size_t qn;
                uint8_t *qm = encode(&m, &qn);
                CHECK(qm && round_trip(qm, qn, file) > 0, "%s re-encoded: %s", file, terra_last_error());
                free(qm);
                terra_qmesh_free(&m);
            }
            terra_free(data);
        }
        closedir(D);
    }
    if (!tiles) printf("SKIP test_real_tiles: no tiles under %s\n", dir);
}

/* Every damaged packed tile is refused or unpacks to something of at most max_out bytes; ASan
 * watches for reads outside. */
static void test_damaged(void) {
    unsigned long long s = 99;
    for (int i = 0; i < 40; i++) {
        rtile t;
        rtile_make(&t, &s, true);
        size_t n, pn;
        uint8_t *qm = encode(&t.m, &n), *pk = NULL;
        if (qm && terra_tile_codec_pack(qm, n, 0, &pk, &pn) == TERRA_OK) {
            for (int k = 0; k < 50; k++) {
                uint8_t *bad = malloc(pn);
                memcpy(bad, pk, pn);
                size_t bn = k % 5 == 0 ? (size_t)(test_rand_u64(&s) % pn) : pn;
                bad[test_rand_u64(&s) % pn] ^= (uint8_t)(1 + test_rand_u64(&s) % 255);
                uint8_t *out = NULL;
                size_t on = 0;
                terra_status st = terra_tile_codec_unpack(bad, bn, n, &out, &on);
                CHECK(st != TERRA_OK || (out && on <= n), "damaged tile %d/%d: %zu bytes", i, k, on);
                terra_free(out);
                free(bad);
            }
            uint8_t zero = 0, *out = NULL;
            size_t on;
            CHECK(terra_tile_codec_unpack(&zero, 1, n, &out, &on) == TERRA_E_VERSION, "version 0");
            CHECK(terra_tile_codec_unpack(pk, 0, n, &out, &on) == TERRA_E_CORRUPT, "empty");
        }
        terra_free(pk);
        free(qm);
        rtile_free(&t);
    }
}

/* An archive written packed reads back as the quantized-mesh bytes added; a tile the codec cannot
 * reproduce goes in as zstd. */
static void test_archive(void) {
    char path[] = "/tmp/terra_test_tile_codec_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    /* eight level-0 tiles of 64 m in a row: an archive every reader takes (terra_archive_validate) */
    terra_archive_write_desc d = {.frame = TERRA_FRAME_LOCAL, .compression = TERRA_COMPRESS_PACKED, .tin = true,
                                  .tile_size_m = 64, .bounds = {0, 0, 512, 64}};
    terra_archive_writer *w;
    CHECK(terra_archive_writer_create(path, &d, &w) == TERRA_OK, "create");
    unsigned long long s = 5;
    uint8_t *tiles[8];
    size_t sizes[8];
    for (int i = 0; i < 8; i++) {
        rtile t;
        rtile_make(&t, &s, true);
        tiles[i] = encode(&t.m, &sizes[i]);
        rtile_free(&t);
    }
    /* tile 7 with an extension terra does not know (id 200, 1 byte): not what terra's encoder writes */
    uint8_t *odd = malloc(sizes[7] + 6);
    memcpy(odd, tiles[7], sizes[7]);
    memcpy(odd + sizes[7], "\xc8\x01\x00\x00\x00\x2a", 6);
    free(tiles[7]);
    tiles[7] = odd;
    sizes[7] += 6;
    terra_archive_tile_info info = {0, 1, -10, 900}; /* the tiles' header heights (rtile_make) */
    for (int i = 0; i < 8; i++)
        CHECK(terra_archive_writer_add(w, terra_tile_key_make(0, 0, i, 0), tiles[i], sizes[i], &info) == TERRA_OK,
              "add %d: %s", i, terra_last_error());
    CHECK(terra_archive_writer_finish(w) == TERRA_OK, "finish: %s", terra_last_error());
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "open: %s", terra_last_error());
    CHECK(terra_archive_get_info(a)->version == TERRA_ARCHIVE_VERSION, "version");
    for (int i = 0; i < 8; i++) {
        uint8_t *raw;
        size_t rn;
        terra_archive_entry e;
        CHECK(terra_archive_read_tile(a, terra_tile_key_make(0, 0, i, 0), &raw, &rn, &e) == TERRA_OK, "read %d: %s", i,
              terra_last_error());
        CHECK(e.compression == (i == 7 ? TERRA_COMPRESS_ZSTD : TERRA_COMPRESS_PACKED), "tile %d stored as %s", i,
              terra_compression_name((terra_compression)e.compression));
        CHECK(rn == sizes[i] && !memcmp(raw, tiles[i], rn), "tile %d bytes", i);
        terra_free(raw);
        free(tiles[i]);
    }
    uint64_t bad = 1;
    CHECK(terra_archive_verify_tiles(a, NULL, NULL, &bad) == TERRA_OK && bad == 0, "verify: %s", terra_last_error());
    terra_archive_close(a);
    unlink(path);
    terra_compression c;
    CHECK(terra_compression_parse("packed", &c) && c == TERRA_COMPRESS_PACKED &&
          !strcmp(terra_compression_name(c), "packed"), "name");
}

int main(void) {
    RUN(test_random_tiles);
    RUN(test_degenerate_tiles);
    RUN(test_gzip_lookalike);
    RUN(test_real_tiles);
    RUN(test_damaged);
    RUN(test_archive);
    return finish();
}
