/* libFuzzer target: the packed tile decoder on arbitrary bytes. The first byte picks how the rest
 * is read: odd, as a packed tile; even, as the codec's body (compressed here into a frame, so
 * mutations reach the body's parser rather than dying in zstd). Must never crash, read out of
 * bounds or give more than max_out bytes; what it gives must decode as quantized-mesh. */
#include "terra/qmesh.h"
#include "terra/tile_codec.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t max_out = (size_t)1 << 20;
    uint8_t *packed = NULL;
    size_t pn = size - 1;
    if (data[0] & 1) {
        packed = malloc(pn ? pn : 1);
        if (!packed) return 0;
        if (pn) memcpy(packed, data + 1, pn);
    } else {
        size_t cap = ZSTD_compressBound(pn) + 1;
        packed = malloc(cap);
        if (!packed) return 0;
        packed[0] = TERRA_TILE_CODEC_VERSION;
        size_t r = ZSTD_compress(packed + 1, cap - 1, data + 1, pn, 1);
        if (ZSTD_isError(r)) {
            free(packed);
            return 0;
        }
        pn = r + 1;
    }
    uint8_t *out = NULL;
    size_t on = 0;
    if (terra_tile_codec_unpack(packed, pn, max_out, &out, &on) == TERRA_OK) {
        if (on > max_out) abort();
        terra_qmesh m;
        if (terra_qmesh_decode(out, on, NULL, &m) != TERRA_OK) abort(); /* the codec only writes valid tiles */
        terra_qmesh_free(&m);
        terra_free(out);
    }
    free(packed);
    return 0;
}
