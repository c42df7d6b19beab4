/* The edit layer (edit.h): each brush does what it says inside its shape, nothing outside its
 * bounds, and leaves no step; ranges stay conservative under thousands of random edits (every grid
 * sampled is checked against them); grids and points agree; two peers, one applying edits live and
 * one replaying its journal, agree bit for bit at a million points; a journal cut at every byte
 * replays its whole records only; a damaged one is refused; edits land while other threads sample. */
#include "check.h"
#include "terra/edit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/terra_edit_XXXXXX";

static float flat(void *u, double x, double z) { (void)u, (void)x, (void)z; return 100; }

static terra_source *flat_source(void) {
    terra_source *s = NULL;
    terra_source_create(&(terra_source_desc){.height_at = flat, .min_height = 100, .max_height = 100, .name = "flat"}, &s);
    return s;
}

static float height(const terra_source *s, double x, double z) {
    float h = NAN;
    terra_source_height(s, x, z, &h);
    return h;
}

static terra_edit random_edit(unsigned long long *seed, double area) {
    terra_edit e = {.brush = (terra_brush)(test_rand_u64(seed) % 6), .shape = (terra_shape)(test_rand_u64(seed) % 3),
                    .x = test_rand_range(seed, -area, area), .z = test_rand_range(seed, -area, area),
                    .radius = test_rand_range(seed, 0.5, 60), .half_z = test_rand_range(seed, 0, 40),
                    .yaw = test_rand_range(seed, -3.2, 3.2), .falloff = test_rand_range(seed, 0, 30),
                    .surface = (terra_surface)(16 + test_rand_u64(seed) % 8)};
    switch (e.brush) {
    case TERRA_BRUSH_RAISE:
    case TERRA_BRUSH_LOWER: e.amount = test_rand_range(seed, 0, 20); break;
    case TERRA_BRUSH_SMOOTH: e.amount = test_rand_range(seed, 0, 1); break;
    default: e.amount = test_rand_range(seed, -200, 2000); break;
    }
    if (test_rand_u64(seed) % 400 == 0 && e.brush != TERRA_BRUSH_SMOOTH) e.radius = test_rand_range(seed, 300, 3000); /* a few big ones */
    return e;
}

/* ---- brushes ---------------------------------------------------------------------------------------- */

static void test_brushes(void) {
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base}, &l) == TERRA_OK, "%s", terra_last_error());
    if (!l) return;
    const terra_source *s = terra_edit_layer_source(l);
    double r[4];
    /* raise a cylinder 5 m: +5 inside, the base past radius + falloff, in between no step */
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .x = 0, .z = 0, .radius = 10, .falloff = 8, .amount = 5}, r) ==
          TERRA_OK);
    CHECK(r[0] <= -18 && r[2] >= 18 && r[0] > -18.01, "region %g..%g", r[0], r[2]);
    CHECK(height(s, 3, 4) == 105 && height(s, 18.5, 0) == 100 && height(s, 0, -30) == 100, "raise: %g %g",
          height(s, 3, 4), height(s, 18.5, 0));
    double worst = 0;
    for (double x = 0; x < 25; x += 0.01) worst = fmax(worst, fabs(height(s, x + 0.01, 0) - height(s, x, 0)));
    CHECK(worst < 0.05, "a step of %g m in 1 cm across the falloff", worst);
    /* dig a box to 90 m: 90 inside, a 97 m mound above its floor... */
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_DIG, .shape = TERRA_SHAPE_BOX, .x = 100, .z = 0, .radius = 10,
                                            .half_z = 4, .yaw = 0.5, .amount = 90},
                           NULL) == TERRA_OK);
    CHECK(height(s, 100, 0) == 90 && height(s, 100 + 9 * cos(0.5), 9 * sin(0.5)) == 90 && height(s, 100, 6) == 100,
          "dig box: %g %g %g", height(s, 100, 0), height(s, 100 + 9 * cos(0.5), 9 * sin(0.5)), height(s, 100, 6));
    /* ...and digging to a floor above the ground leaves it */
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_DIG, .x = 200, .z = 0, .radius = 10, .amount = 150}, NULL) ==
          TERRA_OK);
    CHECK(height(s, 200, 0) == 100, "a floor above the ground digs nothing");
    /* a pit: its floor the bottom of a sphere, 70 m at the centre, rising to 90 at the rim */
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_DIG, .shape = TERRA_SHAPE_PIT, .x = 300, .z = 0, .radius = 20,
                                            .falloff = 4, .amount = 70},
                           NULL) == TERRA_OK);
    const double want = 70 + 20 - sqrt(400.0 - 144);
    CHECK(height(s, 300, 0) == 70 && fabs(height(s, 312, 0) - want) < 1e-4, "pit: %g %g (want 70, %g)", height(s, 300, 0),
          height(s, 312, 0), want);
    /* flatten to 120 inside; paint */
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_FLATTEN, .x = 400, .z = 0, .radius = 5, .falloff = 5, .amount = 120},
                           NULL) == TERRA_OK);
    CHECK(height(s, 401, 1) == 120 && height(s, 411, 0) == 100, "flatten");
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_PAINT, .x = 400, .z = 0, .radius = 3, .surface = 40}, NULL) ==
          TERRA_OK);
    float h[3];
    terra_surface id[3];
    CHECK(terra_source_sample(s, &(terra_grid_request){.ix0 = 399, .iz0 = 0, .spacing = 1, .nx = 3, .nz = 1}, h, id) == TERRA_OK);
    CHECK(id[1] == 40 && h[1] == 120, "painted: surface %d, height %g", id[1], h[1]);
    CHECK(terra_edit_count(l) == 6, "%zu edits", terra_edit_count(l));
    /* refused, naming the field */
    const terra_edit bad[] = {{.brush = TERRA_BRUSH_RAISE, .radius = 0},
                              {.brush = TERRA_BRUSH_RAISE, .radius = 1, .amount = -1},
                              {.brush = TERRA_BRUSH_SMOOTH, .radius = 1, .amount = 2},
                              {.brush = TERRA_BRUSH_RAISE, .radius = 1, .falloff = NAN},
                              {.brush = (terra_brush)9, .radius = 1},
                              {.brush = TERRA_BRUSH_RAISE, .radius = 1, .x = 1e300}};
    const char *says[] = {"radius", "at least 0", "fraction", "falloff", "brush", "centre"};
    for (int i = 0; i < 6; i++)
        CHECK(terra_edit_apply(l, &bad[i], NULL) == TERRA_E_INVALID && strstr(terra_last_error(), says[i]), "bad %d: %s", i,
              terra_last_error());
    CHECK(terra_edit_count(l) == 6, "nothing refused was applied");
    terra_edit_layer_destroy(l);
    terra_source_destroy(base);
}

/* ---- random edits over the default world --------------------------------------------------------------- */

/* Grids everywhere: each sample checked against the range (terra_source_sample does), and against
 * point queries at lattice points. */
static void test_ranges_and_points(void) {
    terra_source *w = NULL;
    terra_world_create(NULL, &w);
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = w}, &l) == TERRA_OK);
    if (!l) return;
    unsigned long long seed = 17;
    for (int i = 0; i < 3000; i++) {
        const terra_edit e = random_edit(&seed, 1500);
        CHECK(terra_edit_apply(l, &e, NULL) == TERRA_OK, "edit %d: %s", i, terra_last_error());
    }
    const terra_source *s = terra_edit_layer_source(l);
    float h[33 * 33];
    int failed = 0, unlike = 0;
    for (int g = 0; g < 300; g++) {
        const double spacing = ldexp(1.0, (int)(test_rand_u64(&seed) % 8) - 2);
        const terra_grid_request r = {.ix0 = (int64_t)(test_rand_range(&seed, -1700, 1600) / spacing),
                                      .iz0 = (int64_t)(test_rand_range(&seed, -1700, 1600) / spacing),
                                      .spacing = spacing, .nx = 1 + (int)(test_rand_u64(&seed) % 33),
                                      .nz = 1 + (int)(test_rand_u64(&seed) % 33)};
        if (terra_source_sample(s, &r, h, NULL) != TERRA_OK) {
            if (!failed++) fprintf(stderr, "  %s\n", terra_last_error());
            continue;
        }
        const int i = (int)(test_rand_u64(&seed) % (uint64_t)r.nx), j = (int)(test_rand_u64(&seed) % (uint64_t)r.nz);
        unlike += height(s, (double)(r.ix0 + i) * spacing, (double)(r.iz0 + j) * spacing) != h[j * r.nx + i];
    }
    CHECK(failed == 0, "%d of 300 grids fell outside the stated range (or failed)", failed);
    CHECK(unlike == 0, "%d grid samples differ from the point query there", unlike);
    terra_edit_layer_destroy(l);
    terra_source_destroy(w);
}

/* Two peers: one applies 10,000 edits live (writing the journal), the other replays the journal.
 * Heights at a million points are equal bit for bit. */
static void test_peers_agree(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/peers.edits", dir);
    terra_source *w = NULL;
    terra_world_create(NULL, &w);
    terra_edit_layer *a = NULL, *b = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = w, .journal = path}, &a) == TERRA_OK, "%s", terra_last_error());
    if (!a) return;
    unsigned long long seed = 99;
#ifdef TERRA_SANITIZED
    const int edits = 2000;
#else
    const int edits = 10000;
#endif
    for (int i = 0; i < edits; i++) {
        const terra_edit e = random_edit(&seed, 2000);
        terra_edit_apply(a, &e, NULL);
    }
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = w, .journal = path}, &b) == TERRA_OK, "%s", terra_last_error());
    CHECK(b && terra_edit_count(b) == (size_t)edits, "replayed %zu of %d", b ? terra_edit_count(b) : 0, edits);
    if (!b) return;
    enum { N = 125 };
    static float ha[N * N], hb[N * N];
    long unlike = 0, points = 0;
    for (int gz = 0; gz < 8; gz++)
        for (int gx = 0; gx < 8; gx++) { /* 8 x 8 grids of 125 x 125: 1,000,000 points over 4 km */
            const terra_grid_request r = {.ix0 = -1000 + gx * N, .iz0 = -1000 + gz * N, .spacing = 2, .nx = N, .nz = N};
            CHECK(terra_source_sample(terra_edit_layer_source(a), &r, ha, NULL) == TERRA_OK, "%s", terra_last_error());
            CHECK(terra_source_sample(terra_edit_layer_source(b), &r, hb, NULL) == TERRA_OK, "%s", terra_last_error());
            for (int k = 0; k < N * N; k++) unlike += memcmp(&ha[k], &hb[k], sizeof(float)) != 0;
            points += N * N;
        }
    CHECK(unlike == 0, "%ld of %ld points differ between the peers", unlike, points);
    terra_edit_layer_destroy(a);
    terra_edit_layer_destroy(b);
    terra_source_destroy(w);
}

static int warnings;
static void count_warnings(terra_log_level level, const char *message, void *user) {
    (void)message, (void)user;
    warnings += level == TERRA_LOG_WARN;
}

/* A journal of 12 edits cut at every length replays the whole records before the cut, and no more;
 * the file is cut back to them and takes new edits after. A damaged record before the last is an
 * error naming the byte. */
static void test_journal_cut_everywhere(void) {
    char path[600], cut[600];
    snprintf(path, sizeof path, "%s/whole.edits", dir);
    snprintf(cut, sizeof cut, "%s/cut.edits", dir);
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK);
    if (!l) return;
    unsigned long long seed = 5;
    enum { EDITS = 12 };
    for (int i = 0; i < EDITS; i++) {
        terra_edit e = random_edit(&seed, 50);
        if (e.brush == TERRA_BRUSH_SMOOTH) e.brush = TERRA_BRUSH_RAISE;
        terra_edit_apply(l, &e, NULL);
    }
    terra_edit_layer_destroy(l);
    FILE *f = fopen(path, "rb");
    uint8_t bytes[4096];
    const size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f) fclose(f);
    const size_t rec = (n - 8) / EDITS;
    CHECK(n == 8 + EDITS * rec && rec > 0, "%zu bytes", n);
    int wrong = 0, torn = 0;
    terra_set_log(count_warnings, NULL); /* each torn record is dropped with a message */
    warnings = 0;
    for (size_t len = 0; len <= n; len++) {
        torn += (len > 0 && len < 8) || (len > 8 && (len - 8) % rec != 0);
        f = fopen(cut, "wb");
        fwrite(bytes, 1, len, f);
        fclose(f);
        terra_edit_layer *c = NULL;
        const size_t whole = len < 8 ? 0 : (len - 8) / rec;
        if (terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = cut}, &c) != TERRA_OK ||
            terra_edit_count(c) != whole) {
            wrong++;
        } else { /* cut back to the whole records, and appending works */
            terra_edit_apply(c, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .radius = 1, .amount = 1}, NULL);
            terra_edit_layer_destroy(c);
            c = NULL;
            terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = cut}, &c);
            wrong += !c || terra_edit_count(c) != whole + 1;
        }
        terra_edit_layer_destroy(c);
    }
    CHECK(wrong == 0, "%d of %zu cuts replayed other than their whole records", wrong, n + 1);
    CHECK(warnings == torn, "%d warnings for %d torn journals", warnings, torn);
    terra_set_log(NULL, NULL);
    /* a damaged record with records after it */
    bytes[8 + rec + 20] ^= 0x40;
    f = fopen(cut, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
    terra_edit_layer *c = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = cut}, &c) == TERRA_E_CORRUPT && !c,
          "a damaged record");
    char at[64];
    snprintf(at, sizeof at, "at byte %zu", 8 + rec);
    CHECK(strstr(terra_last_error(), at) && strstr(terra_last_error(), "cut.edits"), "says: %s", terra_last_error());
    f = fopen(cut, "wb");
    fputs("not a journal at all", f);
    fclose(f);
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = cut}, &c) == TERRA_E_FORMAT,
          "a file that is not a journal: %s", terra_last_error());
    terra_source_destroy(base);
}

/* Edits land while two threads sample grids: every grid stays within its range. */
typedef struct {
    const terra_source *s;
    atomic_int *stop;
    int grids, failed;
} sampler;

static void *sample_loop(void *arg) {
    sampler *j = arg;
    float h[17 * 17];
    unsigned long long seed = (unsigned long long)(uintptr_t)j;
    while (!atomic_load(j->stop)) {
        const terra_grid_request r = {.ix0 = (int64_t)test_rand_range(&seed, -600, 600),
                                      .iz0 = (int64_t)test_rand_range(&seed, -600, 600), .spacing = 1, .nx = 17, .nz = 17};
        j->failed += terra_source_sample(j->s, &r, h, NULL) != TERRA_OK;
        j->grids++;
    }
    return NULL;
}

static void test_edits_while_sampling(void) {
    terra_source *w = NULL;
    terra_world_create(NULL, &w);
    terra_edit_layer *l = NULL;
    terra_edit_layer_create(&(terra_edit_layer_desc){.base = w}, &l);
    if (!l) return;
    atomic_int stop;
    atomic_init(&stop, 0);
    sampler jobs[2] = {{.s = terra_edit_layer_source(l), .stop = &stop}, {.s = terra_edit_layer_source(l), .stop = &stop}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, sample_loop, &jobs[i]);
    unsigned long long seed = 3;
    for (int i = 0; i < 2000; i++) {
        const terra_edit e = random_edit(&seed, 600);
        terra_edit_apply(l, &e, NULL);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(jobs[0].failed + jobs[1].failed == 0, "%d of %d grids failed while edits landed", jobs[0].failed + jobs[1].failed,
          jobs[0].grids + jobs[1].grids);
    terra_edit_layer_destroy(l);
    terra_source_destroy(w);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(test_brushes);
    RUN(test_ranges_and_points);
    RUN(test_peers_agree);
    RUN(test_journal_cut_everywhere);
    RUN(test_edits_while_sampling);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return finish();
}
