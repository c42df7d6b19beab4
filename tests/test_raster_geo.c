/* Rasters opened for windowed and warped reads (terra_raster_open, terra cook's input): what a
 * raster is without reading it, windows that tile it exactly (PNG in process, GDAL in process and
 * through the terra-raster child), heights on an EPSG:4326 grid through GDAL's warp transformer
 * (exact where grids coincide, bilinear between, holes kept, a projected copy warping back), a
 * 16384^2 raster read window by window in bounded memory; the reader's CPU time bounded per read
 * and per request; a garbled description from the child made sound. */
#include "check.h"
#include "terra/raster.h"
#include "../io/raster_wire.h"

#include <cpl_conv.h>
#include <gdal.h>
#include <gdal_utils.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define TEST_PI 3.14159265358979323846
#define HGT "data/dem/N44W072.hgt"
#define STH "data/dem/sthelens_10m.png"

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "raster_geo_%ld_%s", (long)getpid(), name);
    return buf;
}

/* NaN equals NaN: heights compare as the reader gives them. */
static bool same_height(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

/* Cuts [0, n) into random pieces of 1..max: starts[0..count], starts[count] = n. */
static int random_cuts(unsigned long long *rng, int n, int max, int *starts) {
    int count = 0;
    for (int at = 0; at < n; count++) {
        starts[count] = at;
        at += 1 + (int)(test_rand_u64(rng) % (unsigned long long)max);
        if (at > n) at = n;
    }
    starts[count] = n;
    return count;
}

/* Windows in random cuts (rows top-down; within a band of rows, columns in random order when
 * `shuffle`) put together give exactly the whole read. */
static void check_windows_tile(terra_raster_source *s, const terra_raster *whole, unsigned long long seed, bool shuffle,
                               const char *what) {
    unsigned long long rng = seed;
    const int W = whole->width, H = whole->height;
    int *xs = malloc(sizeof(int) * (size_t)(W + 1)), *ys = malloc(sizeof(int) * (size_t)(H + 1));
    float *got = malloc(sizeof(float) * (size_t)W * (size_t)H), *win = malloc(sizeof(float) * (size_t)W * (size_t)H);
    int nx = random_cuts(&rng, W, W / 3 + 1, xs), ny = random_cuts(&rng, H, H / 3 + 1, ys);
    memset(got, 0, sizeof(float) * (size_t)W * (size_t)H);
    bool ok = true;
    for (int j = 0; j < ny && ok; j++) {
        for (int k = 0; k < nx && ok; k++) {
            int i = shuffle ? nx - 1 - k : k;
            int x0 = xs[i], y0 = ys[j], w = xs[i + 1] - x0, h = ys[j + 1] - y0;
            terra_status st = terra_raster_read_window(s, x0, y0, w, h, win);
            CHECK(st == TERRA_OK, "%s: window %dx%d at (%d, %d): %s", what, w, h, x0, y0, terra_last_error());
            ok = st == TERRA_OK;
            for (int r = 0; r < h && ok; r++)
                memcpy(got + (size_t)(y0 + r) * (size_t)W + (size_t)x0, win + (size_t)r * (size_t)w,
                       sizeof(float) * (size_t)w);
        }
    }
    size_t diff = 0;
    for (size_t i = 0; ok && i < (size_t)W * (size_t)H; i++)
        diff += !same_height(got[i], whole->heights[i]);
    /* Then one above the last band: a PNG decodes from the top again. */
    int x0 = (int)(test_rand_u64(&rng) % (unsigned)W), y0 = (int)(test_rand_u64(&rng) % (unsigned)(H / 2 + 1));
    int w = 1 + (int)(test_rand_u64(&rng) % (unsigned)(W - x0)),
        h = 1 + (int)(test_rand_u64(&rng) % (unsigned)(H - y0));
    CHECK(terra_raster_read_window(s, x0, y0, w, h, win) == TERRA_OK, "%s: %s", what, terra_last_error());
    for (int r = 0; r < h; r++)
        for (int c = 0; c < w; c++)
            diff += !same_height(win[r * w + c], whole->heights[(size_t)(y0 + r) * (size_t)W + (size_t)(x0 + c)]);
    CHECK(ok && diff == 0, "%s: %zu samples differ from the whole read (%d x %d windows)", what, diff, nx, ny);
    free(xs);
    free(ys);
    free(got);
    free(win);
}

/* ---- describe ------------------------------------------------------------------------------------ */

static void check_hgt_info(const terra_raster_info *in, const char *what) {
    CHECK(in->width == 1201 && in->height == 1201, "%s: %dx%d", what, in->width, in->height);
    CHECK(in->georeferenced && in->has_crs && in->geographic && in->epsg == 4326, "%s: georef %d crs %d geo %d epsg %d",
          what, in->georeferenced, in->has_crs, in->geographic, in->epsg);
    CHECK(in->crs_wkt && strstr(in->crs_wkt, "WGS 84"), "%s: WKT %s", what, in->crs_wkt ? in->crs_wkt : "(none)");
    /* 3 arc-seconds, pixel corners half a sample outside 72 W / 45 N. */
    CHECK(fabs(in->geo[1] - 1.0 / 1200) < 1e-12 && fabs(in->geo[5] + 1.0 / 1200) < 1e-12 &&
              fabs(in->geo[0] - (-72 - 0.5 / 1200)) < 1e-9 && fabs(in->geo[3] - (45 + 0.5 / 1200)) < 1e-9,
          "%s: geotransform %.12g %.12g %.12g %.12g", what, in->geo[0], in->geo[1], in->geo[3], in->geo[5]);
    CHECK(in->has_nodata && in->nodata == -32768, "%s: nodata %d %g", what, in->has_nodata, in->nodata);
    CHECK(in->has_lonlat && fabs(in->lonlat_bounds[0] + 72) < 1e-9 && fabs(in->lonlat_bounds[1] - 44) < 1e-9 &&
              fabs(in->lonlat_bounds[2] + 71) < 1e-9 && fabs(in->lonlat_bounds[3] - 45) < 1e-9,
          "%s: bounds %.12g %.12g %.12g %.12g", what, in->lonlat_bounds[0], in->lonlat_bounds[1], in->lonlat_bounds[2],
          in->lonlat_bounds[3]);
    CHECK(fabs(in->lonlat_step[0] - 1.0 / 1200) < 1e-12 && fabs(in->lonlat_step[1] - 1.0 / 1200) < 1e-12,
          "%s: step %.12g %.12g", what, in->lonlat_step[0], in->lonlat_step[1]);
    /* Metres per sample as terra_raster_read gives them: ~92.6 m north, ~66 m east at 44.5 N. */
    CHECK(fabs(in->spacing_y - 92.66) < 0.1 && fabs(in->spacing_x - 66.1) < 0.2, "%s: spacing %g %g", what,
          in->spacing_x, in->spacing_y);
}

static void test_describe_hgt(void) {
    if (!have_shared("describe .hgt")) return;
    char p[512];
    terra_raster_desc d = {.path = shared_path(HGT, p, sizeof p)};
    terra_raster_source *a = NULL, *b = NULL;
    CHECK(terra_raster_open_gdal(&d, &a) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_raster_open(&d, NULL, &b) == TERRA_OK, "%s", terra_last_error());
    if (!a || !b) goto done;
    check_hgt_info(terra_raster_source_info(a), "in process");
    check_hgt_info(terra_raster_source_info(b), "through terra-raster");
    const terra_raster_info *ia = terra_raster_source_info(a), *ib = terra_raster_source_info(b);
    CHECK(strcmp(ia->crs_wkt, ib->crs_wkt) == 0 && memcmp(ia->geo, ib->geo, sizeof ia->geo) == 0 &&
          memcmp(ia->lonlat_bounds, ib->lonlat_bounds, sizeof ia->lonlat_bounds) == 0);
    /* Agrees with the whole read. */
    terra_raster r;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK);
    CHECK(r.spacing_x == ia->spacing_x && r.spacing_y == ia->spacing_y && memcmp(r.geo, ia->geo, sizeof r.geo) == 0);
    terra_raster_free(&r);
done:
    terra_raster_close(a);
    terra_raster_close(b);
}

/* Opening fails as the whole read fails, naming the file; a PNG is in process and has no place. */
static void test_open_errors(void) {
    char bad[256];
    tmp_path("bad.tif", bad, sizeof bad);
    FILE *f = fopen(bad, "w");
    fputs("not a raster\n", f);
    fclose(f);
    terra_raster_source *s = (terra_raster_source *)1;
    CHECK(terra_raster_open(&(terra_raster_desc){.path = bad}, NULL, &s) == TERRA_E_FORMAT && !s);
    CHECK(strstr(terra_last_error(), bad) != NULL, "%s", terra_last_error());
    CHECK(terra_raster_open_gdal(&(terra_raster_desc){.path = bad}, &s) == TERRA_E_FORMAT && !s);
    CHECK(terra_raster_open(&(terra_raster_desc){.path = bad}, "/nonexistent/terra-raster", &s) == TERRA_E_UNSUPPORTED);
    unlink(bad);
    if (!have_shared("PNG source")) return;
    /* A reader that ends without a word: an error naming the file, not a hang or a SIGPIPE. */
    char hgt[512];
    terra_raster_desc dh = {.path = shared_path(HGT, hgt, sizeof hgt)};
    CHECK(terra_raster_open(&dh, "/bin/true", &s) == TERRA_E_IO && !s);
    CHECK(strstr(terra_last_error(), hgt) != NULL, "%s", terra_last_error());
    char p[512];
    terra_raster_desc d = {.path = shared_path(STH, p, sizeof p), .spacing_m = 10};
    CHECK(terra_raster_open(&d, "/nonexistent/terra-raster", &s) == TERRA_OK, "a plain PNG needs no child: %s",
          terra_last_error());
    if (!s) return;
    const terra_raster_info *in = terra_raster_source_info(s);
    CHECK(in->width == 2000 && in->height == 2000 && !in->georeferenced && !in->has_crs && in->spacing_x == 10);
    float v[4];
    CHECK(terra_raster_read_window(s, 1999, 0, 2, 1, v) == TERRA_E_INVALID, "a window past the edge");
    CHECK(terra_raster_read_window(s, 0, 0, 0, 1, v) == TERRA_E_INVALID, "an empty window");
    terra_raster_geo_grid g = {.west = 0, .north = 0, .step_x = 1, .step_y = 1, .width = 2, .height = 2};
    CHECK(terra_raster_read_geo(s, &g, 0, 0, 2, 2, v) == TERRA_E_UNSUPPORTED, "no georeferencing");
    terra_raster_close(s);
}

/* ---- windows of the raster's own grid -------------------------------------------------------------- */

static void test_windows_tile_whole(void) {
    if (!have_shared("windows")) return;
    char p[512];
    struct {
        const char *file;
        terra_raster_encoding enc;
        bool png;
    } cases[] = {{HGT, TERRA_RASTER_PLAIN, false},
                 {STH, TERRA_RASTER_PLAIN, true},
                 {"data/dem/fuji.png", TERRA_RASTER_TERRAIN_RGB, true},
                 {"data/dem/grand-canyon-terrarium.png", TERRA_RASTER_TERRARIUM, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        terra_raster_desc d = {
            .path = shared_path(cases[c].file, p, sizeof p), .encoding = cases[c].enc, .z_scale = 0.5};
        terra_raster whole;
        CHECK(terra_raster_read(&d, &whole) == TERRA_OK, "%s", terra_last_error());
        if (!whole.heights) continue;
        terra_raster_source *in = NULL, *child = NULL, *gdal = NULL;
        CHECK(terra_raster_open(&d, NULL, &in) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_raster_open_gdal(&d, &gdal) == TERRA_OK, "%s", terra_last_error());
        /* PNGs through the child too: GDAL's PNG driver, served. */
        if (cases[c].png) {
            char png[512];
            tmp_path("copy.png", png, sizeof png);
            /* A world file beside it sends it to GDAL: the same samples, the child's path. */
            char wld[520];
            snprintf(wld, sizeof wld, "%.*s.wld", (int)(strlen(png) - 4), png);
            CHECK(symlink(d.path, png) == 0);
            FILE *f = fopen(wld, "w");
            fputs("1\n0\n0\n-1\n0.5\n-0.5\n", f);
            fclose(f);
            terra_raster_desc dc = d;
            dc.path = png;
            CHECK(terra_raster_open(&dc, NULL, &child) == TERRA_OK, "%s", terra_last_error());
            unlink(png);
            unlink(wld);
        }
        for (int round = 0; round < 6; round++) {
            unsigned long long seed = 1000 * c + (unsigned long long)round;
            if (in) check_windows_tile(in, &whole, seed, round & 1, cases[c].file);
            if (gdal) check_windows_tile(gdal, &whole, seed + 7, round & 1, "in process");
            if (child) check_windows_tile(child, &whole, seed + 13, round & 1, "child");
        }
        terra_raster_close(in);
        terra_raster_close(child);
        terra_raster_close(gdal);
        terra_raster_free(&whole);
    }
}

/* Several threads reading one source at once (the cook's workers): each gets its own windows right. */
typedef struct thread_job {
    terra_raster_source *s;
    const terra_raster *whole;
    unsigned long long seed;
    size_t bad, failed;
} thread_job;

static void *read_random_windows(void *arg) {
    thread_job *j = arg;
    const int W = j->whole->width, H = j->whole->height;
    float *win = malloc(sizeof(float) * 64 * 64);
    for (int t = 0; t < 40; t++) {
        int w = 1 + (int)(test_rand_u64(&j->seed) % 64), h = 1 + (int)(test_rand_u64(&j->seed) % 64);
        int x0 = (int)(test_rand_u64(&j->seed) % (unsigned)(W - w + 1)),
            y0 = (int)(test_rand_u64(&j->seed) % (unsigned)(H - h + 1));
        if (terra_raster_read_window(j->s, x0, y0, w, h, win) != TERRA_OK) {
            j->failed++;
            continue;
        }
        for (int r = 0; r < h; r++)
            for (int c = 0; c < w; c++)
                j->bad +=
                    !same_height(win[r * w + c], j->whole->heights[(size_t)(y0 + r) * (size_t)W + (size_t)(x0 + c)]);
    }
    free(win);
    return NULL;
}

static void test_threads_share_a_source(void) {
    if (!have_shared("threads")) return;
    char p[512];
    const char *files[] = {HGT, STH};
    for (int f = 0; f < 2; f++) {
        terra_raster_desc d = {.path = shared_path(files[f], p, sizeof p)};
        terra_raster whole;
        CHECK(terra_raster_read(&d, &whole) == TERRA_OK, "%s", terra_last_error());
        terra_raster_source *srcs[2] = {NULL, NULL};
        CHECK(terra_raster_open(&d, NULL, &srcs[0]) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_raster_open_gdal(&d, &srcs[1]) == TERRA_OK, "%s", terra_last_error());
        for (int k = 0; k < 2 && whole.heights; k++) {
            if (!srcs[k]) continue;
            thread_job jobs[4];
            pthread_t th[4];
            for (int i = 0; i < 4; i++) {
                jobs[i] =
                    (thread_job){.s = srcs[k], .whole = &whole, .seed = (unsigned long long)(100 * f + 10 * k + i)};
                pthread_create(&th[i], NULL, read_random_windows, &jobs[i]);
            }
            for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                CHECK(jobs[i].bad == 0 && jobs[i].failed == 0, "%s source %d thread %d: %zu wrong, %zu failed",
                      files[f], k, i, jobs[i].bad, jobs[i].failed);
            }
        }
        terra_raster_close(srcs[0]);
        terra_raster_close(srcs[1]);
        terra_raster_free(&whole);
    }
}

/* ---- warped reads ------------------------------------------------------------------------------------- */

/* Bilinear over the whole raster's sample centres at source coordinates (fx, fy), NaN outside or
 * where a sample with a weight is a hole: the reference the warped reads are held to. A coordinate
 * within 1e-6 of a sample is on it (the transform's rounding), and then its neighbours weigh 0. */
static double bilinear(const terra_raster *r, double fx, double fy) {
    if (fabs(fx - nearbyint(fx)) < 1e-6) fx = nearbyint(fx);
    if (fabs(fy - nearbyint(fy)) < 1e-6) fy = nearbyint(fy);
    if (fx < 0 || fy < 0 || fx > r->width - 1 || fy > r->height - 1) return NAN;
    int i = (int)fx, j = (int)fy;
    double tx = fx - i, ty = fy - j, v = 0;
    for (int b = 0; b < 2; b++)
        for (int a = 0; a < 2; a++) {
            if ((a && tx == 0) || (b && ty == 0)) continue;
            v += (a ? tx : 1 - tx) * (b ? ty : 1 - ty) * r->heights[(size_t)(j + b) * (size_t)r->width + (size_t)(i + a)];
        }
    return v;
}

/* A GeoTIFF copy of the .hgt with a block of holes. */
static bool hgt_with_holes(const char *src, const char *dst) {
    GDALAllRegister();
    GDALDatasetH s = GDALOpen(src, GA_ReadOnly);
    if (!s) return false;
    GDALDatasetH d = GDALCreateCopy(GDALGetDriverByName("GTiff"), dst, s, FALSE, NULL, NULL, NULL);
    GDALClose(s);
    if (!d) return false;
    int16_t hole[40 * 30];
    for (int i = 0; i < 40 * 30; i++)
        hole[i] = -32768;
    bool ok =
        GDALRasterIO(GDALGetRasterBand(d, 1), GF_Write, 500, 600, 40, 30, hole, 40, 30, GDT_Int16, 0, 0) == CE_None;
    GDALClose(d);
    return ok;
}

static void test_geo_hgt(void) {
    if (!have_shared("warped reads")) return;
    char p[512], holes[256];
    tmp_path("holes.tif", holes, sizeof holes);
    CHECK(hgt_with_holes(shared_path(HGT, p, sizeof p), holes));
    terra_raster_desc d = {.path = holes};
    terra_raster whole;
    CHECK(terra_raster_read(&d, &whole) == TERRA_OK, "%s", terra_last_error());
    CHECK(whole.nodata_count == 40 * 30, "%zu holes", whole.nodata_count);
    terra_raster_source *srcs[2] = {NULL, NULL};
    CHECK(terra_raster_open(&d, NULL, &srcs[0]) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_raster_open_gdal(&d, &srcs[1]) == TERRA_OK, "%s", terra_last_error());
    unsigned long long rng = 42;
    float *out = malloc(sizeof(float) * 300 * 300);
    for (int k = 0; k < 2 && whole.heights; k++) {
        terra_raster_source *s = srcs[k];
        if (!s) continue;
        /* The .hgt's own grid: every sample's own value, holes as holes, exactly. */
        terra_raster_geo_grid own = {
            .west = -72, .north = 45, .step_x = 1.0 / 1200, .step_y = 1.0 / 1200, .width = 1201, .height = 1201};
        size_t bad = 0;
        for (int t = 0; t < 12; t++) {
            int w = 1 + (int)(test_rand_u64(&rng) % 300), h = 1 + (int)(test_rand_u64(&rng) % 300);
            int x0 = (int)(test_rand_u64(&rng) % (unsigned)(1202 - w)),
                y0 = (int)(test_rand_u64(&rng) % (unsigned)(1202 - h));
            if (t == 0) x0 = 480, y0 = 590, w = 80, h = 50; /* around the holes */
            if (t == 1) x0 = 1201 - w, y0 = 1201 - h;       /* the last row and column: on the edge, not outside */
            CHECK(terra_raster_read_geo(s, &own, x0, y0, w, h, out) == TERRA_OK, "%s", terra_last_error());
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++)
                    bad += !same_height(out[j * w + i], whole.heights[(size_t)(y0 + j) * 1201 + (size_t)(x0 + i)]);
        }
        CHECK(bad == 0, "source %d: %zu samples differ on the coinciding grid", k, bad);
        /* Random grids (origin, step 0.3..3 samples, reaching past the raster): bilinear between the
         * sample centres, NaN outside and where a weighted neighbour is a hole. */
        size_t nan_mismatch = 0, compared = 0, outside = 0;
        double worst = 0;
        for (int t = 0; t < 40; t++) {
            double sx = test_rand_range(&rng, 0.3, 3) / 1200, sy = test_rand_range(&rng, 0.3, 3) / 1200;
            terra_raster_geo_grid g = {.west = test_rand_range(&rng, -72.05, -71.2),
                                       .north = test_rand_range(&rng, 44.3, 45.05),
                                       .step_x = sx,
                                       .step_y = sy,
                                       .width = 4000,
                                       .height = 4000};
            int w = 1 + (int)(test_rand_u64(&rng) % 300), h = 1 + (int)(test_rand_u64(&rng) % 300);
            int x0 = (int)(test_rand_u64(&rng) % 600), y0 = (int)(test_rand_u64(&rng) % 600);
            if (t % 4 == 0) { /* through the holes */
                g.west = -72 + 470.3 / 1200 - x0 * sx;
                g.north = 45 - 580.7 / 1200 + y0 * sy;
            }
            CHECK(terra_raster_read_geo(s, &g, x0, y0, w, h, out) == TERRA_OK, "%s", terra_last_error());
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++) {
                    double lon = g.west + (x0 + i) * g.step_x, lat = g.north - (y0 + j) * g.step_y;
                    double e = bilinear(&whole, (lon + 72) * 1200, (45 - lat) * 1200);
                    float o = out[j * w + i];
                    if (isnan(e) || isnan(o)) {
                        nan_mismatch += isnan(e) != isnan(o);
                        outside += isnan(o);
                        continue;
                    }
                    compared++;
                    worst = fmax(worst, fabs(o - e));
                }
        }
        CHECK(nan_mismatch == 0, "source %d: %zu points NaN on one side only", k, nan_mismatch);
        CHECK(worst < 1e-3 && compared > 100000 && outside > 1000, "source %d: worst %g m over %zu points (%zu NaN)", k,
              worst, compared, outside);
        printf("     source %d: bilinear within %.2g m over %zu points, %zu NaN (holes, outside)\n", k, worst, compared,
               outside);
    }
    free(out);
    terra_raster_close(srcs[0]);
    terra_raster_close(srcs[1]);
    terra_raster_free(&whole);
    unlink(holes);
}

/* A projected copy (UTM 19N, 30 m, made with GDAL's warper) warps back onto the .hgt's grid within a
 * few metres of the original. */
static void test_geo_projected(void) {
    if (!have_shared("projected round trip")) return;
    char p[512], tif[256];
    tmp_path("utm.tif", tif, sizeof tif);
    GDALAllRegister();
    GDALDatasetH src = GDALOpen(shared_path(HGT, p, sizeof p), GA_ReadOnly);
    CHECK(src != NULL);
    if (!src) return;
    char *args[] = {"-t_srs", "EPSG:32619", "-tr",        "30",    "30", "-r", "bilinear",
                    "-ot",    "Float32",    "-dstnodata", "-9999", "-q", NULL};
    GDALWarpAppOptions *o = GDALWarpAppOptionsNew(args, NULL);
    int usage = 0;
    GDALDatasetH dst = GDALWarp(tif, NULL, 1, &src, o, &usage);
    GDALWarpAppOptionsFree(o);
    GDALClose(src);
    CHECK(dst != NULL, "gdalwarp to UTM");
    if (!dst) return;
    GDALClose(dst);

    terra_raster_desc d = {.path = tif}, dh = {.path = p};
    terra_raster_source *s = NULL;
    terra_raster orig;
    CHECK(terra_raster_read(&dh, &orig) == TERRA_OK);
    CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s", terra_last_error());
    if (s && orig.heights) {
        const terra_raster_info *in = terra_raster_source_info(s);
        CHECK(in->has_crs && !in->geographic && in->epsg == 32619 && in->has_nodata && in->nodata == -9999,
              "geographic %d epsg %d", in->geographic, in->epsg);
        CHECK(fabs(in->spacing_x - 30) < 1e-9 && fabs(in->spacing_y - 30) < 1e-9);
        /* The UTM rectangle holds the degree square: its lon/lat bounds reach a little past it. */
        CHECK(in->has_lonlat && in->lonlat_bounds[0] < -72 && in->lonlat_bounds[0] > -72.1 &&
                  in->lonlat_bounds[2] > -71 && in->lonlat_bounds[2] < -70.9 && in->lonlat_bounds[1] < 44 &&
                  in->lonlat_bounds[1] > 43.95 && in->lonlat_bounds[3] > 45 && in->lonlat_bounds[3] < 45.05,
              "bounds %g %g %g %g", in->lonlat_bounds[0], in->lonlat_bounds[1], in->lonlat_bounds[2],
              in->lonlat_bounds[3]);
        /* 30 m at 44.5 N: ~3.8e-4 degrees of longitude, ~2.7e-4 of latitude. */
        CHECK(fabs(in->lonlat_step[0] - 30 / (111195.0 * cos(44.5 * TEST_PI / 180))) < 2e-5 &&
                  fabs(in->lonlat_step[1] - 30 / 111195.0) < 2e-5,
              "step %g %g", in->lonlat_step[0], in->lonlat_step[1]);
        terra_raster_geo_grid own = {
            .west = -72, .north = 45, .step_x = 1.0 / 1200, .step_y = 1.0 / 1200, .width = 1201, .height = 1201};
        float *out = malloc(sizeof(float) * 1201 * 401);
        size_t n = 0, nan = 0, over5 = 0;
        double sum = 0, worst = 0;
        for (int y0 = 0; y0 < 1201; y0 += 401) { /* three bands of windows */
            int h = y0 + 401 > 1201 ? 1201 - y0 : 401;
            CHECK(terra_raster_read_geo(s, &own, 0, y0, 1201, h, out) == TERRA_OK, "%s", terra_last_error());
            for (size_t k = 0; k < (size_t)1201 * (size_t)h; k++) {
                if (isnan(out[k])) {
                    nan++;
                    continue;
                }
                double e = fabs(out[k] - orig.heights[(size_t)y0 * 1201 + k]);
                n++;
                sum += e;
                worst = fmax(worst, e);
                over5 += e > 5;
            }
        }
        /* Every point of the degree square lies inside the UTM copy (only edge samples, where the
         * 30 m grid stops short of the .hgt's last sample, may fall outside). */
        CHECK(nan < 4 * 1201, "%zu NaN", nan);
        /* And GDAL's own warper (gdalwarp -r bilinear, exact transforms) agrees on a grid finer than the
         * UTM copy (1/2 arc-second, ~11 x 15 m: coarser, gdalwarp widens its kernel to average), its
         * pixel centres on the grid's points. */
        GDALDatasetH utm = GDALOpen(tif, GA_ReadOnly);
        const double fs = 1.0 / 7200;
        terra_raster_geo_grid fine = {
            .west = -71.7, .north = 44.7, .step_x = fs, .step_y = fs, .width = 1201, .height = 1201};
        char te[4][32];
        snprintf(te[0], 32, "%.17g", fine.west - fs / 2);
        snprintf(te[1], 32, "%.17g", fine.north - 1200.5 * fs);
        snprintf(te[2], 32, "%.17g", fine.west + 1200.5 * fs);
        snprintf(te[3], 32, "%.17g", fine.north + fs / 2);
        char *back[] = {"-of", "MEM",     "-t_srs",     "EPSG:4326", "-te", te[0],      te[1], te[2],
                        te[3], "-ts",     "1201",       "1201",      "-r",  "bilinear", "-et", "0",
                        "-ot", "Float32", "-dstnodata", "-9999",     "-q",  NULL};
        GDALWarpAppOptions *bo = GDALWarpAppOptionsNew(back, NULL);
        GDALDatasetH ref = utm ? GDALWarp("", NULL, 1, &utm, bo, &usage) : NULL;
        GDALWarpAppOptionsFree(bo);
        CHECK(ref != NULL, "gdalwarp back to EPSG:4326");
        float *mine = malloc(sizeof(float) * 1201 * 1201), *theirs = malloc(sizeof(float) * 1201 * 1201);
        if (ref && terra_raster_read_geo(s, &fine, 0, 0, 1201, 1201, mine) == TERRA_OK &&
            GDALRasterIO(GDALGetRasterBand(ref, 1), GF_Read, 0, 0, 1201, 1201, theirs, 1201, 1201, GDT_Float32, 0, 0) ==
                CE_None) {
            double gsum = 0, gworst = 0;
            size_t gn = 0;
            for (size_t k = 0; k < (size_t)1201 * 1201; k++) {
                if (isnan(mine[k]) || theirs[k] == -9999) continue;
                double e = fabs(mine[k] - theirs[k]);
                gsum += e, gworst = fmax(gworst, e), gn++;
            }
            /* Not bit for bit: rows here are approximated within 1/64 of a sample (~0.5 m), gdalwarp's
             * exactly; the heights differ by that times the slope. */
            CHECK(gn > 1400000 && gsum / (double)gn < 0.01 && gworst < 0.5,
                  "against gdalwarp: mean %g m, worst %g m over %zu", gsum / (double)gn, gworst, gn);
            printf("     against gdalwarp -r bilinear onto the same points: mean %.4f m, worst %.3f m (%zu points)\n",
                   gsum / (double)gn, gworst, gn);
        }
        free(mine);
        free(theirs);
        if (ref) GDALClose(ref);
        if (utm) GDALClose(utm);
        /* Two bilinear resamplings in the White Mountains: under a metre on average, a few steep
         * samples (measured: 0.24%, worst 17 m) past 5 m. */
        CHECK(sum / (double)n < 1.0 && (double)over5 < 5e-3 * (double)n,
              "mean %.3g m, worst %.3g m, %zu of %zu past 5 m", sum / (double)n, worst, over5, n);
        printf("     UTM 19N 30 m back onto 3\" (%zu points): mean %.3f m, worst %.2f m, %zu past 5 m, %zu NaN\n", n,
               sum / (double)n, worst, over5, nan);
        free(out);
    }
    terra_raster_close(s);
    terra_raster_free(&orig);
    unlink(tif);
}

/* ---- a raster larger than it should take: 16384^2, window by window ------------------------------ */

/* St Helens mirrored: sample (x, y) of the big raster is the source's (m(x), m(y)), m folding every
 * 2 * 2000 so the seams are continuous. */
static int mirror(int x, int n) {
    x %= 2 * n;
    return x < n ? x : 2 * n - 1 - x;
}

static long peak_mib(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_maxrss / 1024; /* kB on Linux */
}

static bool write_big_tiff(const char *path, const terra_raster *src, int side) {
    /* Uncompressed: the test measures memory, and compressing 512 MiB would be most of its time. */
    char *opts[] = {"TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", NULL};
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path, side, side, 1, GDT_UInt16, opts);
    if (!ds) return false;
    /* UTM 10N around St Helens, 10 m: a projected raster to warp from too. */
    double gt[6] = {520000, 10, 0, 5200000, 0, -10};
    GDALSetGeoTransform(ds, gt);
    GDALSetProjection(ds, "EPSG:32610");
    uint16_t *rows = malloc(sizeof(uint16_t) * (size_t)side * 256);
    bool ok = rows != NULL;
    for (int y0 = 0; ok && y0 < side; y0 += 256) {
        for (int j = 0; j < 256; j++)
            for (int x = 0; x < side; x++)
                rows[(size_t)j * (size_t)side + (size_t)x] =
                    (uint16_t)src->heights[(size_t)mirror(y0 + j, src->height) * (size_t)src->width +
                                           (size_t)mirror(x, src->width)];
        ok = GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, y0, side, 256, rows, side, 256, GDT_UInt16, 0, 0) ==
             CE_None;
    }
    free(rows);
    GDALClose(ds);
    return ok;
}

static bool write_big_png(const char *path, const terra_raster *src, int side) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_byte *row = malloc((size_t)side * 2);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        free(row);
        return false;
    }
    png_init_io(png, f);
    png_set_compression_level(png, 0); /* stored, unfiltered: as above, time goes to the reading */
    png_set_filter(png, 0, PNG_FILTER_NONE);
    png_set_IHDR(png, info, (png_uint_32)side, (png_uint_32)side, 16, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < side; y++) {
        const float *s = src->heights + (size_t)mirror(y, src->height) * (size_t)src->width;
        for (int x = 0; x < side; x++) {
            unsigned v = (unsigned)s[mirror(x, src->width)];
            row[2 * x] = (png_byte)(v >> 8);
            row[2 * x + 1] = (png_byte)v;
        }
        png_write_row(png, row);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(row);
    return fclose(f) == 0;
}

/* Bands of windows top down; every sample checked against the mirror. Returns the mismatches. */
static size_t read_big(terra_raster_source *s, const terra_raster *src, int side, int win, float *out) {
    size_t bad = 0;
    for (int y0 = 0; y0 < side; y0 += win)
        for (int x0 = 0; x0 < side; x0 += win) {
            if (terra_raster_read_window(s, x0, y0, win, win, out) != TERRA_OK) {
                CHECK(0, "window (%d, %d): %s", x0, y0, terra_last_error());
                return (size_t)-1;
            }
            for (int j = 0; j < win; j++) {
                const float *r = src->heights + (size_t)mirror(y0 + j, src->height) * (size_t)src->width;
                for (int i = 0; i < win; i++)
                    bad += out[(size_t)j * (size_t)win + (size_t)i] != r[mirror(x0 + i, src->width)];
            }
        }
    return bad;
}

static void test_big_mirrored(void) {
    if (!have_shared("16384^2 mirrored St Helens")) return;
#ifdef TERRA_SANITIZED
    const int side = 4096; /* the sanitizers' shadow memory and quarantine make RSS no measure */
#else
    const int side = 16384;
#endif
    const int win = 512;
    char p[512], tif[256], png[256];
    tmp_path("big.tif", tif, sizeof tif);
    tmp_path("big.png", png, sizeof png);
    terra_raster src;
    CHECK(terra_raster_read(&(terra_raster_desc){.path = shared_path(STH, p, sizeof p)}, &src) == TERRA_OK);
    if (!src.heights) return;
    GDALAllRegister();
    /* GDAL's block cache would hold what is written (5% of memory by default): the writing is the
     * test's, not the reader's, so it is kept small; terra-raster sets the same for itself. The
     * child's peak starts at this process's peak (Linux counts the pages of the spawning process
     * before exec), so this is also what keeps RUSAGE_CHILDREN a measure of the child. */
    GDALSetCacheMax64((GIntBig)16 << 20);
    CHECK(write_big_tiff(tif, &src, side), "writing %s", tif);
    CHECK(write_big_png(png, &src, side), "writing %s", png);
    long made = peak_mib(RUSAGE_SELF);
    float *out = malloc(sizeof(float) * (size_t)win * (size_t)win);
    /* The PNG in this process (libpng, a band of rows kept), the GeoTIFF through terra-raster. */
    terra_raster_source *sp = NULL, *st = NULL;
    /* A budget of a quarter of the heights (at least 64 MiB): a read of the whole is refused. */
    size_t budget = (size_t)side * (size_t)side > ((size_t)64 << 20) ? (size_t)side * (size_t)side : (size_t)64 << 20;
    terra_raster_desc dp = {.path = png, .max_bytes = budget}, dt = {.path = tif, .max_bytes = budget};
    CHECK(terra_raster_open(&dp, NULL, &sp) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_raster_open(&dt, NULL, &st) == TERRA_OK, "%s", terra_last_error());
    terra_raster whole;
    CHECK(terra_raster_read_isolated(&dp, NULL, &whole) == TERRA_E_CAPACITY, "the whole is past the budget");
    terra_raster_free(&whole);
    if (sp) CHECK(read_big(sp, &src, side, win, out) == 0, "PNG windows differ from the mirror");
    if (st) CHECK(read_big(st, &src, side, win, out) == 0, "GeoTIFF windows differ from the mirror");
    /* Warped windows from the projected GeoTIFF: a 4096-point-wide band on a 1/3 arc-second grid. */
    if (st) {
        const terra_raster_info *in = terra_raster_source_info(st);
        CHECK(in->epsg == 32610 && in->has_lonlat, "epsg %d", in->epsg);
        terra_raster_geo_grid g = {.west = in->lonlat_bounds[0],
                                   .north = in->lonlat_bounds[3],
                                   .step_x = 1.0 / 10800,
                                   .step_y = 1.0 / 10800,
                                   .width = 8192,
                                   .height = 8192};
        size_t valid = 0, out_of_range = 0;
        for (int x0 = 0; x0 < 4096; x0 += win) {
            CHECK(terra_raster_read_geo(st, &g, x0, 2048, win, win, out) == TERRA_OK, "%s", terra_last_error());
            for (size_t k = 0; k < (size_t)win * (size_t)win; k++) {
                if (isnan(out[k])) continue;
                valid++;
                out_of_range += !(out[k] >= src.min_z && out[k] <= src.max_z);
            }
        }
        CHECK(valid > 1000000 && out_of_range == 0, "%zu valid, %zu out of the source's range", valid, out_of_range);
    }
    terra_raster_close(sp);
    terra_raster_close(st);
    long self = peak_mib(RUSAGE_SELF), children = peak_mib(RUSAGE_CHILDREN);
    printf("     %dx%d (%.0f MiB of heights) in %dx%d windows: peak RSS %ld MiB here (%ld after writing it), "
           "%ld MiB in terra-raster\n",
           side, side, (double)side * side * 4 / 1048576, win, win, self, made, children);
#ifndef TERRA_SANITIZED
    CHECK(self < 384 && children < 384, "peak RSS %ld MiB here, %ld MiB in the child", self, children);
#endif
    free(out);
    terra_raster_free(&src);
    unlink(tif);
    unlink(png);
}

/* ---- the reader's CPU time ---------------------------------------------------------------------- */

/* A VRT that costs the reader ~2 s of CPU per million samples (a 15x15 kernel over a 2x2 grid
 * stretched to side x side). */
static bool write_heavy_vrt(const char *vrt, const char *asc, int side) {
    FILE *f = fopen(asc, "w");
    if (!f) return false;
    fputs("ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 4\n", f);
    if (fclose(f)) return false;
    if (!(f = fopen(vrt, "w"))) return false;
    fprintf(f, "<VRTDataset rasterXSize=\"%d\" rasterYSize=\"%d\"><VRTRasterBand dataType=\"Float32\" band=\"1\">"
               "<KernelFilteredSource><SourceFilename relativeToVRT=\"0\">%s</SourceFilename><SourceBand>1</SourceBand>"
               "<SrcRect xOff=\"0\" yOff=\"0\" xSize=\"2\" ySize=\"2\"/>"
               "<DstRect xOff=\"0\" yOff=\"0\" xSize=\"%d\" ySize=\"%d\"/><Kernel normalized=\"1\"><Size>15</Size><Coefs>",
            side, side, asc, side, side);
    for (int i = 0; i < 225; i++) fputs(i ? " 1" : "1", f);
    fputs("</Coefs></Kernel></KernelFilteredSource></VRTRasterBand></VRTDataset>\n", f);
    return fclose(f) == 0;
}

/* A reader caught in a long computation is ended once a read, or one request of a served source,
 * has taken its CPU allowance ($TERRA_READER_CPU_S, 1 s here; ~8 s wanted), and the error says it ran
 * out of CPU time; requests that each fit run, however many (24 of ~0.13 s). */
static void test_cpu_limit(void) {
    char vrt[256], asc[256];
    tmp_path("heavy.vrt", vrt, sizeof vrt);
    tmp_path("heavy.asc", asc, sizeof asc);
    const int side = 4000;
    CHECK(write_heavy_vrt(vrt, asc, side), "writing %s", vrt);
    setenv("GDAL_PAM_ENABLED", "NO", 1);
    setenv("TERRA_READER_CPU_S", "1", 1);
    const terra_raster_desc d = {.path = vrt};
    terra_raster whole;
    CHECK(terra_raster_read_isolated(&d, NULL, &whole) == TERRA_E_IO &&
              strstr(terra_last_error(), "the raster reader ran out of CPU time on") &&
              strstr(terra_last_error(), vrt) && strstr(terra_last_error(), "TERRA_READER_CPU_S"),
          "a whole read: %s", terra_last_error());
    terra_raster_source *s = NULL;
    float *out = malloc(sizeof(float) * (size_t)side * (size_t)side);
    CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s", terra_last_error());
    if (s && out) {
        CHECK(terra_raster_read_window(s, 0, 0, side, side, out) == TERRA_E_IO &&
                  strstr(terra_last_error(), "ran out of CPU time on"),
              "one window of all: %s", terra_last_error());
        CHECK(terra_raster_read_window(s, 0, 0, 8, 8, out) == TERRA_E_IO &&
                  strstr(terra_last_error(), "stopped answering earlier"),
              "then: %s", terra_last_error());
    }
    terra_raster_close(s);
    s = NULL;
    CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s", terra_last_error());
    for (int k = 0; s && out && k < 24; k++) {
        CHECK(terra_raster_read_window(s, 0, 50 * k, side, 50, out) == TERRA_OK, "band %d: %s", k, terra_last_error());
        const float mid = out[side * 25 + side / 2];
        CHECK(mid >= 1 && mid <= 4, "band %d: %g", k, (double)mid);
    }
    terra_raster_close(s);
    unsetenv("TERRA_READER_CPU_S");
    free(out);
    unlink(vrt);
    unlink(asc);
}

/* ---- a reader's description is another process's bytes ------------------------------------------- */

/* This program as a served reader whose description is every byte 2 (its ellipsoid's name without
 * an end, its flags no booleans), then one that reads to its end of input. */
static int garbled_reader(void) {
    terra_raster_info in;
    memset(&in, 2, sizeof in);
    in.width = in.height = 4;
    if (!terra_raster_send_reply(1, TERRA_OK, &in, sizeof in)) return 1;
    char b[256];
    while (read(0, b, sizeof b) > 0) {
    }
    return 0;
}

/* The description from the child is made sound: its text ends within its array and its flags are
 * booleans (a byte other than 0 or 1 would be no bool: UBSan's "not a valid value for type bool"). */
static void test_garbled_description(void) {
    terra_raster_source *s = NULL;
    CHECK(terra_raster_open(&(terra_raster_desc){.path = "garbled.tif"}, "/proc/self/exe", &s) == TERRA_OK, "%s",
          terra_last_error());
    if (!s) return;
    const terra_raster_info *in = terra_raster_source_info(s);
    CHECK(memchr(in->ellipsoid, 0, sizeof in->ellipsoid) != NULL, "the ellipsoid's name has no end");
    const bool *flags[] = {&in->georeferenced, &in->has_crs, &in->geographic, &in->off_earth,
                           &in->has_lonlat, &in->has_nodata, &in->range_known};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        unsigned char byte;
        memcpy(&byte, flags[i], 1);
        CHECK(byte == 1, "flag %zu is byte %d", i, byte);
    }
    CHECK(in->crs_wkt == NULL && in->width == 4, "wkt %p, width %d", (const void *)in->crs_wkt, in->width);
    terra_raster_close(s);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--serve")) return garbled_reader();
    RUN(test_describe_hgt);
    RUN(test_open_errors);
    RUN(test_windows_tile_whole);
    RUN(test_threads_share_a_source);
    RUN(test_geo_hgt);
    RUN(test_geo_projected);
    RUN(test_big_mirrored);
    RUN(test_cpu_limit);
    RUN(test_garbled_description);
    return finish();
}
