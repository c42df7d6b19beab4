/* libFuzzer target: the quantized-mesh decoder on arbitrary bytes. Whatever decodes must encode
 * again and decode to the same values. Built with clang (-fsanitize=fuzzer,address,undefined). */
#include "terra/qmesh.h"

#include <stdlib.h>
#include <string.h>

static void check_same(const terra_qmesh *a, const terra_qmesh *b) {
    size_t vc = a->vertex_count;
    if (a->vertex_count != b->vertex_count || a->triangle_count != b->triangle_count ||
        memcmp(a->u, b->u, vc * 2) || memcmp(a->v, b->v, vc * 2) || memcmp(a->h, b->h, vc * 2) ||
        memcmp(a->indices, b->indices, (size_t)a->triangle_count * 12))
        abort();
    for (int e = 0; e < 4; e++)
        if (a->edge_count[e] != b->edge_count[e] || memcmp(a->edges[e], b->edges[e], (size_t)a->edge_count[e] * 4)) abort();
    if ((a->normals != NULL) != (b->normals != NULL) || (a->normals && memcmp(a->normals, b->normals, vc * 2))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    terra_qmesh_decode_desc desc = {.max_vertices = 1u << 20, .max_triangles = 1u << 21};
    for (int endian = 0; endian < 3; endian++) {
        desc.extension_endian = endian;
        terra_qmesh m;
        if (terra_qmesh_decode(data, size, &desc, &m) != TERRA_OK) continue;
        m.extensions &= ~(uint32_t)TERRA_QMESH_HAS_LEGACY_NORMALS;
        size_t cap = terra_qmesh_encoded_size(&m), n = 0;
        uint8_t *buf = malloc(cap ? cap : 1);
        if (buf && terra_qmesh_encode(&m, buf, cap, &n) == TERRA_OK) {
            terra_qmesh back;
            desc.extension_endian = 1;
            if (terra_qmesh_decode(buf, n, &desc, &back) != TERRA_OK) abort();
            check_same(&m, &back);
            terra_qmesh_free(&back);
        }
        free(buf);
        terra_qmesh_free(&m);
    }
    return 0;
}
