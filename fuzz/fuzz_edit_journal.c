/* libFuzzer target: edit journals replayed (terra_edit_layer_create, terra/edit.h) over a small
 * analytic ground. The first byte picks how the rest is read: bit 0 clear, each whole record's
 * CRC-32C is made again after mutation, so the fields reach the checks and the index; bit 1 set,
 * the journal is replayed read-only (else it may be cut and written). Must never crash or read
 * out of bounds; a journal that replays must give, near its first edits, grids within their stated
 * range (terra_source_sample checks) and equal bit for bit to the points there, and take one more
 * edit. */
#include "terra/archive.h" /* terra_crc32c */
#include "terra/edit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { HEADER = 8, RECORD = 68 };

static void quiet(terra_log_level level, const char *message, void *user) { (void)level, (void)message, (void)user; }

static float ground(void *user, double x, double z) {
    (void)user;
    return (float)(100 + 10 * sin(x * 0.1) * cos(z * 0.07));
}

static double field(const uint8_t *rec, int i) { /* the record's i-th double, as FORMAT.md lays it */
    uint64_t bits = 0;
    for (int b = 0; b < 8; b++) bits |= (uint64_t)rec[4 + 8 + 8 * i + b] << (8 * b);
    double v;
    memcpy(&v, &bits, sizeof v);
    return isfinite(v) ? fmax(-2e7, fmin(2e7, v)) : 0;
}

static void check_near(const terra_source *s, double x, double z, double spacing) {
    enum { N = 9 };
    float h[N * N];
    terra_surface id[N * N];
    const terra_grid_request r = {.ix0 = (int64_t)floor(x / spacing) - N / 2, .iz0 = (int64_t)floor(z / spacing) - N / 2,
                                  .spacing = spacing, .nx = N, .nz = N};
    if (terra_source_sample(s, &r, h, id) != TERRA_OK) {
        fprintf(stderr, "grid: %s\n", terra_last_error());
        abort();
    }
    for (int k = 0; k < N * N; k += 7) {
        const double px = (double)(r.ix0 + k % N) * spacing, pz = (double)(r.iz0 + k / N) * spacing;
        float p = NAN;
        if (terra_source_height(s, px, pz, &p) != TERRA_OK || memcmp(&p, &h[k], sizeof p) ||
            terra_source_surface_raw(s, px, pz) != id[k]) {
            fprintf(stderr, "the point %.17g, %.17g is not the grid's sample there\n", px, pz);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    static terra_source *base;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/terra_fuzz_journal_%ld.edits", (long)getpid());
        terra_set_log(quiet, NULL); /* torn journals are warned of */
        if (terra_source_create(&(terra_source_desc){.height_at = ground, .min_height = 90, .max_height = 110, .name = "fuzz"},
                                &base) != TERRA_OK)
            abort();
    }
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    const size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return 0;
    memcpy(b, data + 1, n);
    for (size_t at = HEADER; !(mode & 1) && at + RECORD <= n; at += RECORD) {
        const uint32_t crc = terra_crc32c(0, b + at + 4, RECORD - 4);
        for (int i = 0; i < 4; i++) b[at + i] = (uint8_t)(crc >> (8 * i));
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(b);
        return 0;
    }
    fwrite(b, 1, n, f);
    fclose(f);
    terra_edit_layer *l = NULL;
    if (terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path, .read_only = (mode & 2) != 0}, &l) ==
        TERRA_OK) {
        const terra_source *s = terra_edit_layer_source(l);
        const size_t records = n > HEADER ? (n - HEADER) / RECORD : 0;
        for (size_t i = 0; i < records && i < 3; i++) {
            const uint8_t *rec = b + HEADER + i * RECORD;
            check_near(s, field(rec, 0), field(rec, 1), 0.5);
            check_near(s, field(rec, 0), field(rec, 1), ldexp(1, 1 + (int)(rec[5] % 12)));
        }
        check_near(s, 0, 0, 1);
        float lo, hi;
        if (terra_source_height_range(s, -3e7, -3e7, 3e7, 3e7, &lo, &hi) != TERRA_OK) abort();
        const terra_status st =
            terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_SMOOTH, .radius = 20, .falloff = 4, .amount = 0.5}, NULL);
        if ((mode & 2) ? st != TERRA_E_INVALID : st != TERRA_OK && st != TERRA_E_CAPACITY) abort();
        check_near(s, 0, 0, 1);
        terra_edit_layer_destroy(l);
    }
    free(b);
    return 0;
}
