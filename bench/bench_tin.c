/* tin benchmark: terra mesh against delatin and @mapbox/martini (npm), side by side in one run.
 *
 * For each case (input, error bound) every tool meshes the same float32 heights; terra runs as the
 * `terra mesh` command (its report gives mesh time and the peak memory of its process and of the
 * terra-raster process that read the input: the larger is recorded), the peers
 * through bench/peers/run.mjs in node. Every tool's output is then measured by terra's independent
 * checker on every sample. Figures: tin.<input>_<error>.<tool>.ms / .triangles / .max_error / .peak_mb.
 *
 * The peers are installed here with npm into bench/peers/node_modules when missing (needs node,
 * npm and the registry). Without them the terra figures are still recorded.
 * The whole process (tin.<case>.terra.whole_ms, tin.<case>.whole_vs_hmm): `terra mesh` timed from
 * its start to its exit on the original PNG (process start, reading, meshing, writing the OBJ; no
 * check), median of several runs, against hmm's whole process. hmm (C++) cannot be installed here,
 * so its time is estimated from delatin's meshing time in the same run times a ratio measured on
 * the reference machine (docs/TIN.md, "Whole process"): HMM_PER_DELATIN_* below.
 * Environment: TERRA_BENCH_TIN_QUICK=1 runs fuji only; TERRA_BENCH_TIN_TILES_ONLY=1 the tiled mode
 * only; TERRA_BENCH_TIN_WHOLE_ONLY=1 the whole-process figures only (fuji 20 m and St Helens 1 m,
 * terra and delatin, about a minute); TERRA_BENCH_TIN_BASELINE=PATH, the `terra` of commit 753c7b3
 * (issue 12's anchor: its whole process took 1.78x hmm's on fuji at 20 m), adds that build timed
 * alternately with this one (tin.fuji_20m.whole_vs_hmm_by_anchor); TERRA_BENCH_TIN_RUNS (default 3) sets the
 * runs per figure on the small inputs (medians). Run from the repository root (make bench). */
#include "bench.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* hmm's whole process (read the PNG, mesh, write the mesh) as a multiple of delatin's meshing
 * time on the same input and bound (docs/TIN.md, "Whole process"):
 * - St Helens 1 m: hmm meshes in 0.37 of delatin's time on the reference machine
 *   (docs/BENCHMARKS.md); its PNG read and STL write are not counted, so the estimate is low and
 *   terra's ratio to it high (conservative).
 * - fuji 20 m: derived from issue 12's figure, terra's whole process 1.78x hmm's at commit
 *   753c7b3. That build's whole process, timed here alternately with delatin's meshing (30
 *   pairs, two sessions), took a median 0.56 of delatin's time (88.7 against 158 ms on the idle
 *   2-core machine); / 1.78, hmm's whole process is 0.32 of delatin's meshing (about 50 ms). The other figure (terra
 *   meshes in 0.43x hmm's time) puts hmm's meshing at 12.4 / 0.43 = 29-37 ms: hmm spends
 *   ~10 ms outside meshing, as a C++ program reading a 512x512 PNG should. */
#define HMM_PER_DELATIN_FUJI_20M 0.32
/* St Helens' ratio is hmm's meshing alone; its reading and writing are measured here instead of
 * left out: hmm reads heightmaps with stb_image (16 bits, one channel) and writes a binary STL
 * (a facet normal and three corners a triangle), so hmm_io_ms does exactly that with the same PNG
 * and terra's mesh of it (Debian's libstb-dev; without it the estimate is the meshing alone). */
#define HMM_PER_DELATIN_STHELENS_1M 0.37

typedef struct bcase {
    const char *name;           /* fuji, sthelens, mirror4096 */
    double error;
} bcase;

static char terra_bin[1024], work[1024], peers[1024];

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Raw float32 plus an ENVI header, so GDAL (and so `terra mesh`) reads it too. */
static int write_envi(const char *path, const float *h, int w, int ht) {
    if (write_file(path, h, (size_t)w * (size_t)ht * sizeof(float))) return -1;
    char hdr[1100], txt[512];
    snprintf(hdr, sizeof hdr, "%.*s.hdr", (int)(strrchr(path, '.') - path), path);
    int n = snprintf(txt, sizeof txt,
                     "ENVI\nsamples = %d\nlines = %d\nbands = 1\nheader offset = 0\nfile type = ENVI Standard\n"
                     "data type = 4\ninterleave = bsq\nbyte order = 0\n",
                     w, ht);
    return write_file(hdr, txt, (size_t)n);
}

static double median3(double *v, int n) { return bench_median(v, n); }

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs `terra mesh` and reads its report. */
static int run_terra(const char *in, double err, const char *out, double *ms, double *tris, double *maxe, double *peak) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' mesh '%s' -e %g -o '%s' -q", terra_bin, in, err, out);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[512];
    int got = 0;
    *peak = 0;
    while (fgets(line, sizeof line, p)) {
        double v;
        if (sscanf(line, "mesh_ms %lf", &v) == 1) *ms = v, got |= 1;
        if (sscanf(line, "triangles %lf", &v) == 1) *tris = v, got |= 2;
        if (sscanf(line, "peak_mb %lf", &v) == 1) *peak = v > *peak ? v : *peak, got |= 8;
        if (sscanf(line, "reader_peak_mb %lf", &v) == 1) *peak = v > *peak ? v : *peak;
    }
    int rc = pclose(p);
    *maxe = NAN; /* measured by the caller's checker, as for the peers */
    return rc == 0 && got == 11 ? 0 : -1;
}

static int run_peer(const char *tool, const char *raw, int w, int h, double err, const char *out, double *ms,
                    double *tris, double *peak) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && node run.mjs %s '%s' %d %d %g '%s'", peers, tool, raw, w, h, err, out);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[512];
    int got = 0;
    while (fgets(line, sizeof line, p)) {
        const char *a = strstr(line, "\"ms\":"), *b = strstr(line, "\"triangles\":"), *c = strstr(line, "\"peak_mb\":");
        if (a && b && c) {
            *ms = atof(a + 5), *tris = atof(b + 12), *peak = atof(c + 10);
            got = 1;
        }
    }
    int rc = pclose(p);
    return rc == 0 && got ? 0 : -1;
}

#ifdef TERRA_HAVE_STB
#include <stb/stb_image.h>

/* hmm's input and output on its own: the PNG read by stb_image as 16-bit grey, then the mesh in
 * `obj` written as a binary STL with facet normals to `stl`. ms, or < 0 on failure. */
static double hmm_io_ms(const char *png, const char *obj, const char *stl) {
    double *xyz;
    uint32_t *tri;
    size_t nv, nt;
    if (terra_io_read_obj(obj, &xyz, &nv, &tri, &nt) != TERRA_OK) return -1;
    const double t0 = bench_now();
    int w, h, c;
    uint16_t *px = stbi_load_16(png, &w, &h, &c, 1);
    FILE *f = px ? fopen(stl, "wb") : NULL;
    if (f) {
        static const char header[80];
        const uint32_t count = (uint32_t)nt;
        fwrite(header, 1, sizeof header, f);
        fwrite(&count, 4, 1, f);
        for (size_t t = 0; t < nt; t++) {
            float rec[12];
            const double *a = &xyz[3 * tri[3 * t]], *b = &xyz[3 * tri[3 * t + 1]], *d = &xyz[3 * tri[3 * t + 2]];
            const double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, v[3] = {d[0] - a[0], d[1] - a[1], d[2] - a[2]};
            double nrm[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
            const double len = sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2]);
            for (int k = 0; k < 3; k++) {
                rec[k] = (float)(len > 0 ? nrm[k] / len : 0);
                rec[3 + k] = (float)a[k], rec[6 + k] = (float)b[k], rec[9 + k] = (float)d[k];
            }
            uint8_t record[50] = {0}; /* 12 floats and a zero attribute word: one write a facet */
            memcpy(record, rec, sizeof rec);
            fwrite(record, sizeof record, 1, f);
        }
    }
    const bool ok = f && fclose(f) == 0;
    const double ms = (bench_now() - t0) * 1e3;
    stbi_image_free(px);
    terra_free(xyz);
    terra_free(tri);
    remove(stl);
    return ok ? ms : -1;
}
#endif

/* Wall time of one whole `terra mesh` process, from spawn to exit, in ms; < 0 on failure. */
static double run_whole(const char *bin, const char *png, const char *opt1, const char *opt2, double err,
                        const char *out) {
    char e[32];
    snprintf(e, sizeof e, "%g", err);
    char *argv[] = {(char *)bin, "mesh", (char *)png, (char *)opt1, (char *)opt2, "-e", e, "-o", (char *)out, "-q", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    double t0 = bench_now();
    pid_t pid;
    int st = -1;
    if (posix_spawn(&pid, bin, &fa, NULL, argv, environ) != 0 || waitpid(pid, &st, 0) != pid) st = -1;
    double ms = (bench_now() - t0) * 1e3;
    posix_spawn_file_actions_destroy(&fa);
    return st == 0 ? ms : -1;
}

/* terra's checker on a peer's OBJ. */
static double check_obj(const char *obj, const terra_raster *r) {
    double *xyz;
    uint32_t *tri;
    size_t nv, nt;
    if (terra_io_read_obj(obj, &xyz, &nv, &tri, &nt) != TERRA_OK) return NAN;
    int32_t *xy = malloc(nv * 2 * sizeof(int32_t) + 1);
    float *z = malloc(nv * sizeof(float) + 1);
    for (size_t v = 0; v < nv; v++) xy[2 * v] = (int32_t)xyz[3 * v], xy[2 * v + 1] = (int32_t)xyz[3 * v + 1], z[v] = (float)xyz[3 * v + 2];
    terra_tin_check_result res;
    double e = terra_tin_check(r->heights, r->width, r->height, xy, z, nv, tri, nt, NULL, &res) == TERRA_OK
                   ? res.max_error
                   : NAN;
    free(xy);
    free(z);
    terra_free(xyz);
    terra_free(tri);
    return e;
}

int main(int argc, char **argv) {
    (void)argc;
    const char *shared = getenv("TERRA_SHARED");
    if (!shared) shared = "../shared";
    const char *bin = getenv("TERRA_BIN");
    if (bin) {
        snprintf(terra_bin, sizeof terra_bin, "%s", bin);
    } else {
        const char *slash = strrchr(argv[0], '/');
        snprintf(terra_bin, sizeof terra_bin, "%.*s/terra", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    }
    const char *slash = strrchr(argv[0], '/');
    snprintf(work, sizeof work, "%.*s/bench/tin", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", work);
    if (system(cmd) != 0) return 1;
    /* Absolute paths: the peers run from bench/peers. */
    static char cwd[512], tmp[1024];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    if (work[0] != '/') snprintf(tmp, sizeof tmp, "%s/%.500s", cwd, work), memcpy(work, tmp, sizeof tmp);
    if (terra_bin[0] != '/') snprintf(tmp, sizeof tmp, "%s/%.500s", cwd, terra_bin), memcpy(terra_bin, tmp, sizeof tmp);
    snprintf(peers, sizeof peers, "%s/bench/peers", cwd);
    int have_peers = 0;
    if (system("command -v node >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' 2>/dev/null && { [ -d node_modules/delatin ] && [ -d node_modules/@mapbox/martini ] || "
                 "npm install --no-audit --no-fund --silent >&2; } && [ -d node_modules/delatin ]",
                 peers);
        have_peers = system(cmd) == 0;
    }
    if (!have_peers) printf("  (delatin and martini unavailable: node/npm missing or offline; terra only)\n");
    const int runs_env = getenv("TERRA_BENCH_TIN_RUNS") ? atoi(getenv("TERRA_BENCH_TIN_RUNS")) : 3;
    const int runs_small = runs_env < 1 ? 1 : runs_env;
    const bool quick = getenv("TERRA_BENCH_TIN_QUICK") != NULL;

    static const bcase cases[] = {{"fuji", 1}, {"fuji", 5}, {"fuji", 20}, {"sthelens", 1}, {"mirror4096", 1}};
    const bool tiles_only = getenv("TERRA_BENCH_TIN_TILES_ONLY") != NULL;
    const bool whole_only = getenv("TERRA_BENCH_TIN_WHOLE_ONLY") != NULL;
    const int ncases = tiles_only ? 0 : quick ? 3 : whole_only ? 4 : (int)(sizeof cases / sizeof cases[0]);
    double delatin_fuji20 = 0, delatin_sthelens1 = 0;
    terra_raster r = {0};
    const char *loaded = "";
    char in_path[1200], raw_path[1200];
    for (int ci = 0; ci < ncases; ci++) {
        const bcase *c = &cases[ci];
        /* The whole-process figures need delatin on fuji 20 m and St Helens 1 m only. */
        const bool for_whole = (!strcmp(c->name, "fuji") && c->error == 20) || (!strcmp(c->name, "sthelens") && c->error == 1);
        if (whole_only && !for_whole) continue;
        if (strcmp(loaded, c->name)) {
            terra_raster_free(&r);
            terra_raster_desc d = {0};
            char p[1024];
            if (!strcmp(c->name, "fuji")) {
                snprintf(p, sizeof p, "%s/data/dem/fuji.png", shared);
                d.encoding = TERRA_RASTER_TERRAIN_RGB;
            } else {
                snprintf(p, sizeof p, "%s/data/dem/sthelens_10m.png", shared);
                d.z_scale = 0.1;
            }
            d.path = p;
            if (terra_raster_read(&d, &r) != TERRA_OK) {
                printf("  skip %s: %s\n", c->name, terra_last_error());
                continue;
            }
            if (!strcmp(c->name, "mirror4096")) {
                /* St Helens 2000^2 mirrored into 4096^2: every sample real, seams continuous. */
                const int N = 4096, S = r.width;
                float *m = malloc((size_t)N * N * sizeof(float));
                if (!m) return 1;
                for (int y = 0; y < N; y++) {
                    int sy = (y / S) % 2 ? S - 1 - y % S : y % S;
                    for (int x = 0; x < N; x++) {
                        int sx = (x / S) % 2 ? S - 1 - x % S : x % S;
                        m[(size_t)y * N + x] = r.heights[(size_t)sy * S + sx];
                    }
                }
                terra_free(r.heights);
                r.heights = m;
                r.width = r.height = N;
            }
            snprintf(raw_path, sizeof raw_path, "%s/%s.f32", work, c->name);
            if (write_envi(raw_path, r.heights, r.width, r.height)) {
                printf("  cannot write %s\n", raw_path);
                return 1;
            }
            loaded = c->name;
        }
        /* Everyone reads the same float32 heights (terra through GDAL's ENVI driver). */
        snprintf(in_path, sizeof in_path, "%s", raw_path);
        const bool big = r.width * (size_t)r.height > 1000000;
        /* delatin's time on fuji at 20 m anchors hmm's estimate, and node's JIT makes single runs of
         * it vary 120-300 ms: at least 9 runs there. At most 9 anywhere (ms[] below). */
        const int runs = big ? 1 : for_whole ? 9 : runs_small > 9 ? 9 : runs_small;
        char label[128], name[256], out[1400];
        snprintf(label, sizeof label, "%s_%gm", c->name, c->error);
        /* terra */
        double ms[9], tris = 0, maxe = 0, peak = 0;
        int ok = 1;
        snprintf(out, sizeof out, "%s/%s.terra.obj", work, label);
        for (int i = 0; i < runs && ok; i++) ok = run_terra(in_path, c->error, out, &ms[i], &tris, &maxe, &peak) == 0;
        if (ok) maxe = check_obj(out, &r);
        if (ok) {
            snprintf(name, sizeof name, "tin.%s.terra.ms", label), bench_record(name, median3(ms, runs), "ms", runs, "median");
            snprintf(name, sizeof name, "tin.%s.terra.triangles", label), bench_record(name, tris, "count", 1, "value");
            snprintf(name, sizeof name, "tin.%s.terra.max_error", label), bench_record(name, maxe, "m", 1, "value");
            snprintf(name, sizeof name, "tin.%s.terra.peak_mb", label), bench_record(name, peak, "MB", 1, "value");
        } else {
            printf("  terra failed on %s\n", label);
        }
        if (!have_peers) continue;
        static const char *tools[] = {"delatin", "martini"};
        for (int ti = 0; ti < (whole_only ? 1 : 2); ti++) {
            snprintf(out, sizeof out, "%s/%s.%s.obj", work, label, tools[ti]);
            ok = 1;
            for (int i = 0; i < runs && ok; i++)
                ok = run_peer(tools[ti], raw_path, r.width, r.height, c->error, out, &ms[i], &tris, &peak) == 0;
            if (!ok) {
                printf("  %s failed on %s\n", tools[ti], label);
                continue;
            }
            double e = check_obj(out, &r);
            double med = median3(ms, runs);
            if (ti == 0 && for_whole) *(!strcmp(c->name, "fuji") ? &delatin_fuji20 : &delatin_sthelens1) = med;
            snprintf(name, sizeof name, "tin.%s.%s.ms", label, tools[ti]), bench_record(name, med, "ms", runs, "median");
            snprintf(name, sizeof name, "tin.%s.%s.triangles", label, tools[ti]), bench_record(name, tris, "count", 1, "value");
            snprintf(name, sizeof name, "tin.%s.%s.max_error", label, tools[ti]), bench_record(name, e, "m", 1, "value");
            snprintf(name, sizeof name, "tin.%s.%s.peak_mb", label, tools[ti]), bench_record(name, peak, "MB", 1, "value");
        }
    }
    terra_raster_free(&r);

    /* The whole process on the original PNGs, against hmm's (estimated, see HMM_PER_DELATIN_*). */
    if (!tiles_only) {
        static const struct {
            const char *label, *png, *opt1, *opt2;
            double error, hmm_per_delatin;
        } wc[] = {{"fuji_20m", "fuji.png", "--encoding", "terrain-rgb", 20, HMM_PER_DELATIN_FUJI_20M},
                  {"sthelens_1m", "sthelens_10m.png", "--z-scale", "0.1", 1, HMM_PER_DELATIN_STHELENS_1M}};
        for (int i = 0; i < (quick ? 1 : 2); i++) {
            char png[1200], out[1400], name[256];
            snprintf(png, sizeof png, "%s/data/dem/%s", shared, wc[i].png);
            snprintf(out, sizeof out, "%s/%s.whole.obj", work, wc[i].label);
            const int runs = i == 0 ? 11 : 5; /* short runs vary most */
            double ms[32];
            int n = 0;
            run_whole(terra_bin, png, wc[i].opt1, wc[i].opt2, wc[i].error, out); /* warm the page cache */
            for (; n < runs && n < 32; n++)
                if ((ms[n] = run_whole(terra_bin, png, wc[i].opt1, wc[i].opt2, wc[i].error, out)) < 0) break;
            if (n < runs) {
                printf("  terra mesh failed on %s\n", png);
                continue;
            }
            double whole = median3(ms, n);
            snprintf(name, sizeof name, "tin.%s.terra.whole_ms", wc[i].label), bench_record(name, whole, "ms", n, "median");
            const char *baseline = getenv("TERRA_BENCH_TIN_BASELINE");
            if (i == 0 && baseline && *baseline) {
                /* Issue 12's own anchor: at 753c7b3 the whole process took 1.78x hmm's on fuji at
                 * 20 m. That build (TERRA_BENCH_TIN_BASELINE) and this one, alternately. */
                enum { PAIRS = 21 };
                double old_ms[PAIRS], new_ms[PAIRS];
                int k = 0;
                run_whole(baseline, png, wc[i].opt1, wc[i].opt2, wc[i].error, out);
                for (; k < PAIRS; k++) {
                    old_ms[k] = run_whole(baseline, png, wc[i].opt1, wc[i].opt2, wc[i].error, out);
                    new_ms[k] = run_whole(terra_bin, png, wc[i].opt1, wc[i].opt2, wc[i].error, out);
                    if (old_ms[k] < 0 || new_ms[k] < 0) break;
                }
                if (k == PAIRS) {
                    const double o = median3(old_ms, k), m = median3(new_ms, k);
                    bench_record("tin.fuji_20m.baseline_753c7b3.whole_ms", o, "ms", k, "median");
                    bench_record("tin.fuji_20m.whole_vs_hmm_by_anchor", 1.78 * m / o, "x", k, "value");
                } else {
                    printf("  the baseline %s failed on %s\n", baseline, png);
                }
            }
            double delatin = i == 0 ? delatin_fuji20 : delatin_sthelens1;
            if (!(delatin > 0)) {
                printf("  (no delatin time for %s: hmm's whole process not estimated)\n", wc[i].label);
                continue;
            }
            double hmm = wc[i].hmm_per_delatin * delatin;
#ifdef TERRA_HAVE_STB
            if (i == 1) { /* St Helens: meshing calibrated, reading and writing measured */
                char stl[1500];
                snprintf(stl, sizeof stl, "%s/%s.hmm_io.stl", work, wc[i].label);
                double io[5];
                int k = 0;
                while (k < 5 && (io[k] = hmm_io_ms(png, out, stl)) >= 0) k++;
                if (k == 5) {
                    const double io_ms = median3(io, k);
                    snprintf(name, sizeof name, "tin.%s.hmm.io_ms", wc[i].label), bench_record(name, io_ms, "ms", k, "median");
                    hmm += io_ms;
                }
            }
#endif
            snprintf(name, sizeof name, "tin.%s.hmm.whole_ms_estimated", wc[i].label), bench_record(name, hmm, "ms", 1, "value");
            snprintf(name, sizeof name, "tin.%s.whole_vs_hmm", wc[i].label), bench_record(name, whole / hmm, "x", n, "value");
        }
    }

    /* The tiled mode (128-sample tiles, stable borders) on one and two threads, in this process. */
    if (!quick && !whole_only) {
        terra_raster_desc d = {0};
        char p[1024];
        snprintf(p, sizeof p, "%s/data/dem/sthelens_10m.png", shared);
        d.path = p, d.z_scale = 0.1;
        if (terra_raster_read(&d, &r) == TERRA_OK) {
            const double levels[3] = {20, 5, 1};
            double ms[2] = {0, 0};
            for (int th = 1; th <= 2; th++) {
                terra_tin_tiles_desc td = {r.width, r.height, r.heights, 128, levels, 3, th, NULL};
                terra_tin_tiles T;
                double t0 = bench_now(), c0 = cpu_now();
                if (terra_tin_tiles_build(&td, &T) != TERRA_OK) break;
                ms[th - 1] = (bench_now() - t0) * 1e3;
                double cpu = (cpu_now() - c0) * 1e3;
                char cname[128];
                /* CPU time of the process: with idle cores the wall time of 2 threads is about half of it. */
                snprintf(cname, sizeof cname, "tin.sthelens_tiles128_20-5-1m.threads%d.cpu_ms", th);
                bench_record(cname, cpu, "ms", 1, "value");
                size_t tris = 0;
                for (int i = 0; i < T.tiles_x * T.tiles_y; i++) tris += T.tiles[i].mesh.levels[2].triangle_count;
                char name[128];
                snprintf(name, sizeof name, "tin.sthelens_tiles128_20-5-1m.threads%d.ms", th);
                bench_record(name, ms[th - 1], "ms", 1, "value");
                if (th == 1) {
                    snprintf(name, sizeof name, "tin.sthelens_tiles128_20-5-1m.triangles_1m");
                    bench_record(name, (double)tris, "count", 1, "value");
                }
                terra_tin_tiles_free(&T);
            }
            if (ms[0] > 0 && ms[1] > 0) bench_record("tin.sthelens_tiles128_20-5-1m.speedup_2_threads", ms[0] / ms[1], "x", 1, "value");
            terra_raster_free(&r);
        }
    }
    return 0;
}
