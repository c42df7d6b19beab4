/* cook benchmark: `terra cook` on real elevation, as a user runs it (whole process, report read back).
 *
 * Figures (docs/BENCHMARKS.md, issue 13's goals):
 *  - cook.sthelens_1m.bytes_vs_raw, cook.sthelens_5m.bytes_vs_raw: archive bytes (every level, normals
 *    included) over the raw 16-bit raster (2000 x 2000 x 2 = 8.0 MB), St Helens 10 m at a finest
 *    error of 1 m and 5 m. Goals: <= 1 and <= 0.25.
 *  - cook.samples_per_s_per_thread: source samples over the whole process's wall time (start to exit:
 *    reading, meshing every level, writing) on one thread; goal >= 1.3 M (twice cesium-terrain-builder's
 *    published rate per thread: 150 tiles of 65 x 65 samples a second).
 *  - cook.speedup_2_threads: one thread's time over two threads', runs alternated; goal near 2.
 *  - cook.big_raster.peak_mb: the largest resident memory of the cook's processes (its own and the
 *    raster reader's) on a 16384 x 16384 16-bit raster (St Helens mirror-tiled, written once into
 *    build/bench/ as a tiled GeoTIFF, which the cook reads a window at a time); goal <= 1024. Only with TERRA_BENCH_COOK_BIG=1: it takes a quarter of an hour or more.
 * Medians of TERRA_BENCH_COOK_RUNS (default 3) runs. Needs ../shared/data (skips without it). Run from
 * the repository root (make bench). */
#include "bench.h"

#include <gdal.h>
#include <png.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *terra_bin = "build/terra";

typedef struct cook_run {
    double wall_s, bytes, peak_mb;
} cook_run;

/* Runs `terra cook IN -o OUT ARGS -q --no-cache` and reads its report. */
static int run_cook(const char *in, const char *out, const char *args, cook_run *r) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' cook '%s' -o '%s' %s -q --no-cache", terra_bin, in, out, args);
    double t0 = bench_now();
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[512];
    int got = 0;
    r->peak_mb = 0;
    while (fgets(line, sizeof line, p)) {
        double v;
        if (sscanf(line, "bytes %lf", &v) == 1) r->bytes = v, got |= 1;
        if (sscanf(line, "peak_mb %lf", &v) == 1 || sscanf(line, "reader_peak_mb %lf", &v) == 1)
            r->peak_mb = v > r->peak_mb ? v : r->peak_mb, got |= 2;
    }
    int rc = pclose(p);
    r->wall_s = bench_now() - t0;
    if (rc != 0 || got != 3) {
        fprintf(stderr, "bench_cook: '%s' failed (exit %d)\n", cmd, rc);
        return -1;
    }
    return 0;
}

/* Sample (x, y) of the big raster is St Helens' (m(x), m(y)): mirror-tiled, continuous seams. */
static int mirror(int x, int n) {
    x %= 2 * n;
    return x < n ? x : 2 * n - 1 - x;
}

/* Writes the mirror-tiled raster as a tiled 16-bit GeoTIFF without georeference (GDAL reads a
 * window of it without decoding from the top, as it must for a PNG), reading the source PNG once. */
static int write_big(const char *src_path, const char *path, int side) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, src_path)) return -1;
    img.format = PNG_FORMAT_LINEAR_Y; /* 16-bit grey, as stored */
    const int w = (int)img.width, h = (int)img.height, band_rows = 256;
    uint16_t *src = malloc(PNG_IMAGE_SIZE(img));
    uint16_t *rows = malloc((size_t)side * band_rows * 2);
    if (!src || !rows || !png_image_finish_read(&img, NULL, src, 0, NULL)) {
        free(src);
        free(rows);
        png_image_free(&img);
        return -1;
    }
    GDALAllRegister();
    char *opts[] = {"TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "COMPRESS=DEFLATE", "BIGTIFF=IF_SAFER", NULL};
    GDALDriverH drv = GDALGetDriverByName("GTiff");
    GDALDatasetH ds = drv ? GDALCreate(drv, path, side, side, 1, GDT_UInt16, opts) : NULL;
    int rc = ds ? 0 : -1;
    for (int y0 = 0; rc == 0 && y0 < side; y0 += band_rows) {
        const int n = side - y0 < band_rows ? side - y0 : band_rows;
        for (int j = 0; j < n; j++) {
            const uint16_t *s = src + (size_t)mirror(y0 + j, h) * (size_t)w;
            for (int x = 0; x < side; x++) rows[(size_t)j * side + x] = s[mirror(x, w)];
        }
        if (GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, y0, side, n, rows, side, n, GDT_UInt16, 0, 0) != CE_None)
            rc = -1;
    }
    if (ds) GDALClose(ds);
    free(src);
    free(rows);
    return rc;
}

int main(void) {
    const char *shared = getenv("TERRA_SHARED");
    if (!shared) shared = "../shared";
    if (getenv("TERRA_BIN")) terra_bin = getenv("TERRA_BIN");
    const int runs = getenv("TERRA_BENCH_COOK_RUNS") ? atoi(getenv("TERRA_BENCH_COOK_RUNS")) : 3;
    char sthelens[1024], out[1024];
    snprintf(sthelens, sizeof sthelens, "%s/data/dem/sthelens_10m.png", shared);
    if (access(sthelens, R_OK) != 0) {
        printf("bench_cook: SKIP (no %s)\n", sthelens);
        return 0;
    }
    mkdir("build/bench", 0777);
    snprintf(out, sizeof out, "build/bench/cook_sthelens.terra");
    const char *raster = "--encoding plain --z-scale 0.1 --spacing 10";
    const double raw_bytes = 2000.0 * 2000.0 * 2.0, samples = 2000.0 * 2000.0;
    printf("cook: St Helens 10 m (2000 x 2000), whole `terra cook` processes, %d runs\n", runs);

    double t1[16], t2[16];
    cook_run r;
    double bytes1 = 0, bytes5 = 0;
    char args[512];
    for (int i = 0; i < runs && i < 16; i++) { /* alternated, so both thread counts see the same machine */
        snprintf(args, sizeof args, "%s -e 1 --threads 1", raster);
        if (run_cook(sthelens, out, args, &r)) return 1;
        t1[i] = r.wall_s, bytes1 = r.bytes;
        snprintf(args, sizeof args, "%s -e 1 --threads 2", raster);
        if (run_cook(sthelens, out, args, &r)) return 1;
        t2[i] = r.wall_s;
    }
    snprintf(args, sizeof args, "%s -e 5 --threads 2", raster);
    if (run_cook(sthelens, out, args, &r)) return 1;
    bytes5 = r.bytes;
    const int n = runs < 16 ? runs : 16;
    double ratio[16];
    for (int i = 0; i < n; i++) ratio[i] = t1[i] / t2[i];
    const double m1 = bench_median(t1, n);
    bench_record("cook.sthelens_1m.bytes", bytes1, "B", 1, "value");
    bench_record("cook.sthelens_1m.bytes_vs_raw", bytes1 / raw_bytes, "x", 1, "value");
    bench_record("cook.sthelens_5m.bytes", bytes5, "B", 1, "value");
    bench_record("cook.sthelens_5m.bytes_vs_raw", bytes5 / raw_bytes, "x", 1, "value");
    bench_record("cook.sthelens_1m.whole_s_1_thread", m1, "s", n, "median");
    bench_record("cook.samples_per_s_per_thread", samples / m1, "1/s", n, "median");
    bench_record("cook.speedup_2_threads", bench_median(ratio, n), "x", n, "median");
    remove(out);

    const char *big_env = getenv("TERRA_BENCH_COOK_BIG");
    if (!big_env || strcmp(big_env, "1")) {
        printf("cook: the 16384 x 16384 raster skipped (TERRA_BENCH_COOK_BIG=1 runs it)\n");
        return 0;
    }
    const char *big = "build/bench/cook_big_16384.tif";
    struct stat sb;
    if (stat(big, &sb) != 0) {
        printf("cook: writing the 16384 x 16384 mirror of St Helens to %s\n", big);
        if (write_big(sthelens, big, 16384)) {
            fprintf(stderr, "bench_cook: cannot write %s\n", big);
            return 1;
        }
    }
    snprintf(out, sizeof out, "build/bench/cook_big.terra");
    snprintf(args, sizeof args, "%s -e 1 --threads 2", raster);
    if (run_cook(big, out, args, &r)) return 1;
    bench_record("cook.big_raster.peak_mb", r.peak_mb, "MB", 1, "value");
    bench_record("cook.big_raster.samples_per_s_per_thread", 16384.0 * 16384.0 / r.wall_s / 2, "1/s", 1, "value");
    bench_record("cook.big_raster.bytes_vs_raw", r.bytes / (16384.0 * 16384.0 * 2), "x", 1, "value");
    remove(out);
    return 0;
}
