/* The edit layer (edit.h): each brush does what it says inside its shape, nothing outside its
 * bounds, and leaves no step; ranges stay conservative under thousands of random edits (every grid
 * sampled is checked against them); grids and points agree; the index by region gives, for random
 * journals and random points and grids, the bits of a plain replay of every edit in order (kept
 * here); one place takes at most TERRA_EDIT_MAX_OVERLAP edits, live or replayed; two peers, one
 * applying edits live and one replaying its journal, agree bit for bit at a million points; a
 * journal cut at every byte replays its whole records only; a damaged one, or one holding an edit
 * the layer refuses (a paint of surface 0), is refused naming the edit; a journal read while
 * another process appends (holding its lock mid-record) is read whole and never cut; edits land
 * while other threads sample. */
#include "check.h"
#include "terra/edit.h"

#include "terra/archive.h" /* terra_crc32c: journals written by hand */

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* ---- the index against a plain replay -------------------------------------------------------------- */

/* A plain replay, as the layer did it before its index: every edit in order, each applied where
 * its bounds hold the point (edit.h's brushes, written out again here so a change to them shows). */
typedef struct ref_edit {
    terra_edit e;
    double b[4], c, s, stencil;
} ref_edit;

static void ref_store(ref_edit *s, const terra_edit *e) {
    s->e = *e;
    if (s->e.half_z == 0) s->e.half_z = e->radius;
    s->c = cos(e->yaw), s->s = sin(e->yaw);
    s->stencil = fmax(1.0, e->falloff / 2);
    terra_edit_bounds(&s->e, s->b);
}

static double ref_apply(const terra_source *base, const ref_edit *s, double x, double z, double h, double b,
                        terra_surface *surf) {
    const terra_edit *e = &s->e;
    const double dx = x - e->x, dz = z - e->z;
    double d, r = 0, w = 1;
    if (e->shape == TERRA_SHAPE_BOX) {
        const double lx = dx * s->c + dz * s->s, lz = -dx * s->s + dz * s->c;
        const double ox = fmax(fabs(lx) - e->radius, 0), oz = fmax(fabs(lz) - e->half_z, 0);
        d = sqrt(ox * ox + oz * oz);
    } else {
        r = sqrt(dx * dx + dz * dz);
        d = fmax(r - e->radius, 0);
    }
    if (d > 0) {
        if (d >= e->falloff) return h;
        const double t = 1 - d / e->falloff;
        w = t * t * (3 - 2 * t);
    }
    if (w <= 0) return h;
    switch (e->brush) {
    case TERRA_BRUSH_RAISE: return h + w * e->amount;
    case TERRA_BRUSH_LOWER: return h - w * e->amount;
    case TERRA_BRUSH_FLATTEN: return h + w * (e->amount - h);
    case TERRA_BRUSH_SMOOTH: {
        const double q = s->stencil;
        const double mean = ((double)terra_source_height_raw(base, x + q, z) + terra_source_height_raw(base, x - q, z) +
                             terra_source_height_raw(base, x, z + q) + terra_source_height_raw(base, x, z - q)) /
                            4;
        return h + w * e->amount * (mean - b);
    }
    case TERRA_BRUSH_DIG: {
        double floor = e->amount;
        if (e->shape == TERRA_SHAPE_PIT) {
            const double q = fmin(r, e->radius);
            floor = e->amount + e->radius - sqrt(e->radius * e->radius - q * q);
        }
        return h - w * fmax(0, h - floor);
    }
    case TERRA_BRUSH_PAINT:
        if (w >= 0.5) *surf = e->surface;
        return h;
    }
    return h;
}

static float ref_replay(const terra_source *base, const ref_edit *E, size_t n, double x, double z, float b,
                        terra_surface *surf) {
    double h = b;
    for (size_t i = 0; i < n; i++)
        if (x >= E[i].b[0] && x <= E[i].b[2] && z >= E[i].b[1] && z <= E[i].b[3]) h = ref_apply(base, &E[i], x, z, h, b, surf);
    return (float)h;
}

static double log_uniform(unsigned long long *seed, double lo, double hi) {
    return exp(test_rand_range(seed, log(lo), log(hi)));
}

/* Edits of every size, from 1 cm to the largest, stacked, clustered and scattered. */
static terra_edit index_case(unsigned long long *seed, double (*centre)[2], int clusters, const terra_edit *before) {
    terra_edit e = {.brush = (terra_brush)(test_rand_u64(seed) % 6), .shape = (terra_shape)(test_rand_u64(seed) % 3),
                    .yaw = test_rand_range(seed, -7, 7), .surface = (terra_surface)(1 + test_rand_u64(seed) % 255)};
    const uint64_t size = test_rand_u64(seed) % 100;
    e.radius = size < 2 ? test_rand_range(seed, 1e5, TERRA_EDIT_MAX_EXTENT) : log_uniform(seed, 0.01, size < 10 ? 3000 : 60);
    e.half_z = test_rand_u64(seed) % 3 ? log_uniform(seed, 0.01, fmin(2 * e.radius, TERRA_EDIT_MAX_EXTENT)) : 0;
    e.falloff = test_rand_u64(seed) % 5 ? log_uniform(seed, 0.01, 100) : 0;
    if (before && test_rand_u64(seed) % 10 == 0) {
        e.x = before->x, e.z = before->z; /* stacked */
    } else if (test_rand_u64(seed) % 10 == 0) {
        e.x = test_rand_range(seed, -TERRA_EDIT_MAX_EXTENT, TERRA_EDIT_MAX_EXTENT);
        e.z = test_rand_range(seed, -TERRA_EDIT_MAX_EXTENT, TERRA_EDIT_MAX_EXTENT);
    } else {
        const double *c = centre[test_rand_u64(seed) % (uint64_t)clusters], spread = log_uniform(seed, 1, 2000);
        e.x = c[0] + test_rand_range(seed, -spread, spread), e.z = c[1] + test_rand_range(seed, -spread, spread);
    }
    switch (e.brush) {
    case TERRA_BRUSH_RAISE:
    case TERRA_BRUSH_LOWER: e.amount = test_rand_range(seed, 0, 30); break;
    case TERRA_BRUSH_SMOOTH: e.amount = test_rand_range(seed, 0, 1); break;
    default: e.amount = test_rand_range(seed, -300, 1500); break;
    }
    return e;
}

/* A place to ask: near a cluster, on an edit's bounds (their edges are where holding begins), or
 * anywhere. */
static void index_place(unsigned long long *seed, double (*centre)[2], int clusters, const ref_edit *E, size_t n,
                        double *x, double *z) {
    const uint64_t how = test_rand_u64(seed) % 10;
    if (how < 3 && n) {
        const ref_edit *s = &E[test_rand_u64(seed) % n];
        *x = s->b[test_rand_u64(seed) % 2 ? 0 : 2], *z = s->b[test_rand_u64(seed) % 2 ? 1 : 3];
        if (test_rand_u64(seed) % 2) *x = test_rand_range(seed, s->b[0], s->b[2]);
    } else if (how < 9) {
        const double *c = centre[test_rand_u64(seed) % (uint64_t)clusters], spread = log_uniform(seed, 1, 3000);
        *x = c[0] + test_rand_range(seed, -spread, spread), *z = c[1] + test_rand_range(seed, -spread, spread);
    } else {
        *x = test_rand_range(seed, -3e7, 3e7), *z = test_rand_range(seed, -3e7, 3e7);
    }
}

/* Random journals, random points and grids (from a sample to thousands of kilometres a side):
 * heights and surfaces bit for bit those of the plain replay; every grid within its stated range
 * (terra_source_sample checks). */
static void test_index_is_a_plain_replay(void) {
    terra_source *w = NULL;
    terra_world_create(NULL, &w);
    unsigned long long seed = 2024;
#ifdef TERRA_SANITIZED
    const int journals = 2;
#else
    const int journals = 6;
#endif
    long points = 0, samples = 0, unlike = 0, refused = 0, failed = 0;
    for (int jn = 0; jn < journals; jn++) {
        terra_edit_layer *l = NULL;
        CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = w}, &l) == TERRA_OK, "%s", terra_last_error());
        if (!l) break;
        double centre[4][2];
        const int clusters = 1 + (int)(test_rand_u64(&seed) % 4);
        for (int c = 0; c < clusters; c++)
            centre[c][0] = test_rand_range(&seed, -5000, 5000), centre[c][1] = test_rand_range(&seed, -5000, 5000);
        const size_t edits = 100 + test_rand_u64(&seed) % 2000;
        ref_edit *E = malloc(edits * sizeof *E);
        size_t n = 0;
        terra_edit last = {0};
        for (size_t i = 0; i < edits; i++) {
            const terra_edit e = index_case(&seed, centre, clusters, i ? &last : NULL);
            const terra_status st = terra_edit_apply(l, &e, NULL);
            if (st == TERRA_OK) {
                ref_store(&E[n++], &e), last = e;
            } else {
                refused++;
                CHECK(st == TERRA_E_CAPACITY, "edit %zu: %s", i, terra_last_error());
            }
        }
        const terra_source *s = terra_edit_layer_source(l);
        for (int q = 0; q < 1500; q++) {
            double x, z;
            index_place(&seed, centre, clusters, E, n, &x, &z);
            float h = NAN;
            terra_surface id = terra_source_surface_raw(w, x, z);
            const float want = ref_replay(w, E, n, x, z, terra_source_height_raw(w, x, z), &id);
            failed += terra_source_height(s, x, z, &h) != TERRA_OK;
            unlike += memcmp(&h, &want, sizeof h) != 0 || terra_source_surface_raw(s, x, z) != id;
            points++;
        }
        static float hb[48 * 48], hl[48 * 48];
        static terra_surface sb[48 * 48], sl[48 * 48];
        for (int g = 0; g < 120; g++) {
            double x, z;
            index_place(&seed, centre, clusters, E, n, &x, &z);
            const double spacing = ldexp(1.0, (int)(test_rand_u64(&seed) % 22) - 6); /* 1/64 m .. 32 km */
            const terra_grid_request r = {.ix0 = (int64_t)floor(x / spacing), .iz0 = (int64_t)floor(z / spacing),
                                          .spacing = spacing, .nx = 1 + (int)(test_rand_u64(&seed) % 48),
                                          .nz = 1 + (int)(test_rand_u64(&seed) % 48)};
            if (terra_source_sample(w, &r, hb, sb) != TERRA_OK || terra_source_sample(s, &r, hl, sl) != TERRA_OK) {
                if (!failed++) fprintf(stderr, "  %s\n", terra_last_error());
                continue;
            }
            for (int j = 0; j < r.nz; j++)
                for (int i = 0; i < r.nx; i++) {
                    const int k = j * r.nx + i;
                    terra_surface id = sb[k];
                    const float want = ref_replay(w, E, n, (double)(r.ix0 + i) * spacing, (double)(r.iz0 + j) * spacing, hb[k], &id);
                    unlike += memcmp(&hl[k], &want, sizeof want) != 0 || sl[k] != id;
                    samples++;
                }
        }
        free(E);
        terra_edit_layer_destroy(l);
    }
    CHECK(failed == 0, "%ld queries failed (or fell outside their range)", failed);
    CHECK(unlike == 0, "%ld of %ld points and %ld grid samples differ from the plain replay", unlike, points, samples);
    printf("     %ld points, %ld grid samples over %d journals (%ld edits refused at the cap)\n", points, samples, journals,
           refused);
    terra_source_destroy(w);
}

/* ---- what one place takes -------------------------------------------------------------------------- */

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) ? -1 : (long)sb.st_size;
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    const size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f) fclose(f);
    return n;
}

static void spill(const char *path, const uint8_t *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite(buf, 1, n, f), fclose(f);
}

/* TERRA_EDIT_MAX_OVERLAP edits stacked on one place land, the next is refused there (a huge one
 * too, as it reaches it) and lands elsewhere; a journal holding one more is refused naming the
 * edit. Huge edits alone: as many land, and no more; smooths count four. */
static void test_overlap_cap(void) {
    char path[600], over[600];
    snprintf(path, sizeof path, "%s/cap.edits", dir);
    snprintf(over, sizeof over, "%s/over.edits", dir);
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK, "%s",
          terra_last_error());
    if (!l) return;
    const terra_edit stack = {.brush = TERRA_BRUSH_RAISE, .x = 10, .z = 10, .radius = 3, .falloff = 1, .amount = 0.5};
    int landed = 0;
    for (int i = 0; i < TERRA_EDIT_MAX_OVERLAP; i++) landed += terra_edit_apply(l, &stack, NULL) == TERRA_OK;
    CHECK(landed == TERRA_EDIT_MAX_OVERLAP, "%d of %d stacked edits landed: %s", landed, TERRA_EDIT_MAX_OVERLAP,
          terra_last_error());
    char cap[16];
    snprintf(cap, sizeof cap, "(%d,", TERRA_EDIT_MAX_OVERLAP);
    CHECK(terra_edit_apply(l, &stack, NULL) == TERRA_E_CAPACITY && strstr(terra_last_error(), cap) &&
              strstr(terra_last_error(), "x 10.0, z 10.0"),
          "one more: %s", terra_last_error());
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_LOWER, .radius = 1e7, .amount = 1}, NULL) == TERRA_E_CAPACITY,
          "a huge edit over the stack");
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .x = 5000, .radius = 3, .amount = 1}, NULL) == TERRA_OK,
          "elsewhere: %s", terra_last_error());
    CHECK(terra_edit_count(l) == (size_t)TERRA_EDIT_MAX_OVERLAP + 1, "%zu edits", terra_edit_count(l));
    CHECK(height(terra_edit_layer_source(l), 10, 10) == 100 + 0.5 * TERRA_EDIT_MAX_OVERLAP, "the stack: %g",
          height(terra_edit_layer_source(l), 10, 10));
    terra_edit_layer_destroy(l);
    /* the journal with the stack's record once more */
    static uint8_t bytes[8 + 68 * (TERRA_EDIT_MAX_OVERLAP + 2)];
    const size_t n = slurp(path, bytes, sizeof bytes);
    CHECK(n == 8 + 68 * ((size_t)TERRA_EDIT_MAX_OVERLAP + 1), "%zu bytes", n);
    memcpy(bytes + n, bytes + 8, 68);
    spill(over, bytes, n + 68);
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = over}, &l) == TERRA_E_CAPACITY && !l,
          "a journal past the cap");
    char says[64];
    snprintf(says, sizeof says, "edit %d, at byte %zu", TERRA_EDIT_MAX_OVERLAP + 2, n);
    CHECK(strstr(terra_last_error(), "over.edits") && strstr(terra_last_error(), says), "says: %s", terra_last_error());
    CHECK(file_size(over) == (long)n + 68, "the refused journal was changed");
    /* huge edits: each reaches everywhere */
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base}, &l) == TERRA_OK);
    unsigned long long seed = 8;
    landed = 0;
    for (int i = 0; i <= TERRA_EDIT_MAX_OVERLAP; i++) {
        const terra_edit e = {.brush = TERRA_BRUSH_RAISE, .x = test_rand_range(&seed, -1e7, 1e7),
                              .z = test_rand_range(&seed, -1e7, 1e7), .radius = 1e7, .falloff = 1e7, .amount = 1};
        landed += terra_edit_apply(l, &e, NULL) == TERRA_OK;
    }
    CHECK(landed == TERRA_EDIT_MAX_OVERLAP, "%d huge edits landed", landed);
    terra_edit_layer_destroy(l);
    /* smooths (their base samples count) */
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base}, &l) == TERRA_OK);
    landed = 0;
    for (int i = 0; i <= TERRA_EDIT_MAX_OVERLAP / 4; i++)
        landed += terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_SMOOTH, .radius = 5, .amount = 0.5}, NULL) == TERRA_OK;
    CHECK(landed == TERRA_EDIT_MAX_OVERLAP / 4, "%d smooths landed", landed);
    terra_edit_layer_destroy(l);
    terra_source_destroy(base);
}

/* ---- journals another process writes ---------------------------------------------------------------- */

/* A record's CRC-32C made again over the 64 bytes after it (FORMAT.md's record). */
static void reseal(uint8_t *rec) {
    const uint32_t crc = terra_crc32c(0, rec + 4, 64);
    for (int i = 0; i < 4; i++) rec[i] = (uint8_t)(crc >> (8 * i));
}

/* A paint of surface 0 (no surface: the CLI refuses it) is refused live, and in a journal naming
 * the file and the edit. */
static void test_paint_of_no_surface(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/paint0.edits", dir);
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK);
    if (!l) return;
    const terra_edit paint = {.brush = TERRA_BRUSH_PAINT, .radius = 4, .surface = 7};
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .radius = 4, .amount = 1}, NULL) == TERRA_OK);
    CHECK(terra_edit_apply(l, &paint, NULL) == TERRA_OK);
    CHECK(terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_PAINT, .radius = 4}, NULL) == TERRA_E_INVALID &&
              strstr(terra_last_error(), "surface 0"),
          "a paint of surface 0: %s", terra_last_error());
    terra_edit_layer_destroy(l);
    /* the second record's surface set to 0, its CRC-32C made again (FORMAT.md's record) */
    uint8_t b[8 + 2 * 68];
    CHECK(slurp(path, b, sizeof b) == sizeof b, "two edits");
    uint8_t *rec = b + 8 + 68;
    CHECK(rec[4 + 2] == 7, "the surface byte");
    rec[4 + 2] = 0;
    reseal(rec);
    spill(path, b, sizeof b);
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_E_CORRUPT && !l,
          "a journal's paint of surface 0");
    CHECK(strstr(terra_last_error(), "paint0.edits: edit 2, at byte 76") && strstr(terra_last_error(), "surface 0"), "says: %s",
          terra_last_error());
    /* the surface put back and a reserved byte set instead (FORMAT.md: five zero bytes) */
    rec[4 + 2] = 7, rec[4 + 5] = 1;
    reseal(rec);
    spill(path, b, sizeof b);
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_E_CORRUPT && !l,
          "a journal's record with a reserved byte set");
    CHECK(strstr(terra_last_error(), "paint0.edits: edit 2, at byte 76: its reserved byte 9 (file byte 85) is not 0"),
          "says: %s", terra_last_error());
    terra_source_destroy(base);
}

/* A layer that runs out of memory after its journal took an edit takes no more edits (the journal,
 * which other processes read, keeps it); opened again, it replays the edit. */
static void *plain_alloc(size_t n, void *u) { (void)u; return malloc(n); }
static void *no_realloc(void *p, size_t n, void *u) { (void)p, (void)n, (void)u; return NULL; }
static void plain_free(void *p, void *u) { (void)u; free(p); }
static void test_memory_after_the_journal(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/behind.edits", dir);
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK);
    if (!l) return;
    const terra_edit raise = {.brush = TERRA_BRUSH_RAISE, .radius = 4, .amount = 1};
    size_t landed = 0;
    for (int i = 0; i < 64; i++) landed += terra_edit_apply(l, &raise, NULL) == TERRA_OK;
    CHECK(landed == 64, "%zu edits", landed);
    /* the 65th grows the layer's edit array: that realloc fails, after the journal took the edit */
    terra_set_allocator(&(terra_allocator){plain_alloc, no_realloc, plain_free, NULL});
    const terra_status st = terra_edit_apply(l, &raise, NULL);
    terra_set_allocator(NULL);
    CHECK(st == TERRA_E_NOMEM, "the 65th edit: %d %s", (int)st, terra_last_error());
    CHECK(file_size(path) == 8 + 65 * 68, "the journal holds %ld bytes", file_size(path));
    CHECK(terra_edit_apply(l, &raise, NULL) == TERRA_E_NOMEM && strstr(terra_last_error(), "open the layer again"),
          "an edit after it: %s", terra_last_error());
    CHECK(terra_edit_count(l) == 64, "%zu edits live", terra_edit_count(l));
    terra_edit_layer_destroy(l);
    l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK, "%s",
          terra_last_error());
    CHECK(l && terra_edit_count(l) == 65, "%zu edits replayed", l ? terra_edit_count(l) : 0);
    terra_edit_layer_destroy(l);
    terra_source_destroy(base);
}

/* Read-only: a torn last edit is left out and left in the file; nothing is written; a missing
 * journal is not made. */
static void test_read_only(void) {
    char path[600], none[600];
    snprintf(path, sizeof path, "%s/ro.edits", dir);
    snprintf(none, sizeof none, "%s/none.edits", dir);
    terra_source *base = flat_source();
    terra_edit_layer *l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK);
    if (!l) return;
    for (int i = 0; i < 3; i++) terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .x = i, .radius = 4, .amount = 1}, NULL);
    terra_edit_layer_destroy(l);
    uint8_t b[8 + 3 * 68 + 30];
    const size_t n = slurp(path, b, sizeof b);
    memcpy(b + n, b + 8, 30); /* a record torn after 30 bytes */
    spill(path, b, n + 30);
    terra_set_log(count_warnings, NULL);
    warnings = 0;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path, .read_only = true}, &l) == TERRA_OK,
          "%s", terra_last_error());
    terra_set_log(NULL, NULL);
    CHECK(l && terra_edit_count(l) == 3 && warnings == 1, "%zu edits, %d warnings", l ? terra_edit_count(l) : 0, warnings);
    CHECK(l && terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .radius = 1}, NULL) == TERRA_E_INVALID,
          "an edit to a read-only journal");
    terra_edit_layer_destroy(l);
    CHECK(file_size(path) == (long)n + 30, "the torn edit was cut: %ld bytes", file_size(path));
    l = NULL;
    CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = none, .read_only = true}, &l) ==
                  TERRA_E_NOT_FOUND &&
              !l && file_size(none) < 0,
          "a missing journal read-only");
    terra_source_destroy(base);
}

/* Another process appends an edit in two writes under the journal's lock: a replay in between,
 * read-only or not, waits for it and takes it whole (without the lock it would read a torn edit,
 * and cut it from under the writer). The writer's pause is what makes the replay wait, not what
 * the test measures. */
static void test_replay_while_appending(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/busy.edits", dir);
    terra_source *base = flat_source();
    for (int read_only = 0; read_only < 2; read_only++) {
        unlink(path);
        terra_edit_layer *l = NULL;
        CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path}, &l) == TERRA_OK);
        if (!l) break;
        for (int i = 0; i < 5; i++) terra_edit_apply(l, &(terra_edit){.brush = TERRA_BRUSH_RAISE, .x = i, .radius = 4, .amount = 1}, NULL);
        terra_edit_layer_destroy(l);
        uint8_t b[8 + 5 * 68];
        CHECK(slurp(path, b, sizeof b) == sizeof b);
        int go[2];
        CHECK(pipe(go) == 0);
        fflush(NULL);
        const pid_t pid = fork();
        if (pid == 0) {
            const int fd = open(path, O_WRONLY | O_APPEND);
            struct flock f = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            int ok = fd >= 0 && fcntl(fd, F_SETLKW, &f) == 0 && write(fd, b + 8, 30) == 30;
            ok = ok && write(go[1], "g", 1) == 1;
            nanosleep(&(struct timespec){.tv_nsec = 300 * 1000 * 1000}, NULL);
            ok = ok && write(fd, b + 8 + 30, 38) == 38;
            _exit(ok ? 0 : 1);
        }
        char c = 0;
        CHECK(read(go[0], &c, 1) == 1 && c == 'g', "the writer started");
        close(go[0]), close(go[1]);
        l = NULL;
        CHECK(terra_edit_layer_create(&(terra_edit_layer_desc){.base = base, .journal = path, .read_only = read_only}, &l) ==
                  TERRA_OK,
              "%s", terra_last_error());
        CHECK(l && terra_edit_count(l) == 6, "%s replay while another appends: %zu edits, not 6", read_only ? "a read-only" : "a",
              l ? terra_edit_count(l) : 0);
        terra_edit_layer_destroy(l);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed");
        CHECK(file_size(path) == 8 + 6 * 68, "%ld bytes after, not %d", file_size(path), 8 + 6 * 68);
    }
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
    RUN(test_index_is_a_plain_replay);
    RUN(test_overlap_cap);
    RUN(test_paint_of_no_surface);
    RUN(test_read_only);
    RUN(test_memory_after_the_journal);
    RUN(test_replay_while_appending);
    RUN(test_edits_while_sampling);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return finish();
}
