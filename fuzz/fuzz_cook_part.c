/* libFuzzer target: the split cook's part files (terra/cook.h): the head's key alone
 * (terra_cook_part_key_read, what a rerun checks against the file's name) and the whole file
 * (terra_cook_part_decode: header, mesh, finest list, tiles). The first byte picks how the rest is
 * read: odd, as a part file's bytes; even, the same with its last four bytes set to the CRC-32C of
 * the others, so mutations get past the checksum and reach the counts and arrays. Must never crash
 * or read out of bounds; a part that decodes must have the key its head gives, and encode back to
 * the same bytes. */
#include "terra/cook.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return 0;
    if (n) memcpy(b, data + 1, n);
    if (!(data[0] & 1) && n >= 4) {
        const uint32_t c = terra_crc32c(0, b, n - 4);
        for (int i = 0; i < 4; i++) b[n - 4 + i] = (uint8_t)(c >> (8 * i));
    }
    terra_cook_part_key k;
    const terra_status key = terra_cook_part_key_read(b, n, &k);
    terra_cook_part p;
    if (terra_cook_part_decode(b, n, &p) == TERRA_OK) {
        if (key != TERRA_OK || k.fingerprint != p.fingerprint || k.bottom != p.bottom || k.depth != p.depth ||
            k.tx != p.root.tx || k.ty != p.root.ty)
            abort();
        uint8_t *again = NULL;
        size_t m = 0;
        if (terra_cook_part_encode(&p, &again, &m) == TERRA_OK && (m != n || memcmp(again, b, n))) abort();
        terra_free(again);
        terra_cook_part_free(&p);
    }
    free(b);
    return 0;
}
