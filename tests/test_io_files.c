/* libterra-io's files and limits: temporaries unique across threads and processes, leftovers of
 * killed writers found and removed, write errors naming the target, no non-finite mesh written,
 * rasters refused past the memory budget or at non-finite coordinates. */
#include "check.h"
#include "terra/io.h"
#include "terra/raster.h"

#include <dirent.h>
#include <errno.h>
#include <gdal.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char dir[256];

/* dir/name into buf. */
static const char *in_dir(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    CHECK(fwrite(p, 1, n, f) == n);
    fclose(f);
}

static size_t read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return n;
}

/* Files in dir whose name starts with prefix. */
static int count_files(const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

#define THREADS 8
#define PER_THREAD 25
typedef struct {
    const char *target;
    char *names[PER_THREAD];
    void *files[PER_THREAD];
    terra_status st;
} opener;

static void *open_many(void *arg) {
    opener *o = arg;
    for (int i = 0; i < PER_THREAD && !o->st; i++) o->st = terra_io_open_temp(o->target, &o->names[i], &o->files[i]);
    return NULL;
}

/* Threads of one process writing one target at once each get their own temporary. */
static void test_temp_names_unique_across_threads(void) {
    char target[300];
    in_dir("same.bin", target, sizeof target);
    opener o[THREADS];
    pthread_t th[THREADS];
    memset(o, 0, sizeof o);
    for (int t = 0; t < THREADS; t++) {
        o[t].target = target;
        CHECK(pthread_create(&th[t], NULL, open_many, &o[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) CHECK(o[t].st == TERRA_OK, "thread %d: %s", t, terra_last_error());
    CHECK(count_files("same.bin.tmp") == THREADS * PER_THREAD, "%d temporaries", count_files("same.bin.tmp"));
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < PER_THREAD; i++) {
            if (!o[t].names[i]) continue;
            for (int u = 0; u <= t; u++)
                for (int j = 0; j < (u == t ? i : PER_THREAD); j++)
                    if (o[u].names[j]) CHECK(strcmp(o[t].names[i], o[u].names[j]) != 0, "%s twice", o[t].names[i]);
        }
    /* Ours, being written: not stale. */
    size_t n = 99;
    CHECK(terra_io_stale_temps(target, NULL, NULL, &n, NULL) == TERRA_OK && n == 0, "%zu stale", n);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < PER_THREAD; i++)
            if (o[t].names[i]) {
                fclose(o[t].files[i]);
                terra_io_abort(o[t].names[i]);
            }
    CHECK(count_files("same.bin") == 0);
}

typedef struct {
    int n;
    char names[4][300];
    long pids[4];
    uint64_t bytes[4];
} seen;

static void note(void *ctx, const char *temp, long pid, uint64_t bytes) {
    seen *s = ctx;
    if (s->n < 4) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", temp);
        s->pids[s->n] = pid;
        s->bytes[s->n] = bytes;
    }
    s->n++;
}

/* kill -9 mid-write leaves a temporary; it is reported, and removed by the next write of the same
 * target, while temporaries of live processes and of other targets stay. */
static void test_stale_temps_of_killed_writers(void) {
    char target[300], legacy[340], live[340], other[340], odd[340], saved[256];
    /* A directory this process has not written into yet: in one it has, the next listing may wait
     * for ten times the last one's duration (io/atomic.c), and under sanitizers that is long. */
    snprintf(saved, sizeof saved, "%s", dir);
    snprintf(dir, sizeof dir, "%.200s/stale", saved);
    CHECK(mkdir(dir, 0777) == 0, "%s", dir);
    in_dir("map.png", target, sizeof target);
    pid_t pid = fork();
    if (pid == 0) {
        char *tmp;
        void *f;
        if (terra_io_open_temp(target, &tmp, &f) != TERRA_OK) _exit(2);
        static const char junk[1000];
        fwrite(junk, 1, sizeof junk, f);
        fflush(f);
        raise(SIGKILL);
        _exit(3);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child");
    /* The name earlier versions used, of the same dead process; one of a process that runs (init);
     * one of another target; a name that is no temporary. */
    snprintf(legacy, sizeof legacy, "%s.tmp%ld", target, (long)pid);
    write_bytes(legacy, "0123456789", 10);
    snprintf(live, sizeof live, "%s.tmp1-0", target);
    write_bytes(live, "x", 1);
    snprintf(other, sizeof other, "%s/other.png.tmp%ld-0", dir, (long)pid);
    write_bytes(other, "x", 1);
    snprintf(odd, sizeof odd, "%s.tmpnotapid", target);
    write_bytes(odd, "x", 1);

    seen s = {0};
    size_t n = 0;
    uint64_t bytes = 0;
    CHECK(terra_io_stale_temps(target, note, &s, &n, &bytes) == TERRA_OK, "%s", terra_last_error());
    CHECK(n == 2 && s.n == 2 && bytes == 1010, "%zu stale, %llu bytes", n, (unsigned long long)bytes);
    for (int i = 0; i < s.n && i < 2; i++) {
        CHECK(s.pids[i] == pid, "pid %ld", s.pids[i]);
        CHECK(strncmp(s.names[i], target, strlen(target)) == 0 && (s.bytes[i] == 10 || s.bytes[i] == 1000), "%s",
              s.names[i]);
    }
    /* Listing removes nothing; the next write does. */
    CHECK(count_files("map.png.tmp") == 4);
    const uint8_t px[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    CHECK(terra_io_write_png(target, px, 2, 2, 3) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_io_stale_temps(target, NULL, NULL, &n, &bytes) == TERRA_OK && n == 0 && bytes == 0, "%zu left", n);
    CHECK(access(legacy, F_OK) != 0 && access(live, F_OK) == 0 && access(other, F_OK) == 0 && access(odd, F_OK) == 0);
    CHECK(count_files("map.png.tmp") == 2, "%d", count_files("map.png.tmp"));
    char other_target[300];
    CHECK(terra_io_remove_stale_temps(in_dir("other.png", other_target, sizeof other_target)) == 1 &&
          access(other, F_OK) != 0);
    remove(live);
    remove(odd);
    remove(target);
    /* A directory that cannot be listed: an error naming the target. */
    CHECK(terra_io_stale_temps("/nonexistent-terra-dir/x.png", NULL, NULL, &n, NULL) == TERRA_E_IO &&
          strstr(terra_last_error(), "/nonexistent-terra-dir/x.png"), "%s", terra_last_error());
    CHECK(rmdir(dir) == 0, "%s not empty", dir);
    snprintf(dir, sizeof dir, "%s", saved);
}

/* A failed write names the file the user gave (the temporary only as detail). */
static void test_write_errors_name_the_target(void) {
    const char *target = "/nonexistent-terra-dir/out.obj";
    const double xyz[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
    const uint32_t tri[3] = {0, 1, 2};
    terra_mesh_out o = {.path = target, .vertex_count = 3, .xyz = xyz, .triangle_count = 1, .triangles = tri};
    CHECK(terra_io_write_mesh(&o) == TERRA_E_IO);
    const char *msg = terra_last_error();
    const char *want = "/nonexistent-terra-dir/out.obj: cannot create";
    CHECK(strncmp(msg, want, strlen(want)) == 0, "%s", msg);
    const uint8_t px[3] = {1, 2, 3};
    CHECK(terra_io_write_png("/nonexistent-terra-dir/out.png", px, 1, 1, 3) == TERRA_E_IO);
    CHECK(strncmp(terra_last_error(), "/nonexistent-terra-dir/out.png: ", 32) == 0, "%s", terra_last_error());
}

/* Infinite or NaN positions are refused, naming the file and the vertex, and the earlier file
 * stays as it was. */
static void test_mesh_refuses_non_finite(void) {
    char target[300], buf[64];
    const char *exts[3] = {"obj", "ply", "stl"};
    for (int e = 0; e < 3; e++) {
        char name[32];
        snprintf(name, sizeof name, "keep.%s", exts[e]);
        in_dir(name, target, sizeof target);
        write_bytes(target, "keep", 4);
        double xyz[9] = {0, 0, 0, 1, 0, 0, 0, INFINITY, 0};
        const uint32_t tri[3] = {0, 1, 2};
        terra_mesh_out o = {.path = target, .vertex_count = 3, .xyz = xyz, .triangle_count = 1, .triangles = tri};
        CHECK(terra_io_write_mesh(&o) == TERRA_E_INVALID, "%s", exts[e]);
        CHECK(strstr(terra_last_error(), target) && strstr(terra_last_error(), "vertex 3"), "%s", terra_last_error());
        xyz[7] = NAN;
        CHECK(terra_io_write_mesh(&o) == TERRA_E_INVALID, "%s", exts[e]);
        /* --spacing 1e308: the affine map overflows at column 2. */
        const int32_t xy[6] = {0, 0, 2, 0, 0, 1};
        const float z[3] = {1, 2, 3};
        terra_mesh_out a = {.path = target, .vertex_count = 3, .xy = xy, .z = z, .affine = {0, 1e308, 0, 0, 0, 1},
                            .triangle_count = 1, .triangles = tri};
        CHECK(terra_io_write_mesh(&a) == TERRA_E_INVALID && strstr(terra_last_error(), "vertex 2"), "%s",
              terra_last_error());
        /* Finite as a double, past a float: refused for STL only. */
        xyz[7] = 1e39;
        terra_status st = terra_io_write_mesh(&o);
        CHECK(e == 2 ? st == TERRA_E_INVALID : st == TERRA_OK, "%s: %d %s", exts[e], st, terra_last_error());
        if (e == 2) {
            CHECK(read_text(target, buf, sizeof buf) == 4 && !strcmp(buf, "keep"), "%s changed", target);
        }
        CHECK(count_files("keep.") == 1, "temporaries left");
        remove(target);
    }
}

/* A raster whose georeferencing or spacing overflows is refused, naming the file. */
static void test_raster_refuses_non_finite_extent(void) {
    char tif[300];
    in_dir("far.tif", tif, sizeof tif);
    GDALAllRegister();
    GDALDriverH drv = GDALGetDriverByName("GTiff");
    CHECK(drv != NULL);
    if (!drv) return;
    GDALDatasetH ds = GDALCreate(drv, tif, 40, 30, 1, GDT_Int16, NULL);
    double gt[6] = {-1e300, 1e307, 0, 1e300, 0, -1e307};
    GDALSetGeoTransform(ds, gt);
    int16_t v[40 * 30];
    for (int i = 0; i < 40 * 30; i++) v[i] = (int16_t)i;
    CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 40, 30, v, 40, 30, GDT_Int16, 0, 0) == CE_None);
    GDALClose(ds);
    terra_raster r;
    terra_raster_desc d = {.path = tif};
    CHECK(terra_raster_read(&d, &r) == TERRA_E_UNSUPPORTED && !r.heights, "in process");
    CHECK(strstr(terra_last_error(), tif) && strstr(terra_last_error(), "non-finite"), "%s", terra_last_error());
    CHECK(terra_raster_read_isolated(&d, NULL, &r) == TERRA_E_UNSUPPORTED && !r.heights, "isolated");
    CHECK(strstr(terra_last_error(), tif), "%s", terra_last_error());
    /* The same raster at 1e308 metres a sample: 40 of them are past a double. */
    ds = GDALCreate(drv, tif, 40, 30, 1, GDT_Int16, NULL);
    CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 40, 30, v, 40, 30, GDT_Int16, 0, 0) == CE_None);
    GDALClose(ds);
    d.spacing_m = 1e308;
    CHECK(terra_raster_read(&d, &r) == TERRA_E_UNSUPPORTED && strstr(terra_last_error(), tif), "%s",
          terra_last_error());
    CHECK(terra_raster_read_isolated(&d, NULL, &r) == TERRA_E_UNSUPPORTED, "%s", terra_last_error());
    d.spacing_m = 1e300;
    CHECK(terra_raster_read_isolated(&d, NULL, &r) == TERRA_OK, "%s", terra_last_error());
    terra_raster_free(&r);
    remove(tif);
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* A PNG that declares w x h 8-bit RGB pixels and holds almost none of them (the size is all a
 * reader sees before allocating). */
static void write_png_header_only(const char *path, uint32_t w, uint32_t h) {
    uint8_t f[8 + 25 + 12 + 12];
    size_t n = 0;
    const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(f, sig, 8), n = 8;
    put32(f + n, 13), memcpy(f + n + 4, "IHDR", 4);
    put32(f + n + 8, w), put32(f + n + 12, h);
    f[n + 16] = 8, f[n + 17] = 2, f[n + 18] = 0, f[n + 19] = 0, f[n + 20] = 0;
    put32(f + n + 21, (uint32_t)crc32(0, f + n + 4, 17)), n += 25;
    put32(f + n, 0), memcpy(f + n + 4, "IDAT", 4), put32(f + n + 8, (uint32_t)crc32(0, f + n + 4, 4)), n += 12;
    put32(f + n, 0), memcpy(f + n + 4, "IEND", 4), put32(f + n + 8, (uint32_t)crc32(0, f + n + 4, 4)), n += 12;
    write_bytes(path, f, n);
}

/* Past the memory budget: refused before allocating, naming the file, its size and the budget. */
static void test_raster_memory_budget(void) {
    CHECK(terra_raster_memory_budget(12345) == 12345);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    CHECK(terra_raster_memory_budget(0) == (size_t)((unsigned long long)pages * (unsigned long long)page / 2));
    char png[300], big[300];
    in_dir("small.png", png, sizeof png);
    uint8_t px[64 * 64 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
    CHECK(terra_io_write_png(png, px, 64, 64, 3) == TERRA_OK);
    terra_raster r;
    /* A PNG read in process needs the heights (64x64x4 = 16 KiB) and one row; through GDAL, rows of
     * 256 at a time as well (64 KiB). */
    terra_raster_desc d = {.path = png, .encoding = TERRA_RASTER_TERRAIN_RGB, .max_bytes = 16000};
    CHECK(terra_raster_read(&d, &r) == TERRA_E_CAPACITY && !r.heights, "in process");
    const char *m = terra_last_error();
    CHECK(strstr(m, png) && strstr(m, "64x64") && strstr(m, "budget"), "%s", m);
    CHECK(terra_raster_read_isolated(&d, NULL, &r) == TERRA_E_CAPACITY && !r.heights, "isolated: %s",
          terra_last_error());
    CHECK(strstr(terra_last_error(), png) && strstr(terra_last_error(), "64x64"), "%s", terra_last_error());
    d.max_bytes = 20000;
    CHECK(terra_raster_read(&d, &r) == TERRA_E_CAPACITY, "GDAL's rows counted");
    CHECK(terra_raster_read_isolated(&d, NULL, &r) == TERRA_OK, "%s", terra_last_error());
    terra_raster_free(&r);
    /* Through terra-raster both copies of the heights count (its and the caller's): a GeoTIFF,
     * 64x64 heights (16 KiB) and 256 rows of doubles (128 KiB). */
    char tif[300];
    in_dir("small.tif", tif, sizeof tif);
    GDALAllRegister();
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), tif, 64, 64, 1, GDT_Int16, NULL);
    CHECK(ds != NULL);
    if (ds) {
        int16_t v[64 * 64];
        for (int i = 0; i < 64 * 64; i++) v[i] = (int16_t)i;
        CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 64, 64, v, 64, 64, GDT_Int16, 0, 0) == CE_None);
        GDALClose(ds);
    }
    terra_raster_desc t = {.path = tif, .max_bytes = 64 * 64 * 4 + 64 * 256 * 8};
    CHECK(terra_raster_read(&t, &r) == TERRA_OK, "%s", terra_last_error());
    terra_raster_free(&r);
    CHECK(terra_raster_read_isolated(&t, NULL, &r) == TERRA_E_CAPACITY && strstr(terra_last_error(), tif),
          "isolated within one copy: %s", terra_last_error());
    t.max_bytes = 2 * 64 * 64 * 4 + 64 * 256 * 8;
    CHECK(terra_raster_read_isolated(&t, NULL, &r) == TERRA_OK, "%s", terra_last_error());
    terra_raster_free(&r);
    remove(tif);
    /* The bomb: a few bytes declaring 20000x20000. */
    in_dir("bomb.png", big, sizeof big);
    write_png_header_only(big, 20000, 20000);
    terra_raster_desc b = {.path = big, .encoding = TERRA_RASTER_TERRAIN_RGB, .max_bytes = (size_t)1 << 30};
    CHECK(terra_raster_read_isolated(&b, NULL, &r) == TERRA_E_CAPACITY && !r.heights, "%s", terra_last_error());
    CHECK(strstr(terra_last_error(), big) && strstr(terra_last_error(), "20000x20000") &&
              strstr(terra_last_error(), "1024.0 MiB"), "%s", terra_last_error());
    CHECK(terra_raster_read(&b, &r) == TERRA_E_CAPACITY, "%s", terra_last_error());
    remove(png);
    remove(big);
}

/* Reads the v lines of an OBJ as text: x, y, z strings of each vertex. */
static size_t obj_vertices(const char *path, char (*fields)[3][40], size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < cap)
        if (line[0] == 'v' && line[1] == ' ' && sscanf(line + 2, "%39s %39s %39s", fields[n][0], fields[n][1], fields[n][2]) == 3)
            n++;
    fclose(f);
    return n;
}

/* OBJ numbers read back exactly: doubles (x, y, and z given as doubles) as the same double, float
 * heights as the same float, read as a float or as a double rounded to float, the same values as
 * the printf forms written before (%.17g, %.9g). */
static void test_obj_numbers_round_trip(void) {
    enum { N = 20000 };
    static double xyz[3 * N];
    static int32_t xy[2 * N];
    static float z[N];
    static char fields[N][3][40];
    unsigned long long seed = 12;
    for (size_t i = 0; i < N; i++) {
        /* Magnitudes from 1e-6 to 1e16 (both sides of the fast form's range), integers, halves, negatives. */
        double mag = pow(10.0, test_rand_range(&seed, -6, 16));
        double v = test_rand_range(&seed, -mag, mag);
        if (i % 7 == 0) v = round(v);
        if (i % 11 == 0) v = round(v * 2) / 2;
        if (i % 13 == 0) v = round(v * 10) / 10; /* decimetres, the common case */
        xyz[i] = v;
        z[i] = (float)(i % 3 == 0 ? v : test_rand_range(&seed, -500, 9000));
        if (i % 17 == 0) z[i] = (float)(round(test_rand_range(&seed, -5000, 90000)) * 0.1);
        if (i % 19 == 0) z[i] = nextafterf(z[i], INFINITY);
        xy[2 * i] = (int32_t)(i % 1000), xy[2 * i + 1] = (int32_t)(i / 1000);
    }
    xyz[0] = 0.1, xyz[1] = -0.01, xyz[2] = 0x1p50 - 0.5, xyz[3] = 5e-324, xyz[4] = 1.7976931348623157e308;
    z[0] = 0.01f, z[1] = -0.0099999f, z[2] = 16777215.0f, z[3] = 8388607.5f, z[4] = 1e-40f, z[5] = -0.0f;
    char obj[300];
    in_dir("numbers.obj", obj, sizeof obj);
    /* Doubles: 3 per vertex. */
    terra_mesh_out o = {.path = obj, .vertex_count = N / 3, .xyz = xyz};
    CHECK(terra_io_write_mesh(&o) == TERRA_OK, "%s", terra_last_error());
    size_t n = obj_vertices(obj, fields, N);
    CHECK(n == N / 3, "%zu vertices", n);
    size_t bad = 0;
    for (size_t v = 0; v < n; v++)
        for (int k = 0; k < 3; k++) {
            double want = xyz[3 * v + k], got = strtod(fields[v][k], NULL);
            char old[40];
            snprintf(old, sizeof old, "%.17g", want);
            /* == , not bits: -0 has always been written as 0 */
            if (got != want || strtod(old, NULL) != got) {
                if (bad++ < 5) CHECK(0, "%.17g written as %s", want, fields[v][k]);
            }
        }
    CHECK(bad == 0, "%zu doubles differ", bad);
    /* Float heights: x, y from columns and rows through an affine map with fractional steps. */
    terra_mesh_out h = {.path = obj, .vertex_count = N, .xy = xy, .z = z, .affine = {0.5, 0.37, 0, 1000, 0, -0.37}};
    CHECK(terra_io_write_mesh(&h) == TERRA_OK, "%s", terra_last_error());
    n = obj_vertices(obj, fields, N);
    CHECK(n == N, "%zu vertices", n);
    bad = 0;
    size_t shorter = 0;
    for (size_t v = 0; v < n; v++) {
        double x = 0.5 + 0.37 * xy[2 * v], y = 1000 - 0.37 * xy[2 * v + 1];
        if (strtod(fields[v][0], NULL) != x || strtod(fields[v][1], NULL) != y) {
            if (bad++ < 5) CHECK(0, "x, y %.17g %.17g written as %s %s", x, y, fields[v][0], fields[v][1]);
        }
        float want = z[v];
        char old[40];
        snprintf(old, sizeof old, "%.9g", (double)want);
        float as_float = strtof(fields[v][2], NULL), via_double = (float)strtod(fields[v][2], NULL);
        if (as_float != want || via_double != want || (float)strtod(old, NULL) != want) {
            if (bad++ < 5) CHECK(0, "height %.9g written as %s", (double)want, fields[v][2]);
        }
        shorter += strlen(fields[v][2]) < strlen(old);
    }
    CHECK(bad == 0, "%zu numbers differ", bad);
    CHECK(shorter > N / 10, "only %zu heights shorter than %%.9g", shorter);
    remove(obj);
}

static bool same_raster(const terra_raster *a, const terra_raster *b) {
    return a->width == b->width && a->height == b->height && a->nodata_count == b->nodata_count &&
           a->georeferenced == b->georeferenced && memcmp(a->geo, b->geo, sizeof a->geo) == 0 &&
           a->spacing_x == b->spacing_x && a->spacing_y == b->spacing_y && a->min_z == b->min_z &&
           a->max_z == b->max_z &&
           memcmp(a->heights, b->heights, (size_t)a->width * (size_t)a->height * sizeof(float)) == 0;
}

/* Every PNG in ../shared/data/dem, every encoding and band: read in process with libpng (no
 * terra-raster: a reader that does not exist is never needed) exactly as GDAL reads it, and where
 * GDAL refuses, the same refusal, word for word. */
static void test_png_without_gdal_equals_gdal(void) {
    char root[1024], p[1300];
    shared_path("data/dem", root, sizeof root);
    DIR *dh = opendir(root);
    if (!dh) {
        printf("  skip: %s is absent\n", root);
        return;
    }
    struct {
        terra_raster_encoding enc;
        int band;
        double z, spacing;
    } modes[] = {{TERRA_RASTER_PLAIN, 0, 0, 0},        {TERRA_RASTER_PLAIN, 3, 0, 0},
                 {TERRA_RASTER_PLAIN, 4, 0, 0},        {TERRA_RASTER_TERRAIN_RGB, 0, 0, 0},
                 {TERRA_RASTER_TERRARIUM, 0, 0.5, 0},  {TERRA_RASTER_PLAIN, 1, 0.1, 2.5},
                 {TERRA_RASTER_TERRAIN_RGB, 0, 0, 30}};
    int files = 0, direct = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".png") != 0) continue;
        snprintf(p, sizeof p, "%s/%s", root, e->d_name);
        files++;
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
            terra_raster_desc d = {.path = p, .encoding = modes[k].enc, .band = modes[k].band,
                                   .z_scale = modes[k].z, .spacing_m = modes[k].spacing};
            terra_raster g, a, b;
            char msg[1024];
            terra_status sg = terra_raster_read(&d, &g);
            snprintf(msg, sizeof msg, "%s", terra_last_error());
            terra_status sa = terra_raster_read_isolated(&d, NULL, &a);
            CHECK(sa == sg, "%s mode %zu: %d with GDAL, %d isolated (%s)", e->d_name, k, sg, sa, terra_last_error());
            if (sg != TERRA_OK) {
                CHECK(sa == sg && strcmp(msg, terra_last_error()) == 0, "%s mode %zu: '%s' vs '%s'", e->d_name, k, msg,
                      terra_last_error());
                if (sa == TERRA_OK) terra_raster_free(&a);
                continue;
            }
            if (sa == TERRA_OK) CHECK(same_raster(&g, &a), "%s mode %zu: rasters differ", e->d_name, k);
            terra_status sb = terra_raster_read_isolated(&d, "/nonexistent/terra-raster", &b);
            CHECK(sb == TERRA_OK, "%s mode %zu needed terra-raster: %s", e->d_name, k, terra_last_error());
            if (sb == TERRA_OK) {
                direct++;
                CHECK(same_raster(&g, &b), "%s mode %zu: rasters differ", e->d_name, k);
                terra_raster_free(&b);
            }
            terra_raster_free(&g);
            if (sa == TERRA_OK) terra_raster_free(&a);
        }
    }
    closedir(dh);
    CHECK(files >= 1 && direct >= files, "%d PNGs, %d read without GDAL", files, direct);
    printf("  %d PNGs, %d reads in process identical to GDAL's\n", files, direct);
    /* A damaged PNG: left to GDAL, whose message it is. */
    char cut[300];
    in_dir("cut.png", cut, sizeof cut);
    snprintf(p, sizeof p, "%s/fuji.png", root);
    FILE *f = fopen(p, "rb");
    if (f) {
        static uint8_t buf[300000];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        write_bytes(cut, buf, n / 2);
        terra_raster_desc d = {.path = cut, .encoding = TERRA_RASTER_TERRAIN_RGB};
        terra_raster g, a;
        char msg[1024];
        terra_status sg = terra_raster_read(&d, &g);
        snprintf(msg, sizeof msg, "%s", terra_last_error());
        CHECK(sg != TERRA_OK && terra_raster_read_isolated(&d, NULL, &a) == sg && !strcmp(msg, terra_last_error()),
              "'%s' vs '%s'", msg, terra_last_error());
        remove(cut);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "io_files_%ld", (long)getpid());
    if (mkdir(dir, 0777) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    RUN(test_temp_names_unique_across_threads);
    RUN(test_stale_temps_of_killed_writers);
    RUN(test_write_errors_name_the_target);
    RUN(test_mesh_refuses_non_finite);
    RUN(test_raster_refuses_non_finite_extent);
    RUN(test_raster_memory_budget);
    RUN(test_obj_numbers_round_trip);
    RUN(test_png_without_gdal_equals_gdal);
    rmdir(dir);
    return finish();
}
