/* libFuzzer target: what terra reads of a scenery itself before assimp (io/cook/scenery_check.c):
 * PLY and OFF headers' counts, a glTF's (or .glb's) JSON node graph, URIs and declared triangles.
 * The first byte picks the file's name (so the check it gets: .ply, .off, .gltf, .glb, .obj), how
 * far past the bytes given the file is said to run, and the depth allowed; the rest are the file's
 * first bytes. Must never crash, read out of bounds or leak; asks for no more than the file holds,
 * and gives the same answer twice. */
#include "../io/cook/scenery_check.h"
#include "terra/scenery.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *names[5] = {"f.ply", "f.off", "f.gltf", "f.glb", "f.obj"};
    const char *name = names[data[0] % 5];
    const uint8_t *d = data + 1;
    const size_t n = size - 1;
    const uint64_t file_size = n + (uint64_t)(data[0] / 5 % 8) * 4099;
    const int depth = data[0] & 0x80 ? 3 : TERRA_SCENERY_MAX_DEPTH;
    const uint64_t want = terra_scenery_head_size(name, d, n, file_size);
    if (want > file_size) abort();
    const size_t given = want < n ? (size_t)want : n;
    terra_scenery_declared a, b;
    terra_status sa = terra_scenery_check_head(name, d, given, file_size, depth, &a);
    terra_status sb = terra_scenery_check_head(name, d, given, file_size, depth, &b);
    if (sa != sb || a.known != b.known || a.triangles != b.triangles || a.uri_count != b.uri_count) abort();
    for (size_t i = 0; i < a.uri_count; i++)
        if (strcmp(a.uris[i], b.uris[i]) || !strncmp(a.uris[i], "data:", 5)) abort();
    terra_scenery_declared_free(&a);
    terra_scenery_declared_free(&b);
    return 0;
}
