/* qmesh: real tiles from Cesium's readers and producers decode to the published values, round trips,
 * heightmap-1.0 refusal, legacy big-endian normals, and damaged input handled without a crash. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/qmesh.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

static uint32_t fnv_add(uint32_t h, uint32_t x) {
    h ^= x & 0xffff;
    h *= 0x01000193u;
    h ^= x >> 16;
    h *= 0x01000193u;
    return h;
}
static uint32_t fnv16(const uint16_t *a, size_t n) {
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) h = fnv_add(h, a[i]);
    return h;
}
static uint32_t fnv32(const uint32_t *a, size_t n) {
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) h = fnv_add(h, a[i]);
    return h;
}
static uint32_t fnv8(const uint8_t *a, size_t n) {
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) h = fnv_add(h, a[i]);
    return h;
}

static bool load(const char *rel, uint8_t **data, size_t *size) {
    char path[1024];
    if (!have_shared(rel)) return false;
    shared_path(rel, path, sizeof path);
    terra_status st = terra_io_read_file(path, 64u << 20, data, size);
    CHECK(st == TERRA_OK, "%s: %s", path, terra_last_error());
    return st == TERRA_OK;
}

static void check_header_value(const char *file, const char *name, const cJSON *want, double got) {
    if (cJSON_IsNull(want)) { /* JSON has no NaN or infinity: null stands for either */
        CHECK(!isfinite(got), "%s %s: expected NaN or infinity, got %.17g", file, name, got);
    } else {
        double w = want->valuedouble;
        CHECK(w == got || fabs(w - got) <= 1e-9 * fabs(w), "%s %s: expected %.17g, got %.17g", file, name, w, got);
    }
}

static bool same_mesh(const terra_qmesh *a, const terra_qmesh *b) {
    if (a->vertex_count != b->vertex_count || a->triangle_count != b->triangle_count || a->extensions != b->extensions)
        return false;
    if (memcmp(&a->header, &b->header, sizeof a->header) != 0) return false;
    size_t vc = a->vertex_count;
    if (memcmp(a->u, b->u, vc * 2) || memcmp(a->v, b->v, vc * 2) || memcmp(a->h, b->h, vc * 2)) return false;
    if (memcmp(a->indices, b->indices, (size_t)a->triangle_count * 12)) return false;
    for (int e = 0; e < 4; e++)
        if (a->edge_count[e] != b->edge_count[e] || memcmp(a->edges[e], b->edges[e], a->edge_count[e] * 4u)) return false;
    if (a->normals && memcmp(a->normals, b->normals, vc * 2)) return false;
    if (a->water_mask && (a->water_mask_size != b->water_mask_size || memcmp(a->water_mask, b->water_mask, a->water_mask_size)))
        return false;
    if (a->metadata && (a->metadata_size != b->metadata_size || memcmp(a->metadata, b->metadata, a->metadata_size)))
        return false;
    if (a->materials && memcmp(a->materials, b->materials, vc * 2)) return false;
    return true;
}

/* Decode, encode, decode again: the same values. */
static void check_reencode(const char *file, const terra_qmesh *m) {
    terra_qmesh copy = *m;
    copy.extensions &= ~(uint32_t)TERRA_QMESH_HAS_LEGACY_NORMALS;
    size_t cap = terra_qmesh_encoded_size(&copy), n = 0;
    uint8_t *buf = malloc(cap);
    terra_status st = terra_qmesh_encode(&copy, buf, cap, &n);
    CHECK(st == TERRA_OK, "%s: re-encode: %s", file, terra_last_error());
    terra_qmesh back;
    st = terra_qmesh_decode(buf, n, NULL, &back);
    CHECK(st == TERRA_OK, "%s: decode of re-encoded: %s", file, terra_last_error());
    if (st == TERRA_OK) {
        CHECK(same_mesh(&copy, &back), "%s: re-encoded tile decodes to other values", file);
        terra_qmesh_free(&back);
    }
    free(buf);
}

static void test_real_tiles(void) {
    uint8_t *json;
    size_t jn;
    if (!load("data/qm/expected.json", &json, &jn)) return;
    cJSON *root = cJSON_ParseWithLength((const char *)json, jn);
    CHECK(root && cJSON_IsArray(root), "expected.json does not parse");
    int tiles = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, root) {
        const char *file = cJSON_GetObjectItem(t, "file")->valuestring;
        char rel[512];
        snprintf(rel, sizeof rel, "data/qm/%s", file);
        uint8_t *data;
        size_t size;
        if (!load(rel, &data, &size)) continue;
        CHECK(terra_is_gzip(data, size) == cJSON_IsTrue(cJSON_GetObjectItem(t, "gzipped")), "%s: gzip flag", file);
        terra_qmesh m;
        terra_status st = terra_qmesh_decode_any(data, size, NULL, &m);
        CHECK(st == TERRA_OK, "%s: %s", file, terra_last_error());
        if (st != TERRA_OK) {
            terra_free(data);
            continue;
        }
        tiles++;
        const cJSON *h = cJSON_GetObjectItem(t, "header");
        static const char *names[3] = {"X", "Y", "Z"};
        char name[64];
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "center%s", names[k]);
            check_header_value(file, name, cJSON_GetObjectItem(h, name), m.header.center[k]);
            snprintf(name, sizeof name, "boundingSphereCenter%s", names[k]);
            check_header_value(file, name, cJSON_GetObjectItem(h, name), m.header.sphere_center[k]);
            snprintf(name, sizeof name, "horizonOcclusionPoint%s", names[k]);
            check_header_value(file, name, cJSON_GetObjectItem(h, name), m.header.horizon[k]);
        }
        check_header_value(file, "minHeight", cJSON_GetObjectItem(h, "minHeight"), m.header.min_height);
        check_header_value(file, "maxHeight", cJSON_GetObjectItem(h, "maxHeight"), m.header.max_height);
        check_header_value(file, "boundingSphereRadius", cJSON_GetObjectItem(h, "boundingSphereRadius"),
                           m.header.sphere_radius);
        CHECK(m.vertex_count == (uint32_t)cJSON_GetObjectItem(t, "vertexCount")->valuedouble, "%s vertices %u", file,
              m.vertex_count);
        CHECK(m.triangle_count == (uint32_t)cJSON_GetObjectItem(t, "triangleCount")->valuedouble, "%s triangles %u",
              file, m.triangle_count);
        CHECK(fnv16(m.u, m.vertex_count) == (uint32_t)cJSON_GetObjectItem(t, "u_fnv1a")->valuedouble, "%s u hash", file);
        CHECK(fnv16(m.v, m.vertex_count) == (uint32_t)cJSON_GetObjectItem(t, "v_fnv1a")->valuedouble, "%s v hash", file);
        CHECK(fnv16(m.h, m.vertex_count) == (uint32_t)cJSON_GetObjectItem(t, "h_fnv1a")->valuedouble, "%s h hash", file);
        CHECK(fnv32(m.indices, (size_t)m.triangle_count * 3) ==
                  (uint32_t)cJSON_GetObjectItem(t, "indices_fnv1a")->valuedouble,
              "%s indices hash", file);
        const cJSON *edges = cJSON_GetObjectItem(t, "edges");
        static const char *en[4] = {"west", "south", "east", "north"};
        for (int e = 0; e < 4; e++)
            CHECK(m.edge_count[e] == (uint32_t)cJSON_GetObjectItem(edges, en[e])->valuedouble, "%s %s edge %u", file,
                  en[e], m.edge_count[e]);
        uint32_t want_ext = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(t, "extensions")) {
            if (!strcmp(x->valuestring, "vertexNormals")) want_ext |= TERRA_QMESH_HAS_NORMALS;
            else if (!strcmp(x->valuestring, "waterMask")) want_ext |= TERRA_QMESH_HAS_WATER_MASK;
            else if (!strcmp(x->valuestring, "metadata")) want_ext |= TERRA_QMESH_HAS_METADATA;
        }
        CHECK((m.extensions & 7u) == want_ext, "%s extensions %#x, expected %#x", file, m.extensions, want_ext);
        const cJSON *nh = cJSON_GetObjectItem(t, "normals_fnv1a");
        if (nh && m.normals)
            CHECK(fnv8(m.normals, (size_t)m.vertex_count * 2) == (uint32_t)nh->valuedouble, "%s normals hash", file);
        const cJSON *meta = cJSON_GetObjectItem(t, "metadata");
        if (meta) {
            cJSON *got = m.metadata ? cJSON_ParseWithLength(m.metadata, m.metadata_size) : NULL;
            CHECK(got && cJSON_Compare(got, meta, true), "%s: metadata JSON differs", file);
            cJSON_Delete(got);
        }
        if (strstr(file, "unknownext")) CHECK(m.unknown_extensions > 0, "%s: unknown extension not counted", file);
        check_reencode(file, &m);
        terra_qmesh_free(&m);
        terra_free(data);
    }
    CHECK(tiles == 25, "decoded %d of 25 tiles", tiles);
    cJSON_Delete(root);
    terra_free(json);
}

static void test_legacy_normals(void) {
    const char *pairs[2][2] = {
        {"data/qm/legacy-vertexnormals-bigendian/tile.vertexnormals.terrain", "data/qm/cesium-native/tile.octvertexnormals.terrain"},
        {"data/qm/legacy-vertexnormals-bigendian/tile.vertexnormals.unknownext.terrain",
         "data/qm/cesium-native/tile.octvertexnormals.unknownext.terrain"}};
    for (int i = 0; i < 2; i++) {
        uint8_t *a, *b;
        size_t an, bn;
        if (!load(pairs[i][0], &a, &an)) continue;
        if (!load(pairs[i][1], &b, &bn)) continue;
        terra_qmesh ma, mb;
        terra_status sa = terra_qmesh_decode(a, an, NULL, &ma), sb = terra_qmesh_decode(b, bn, NULL, &mb);
        CHECK(sa == TERRA_OK, "%s: %s", pairs[i][0], terra_last_error());
        CHECK(sb == TERRA_OK, "%s", pairs[i][1]);
        if (sa == TERRA_OK && sb == TERRA_OK) {
            CHECK(ma.extensions & TERRA_QMESH_HAS_LEGACY_NORMALS, "legacy normals not flagged");
            CHECK(ma.normals && mb.normals && ma.vertex_count == mb.vertex_count &&
                      !memcmp(ma.normals, mb.normals, (size_t)ma.vertex_count * 2),
                  "legacy normals differ from the octvertexnormals twin");
            /* Forcing little-endian refuses it cleanly; forcing big-endian reads it. */
            terra_qmesh tmp;
            terra_qmesh_decode_desc le = {.extension_endian = 1}, be = {.extension_endian = 2};
            CHECK(terra_qmesh_decode(a, an, &le, &tmp) == TERRA_E_CORRUPT, "strict little-endian should refuse");
            CHECK(terra_qmesh_decode(a, an, &be, &tmp) == TERRA_OK, "big-endian: %s", terra_last_error());
            /* Re-encoding writes octvertexnormals (little-endian), never the legacy form. */
            ma.extensions &= ~(uint32_t)TERRA_QMESH_HAS_LEGACY_NORMALS;
            size_t cap = terra_qmesh_encoded_size(&ma), n;
            uint8_t *out = malloc(cap);
            CHECK(terra_qmesh_encode(&ma, out, cap, &n) == TERRA_OK, "encode");
            terra_qmesh_free(&tmp);
            CHECK(terra_qmesh_decode(out, n, &le, &tmp) == TERRA_OK, "re-encoded legacy tile is not little-endian");
            CHECK(!(tmp.extensions & TERRA_QMESH_HAS_LEGACY_NORMALS), "legacy flag after re-encoding");
            terra_qmesh_free(&tmp);
            free(out);
        }
        terra_qmesh_free(&ma);
        terra_qmesh_free(&mb);
        terra_free(a);
        terra_free(b);
    }
}

static void test_heightmap_refused(void) {
    const char *files[] = {"data/qm/heightmap-1.0/bertt/1608.terrain", "data/qm/heightmap-1.0/bertt/51617.terrain",
                           "data/qm/heightmap-1.0/bertt/51618.terrain", "data/qm/heightmap-1.0/bertt/ahn_416656.terrain",
                           "data/qm/heightmap-1.0/ctb/smallterrain-blank.terrain"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        uint8_t *d;
        size_t n;
        if (!load(files[i], &d, &n)) continue;
        terra_qmesh m;
        terra_status st = terra_qmesh_decode_any(d, n, NULL, &m);
        CHECK(st == TERRA_E_FORMAT, "%s: status %d (%s)", files[i], st, terra_last_error());
        CHECK(strstr(terra_last_error(), "heightmap-1.0") != NULL, "%s: unclear error '%s'", files[i], terra_last_error());
        terra_free(d);
    }
}

/* A random mesh in first-use order with every extension. */
static void random_mesh(unsigned long long *s, terra_qmesh *m, uint32_t vc, uint32_t tc) {
    memset(m, 0, sizeof *m);
    m->vertex_count = vc;
    m->triangle_count = tc;
    m->u = malloc(vc * 2u + 2);
    m->v = malloc(vc * 2u + 2);
    m->h = malloc(vc * 2u + 2);
    m->materials = malloc(vc * 2u + 2);
    m->normals = malloc(vc * 2u + 2);
    m->indices = malloc((size_t)tc * 12 + 4);
    for (uint32_t i = 0; i < vc; i++) {
        m->u[i] = (uint16_t)(test_rand_u64(s) % 32768);
        m->v[i] = (uint16_t)(test_rand_u64(s) % 32768);
        m->h[i] = (uint16_t)(test_rand_u64(s) % 32768);
        m->materials[i] = (uint16_t)(test_rand_u64(s) % (vc > 500 ? 300 : 7));
        m->normals[2 * i] = (uint8_t)test_rand_u64(s);
        m->normals[2 * i + 1] = (uint8_t)test_rand_u64(s);
    }
    for (size_t i = 0; i < (size_t)tc * 3; i++) m->indices[i] = (uint32_t)(test_rand_u64(s) % vc);
    for (int e = 0; e < 4; e++) {
        m->edge_count[e] = (uint32_t)(test_rand_u64(s) % 40);
        m->edges[e] = malloc(m->edge_count[e] * 4u + 4);
        for (uint32_t i = 0; i < m->edge_count[e]; i++) m->edges[e][i] = (uint32_t)(test_rand_u64(s) % vc);
    }
    m->header.center[0] = test_rand_range(s, -7e6, 7e6);
    m->header.min_height = -12.5f;
    m->header.max_height = 4000.25f;
    m->header.sphere_radius = 1234.5;
    m->header.horizon[2] = NAN;
    static char meta[] = "{\"geometricerror\":12.5}";
    m->metadata = meta;
    m->metadata_size = (uint32_t)strlen(meta);
    m->water_mask_size = 1;
    m->water_mask = malloc(1);
    m->water_mask[0] = 1;
    m->extensions = TERRA_QMESH_HAS_NORMALS | TERRA_QMESH_HAS_MATERIAL | TERRA_QMESH_HAS_METADATA | TERRA_QMESH_HAS_WATER_MASK;
}
static void free_random(terra_qmesh *m) {
    free(m->u), free(m->v), free(m->h), free(m->materials), free(m->normals), free(m->indices), free(m->water_mask);
    for (int e = 0; e < 4; e++) free(m->edges[e]);
}

static void test_random_round_trip(void) {
    unsigned long long s = 42;
    const uint32_t sizes[][2] = {{3, 1}, {17, 30}, {1000, 1900}, {65536, 1000}, {65537, 3000}, {70001, 140000}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        terra_qmesh m;
        random_mesh(&s, &m, sizes[k][0], sizes[k][1]);
        size_t cap = terra_qmesh_encoded_size(&m), n;
        uint8_t *buf = malloc(cap);
        /* random indices are not in first-use order: the encoder refuses, reorder fixes it */
        if (m.vertex_count > 3) CHECK(terra_qmesh_encode(&m, buf, cap, &n) == TERRA_E_INVALID, "unordered accepted");
        uint32_t *remap = malloc(m.vertex_count * 4u);
        uint16_t u0 = m.u[0];
        CHECK(terra_qmesh_reorder(&m, remap) == TERRA_OK, "reorder");
        CHECK(m.u[remap[0]] == u0, "reorder moved vertex 0's values elsewhere");
        CHECK(terra_qmesh_encode(&m, buf, cap, &n) == TERRA_OK, "encode %u: %s", m.vertex_count, terra_last_error());
        CHECK(terra_qmesh_encode(&m, buf, n - 1, &n) == TERRA_E_CAPACITY || n <= cap, "capacity");
        CHECK(terra_qmesh_encode(&m, buf, cap, &n) == TERRA_OK, "encode");
        terra_qmesh d;
        terra_status st = terra_qmesh_decode(buf, n, NULL, &d);
        CHECK(st == TERRA_OK, "decode %u: %s", m.vertex_count, terra_last_error());
        if (st == TERRA_OK) {
            d.header.horizon[2] = m.header.horizon[2] = 0; /* NaN != NaN */
            CHECK(same_mesh(&m, &d), "random mesh %u/%u does not round-trip", m.vertex_count, m.triangle_count);
            terra_qmesh_free(&d);
        }
        free(remap);
        free(buf);
        free_random(&m);
    }
}

/* Every truncation and a sweep of byte flips of real tiles: never a crash (ASan watches). */
static void test_damaged_input(void) {
    const char *files[] = {"data/qm/bertt/806.terrain", "data/qm/cesium-native/tile.octvertexnormals.watermask.terrain",
                           "data/qm/here-qmd/tile-with-metadata-extension.terrain"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        uint8_t *d;
        size_t n;
        if (!load(files[f], &d, &n)) continue;
        int ok_trunc = 0;
        for (size_t len = 0; len < n; len += (n > 20000 ? 7 : 1)) {
            uint8_t *c = malloc(len ? len : 1);
            memcpy(c, d, len);
            terra_qmesh m;
            if (terra_qmesh_decode(c, len, NULL, &m) == TERRA_OK) {
                ok_trunc++;
                terra_qmesh_free(&m);
            }
            free(c);
        }
        /* A truncated tile may still parse only if the cut falls exactly between extensions. */
        CHECK(ok_trunc <= 4, "%s: %d truncations accepted", files[f], ok_trunc);
        uint8_t *c = malloc(n);
        for (size_t i = 0; i < n; i += (n > 20000 ? 13 : 1)) {
            memcpy(c, d, n);
            c[i] ^= (uint8_t)(1u << (i % 8));
            terra_qmesh m;
            if (terra_qmesh_decode(c, n, NULL, &m) == TERRA_OK) terra_qmesh_free(&m);
        }
        free(c);
        terra_free(d);
    }
    /* Impossible counts are refused before allocating. */
    uint8_t small[200];
    memset(small, 0, sizeof small);
    small[88] = 0xff, small[89] = 0xff, small[90] = 0xff, small[91] = 0x0f;
    terra_qmesh m;
    CHECK(terra_qmesh_decode(small, sizeof small, NULL, &m) != TERRA_OK, "huge vertex count accepted");
    CHECK(terra_qmesh_decode(small, 10, NULL, &m) == TERRA_E_FORMAT, "short input");
    CHECK(terra_qmesh_decode(NULL, 0, NULL, &m) == TERRA_E_FORMAT, "empty input");
}

static void test_oct(void) {
    unsigned long long s = 7;
    for (int i = 0; i < 1000; i++) {
        double n[3] = {test_rand_range(&s, -1, 1), test_rand_range(&s, -1, 1), test_rand_range(&s, -1, 1)};
        double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        if (l < 1e-3) continue;
        for (int k = 0; k < 3; k++) n[k] /= l;
        uint8_t e[2];
        double r[3];
        terra_qmesh_oct_encode(n, e);
        terra_qmesh_oct_decode(e, r);
        double dot = n[0] * r[0] + n[1] * r[1] + n[2] * r[2];
        CHECK(dot > 0.9995, "oct round trip %f", dot);
    }
    uint8_t up[2];
    terra_qmesh_oct_encode((double[3]){0, 0, 1}, up);
    CHECK(up[0] == 128 && up[1] == 128, "+z encodes to %u,%u", up[0], up[1]);
}

int main(void) {
    RUN(test_real_tiles);
    RUN(test_legacy_normals);
    RUN(test_heightmap_refused);
    RUN(test_random_round_trip);
    RUN(test_damaged_input);
    RUN(test_oct);
    return finish();
}
