/* libFuzzer target: an archive as a height source (what `terra render --archive` draws), the
 * validation every reader opens through (metadata, index, pyramid: terra_archive_validate, its
 * messages formatted) and the whole-archive check (`terra info --verify`) on arbitrary archive
 * bytes. The input's checksums (header, every entry) are recomputed first, so that mutations reach
 * the metadata, decompression, the quantized-mesh decoder and the lattice instead of stopping at a
 * checksum (fuzz_archive covers the checksums). Must never crash, read out of bounds or hang. */
#include "terra/archive_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v), wr32(p + 4, (uint32_t)(v >> 32)); }

/* Makes the file size, the header checksum and every entry checksum that can be computed right. */
static void reseal(uint8_t *d, size_t n) {
    if (n < TERRA_ARCHIVE_HEADER_SIZE || memcmp(d, TERRA_ARCHIVE_MAGIC, 8) != 0) return;
    const uint32_t meta = rd32(d + 48);
    if (meta > n - TERRA_ARCHIVE_HEADER_SIZE) return;
    wr64(d + 40, n);
    wr32(d + 60, terra_crc32c(terra_crc32c(0, d, 60), d + TERRA_ARCHIVE_HEADER_SIZE, meta));
    const uint64_t count = rd64(d + 16), index = TERRA_ARCHIVE_HEADER_SIZE + (uint64_t)meta;
    for (uint64_t i = 0; i < count && index + (i + 1) * TERRA_ARCHIVE_ENTRY_SIZE <= n; i++) {
        uint8_t *p = d + index + i * TERRA_ARCHIVE_ENTRY_SIZE;
        terra_archive_entry e;
        terra_archive_entry_unpack(p, &e);
        if (e.offset > n || e.size > n - e.offset) continue;
        e.checksum = terra_archive_entry_checksum(&e, d + e.offset);
        terra_archive_entry_pack(&e, p);
    }
}

/* Samples a few requests on every level: the area's corners and middle. */
static void draw(const terra_source *src, const terra_archive_source_info *info) {
    static float h[17 * 17];
    static terra_surface s[17 * 17];
    const double s0 = info->grid.tile0_size / info->grid.cells;
    for (int L = 0; L < info->levels && L < 8; L++) {
        const double sp = ldexp(s0, L);
        const double at[3][2] = {{info->bounds[0], info->bounds[1]},
                                 {0.5 * (info->bounds[0] + info->bounds[2]), 0.5 * (info->bounds[1] + info->bounds[3])},
                                 {info->bounds[2], info->bounds[3]}};
        for (int k = 0; k < 3; k++) {
            terra_grid_request r = {.ix0 = (int64_t)floor(at[k][0] / sp) - 8, .iz0 = (int64_t)floor(at[k][1] / sp) - 8,
                                    .spacing = sp, .nx = 17, .nz = 17};
            (void)terra_source_sample(src, &r, h, s);
        }
    }
    float lo, hi, y;
    (void)terra_source_height_range(src, info->bounds[0], info->bounds[1], info->bounds[2], info->bounds[3], &lo, &hi);
    (void)terra_source_height(src, 0.5 * (info->bounds[0] + info->bounds[2]), 0.5 * (info->bounds[1] + info->bounds[3]), &y);
}

/* Every message a report carries is a whole string naming the archive. */
static void on_report(void *user, uint64_t index, const terra_archive_entry *e, terra_status st, const char *problem) {
    (void)index, (void)e, (void)st;
    *(size_t *)user += strlen(problem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/terra_fuzz_source_%ld.terra", (long)getpid());
    uint8_t *d = malloc(size ? size : 1);
    if (!d) return 0;
    memcpy(d, data, size);
    reseal(d, size);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(d);
        return 0;
    }
    fwrite(d, 1, size, f);
    fclose(f);
    free(d);
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) == TERRA_OK) {
        uint64_t bad;
        size_t said = 0;
        terra_archive_layout layout;
        (void)terra_archive_validate(a, on_report, &said, &layout);
        (void)terra_archive_verify_tiles(a, NULL, NULL, &bad);
        terra_archive_close(a);
    }
    terra_source *src;
    terra_archive_source_info info;
    if (terra_archive_source_create(path, &src, &info) == TERRA_OK) {
        draw(src, &info);
        terra_source_destroy(src);
    }
    return 0;
}
