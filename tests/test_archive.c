/* archive: write, look up, read; keys and order; shared reader across threads; version refusal;
 * every byte flip and every truncation of a small archive rejected cleanly; interrupted writes; the
 * archive source sampled by several threads at once (also built again with a tiny cache). */
#define _DEFAULT_SOURCE /* mincore */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/bake.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* A payload that depends on the key, of varying length. */
static size_t payload_for(terra_tile_key k, uint8_t *buf, size_t cap) {
    unsigned long long s = k * 2654435761ull + 1;
    size_t n = 20 + (size_t)(test_rand_u64(&s) % 200);
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i % 7 == 0 ? test_rand_u64(&s) : i);
    return n;
}

static terra_tile_key key_i(int i) {
    /* levels 0..3, some negative coordinates, two faces */
    int level = i % 4;
    return terra_tile_key_make(i % 13 == 0 ? 1 : 0, level, (i * 7) % 11 - 5, (i * 3) % 9 - 4);
}

/* The first n distinct keys of the key_i pattern. */
static void distinct_keys(int n, terra_tile_key *out) {
    int got = 0;
    for (int i = 0; got < n; i++) {
        terra_tile_key k = key_i(i);
        bool dup = false;
        for (int j = 0; j < got; j++)
            if (out[j] == k) dup = true;
        if (!dup) out[got++] = k;
    }
}

static terra_status write_archive(const char *path, int n, terra_compression c) {
    terra_archive_write_desc d = {0};
    d.frame = TERRA_FRAME_LOCAL;
    d.compression = c;
    d.tile_size_m = 64;
    d.bounds[2] = d.bounds[3] = 1000;
    d.source_json = "{\"kind\":\"test\",\"seed\":1}";
    terra_archive_writer *w;
    terra_status st = terra_archive_writer_create(path, &d, &w);
    if (st) return st;
    uint8_t buf[512];
    terra_tile_key keys[256];
    distinct_keys(n, keys);
    for (int i = 0; i < n; i++) {
        size_t len = payload_for(keys[i], buf, sizeof buf);
        terra_archive_tile_info info = {(float)i, 2.0f * (float)i, -1.0f, (float)i};
        st = terra_archive_writer_add(w, keys[i], buf, len, &info);
        if (st) {
            terra_archive_writer_abort(w);
            return st;
        }
    }
    return terra_archive_writer_finish(w);
}

static void test_keys(void) {
    unsigned long long s = 3;
    for (int i = 0; i < 100000; i++) {
        int face = (int)(test_rand_u64(&s) % 8), level = (int)(test_rand_u64(&s) % 32);
        int32_t x = (int32_t)(test_rand_u64(&s) % (1u << 28)) - (1 << 27);
        int32_t y = (int32_t)(test_rand_u64(&s) % (1u << 28)) - (1 << 27);
        terra_tile_key k = terra_tile_key_make(face, level, x, y);
        CHECK(terra_archive_key_from_order(terra_archive_order(k)) == k, "order round trip %d %d %d %d", face, level, x, y);
    }
    /* face, then level, then Z-order: the four children of a quad are contiguous */
    CHECK(terra_archive_order(terra_tile_key_make(0, 5, 100, 100)) < terra_archive_order(terra_tile_key_make(0, 6, -9, -9)),
          "level order");
    CHECK(terra_archive_order(terra_tile_key_make(0, 31, 0, 0)) < terra_archive_order(terra_tile_key_make(1, 0, -9, -9)),
          "face order");
    uint64_t a = terra_archive_order(terra_tile_key_make(0, 2, -2, -2));
    uint64_t b = terra_archive_order(terra_tile_key_make(0, 2, -1, -1));
    CHECK(b - a == 3, "Z-order quad not contiguous (%llu)", (unsigned long long)(b - a));
    CHECK(terra_crc32c(0, "123456789", 9) == 0xE3069283u, "CRC-32C check value");
}

typedef struct reader_job {
    terra_archive *a;
    int n, bad;
} reader_job;

static void *reader_thread(void *p) {
    reader_job *j = p;
    uint8_t want[512];
    terra_tile_key keys[256];
    distinct_keys(j->n, keys);
    for (int rep = 0; rep < 20; rep++)
        for (int i = 0; i < j->n; i++) {
            terra_tile_key k = keys[i];
            uint8_t *raw;
            size_t n;
            if (terra_archive_read_tile(j->a, k, &raw, &n, NULL) != TERRA_OK) {
                j->bad++;
                continue;
            }
            size_t wn = payload_for(k, want, sizeof want);
            if (wn != n || memcmp(raw, want, n)) j->bad++;
            terra_free(raw);
        }
    return NULL;
}

static void test_write_read(void) {
    const terra_compression cs[3] = {TERRA_COMPRESS_GZIP, TERRA_COMPRESS_ZSTD, TERRA_COMPRESS_NONE};
    for (int c = 0; c < 3; c++) {
        char path[512];
        path_in(path, sizeof path, "rw.terra");
        CHECK(write_archive(path, 60, cs[c]) == TERRA_OK, "write: %s", terra_last_error());
        for (int mode = 0; mode < 2; mode++) {
            terra_archive_open_desc od = {.use_pread = mode == 1};
            terra_archive *a;
            terra_status st = terra_archive_open(path, &od, &a);
            CHECK(st == TERRA_OK, "open: %s", terra_last_error());
            if (st) continue;
            const terra_archive_info *I = terra_archive_get_info(a);
            CHECK(I->tile_count == 60 && I->frame == TERRA_FRAME_LOCAL && I->version == TERRA_ARCHIVE_VERSION, "info");
            CHECK(strstr(I->metadata, "\"source\":{\"kind\":\"test\"") != NULL, "metadata: %s", I->metadata);
            uint64_t bad = 99;
            CHECK(terra_archive_verify(a, &bad) == TERRA_OK && bad == 0, "verify: %s", terra_last_error());
            int found = 0;
            terra_tile_key keys[60];
            distinct_keys(60, keys);
            for (int i = 0; i < 60; i++) {
                terra_tile_key k = keys[i];
                terra_archive_entry e;
                terra_status fs = terra_archive_find(a, k, &e);
                CHECK(fs == TERRA_OK, "find: %s", terra_last_error());
                if (fs) continue;
                CHECK(e.key == k && e.compression == cs[c], "entry key/compression");
                CHECK(e.geometric_error == (float)i && e.longest_edge == 2.0f * (float)i, "entry values");
                found++;
            }
            CHECK(found == 60, "found %d of 60", found);
            terra_archive_entry e;
            CHECK(terra_archive_find(a, terra_tile_key_make(0, 9, 9, 9), &e) == TERRA_E_NOT_FOUND, "absent tile");
            /* entries sorted, each readable */
            uint64_t prev = 0;
            for (uint64_t i = 0; i < I->tile_count; i++) {
                CHECK(terra_archive_entry_at(a, i, &e) == TERRA_OK, "entry_at");
                uint64_t o = terra_archive_order(e.key);
                CHECK(i == 0 || o > prev, "index not sorted");
                prev = o;
            }
            /* one reader shared by four threads */
            pthread_t th[4];
            reader_job jobs[4];
            for (int t = 0; t < 4; t++) {
                jobs[t] = (reader_job){a, 60, 0};
                pthread_create(&th[t], NULL, reader_thread, &jobs[t]);
            }
            int bad_reads = 0;
            for (int t = 0; t < 4; t++) {
                pthread_join(th[t], NULL);
                bad_reads += jobs[t].bad;
            }
            CHECK(bad_reads == 0, "%d bad reads through a shared reader", bad_reads);
            terra_archive_close(a);
        }
    }
}

/* Reads every tile of an archive through every path; returns the number of failures. */
static int exercise(const char *path, bool *opened) {
    terra_archive *a;
    *opened = false;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) return 1;
    *opened = true;
    int fails = 0;
    uint64_t bad = 0;
    if (terra_archive_verify(a, &bad) != TERRA_OK) fails++;
    const terra_archive_info *I = terra_archive_get_info(a);
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry e;
        if (terra_archive_entry_at(a, i, &e) != TERRA_OK) {
            fails++;
            continue;
        }
        uint8_t *raw;
        size_t n;
        if (terra_archive_read_entry(a, &e, &raw, &n) != TERRA_OK) fails++;
        else terra_free(raw);
        terra_archive_entry f;
        if (terra_archive_find(a, e.key, &f) != TERRA_OK) fails++;
    }
    for (int i = 0; i < 40; i++) {
        uint8_t *raw;
        size_t n;
        if (terra_archive_read_tile(a, key_i(i), &raw, &n, NULL) == TERRA_OK) terra_free(raw);
    }
    terra_archive_close(a);
    return fails;
}

static bool read_all(const char *path, uint8_t **data, size_t *n) {
    return terra_io_read_file(path, 1u << 24, data, n) == TERRA_OK;
}
static void write_all(const char *path, const uint8_t *d, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(d, 1, n, f);
    fclose(f);
}

static void test_corruption(void) {
    char path[512], bad_path[512];
    path_in(path, sizeof path, "small.terra");
    path_in(bad_path, sizeof bad_path, "damaged.terra");
    for (int c = 0; c < 2; c++) {
        CHECK(write_archive(path, 6, c ? TERRA_COMPRESS_ZSTD : TERRA_COMPRESS_GZIP) == TERRA_OK, "write: %s",
              terra_last_error());
        uint8_t *d;
        size_t n;
        if (!read_all(path, &d, &n)) return;
        bool opened;
        CHECK(exercise(path, &opened) == 0 && opened, "pristine archive fails");
        uint8_t *c2 = malloc(n);
        int undetected = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(c2, d, n);
            c2[i] ^= 0xff;
            write_all(bad_path, c2, n);
            if (exercise(bad_path, &opened) == 0) {
                undetected++;
                if (undetected < 5) fprintf(stderr, "byte %zu of %zu flipped: not detected\n", i, n);
            }
        }
        CHECK(undetected == 0, "%d of %zu byte flips went unnoticed", undetected, n);
        for (size_t len = 0; len < n; len++) {
            write_all(bad_path, d, len);
            terra_archive *a;
            terra_status st = terra_archive_open(bad_path, NULL, &a);
            CHECK(st == TERRA_E_CORRUPT || st == TERRA_E_FORMAT, "truncation to %zu: status %d", len, st);
            if (st == TERRA_OK) terra_archive_close(a);
        }
        /* bytes appended are noticed too */
        memcpy(c2, d, n);
        FILE *f = fopen(bad_path, "wb");
        fwrite(d, 1, n, f);
        fputc(0, f);
        fclose(f);
        CHECK(exercise(bad_path, &opened) != 0 && !opened, "appended byte accepted");
        free(c2);
        terra_free(d);
    }
    unlink(bad_path);
}

static void test_version_refused(void) {
    char path[512];
    path_in(path, sizeof path, "v.terra");
    CHECK(write_archive(path, 4, TERRA_COMPRESS_GZIP) == TERRA_OK, "write");
    uint8_t *d;
    size_t n;
    if (!read_all(path, &d, &n)) return;
    d[8] = 7; /* version 7 */
    write_all(path, d, n);
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_E_VERSION, "other version accepted");
    const char *msg = terra_last_error();
    CHECK(strstr(msg, "version 7") && strstr(msg, "version 1") && strstr(msg, "again"), "message: %s", msg);
    memcpy(d, "NOTTERRA", 8);
    write_all(path, d, n);
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_E_FORMAT, "bad magic accepted");
    terra_free(d);
}

static void test_interrupted_write(void) {
    char path[512];
    path_in(path, sizeof path, "keep.terra");
    CHECK(write_archive(path, 10, TERRA_COMPRESS_GZIP) == TERRA_OK, "write");
    uint8_t *before;
    size_t bn;
    if (!read_all(path, &before, &bn)) return;
    /* 1. aborted writer */
    terra_archive_write_desc d = {0};
    d.compression = TERRA_COMPRESS_GZIP;
    terra_archive_writer *w;
    CHECK(terra_archive_writer_create(path, &d, &w) == TERRA_OK, "create");
    uint8_t buf[64] = {1, 2, 3};
    terra_archive_writer_add(w, terra_tile_key_make(0, 0, 0, 0), buf, sizeof buf, NULL);
    terra_archive_writer_abort(w);
    /* 2. a failing finish (duplicate keys) */
    CHECK(terra_archive_writer_create(path, &d, &w) == TERRA_OK, "create");
    terra_archive_writer_add(w, terra_tile_key_make(0, 0, 0, 0), buf, sizeof buf, NULL);
    terra_archive_writer_add(w, terra_tile_key_make(0, 0, 0, 0), buf, sizeof buf, NULL);
    CHECK(terra_archive_writer_finish(w) == TERRA_E_INVALID, "duplicate keys accepted");
    /* 3. a process killed while writing */
    pid_t pid = fork();
    if (pid == 0) {
        terra_archive_writer *cw;
        if (terra_archive_writer_create(path, &d, &cw) == TERRA_OK)
            for (int i = 0; i < 1000; i++) terra_archive_writer_add(cw, terra_tile_key_make(0, 1, i, 0), buf, sizeof buf, NULL);
        _exit(3); /* dies before finish */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "child");
    uint8_t *after;
    size_t an;
    CHECK(read_all(path, &after, &an) && an == bn && !memcmp(before, after, bn), "earlier archive changed");
    terra_free(after);
    /* no temporary files left by the clean failures */
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s.tmp*", path);
    glob_t g;
    CHECK(glob(pattern, 0, NULL, &g) == GLOB_NOMATCH, "temporary file left behind");
    globfree(&g);
    /* 4. a successful rewrite replaces it */
    CHECK(write_archive(path, 3, TERRA_COMPRESS_ZSTD) == TERRA_OK, "rewrite");
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK && terra_archive_get_info(a)->tile_count == 3, "rewritten");
    terra_archive_close(a);
    terra_free(before);
}

static void test_compression(void) {
    uint8_t src[5000];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * i % 251);
    for (int c = 0; c < 3; c++) {
        uint8_t *z, *back;
        size_t zn, bn;
        CHECK(terra_compress((terra_compression)c, 0, src, sizeof src, &z, &zn) == TERRA_OK, "compress %d", c);
        CHECK(terra_decompress((terra_compression)c, z, zn, sizeof src, &back, &bn) == TERRA_OK && bn == sizeof src &&
                  !memcmp(back, src, bn),
              "decompress %d", c);
        terra_free(back);
        CHECK(terra_decompress((terra_compression)c, z, zn, 100, &back, &bn) == TERRA_E_CAPACITY, "bomb guard %d", c);
        if (c) {
            for (size_t len = 0; len < zn; len += 3)
                if (terra_decompress((terra_compression)c, z, len, sizeof src, &back, &bn) == TERRA_OK) {
                    CHECK(false, "truncated %s stream of %zu accepted", c == 1 ? "gzip" : "zstd", len);
                    terra_free(back);
                }
        }
        terra_free(z);
    }
}

/* A tile of zero bytes is legal (found by fuzzing: verify once passed NULL to memcpy). */
static void test_empty_tile(void) {
    char path[512];
    path_in(path, sizeof path, "empty.terra");
    terra_archive_write_desc d = {0};
    terra_archive_writer *w;
    CHECK(terra_archive_writer_create(path, &d, &w) == TERRA_OK, "create");
    CHECK(terra_archive_writer_add(w, terra_tile_key_make(0, 0, 0, 0), "", 0, NULL) == TERRA_OK, "add");
    CHECK(terra_archive_writer_finish(w) == TERRA_OK, "finish: %s", terra_last_error());
    for (int mode = 0; mode < 2; mode++) {
        terra_archive_open_desc od = {.use_pread = mode};
        terra_archive *a;
        CHECK(terra_archive_open(path, &od, &a) == TERRA_OK, "open");
        uint64_t bad = 1;
        CHECK(terra_archive_verify(a, &bad) == TERRA_OK && bad == 0, "verify: %s", terra_last_error());
        uint8_t *raw;
        size_t n = 9;
        CHECK(terra_archive_read_tile(a, terra_tile_key_make(0, 0, 0, 0), &raw, &n, NULL) == TERRA_OK && n == 0, "read");
        terra_free(raw);
        terra_archive_close(a);
    }
}

/* Pages of [off, off+len) of the file that are in the page cache. */
static size_t resident_pages(const uint8_t *map, size_t size, size_t off, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), first = off / page, last = (off + len + page - 1) / page;
    size_t n = (size + page - 1) / page;
    unsigned char *vec = malloc(n);
    size_t count = 0;
    if (mincore((void *)map, size, vec) == 0)
        for (size_t i = first; i < last && i < n; i++) count += vec[i] & 1;
    free(vec);
    return count;
}

/* Finding and reading one tile of a large archive brings in the header and a logarithmic number
 * of index pages, not the index. Measured through the page cache: the file is evicted first. */
static void test_lookup_reads_little(void) {
    char path[512];
    path_in(path, sizeof path, "big.terra");
    terra_archive_write_desc d = {0};
    terra_archive_writer *w;
    CHECK(terra_archive_writer_create(path, &d, &w) == TERRA_OK, "create");
    const int side = 400; /* 160 000 tiles, a 7.7 MB index */
    uint8_t payload[16] = {0};
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++) terra_archive_writer_add(w, terra_tile_key_make(0, 3, x, y), payload, sizeof payload, NULL);
    CHECK(terra_archive_writer_finish(w) == TERRA_OK, "finish: %s", terra_last_error());
    int fd = open(path, O_RDONLY);
    struct stat sb;
    fstat(fd, &sb);
    size_t size = (size_t)sb.st_size;
    uint8_t *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED, "mmap");
    if (map == MAP_FAILED) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t index_off = 64, index_len = (size_t)side * side * TERRA_ARCHIVE_ENTRY_SIZE;
    size_t index_pages = index_len / (size_t)sysconf(_SC_PAGESIZE);
    size_t before = resident_pages(map, size, 0, size);
    if (before > index_pages / 20) {
        printf("     (skipped: the page cache would not drop the file, %zu pages stay)\n", before);
    } else {
        for (int mode = 0; mode < 2; mode++) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            terra_archive_open_desc od = {.use_pread = mode == 1};
            terra_archive *a;
            CHECK(terra_archive_open(path, &od, &a) == TERRA_OK, "open");
            terra_archive_entry e;
            uint8_t buf[64];
            CHECK(terra_archive_find(a, terra_tile_key_make(0, 3, 123, 321), &e) == TERRA_OK, "find");
            CHECK(terra_archive_read_stored(a, &e, buf, sizeof buf) == TERRA_OK, "read");
            size_t touched = resident_pages(map, size, index_off, index_len);
            /* 18 probes; pread mode may get a little read-ahead per probe */
            CHECK(touched <= (mode ? 160u : 40u), "%s: %zu of %zu index pages read for one tile", mode ? "pread" : "mmap",
                  touched, index_pages);
            printf("     %s: one lookup read %zu of %zu index pages\n", mode ? "pread" : "mmap", touched, index_pages);
            terra_archive_close(a);
        }
    }
    munmap(map, size);
    close(fd);
    unlink(path);
}

/* ---- the archive source on several threads at once -------------------------------------------- */

/* The archive source built once more, under another name, with a cache of 4 tiles and 2 held per
 * call: every path of the cache (eviction on insertion and on release, two threads decoding the
 * same tile, a call letting go of its tiles midway, the table past its bound while every tile in
 * it is held) runs all the time. */
#define CACHE_TILES 4
#define CALL_HOLDS 2
#define terra_archive_source_create tiny_cache_source_create
terra_status tiny_cache_source_create(const char *path, terra_source **out, terra_archive_source_info *info);
#include "../io/archive_source.c"
#undef terra_archive_source_create

#define SRC_REQUESTS 96
#define SRC_POINTS 64
#define SRC_THREADS 4
typedef struct src_case {
    terra_grid_request req[SRC_REQUESTS];
    float *heights[SRC_REQUESTS];
    terra_surface *surfaces[SRC_REQUESTS]; /* NULL: the request asks for heights only */
    double px[SRC_POINTS], pz[SRC_POINTS]; /* terra_source_height points */
    float py[SRC_POINTS];
} src_case;
typedef struct src_job {
    const terra_source *src;
    const src_case *c;
    unsigned long long seed;
    int rounds;
    long answers, mismatches;
} src_job;

/* Every request and point in an order of the thread's own, `rounds` times over; each answer against
 * the single-threaded one, bit for bit. */
static void *sample_many(void *arg) {
    src_job *j = arg;
    const src_case *c = j->c;
    float *h = malloc(100 * 100 * sizeof *h);
    terra_surface *s = malloc(100 * 100);
    int order[SRC_REQUESTS];
    for (int r = 0; r < SRC_REQUESTS; r++) order[r] = r;
    for (int round = 0; round < j->rounds && h && s; round++) {
        for (int r = SRC_REQUESTS - 1; r > 0; r--) {
            int k = (int)(test_rand_u64(&j->seed) % (unsigned)(r + 1)), t = order[r];
            order[r] = order[k], order[k] = t;
        }
        for (int o = 0; o < SRC_REQUESTS; o++) {
            const int r = order[o];
            const terra_grid_request *q = &c->req[r];
            const size_t n = (size_t)q->nx * (size_t)q->nz;
            j->answers++;
            if (terra_source_sample(j->src, q, h, c->surfaces[r] ? s : NULL) != TERRA_OK ||
                memcmp(h, c->heights[r], n * sizeof *h) != 0 || (c->surfaces[r] && memcmp(s, c->surfaces[r], n) != 0))
                j->mismatches++;
            const int p = (int)(test_rand_u64(&j->seed) % SRC_POINTS);
            float y;
            j->answers++;
            if (terra_source_height(j->src, c->px[p], c->pz[p], &y) != TERRA_OK || memcmp(&y, &c->py[p], sizeof y) != 0)
                j->mismatches++;
        }
    }
    if (!h || !s) j->mismatches++;
    free(h), free(s);
    return NULL;
}

/* Several threads sample random grids (every level, some past the area's edge, some spanning more
 * tiles than a call holds) of one archive source at once, as the streamer's workers do, from a
 * cold cache: every answer is the one a single thread got, and ThreadSanitizer finds nothing.
 * Twice: the source as built, and with the tiny cache. */
static void test_archive_source_threads(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/src.terra", dir);
    terra_source *world, *src;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 3}, &world) == TERRA_OK);
    /* 21 x 17 level-0 tiles of 16 cells, 4 levels: 498 tiles, four times what the cache holds */
    terra_bake_desc bd = {.levels = 4, .cells = 16, .tile0_size = 32, .area = {-40, 8, 600, 520}, .threads = 2,
                          .compression = TERRA_COMPRESS_ZSTD};
    CHECK(terra_bake(world, path, &bd, NULL) == TERRA_OK, "%s", terra_last_error());
    terra_archive_source_info info;
    CHECK(terra_archive_source_create(path, &src, &info) == TERRA_OK, "%s", terra_last_error());
    if (!src) return;
    static src_case c;
    unsigned long long rng = 5;
    const double s0 = info.grid.tile0_size / info.grid.cells;
    for (int r = 0; r < SRC_REQUESTS; r++) {
        const int L = (int)(test_rand_u64(&rng) % (unsigned)(info.levels + 1)); /* one past the coarsest too */
        const double sp = ldexp(s0, L);
        const int big = r % 16 == 0; /* 100 x 100: on level 0, 49 level-0 tiles and more above */
        const int nx = big ? 100 : 1 + (int)(test_rand_u64(&rng) % 40), nz = big ? 100 : 1 + (int)(test_rand_u64(&rng) % 40);
        const double x = test_rand_range(&rng, info.bounds[0] - 60, info.bounds[2] + 60);
        const double z = test_rand_range(&rng, info.bounds[1] - 60, info.bounds[3] + 60);
        c.req[r] = (terra_grid_request){.ix0 = (int64_t)floor(x / sp) - nx / 2, .iz0 = (int64_t)floor(z / sp) - nz / 2,
                                        .spacing = sp, .nx = nx, .nz = nz};
        c.heights[r] = malloc((size_t)nx * (size_t)nz * sizeof(float));
        c.surfaces[r] = r % 3 ? malloc((size_t)nx * (size_t)nz) : NULL;
        CHECK(terra_source_sample(src, &c.req[r], c.heights[r], c.surfaces[r]) == TERRA_OK, "%s", terra_last_error());
    }
    for (int p = 0; p < SRC_POINTS; p++) {
        c.px[p] = test_rand_range(&rng, info.bounds[0] - 20, info.bounds[2] + 20);
        c.pz[p] = test_rand_range(&rng, info.bounds[1] - 20, info.bounds[3] + 20);
        CHECK(terra_source_height(src, c.px[p], c.pz[p], &c.py[p]) == TERRA_OK, "%s", terra_last_error());
    }
    terra_source_destroy(src);
    for (int variant = 0; variant < 2; variant++) {
        /* a fresh source: the threads fill its cache together */
        terra_status st = variant ? tiny_cache_source_create(path, &src, NULL) : terra_archive_source_create(path, &src, NULL);
        CHECK(st == TERRA_OK, "%s", terra_last_error());
        if (st) continue;
        src_job jobs[SRC_THREADS];
        pthread_t t[SRC_THREADS];
        int started = 0;
        for (int i = 0; i < SRC_THREADS; i++) {
            jobs[started] = (src_job){.src = src, .c = &c, .seed = 11 + (unsigned long long)i, .rounds = variant ? 1 : 3};
            if (pthread_create(&t[started], NULL, sample_many, &jobs[started]) == 0) started++;
        }
        long answers = 0, mismatches = 0;
        for (int i = 0; i < started; i++) {
            pthread_join(t[i], NULL);
            answers += jobs[i].answers, mismatches += jobs[i].mismatches;
        }
        CHECK(mismatches == 0 && answers == SRC_THREADS * jobs[0].rounds * 2 * SRC_REQUESTS, "%s cache: %ld of %ld answers differ",
              variant ? "tiny" : "full", mismatches, answers);
        /* and again on one thread, the cache now full of what the threads left */
        jobs[0] = (src_job){.src = src, .c = &c, .seed = 99, .rounds = 1};
        sample_many(&jobs[0]);
        CHECK(jobs[0].mismatches == 0, "%s cache, afterwards: %ld answers differ", variant ? "tiny" : "full", jobs[0].mismatches);
        terra_source_destroy(src);
    }
    for (int r = 0; r < SRC_REQUESTS; r++) free(c.heights[r]), free(c.surfaces[r]);
    terra_source_destroy(world);
    unlink(path);
}

int main(void) {
    snprintf(dir, sizeof dir, "archive_test_%ld", (long)getpid());
    mkdir(dir, 0755);
    RUN(test_keys);
    RUN(test_compression);
    RUN(test_write_read);
    RUN(test_corruption);
    RUN(test_version_refused);
    RUN(test_interrupted_write);
    RUN(test_empty_tile);
    RUN(test_lookup_reads_little);
    RUN(test_archive_source_threads);
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
