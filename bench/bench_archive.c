/* archive: lookup cost in an archive of 1 M tiles (cold: open + first tile; warm: random keys),
 * index bytes per tile, what terra serve does before it listens (open, z/x/y map, layer.json) on
 * 1 M tiles (one level, and a pyramid), layer.json of 160 k scattered tiles, the size of a baked
 * archive against the raw 16-bit raster, and the archive source's sampling throughput on 1 and 2
 * threads (the streamer's requests over the whole archive, and over a corner its cache holds). */
#include "bench.h"
#include "terra/archive_io.h"
#include "terra/archive_mesh.h"
#include "terra/bake.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* ---- the archive source on threads ---------------------------------------------------------- */

typedef struct sample_job {
    const terra_source *src;
    const terra_grid_request *req;
    int count, first, step; /* requests first, first + step, ... below count */
    int failed;
} sample_job;

static void *sample_requests(void *arg) {
    sample_job *j = arg;
    const int w = j->req[0].nx;
    float *h = malloc((size_t)w * (size_t)w * sizeof *h);
    terra_surface *s = malloc((size_t)w * (size_t)w);
    for (int r = j->first; h && s && r < j->count; r += j->step)
        j->failed |= terra_source_sample(j->src, &j->req[r], h, s) != TERRA_OK;
    j->failed |= !h || !s;
    free(h), free(s);
    return NULL;
}

/* What two threads of plain arithmetic get done against one (2 on two free cores): the ceiling
 * for the source's ratio on this machine at this time, which on a shared or throttled one is less. */
static void *spin(void *arg) {
    volatile unsigned long long *x = arg; /* each thread its own, kept: the loop cannot be dropped */
    unsigned long long v = *x;
    for (int i = 0; i < 50000000; i++) v ^= v << 13, v ^= v >> 7, v ^= v << 17;
    *x = v;
    return NULL;
}
static double cpu_ratio(void) {
    enum { RUNS = 5 };
    double t1[RUNS], t2[RUNS];
    for (int r = 0; r < RUNS; r++) {
        unsigned long long x[2 * 8] = {1, [8] = 2}; /* a cache line apart */
        double a = bench_now();
        spin(&x[0]);
        t1[r] = bench_now() - a;
        pthread_t th[2];
        a = bench_now();
        for (int i = 0; i < 2; i++)
            if (pthread_create(&th[i], NULL, spin, &x[8 * i]) != 0) return -1;
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        t2[r] = bench_now() - a;
    }
    return 2 * bench_median(t1, RUNS) / bench_median(t2, RUNS);
}

/* Samples per second (heights and surfaces) of `count` requests shared among `threads` threads on a
 * fresh source (cold cache): the median of RUNS. -1 on a failure. */
static double source_rate(const char *path, const terra_grid_request *req, int count, int threads) {
    enum { RUNS = 7, MAX_THREADS = 2 };
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        terra_source *src;
        if (terra_archive_source_create(path, &src, NULL) != TERRA_OK) return -1;
        sample_job jobs[MAX_THREADS];
        pthread_t th[MAX_THREADS];
        const double a = bench_now();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (sample_job){src, req, count, i, threads, 0};
            if (pthread_create(&th[i], NULL, sample_requests, &jobs[i]) != 0) return -1;
        }
        int failed = 0;
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL), failed |= jobs[i].failed;
        t[r] = bench_now() - a;
        terra_source_destroy(src);
        if (failed) return -1;
    }
    return (double)count * req[0].nx * req[0].nz / bench_median(t, RUNS);
}

/* The streamer's requests (terra_grid_build's: the tile's n + 5 samples a side, surfaces too) for
 * the tiles of a baked archive. stream: every tile of every level once, in a random order, ten times
 * as many tiles as the source caches; warm: the level-0 and level-1 tiles of a 4 x 4 tile corner
 * (about 50 tiles with their borders and home levels, all in the cache), 3000 at random. The figure is
 * the ratio of 2 threads' throughput to 1 thread's (2 is perfect on two free cores), beside what
 * plain arithmetic gets on this machine at the time (cpu_ceiling). */
static void source_threads(const char *path, const terra_bake_desc *bd) {
    const int n = bd->cells ? bd->cells : 32, w = n + 5;
    const double tile0 = bd->tile0_size ? bd->tile0_size : 64;
    int count = 0, cap = 0;
    terra_grid_request *req = NULL;
    for (int L = 0; L < bd->levels; L++) {
        const int side = (int)((bd->area[2] - bd->area[0]) / ldexp(tile0, L));
        for (int ty = 0; ty < side; ty++)
            for (int tx = 0; tx < side; tx++) {
                if (count == cap && !(req = realloc(req, (size_t)(cap = cap ? 2 * cap : 4096) * sizeof *req))) return;
                req[count++] = (terra_grid_request){.ix0 = (int64_t)tx * n - 2, .iz0 = (int64_t)ty * n - 2,
                                                    .spacing = ldexp(tile0 / n, L), .nx = w, .nz = w};
            }
    }
    unsigned long long seed = 7;
    for (int i = count - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int k = (int)((seed >> 33) % (unsigned long long)(i + 1));
        const terra_grid_request t = req[i];
        req[i] = req[k], req[k] = t;
    }
    bench_record("archive.source_threads_2_vs_1.cpu_ceiling", cpu_ratio(), "ratio", 5, "median of each");
    const double s1 = source_rate(path, req, count, 1), s2 = source_rate(path, req, count, 2);
    printf("  archive source, %d tile requests of %d x %d over all %d levels: %.2f M samples/s on 1 thread, %.2f M on 2\n",
           count, w, w, bd->levels, s1 / 1e6, s2 / 1e6);
    bench_record("archive.source_samples_per_s.stream_1_thread", s1, "1/s", 7, "median");
    bench_record("archive.source_threads_2_vs_1.stream", s2 / s1, "ratio", 7, "median of each");
    /* the 20 tiles of the corner, drawn at random 3000 times (cap >= 4096) */
    const int total = 3000;
    for (int i = 0; i < total; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int k = (int)((seed >> 33) % 20), L = k < 16 ? 0 : 1, t = k < 16 ? k : k - 16;
        req[i] = (terra_grid_request){.ix0 = (int64_t)(t % (4 >> L)) * n - 2, .iz0 = (int64_t)(t / (4 >> L)) * n - 2,
                                      .spacing = ldexp(tile0 / n, L), .nx = w, .nz = w};
    }
    const double w1 = source_rate(path, req, total, 1), w2 = source_rate(path, req, total, 2);
    printf("  archive source, %d requests over a 4 x 4 tile corner (cached): %.2f M samples/s on 1 thread, %.2f M on 2\n",
           total, w1 / 1e6, w2 / 1e6);
    bench_record("archive.source_samples_per_s.warm_1_thread", w1, "1/s", 7, "median");
    bench_record("archive.source_threads_2_vs_1.warm", w2 / w1, "ratio", 7, "median of each");
    free(req);
}

/* Median of 3: open with pread (as terra serve does), the z/x/y map, layer.json. */
/* ---- heights from an archive's own tiles (archive_mesh.h) --------------------------------------
 * Point queries as physics asks them: random points in the corner a few tiles cover (the point
 * cache holds 8 finest tiles; warm), ns per query, median of runs. */
static void mesh_heights(const char *path) {
    terra_archive_mesh *m;
    if (terra_archive_mesh_open(path, NULL, &m, NULL) != TERRA_OK) {
        fprintf(stderr, "bench_archive: %s\n", terra_last_error());
        exit(1);
    }
    const terra_source *src = terra_archive_mesh_source(m);
    enum { N = 200000, RUNS_H = 7 };
    double ns[RUNS_H], sink = 0;
    unsigned long long rng = 5;
    for (int r = 0; r < RUNS_H; r++) {
        const double t0 = bench_now();
        for (int i = 0; i < N; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            const double x = 128.0 * (double)(rng >> 40) / 16777216.0, z = 128.0 * (double)((rng >> 16) & 0xffffff) / 16777216.0;
            float h = 0;
            terra_source_height(src, x, z, &h);
            sink += h;
        }
        ns[r] = (bench_now() - t0) * 1e9 / N;
    }
    printf("  heights from the archive's own tiles (2 x 2 finest tiles of 32 x 32 cells, warm): %.0f ns a point (sum %g)\n",
           bench_median(ns, RUNS_H), sink);
    bench_record("archive.mesh_height_ns.warm", bench_median(ns, RUNS_H), "ns", RUNS_H, "median");
    terra_archive_mesh_close(m);
}

static double serve_start(const char *path) {
    double t[3];
    terra_archive_open_desc od = {.use_pread = true};
    for (int r = 0; r < 3; r++) {
        double a = bench_now();
        terra_archive *ar;
        terra_tms_map map;
        char *layer = NULL;
        if (terra_archive_open(path, &od, &ar) != TERRA_OK) return -1;
        terra_status st = terra_archive_tms_map(ar, &map);
        if (st == TERRA_OK) st = terra_archive_layer_json(ar, &map, &layer);
        t[r] = st == TERRA_OK ? bench_now() - a : -1;
        terra_free(layer);
        terra_archive_close(ar);
    }
    return bench_median(t, 3);
}

int main(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/bench_archive_%ld.terra", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    /* 1 M tiles: a dense pyramid of levels 0..9 over 1024 x 1024 level-0 tiles would be 1.4 M; take
     * levels 0..9 of a 1000 x 1000 area, cut at 1 M, with small stored payloads. */
    const size_t N = 1000000;
    terra_archive_write_desc wd = {0};
    wd.frame = TERRA_FRAME_LOCAL;
    wd.compression = TERRA_COMPRESS_NONE;
    terra_archive_writer *w;
    if (terra_archive_writer_create(path, &wd, &w) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 1;
    }
    terra_tile_key *keys = malloc(N * sizeof *keys);
    size_t k = 0;
    uint8_t payload[24];
    for (int level = 0; level < 10 && k < N; level++) {
        int side = 1000 >> level;
        if (side < 1) side = 1;
        for (int y = 0; y < side && k < N; y++)
            for (int x = 0; x < side && k < N; x++) {
                keys[k] = terra_tile_key_make(0, level, x, y);
                memcpy(payload, &keys[k], 8);
                terra_archive_tile_info info = {(float)level, 1, 0, 1};
                terra_archive_writer_add_stored(w, keys[k], payload, sizeof payload, sizeof payload, TERRA_COMPRESS_NONE, &info);
                k++;
            }
    }
    double t0 = bench_now();
    if (terra_archive_writer_finish(w) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 1;
    }
    printf("  wrote %zu tiles in %.2f s (finish)\n", k, bench_now() - t0);

    /* cold: open, find and read the first tile (the page cache holds the file; the reader holds
     * nothing: what is measured is the work up to the first tile, without reading the index) */
    enum { RUNS = 15 };
    double cold[RUNS];
    unsigned long long seed = 1;
    for (int r = 0; r < RUNS; r++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        terra_tile_key key = keys[(seed >> 33) % k];
        double a = bench_now();
        terra_archive *ar;
        terra_archive_open(path, NULL, &ar);
        terra_archive_entry e;
        uint8_t buf[64];
        if (terra_archive_find(ar, key, &e) != TERRA_OK || terra_archive_read_stored(ar, &e, buf, sizeof buf) != TERRA_OK)
            return 1;
        cold[r] = (bench_now() - a) * 1e9;
        terra_archive_close(ar);
    }
    bench_record("archive.lookup_ns.cold", bench_median(cold, RUNS), "ns", RUNS, "median");

    terra_archive *ar;
    terra_archive_open(path, NULL, &ar);
    const terra_archive_info *I = terra_archive_get_info(ar);
    double warm[RUNS], warm_pread[RUNS];
    const int LOOK = 1 << 20;
    terra_tile_key *order = malloc(LOOK * sizeof *order);
    for (int i = 0; i < LOOK; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        order[i] = keys[(seed >> 33) % k];
    }
    for (int r = 0; r < RUNS; r++) {
        double a = bench_now();
        terra_archive_entry e;
        size_t found = 0;
        for (int i = 0; i < LOOK; i++) found += terra_archive_find(ar, order[i], &e) == TERRA_OK;
        warm[r] = (bench_now() - a) * 1e9 / LOOK;
        if (found != (size_t)LOOK) return 1;
    }
    bench_record("archive.lookup_ns.warm", bench_median(warm, RUNS), "ns", RUNS, "median");
    terra_archive_close(ar);
    terra_archive_open_desc od = {.use_pread = true};
    terra_archive_open(path, &od, &ar);
    for (int r = 0; r < 5; r++) {
        double a = bench_now();
        terra_archive_entry e;
        for (int i = 0; i < LOOK / 8; i++) terra_archive_find(ar, order[i], &e);
        warm_pread[r] = (bench_now() - a) * 1e9 / (LOOK / 8);
    }
    bench_record("archive.lookup_ns.warm_pread", bench_median(warm_pread, 5), "ns", 5, "median");
    double index_bytes = (double)(I->data_offset) / (double)I->tile_count;
    bench_record("archive.index_bytes_per_tile", index_bytes, "B", 1, "value");
    printf("  (PMTiles v3 directories: about 2.3 B per entry on a dense pyramid, run-length and delta coded,\n"
           "   no per-tile error or bounds; a plain fixed entry z,x,y,offset,length: 20-24 B)\n");
    terra_archive_close(ar);

    /* What terra serve does before it listens (and again when the file changes): open with pread,
     * the z/x/y map and layer.json. This archive is one level of 1 M tiles: every tile is on the
     * coarsest level, whose smallest x and y the map finds by a search (a scan read the index twice). */
    bench_record("archive.serve_start_s.1M_one_level", serve_start(path), "s", 3, "median");
    unlink(path);
    free(order);
    free(keys);

    /* the same over a pyramid of 1 M tiles: levels 0..9 of 866 x 866 level-0 tiles */
    if (terra_archive_writer_create(path, &wd, &w) != TERRA_OK) return 1;
    size_t pyramid = 0;
    for (int level = 0; level < 10; level++) {
        int side = (866 + (1 << level) - 1) >> level;
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++) {
                terra_tile_key key = terra_tile_key_make(0, level, x, y);
                terra_archive_tile_info info = {(float)level, 1, 0, 1};
                memcpy(payload, &key, 8);
                terra_archive_writer_add_stored(w, key, payload, sizeof payload, sizeof payload, TERRA_COMPRESS_NONE,
                                                &info);
                pyramid++;
            }
    }
    if (terra_archive_writer_finish(w) != TERRA_OK) return 1;
    printf("  pyramid of %zu tiles\n", pyramid);
    bench_record("archive.serve_start_s.1M_pyramid", serve_start(path), "s", 3, "median");
    unlink(path);

    /* layer.json of 160 k scattered tiles (a checkerboard: every tile its own rectangle), which
     * took 7-16 s while ranges were merged by searching every open rectangle */
    if (terra_archive_writer_create(path, &wd, &w) != TERRA_OK) return 1;
    for (int y = 0; y < 400; y++)
        for (int x = y & 1; x < 800; x += 2) {
            terra_tile_key key = terra_tile_key_make(0, 0, x, y);
            terra_archive_tile_info info = {0, 1, 0, 1};
            memcpy(payload, &key, 8);
            terra_archive_writer_add_stored(w, key, payload, sizeof payload, sizeof payload, TERRA_COMPRESS_NONE, &info);
        }
    if (terra_archive_writer_finish(w) != TERRA_OK) return 1;
    double scattered[3];
    for (int r = 0; r < 3; r++) {
        terra_tms_map map;
        char *layer = NULL;
        if (terra_archive_open(path, &od, &ar) != TERRA_OK || terra_archive_tms_map(ar, &map) != TERRA_OK) return 1;
        double a = bench_now();
        if (terra_archive_layer_json(ar, &map, &layer) != TERRA_OK) return 1;
        scattered[r] = bench_now() - a;
        terra_free(layer);
        terra_archive_close(ar);
    }
    bench_record("archive.layer_json_s.scattered_160k", bench_median(scattered, 3), "s", 3, "median");
    unlink(path);

    /* size against the raw 16-bit raster of the finest samples */
    terra_source *src;
    terra_world_desc wdd = {.seed = 1};
    if (terra_world_create(&wdd, &src) != TERRA_OK) return 1;
    const char *variants[2] = {"", ".plain"};
    for (int v = 0; v < 2; v++) {
        terra_bake_desc bd = {0};
        bd.area[2] = bd.area[3] = 2048;
        bd.levels = 6;
        bd.compression = TERRA_COMPRESS_ZSTD;
        bd.no_normals = bd.no_surfaces = v == 1;
        terra_bake_stats st;
        if (terra_bake(src, path, &bd, &st) != TERRA_OK) return 1;
        terra_archive_open(path, NULL, &ar);
        double bytes = (double)terra_archive_get_info(ar)->file_size;
        terra_archive_close(ar);
        double spacing = 64.0 / 32, side = 2048 / spacing + 1;
        double raw = side * side * 2;
        char name[64];
        snprintf(name, sizeof name, "archive.bytes_vs_raw%s", variants[v]);
        printf("  baked 2048 m x 2048 m, levels 0..5 (%llu tiles, %s): %.0f kB vs %.0f kB of 16-bit raster at %.0f m\n",
               (unsigned long long)st.tiles, v ? "heights only" : "normals + surfaces", bytes / 1e3, raw / 1e3, spacing);
        bench_record(name, bytes / raw, "ratio", 1, "value");
        if (v == 0) source_threads(path, &bd), mesh_heights(path);
    }
    terra_source_destroy(src);
    unlink(path);
    return 0;
}
