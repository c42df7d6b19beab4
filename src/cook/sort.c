/* Sorting the cook's 64-bit keys (half-edges a << 32 | b): least significant digit first, 11 bits a
 * pass, skipping the digits all keys share (vertex indices of one tile leave most of them 0).
 * Several times quicker than qsort's callbacks on the million keys of a coarse tile. */
#include "scan.h"

#include <stdlib.h>
#include <string.h>

enum { DIGIT = 11, PASSES = 6, BUCKETS = 1 << DIGIT };

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void terra_cook_sort_u64(uint64_t *a, size_t n, uint64_t *tmp) {
    if (n < 2) return;
    _Static_assert(DIGIT * PASSES >= 64, "the digits cover the key");
    uint32_t (*hist)[BUCKETS] = terra_calloc(PASSES, sizeof *hist);
    if (!hist) { /* out of memory for the counts: the same order through qsort */
        qsort(a, n, sizeof *a, u64_cmp);
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < PASSES; p++) hist[p][(a[i] >> (p * DIGIT)) & (BUCKETS - 1)]++;
    uint64_t *src = a, *dst = tmp;
    for (int p = 0; p < PASSES; p++) {
        uint32_t *h = hist[p];
        if (h[(a[0] >> (p * DIGIT)) & (BUCKETS - 1)] == n) continue; /* one digit for all */
        uint32_t sum = 0;
        for (int b = 0; b < BUCKETS; b++) {
            uint32_t c = h[b];
            h[b] = sum, sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[h[(src[i] >> (p * DIGIT)) & (BUCKETS - 1)]++] = src[i];
        uint64_t *t = src;
        src = dst, dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    terra_free(hist);
}
