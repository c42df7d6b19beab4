/* The cook's cache (terra/cook_cache.h): XXH64 against its published values and streamed over
 * files of every size around the read buffer; what makes an input agree (the hash decides, the
 * time alone does not; an absent named file matches while absent and stops matching once it
 * appears); option, order, grid and settings changes; damaged and truncated records and archives
 * ignored with a warning; and, over random rounds of edits to a small synthetic world cooked into
 * an archive by terra_archive_writer, the reuse decision of every tile: a changed input recooks
 * exactly the tiles it went into and their ancestors, and the archive after each partial cook holds
 * what a fresh cook would. */
#include "check.h"
#include "terra/cook_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n, "write %s", path);
    if (f) fclose(f);
}

static void write_random(const char *path, size_t n, unsigned long long *seed) {
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)test_rand_u64(seed);
    write_bytes(path, b, n);
    free(b);
}

static struct timespec mtime_of(const char *path) {
    struct stat st;
    memset(&st, 0, sizeof st);
    CHECK(stat(path, &st) == 0, "stat %s", path);
    return st.st_mtim;
}

static void set_mtime(const char *path, struct timespec t) {
    struct timespec times[2] = {t, t};
    CHECK(utimensat(AT_FDCWD, path, times, 0) == 0, "utimensat %s", path);
}

/* Moves a file's time by `seconds` (what touch does, without depending on the clock). */
static void touch_by(const char *path, long seconds) {
    struct timespec t = mtime_of(path);
    t.tv_sec += seconds;
    set_mtime(path, t);
}

static uint8_t *slurp(const char *path, size_t *n) {
    uint8_t *d = NULL;
    *n = 0;
    if (terra_io_read_file(path, (size_t)1 << 28, &d, n) != TERRA_OK) return NULL;
    return d;
}

static atomic_int warnings; /* terra_log is called from the cook's threads */
static void count_warnings(terra_log_level level, const char *message, void *user) {
    (void)message, (void)user;
    if (level >= TERRA_LOG_WARN) warnings++;
}

/* ---- XXH64 and the manifest -------------------------------------------------------------------- */

static void test_xxh64_values(void) {
    /* The published values (xxhsum -H64). */
    CHECK(terra_cook_xxh64("", 0, 0) == 0xef46db3751d8e999ull, "empty");
    CHECK(terra_cook_xxh64("a", 1, 0) == 0xd24ec4f1a98c6e5bull, "a");
    CHECK(terra_cook_xxh64("abc", 3, 0) == 0x44bc2cf5ad770999ull, "abc");
    /* Every length 0..200 hashes differently from its neighbours, and the seed matters. */
    uint8_t buf[256];
    unsigned long long s = 7;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)test_rand_u64(&s);
    for (size_t n = 1; n < 200; n++) {
        CHECK(terra_cook_xxh64(buf, n, 0) != terra_cook_xxh64(buf, n - 1, 0), "length %zu", n);
        CHECK(terra_cook_xxh64(buf, n, 0) != terra_cook_xxh64(buf, n, 1), "seed at %zu", n);
    }
}

/* The manifest's hash is XXH64 streamed through a 1 MiB buffer: it must equal the one-shot hash
 * for files of random sizes, many around the buffer's multiples. */
static void test_manifest_hash_streams(void) {
    unsigned long long seed = 11;
    terra_cook_manifest *m;
    CHECK(terra_cook_manifest_create("o", &m) == TERRA_OK, "create");
    const size_t mib = (size_t)1 << 20;
    for (int i = 0; i < 24; i++) {
        size_t n = i < 6   ? (size_t)test_rand_u64(&seed) % 100
                   : i < 18 ? (size_t)(1 + i % 3) * mib + (size_t)(test_rand_u64(&seed) % 65) - 32
                            : (size_t)(test_rand_u64(&seed) % (3 * mib));
        char path[512], name[32];
        snprintf(name, sizeof name, "h%d.bin", i);
        path_in(path, sizeof path, name);
        write_random(path, n, &seed);
        uint32_t idx = 99;
        CHECK(terra_cook_manifest_add_input(m, path, &idx) == TERRA_OK, "add %s: %s", path, terra_last_error());
        CHECK(idx == (uint32_t)i, "index %u", idx);
        size_t got;
        uint8_t *d = slurp(path, &got);
        const terra_cook_file *f = terra_cook_manifest_file(m, idx);
        CHECK(f && d && got == n && f->size == n && !f->absent && !f->named, "size %zu", n);
        CHECK(f && d && f->hash == terra_cook_xxh64(d, n, 0), "hash of %zu bytes", n);
        struct timespec t = mtime_of(path);
        CHECK(f && f->mtime_ns == (int64_t)t.tv_sec * 1000000000 + t.tv_nsec, "mtime");
        terra_free(d);
        unlink(path);
    }
    CHECK(terra_cook_manifest_count(m) == 24, "count");
    terra_cook_manifest_free(m);
}

static void test_manifest_rules(void) {
    terra_cook_manifest *m;
    CHECK(terra_cook_manifest_create(NULL, &m) == TERRA_E_INVALID, "no options");
    CHECK(terra_cook_manifest_create("max_error=1", &m) == TERRA_OK, "create");
    char a[512], missing[512], sub[512], spelled[600];
    path_in(a, sizeof a, "in.bin");
    path_in(missing, sizeof missing, "nowhere/tex.png");
    path_in(sub, sizeof sub, "subdir");
    write_bytes(a, "ground", 6);
    mkdir(sub, 0777);
    uint32_t ia, im, i2;
    CHECK(terra_cook_manifest_add_input(m, a, &ia) == TERRA_OK, "input");
    /* The same file spelled another way is the same file. */
    snprintf(spelled, sizeof spelled, "%s/./subdir/../in.bin", dir);
    CHECK(terra_cook_manifest_add_input(m, spelled, &i2) == TERRA_E_INVALID, "input given twice");
    CHECK(terra_cook_manifest_add_named(m, spelled, &i2) == TERRA_OK && i2 == ia, "named = an input: its number");
    CHECK(!strcmp(terra_cook_manifest_file(m, ia)->key, terra_cook_manifest_file(m, ia)->path), "key of a clean path");
    /* Absent named files are recorded; absent inputs are errors; directories are no inputs. */
    CHECK(terra_cook_manifest_add_named(m, missing, &im) == TERRA_OK, "absent named: %s", terra_last_error());
    const terra_cook_file *f = terra_cook_manifest_file(m, im);
    CHECK(f->absent && f->named && f->size == 0 && f->hash == 0, "recorded absent");
    CHECK(terra_cook_manifest_add_named(m, missing, &i2) == TERRA_OK && i2 == im, "named twice: one entry");
    CHECK(terra_cook_manifest_add_input(m, missing, NULL) == TERRA_E_INVALID, "named before, an input now");
    char gone[512];
    path_in(gone, sizeof gone, "gone.hgt");
    CHECK(terra_cook_manifest_add_input(m, gone, NULL) == TERRA_E_NOT_FOUND, "absent input");
    CHECK(strstr(terra_last_error(), "gone.hgt") != NULL, "names the file: %s", terra_last_error());
    CHECK(terra_cook_manifest_add_input(m, sub, NULL) == TERRA_E_INVALID, "a directory as input");
    CHECK(terra_cook_manifest_add_input(m, "", NULL) == TERRA_E_INVALID, "empty name");
    CHECK(terra_cook_manifest_count(m) == 2, "count %u", terra_cook_manifest_count(m));
    /* Relative paths get the working directory's absolute key. */
    char cwd[512], want[700];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "cwd");
    CHECK(terra_cook_manifest_add_named(m, "x/../y/./z.png", &i2) == TERRA_OK, "relative");
    snprintf(want, sizeof want, "%s/y/z.png", strcmp(cwd, "/") ? cwd : "");
    CHECK(!strcmp(terra_cook_manifest_file(m, i2)->key, want), "key %s", terra_cook_manifest_file(m, i2)->key);
    CHECK(!strcmp(terra_cook_manifest_file(m, i2)->path, "x/../y/./z.png"), "path as given");
    terra_cook_manifest_free(m);
    unlink(a);
    rmdir(sub);
}

static void test_record_path(void) {
    char *p;
    CHECK(terra_cook_cache_record_path(NULL, "out/world.terra", &p) == TERRA_OK, "default");
    CHECK(!strcmp(p, "out/world.terra.cache/world.terra.record"), "%s", p);
    terra_free(p);
    CHECK(terra_cook_cache_record_path("/tmp/c", "world.terra", &p) == TERRA_OK, "given");
    CHECK(!strcmp(p, "/tmp/c/world.terra.record"), "%s", p);
    terra_free(p);
    CHECK(terra_cook_cache_record_path(NULL, "out/", &p) == TERRA_E_INVALID, "no file name");
    CHECK(terra_cook_cache_record_path("", "world.terra", &p) == TERRA_E_INVALID, "empty directory name");
}

/* ---- a small world cooked into an archive ------------------------------------------------------ */

/* Rasters cover rectangles of finest tiles; the scenery one too, and it names an MTL (present) and
 * a texture (absent at first). A tile's payload is a hash of its key, the options, the grid and
 * the content of every input in its set, so a tile reused when it should not have been shows. */
#define RASTERS 4
#define FILES (RASTERS + 3) /* rasters, scenery, mtl, texture */
#define LO (-4)
#define HI 4                /* finest tiles LO..HI-1 in x and y */
#define DEPTH 3

typedef struct world {
    char path[FILES][512];
    int rect[RASTERS + 1][4];  /* x0, y0, x1, y1 (exclusive) of the rasters and the scenery */
    char out[512];
    char options[64];
    char settings[64];
    double tile_units;
    uint64_t cooks;
} world;

static void world_make(world *w, unsigned long long *seed) {
    memset(w, 0, sizeof *w);
    static const char *names[FILES] = {"r0.hgt", "r1.hgt", "r2.hgt", "r3.hgt", "s.obj", "s.mtl", "grass.png"};
    for (int i = 0; i < FILES; i++) path_in(w->path[i], sizeof w->path[i], names[i]);
    for (int i = 0; i <= RASTERS; i++) {
        int x0 = LO + (int)(test_rand_u64(seed) % (HI - LO)), y0 = LO + (int)(test_rand_u64(seed) % (HI - LO));
        w->rect[i][0] = x0, w->rect[i][1] = y0;
        w->rect[i][2] = x0 + 1 + (int)(test_rand_u64(seed) % (unsigned)(HI - x0));
        w->rect[i][3] = y0 + 1 + (int)(test_rand_u64(seed) % (unsigned)(HI - y0));
    }
    for (int i = 0; i < FILES - 1; i++) write_random(w->path[i], 100 + (size_t)(test_rand_u64(seed) % 400), seed);
    unlink(w->path[FILES - 1]);
    path_in(w->out, sizeof w->out, "world.terra");
    snprintf(w->options, sizeof w->options, "max_error=1;levels=%d", DEPTH + 1);
    snprintf(w->settings, sizeof w->settings, "layers=grass");
    w->tile_units = 16;
}

static terra_cook_grid world_grid(const world *w) {
    terra_cook_grid g = {TERRA_FRAME_LOCAL, {0, 0}, {1, 1}, w->tile_units, DEPTH};
    return g;
}

static int32_t floor_div(int32_t v, int32_t d) { return v >= 0 ? v / d : -((-v + d - 1) / d); }

/* The inputs of tile (d, tx, ty) as a bit mask over the files, worked out by brute force over
 * the finest tiles under it (independently of the cache's own level-by-level union). */
static unsigned tile_mask(const world *w, int d, int32_t tx, int32_t ty) {
    unsigned mask = 0;
    for (int32_t fy = LO; fy < HI; fy++)
        for (int32_t fx = LO; fx < HI; fx++) {
            if (floor_div(fx, 1 << d) != tx || floor_div(fy, 1 << d) != ty) continue;
            for (int i = 0; i <= RASTERS; i++)
                if (fx >= w->rect[i][0] && fx < w->rect[i][2] && fy >= w->rect[i][1] && fy < w->rect[i][3])
                    mask |= i == RASTERS ? 7u << RASTERS : 1u << i;
        }
    return mask;
}

/* The tiles of the world: every (d, tx, ty) with a nonzero mask. */
static int world_tiles(const world *w, int (*t)[3], int cap) {
    int n = 0;
    for (int d = 0; d <= DEPTH; d++)
        for (int32_t ty = floor_div(LO, 1 << d); ty <= floor_div(HI - 1, 1 << d); ty++)
            for (int32_t tx = floor_div(LO, 1 << d); tx <= floor_div(HI - 1, 1 << d); tx++)
                if (tile_mask(w, d, tx, ty) && n < cap) t[n][0] = d, t[n][1] = tx, t[n][2] = ty, n++;
    return n;
}

/* What a fresh cook puts in tile (d, tx, ty) now. */
static void tile_payload(const world *w, int d, int32_t tx, int32_t ty, uint64_t out[4]) {
    unsigned mask = tile_mask(w, d, tx, ty);
    uint64_t h = terra_cook_xxh64(w->options, strlen(w->options), (uint64_t)(d * 1000 + tx * 31 + ty));
    h ^= terra_cook_xxh64(&w->tile_units, sizeof w->tile_units, h);
    for (int i = 0; i < FILES; i++) {
        if (!(mask & 1u << i)) continue;
        size_t n;
        uint8_t *data = slurp(w->path[i], &n);
        h = data ? terra_cook_xxh64(data, n, h + (uint64_t)i) : h * 31 + 7; /* absent counts too */
        terra_free(data);
    }
    for (int k = 0; k < 4; k++) out[k] = h + (uint64_t)k * 0x9E3779B97F4A7C15ull;
}

/* Finest tile (tx, ty)'s mesh as a fresh cook makes it now: drawn from its payload, so it changes
 * with its inputs; normals and materials on some tiles only, some tiles with no triangle. */
static void finest_mesh(const world *w, int32_t tx, int32_t ty, terra_cook_mesh *m, double *error) {
    uint64_t p[4];
    tile_payload(w, 0, tx, ty, p);
    unsigned long long s = p[0];
    uint32_t vn = 3 + (uint32_t)(test_rand_u64(&s) % 60), tn = (uint32_t)(test_rand_u64(&s) % 50);
    bool normals = (tx + ty) & 1, materials = tx & 2;
    CHECK(terra_cook_mesh_reserve(m, vn, tn, normals, materials) == TERRA_OK, "reserve");
    for (uint32_t i = 0; i < vn; i++) {
        m->xy[2 * i] = test_rand_range(&s, -1e6, 1e6), m->xy[2 * i + 1] = test_rand_unit(&s);
        m->z[i] = (float)test_rand_range(&s, -400, 9000);
        for (int k = 0; normals && k < 3; k++) m->normal[3 * i + k] = (float)test_rand_unit(&s);
        if (materials) m->material[i] = (uint16_t)test_rand_u64(&s);
    }
    for (uint32_t i = 0; i < 3 * tn; i++) m->tri[i] = (uint32_t)(test_rand_u64(&s) % vn);
    m->vertex_count = vn, m->triangle_count = tn;
    *error = test_rand_unit(&s);
}

static bool mesh_equal(const terra_cook_mesh *a, const terra_cook_mesh *b) {
    size_t vn = a->vertex_count;
    return a->vertex_count == b->vertex_count && a->triangle_count == b->triangle_count &&
           !a->normal == !b->normal && !a->material == !b->material && !memcmp(a->xy, b->xy, vn * 16) &&
           !memcmp(a->z, b->z, vn * 4) && (!a->normal || !memcmp(a->normal, b->normal, vn * 12)) &&
           (!a->material || !memcmp(a->material, b->material, vn * 2)) &&
           !memcmp(a->tri, b->tri, (size_t)a->triangle_count * 12);
}

typedef struct cook_result {
    terra_cook_cache_outcome outcome;
    uint64_t reusable, total, copied;
    uint64_t loaded, stale_meshes, missing_meshes; /* finest meshes loaded; loaded but not fresh; reusable, not loaded */
    terra_cook_input_change change[FILES];
    int wrong;                   /* tiles whose reuse decision differed from `expect_recook` */
} cook_result;

/* The tiles of one cook, emitted by two threads (tile i by thread i % 2): reusable ones copied
 * from the previous archive, the others "cooked". */
typedef struct emit_job {
    const world *w;
    terra_cook_cache *c;
    terra_archive_writer *aw;
    const terra_cook_grid *g;
    const bool *expect_recook;
    bool fresh;
    int tiles[512][3];
    int nt;
    int wrong[2];
    uint64_t copied[2], loaded[2], stale_meshes[2], missing_meshes[2];
    terra_status st[2];
} emit_job;
typedef struct emit_part {
    emit_job *job;
    int t;
} emit_part;

static void *emit_tiles(void *arg) {
    emit_part *p = arg;
    emit_job *j = p->job;
    const world *w = j->w;
    for (int i = p->t; !j->st[p->t] && i < j->nt; i += 2) {
        const int *tile = j->tiles[i];
        terra_tile_key key = terra_cook_key(j->g, tile[0], tile[1], tile[2]);
        bool reusable = terra_cook_cache_reusable(j->c, key);
        if (tile[0] == 0) { /* make_finest: the kept mesh, else a fresh one; kept either way */
            terra_cook_mesh fresh = {0}, kept = {0};
            double fresh_error, kept_error = -1;
            finest_mesh(w, tile[1], tile[2], &fresh, &fresh_error);
            terra_status ls = terra_cook_cache_load_finest(j->c, tile[1], tile[2], &kept, &kept_error);
            j->loaded[p->t] += ls == TERRA_OK;
            j->stale_meshes[p->t] += ls == TERRA_OK && (!mesh_equal(&kept, &fresh) || kept_error != fresh_error);
            j->stale_meshes[p->t] += ls == TERRA_OK && !reusable;
            j->missing_meshes[p->t] += ls != TERRA_OK && reusable;
            terra_status ks = terra_cook_cache_keep_finest(j->c, tile[1], tile[2],
                                                           ls == TERRA_OK ? &kept : &fresh, ls == TERRA_OK ? kept_error : fresh_error);
            if (ks) j->st[p->t] = ks;
            terra_cook_mesh_free(&fresh);
            terra_cook_mesh_free(&kept);
        }
        if (j->expect_recook) {
            unsigned mask = tile_mask(w, tile[0], tile[1], tile[2]);
            bool touched = false;
            for (int k = 0; k < FILES; k++) touched = touched || ((mask & 1u << k) && j->expect_recook[k]);
            j->wrong[p->t] += reusable != (!j->fresh && !touched);
        } else {
            j->wrong[p->t] += reusable && j->fresh;
        }
        if (reusable) {
            j->st[p->t] = terra_cook_cache_copy_tile(j->c, key, j->aw);
            j->copied[p->t]++;
        } else {
            uint64_t pl[4];
            tile_payload(w, tile[0], tile[1], tile[2], pl);
            terra_archive_tile_info info = {1, 2, 0, 1};
            j->st[p->t] = terra_archive_writer_add(j->aw, key, pl, sizeof pl, &info);
        }
    }
    return NULL;
}

/* One cook of the world as the driver would run it (terra/cook_cache.h, steps 1..5).
 * expect_recook (may be NULL) says, per input, whether the test changed it since the last cook;
 * fresh: no tile should be reusable at all. */
static terra_status cook_world(world *w, const bool *expect_recook, bool fresh, cook_result *r) {
    memset(r, 0, sizeof *r);
    terra_cook_manifest *m;
    terra_status st = terra_cook_manifest_create(w->options, &m);
    for (int i = 0; !st && i < FILES; i++)
        st = i < FILES - 2 ? terra_cook_manifest_add_input(m, w->path[i], NULL) : terra_cook_manifest_add_named(m, w->path[i], NULL);
    terra_cook_cache *c = NULL;
    if (!st) st = terra_cook_cache_open(NULL, w->out, m, &c);
    if (st) {
        terra_cook_manifest_free(m);
        return st;
    }
    r->outcome = terra_cook_cache_get_outcome(c);
    for (int i = 0; i < FILES; i++) r->change[i] = terra_cook_cache_input_change(c, (uint32_t)i);
    if (r->outcome == TERRA_COOK_CACHE_UNCHANGED) {
        terra_cook_cache_close(c);
        terra_cook_manifest_free(m);
        return TERRA_OK;
    }
    terra_cook_grid g = world_grid(w);
    st = terra_cook_cache_begin(c, &g, w->settings);
    for (int32_t ty = LO; !st && ty < HI; ty++)
        for (int32_t tx = LO; !st && tx < HI; tx++) {
            unsigned mask = tile_mask(w, 0, tx, ty);
            uint32_t in[FILES + 1];
            size_t n = 0;
            for (int i = FILES - 1; i >= 0; i--) /* any order, a repeat too */
                if (mask & 1u << i) in[n++] = (uint32_t)i;
            if (n) in[n] = in[0], n++;
            if (mask) st = terra_cook_cache_set_finest(c, tx, ty, in, n);
        }
    if (!st) st = terra_cook_cache_plan(c, &r->reusable, &r->total);
    terra_archive_writer *aw = NULL;
    terra_archive_write_desc d = {0};
    d.frame = TERRA_FRAME_LOCAL;
    d.compression = TERRA_COMPRESS_GZIP;
    d.tile_size_m = w->tile_units;
    d.bounds[2] = d.bounds[3] = 64;
    if (!st) st = terra_archive_writer_create(w->out, &d, &aw);
    emit_job job = {w, c, aw, &g, expect_recook, fresh, {{0}}, 0, {0}, {0}, {0}, {0}, {0}, {TERRA_OK, TERRA_OK}};
    job.nt = world_tiles(w, job.tiles, 512);
    CHECK(st || r->total == (uint64_t)job.nt, "planned %llu tiles, the world has %d", (unsigned long long)r->total, job.nt);
    /* Two threads emit the tiles, as the pyramid's workers would. */
    pthread_t th[2];
    emit_part part[2] = {{&job, 0}, {&job, 1}};
    bool started[2] = {false, false};
    for (int t = 0; !st && t < 2; t++) started[t] = pthread_create(&th[t], NULL, emit_tiles, &part[t]) == 0;
    for (int t = 0; t < 2; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        r->wrong += job.wrong[t];
        r->copied += job.copied[t];
        r->loaded += job.loaded[t];
        r->stale_meshes += job.stale_meshes[t];
        r->missing_meshes += job.missing_meshes[t];
    }
    for (int t = 0; !st && t < 2; t++) st = started[t] ? job.st[t] : terra_fail(TERRA_E_INVALID, "no thread");
    CHECK(!r->stale_meshes, "%llu finest meshes loaded that a fresh cook would not make", (unsigned long long)r->stale_meshes);
    if (!st) {
        st = terra_archive_writer_finish(aw);
        aw = NULL;
    }
    if (aw) terra_archive_writer_abort(aw);
    if (!st) st = terra_cook_cache_commit(c);
    terra_cook_cache_close(c);
    terra_cook_manifest_free(m);
    w->cooks++;
    return st;
}

/* The archive holds exactly what a fresh cook of the world would. */
static bool archive_is_fresh(const world *w) {
    terra_archive *a;
    if (terra_archive_open(w->out, NULL, &a) != TERRA_OK) return false;
    terra_cook_grid g = world_grid(w);
    int tiles[512][3];
    int nt = world_tiles(w, tiles, 512);
    bool ok = terra_archive_get_info(a)->tile_count == (uint64_t)nt;
    for (int i = 0; ok && i < nt; i++) {
        uint8_t *raw = NULL;
        size_t n = 0;
        uint64_t p[4];
        tile_payload(w, tiles[i][0], tiles[i][1], tiles[i][2], p);
        ok = terra_archive_read_tile(a, terra_cook_key(&g, tiles[i][0], tiles[i][1], tiles[i][2]), &raw, &n, NULL) ==
                 TERRA_OK &&
             n == sizeof p && !memcmp(raw, p, n);
        terra_free(raw);
    }
    terra_archive_close(a);
    return ok;
}

/* The store of finest meshes beside the record (DIR/NAME.meshes). */
static void meshes_path(const world *w, char *buf, size_t n) { snprintf(buf, n, "%s.cache/world.terra.meshes", w->out); }

static void remove_cache(const world *w) {
    char *rec;
    if (terra_cook_cache_record_path(NULL, w->out, &rec) == TERRA_OK) unlink(rec);
    char d[600];
    meshes_path(w, d, sizeof d);
    unlink(d);
    snprintf(d, sizeof d, "%s.cache", w->out);
    CHECK(rmdir(d) == 0 || errno == ENOENT, "%s: only the record and the meshes", d);
    terra_free(rec);
}

static void world_remove(const world *w) {
    for (int i = 0; i < FILES; i++) unlink(w->path[i]);
    remove_cache(w);
    unlink(w->out);
}

/* Rewrites a file with other bytes of the same size and puts its old time back. */
static void rewrite_same_size(const char *path, unsigned long long *seed) {
    size_t n;
    uint8_t *d = slurp(path, &n);
    struct timespec t = mtime_of(path);
    for (size_t i = 0; d && i < n; i += 1 + (size_t)(test_rand_u64(seed) % 16)) d[i] ^= (uint8_t)(1 + test_rand_u64(seed) % 255);
    if (d) write_bytes(path, d, n);
    set_mtime(path, t);
    terra_free(d);
}

/* ---- what agrees ------------------------------------------------------------------------------- */

static void test_agreement(void) {
    unsigned long long seed = 3;
    world w;
    world_make(&w, &seed);
    cook_result r;
    bool none[FILES] = {0}, changed[FILES] = {0};
    /* First cook: nothing to reuse, nothing wrong. */
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK, "first cook: %s", terra_last_error());
    CHECK(r.outcome == TERRA_COOK_CACHE_FRESH && r.copied == 0 && !r.wrong, "fresh");
    CHECK(r.change[0] == TERRA_COOK_INPUT_NEW, "new");
    CHECK(archive_is_fresh(&w), "first archive");

    /* Unchanged: a no-op, the archive untouched (same bytes, same time), the texture still absent. */
    size_t n0, n1;
    uint8_t *before = slurp(w.out, &n0);
    struct timespec t0 = mtime_of(w.out);
    CHECK(cook_world(&w, none, false, &r) == TERRA_OK, "second cook");
    CHECK(r.outcome == TERRA_COOK_CACHE_UNCHANGED, "unchanged, the absent texture matching (outcome %d)", r.outcome);
    CHECK(r.change[FILES - 1] == TERRA_COOK_INPUT_SAME, "absent and absent agree");
    uint8_t *after = slurp(w.out, &n1);
    struct timespec t1 = mtime_of(w.out);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "same bytes");
    CHECK(t0.tv_sec == t1.tv_sec && t0.tv_nsec == t1.tv_nsec, "same time");
    terra_free(before);
    terra_free(after);

    /* Touched, content unchanged: agrees (the hash decides), reported as touched. */
    touch_by(w.path[1], 1000);
    CHECK(cook_world(&w, none, false, &r) == TERRA_OK, "touched cook");
    CHECK(r.outcome == TERRA_COOK_CACHE_UNCHANGED && r.change[1] == TERRA_COOK_INPUT_TOUCHED, "touched: %d %d",
          r.outcome, r.change[1]);

    /* Same size, other bytes, old time put back: changed; only its tiles and their ancestors. */
    rewrite_same_size(w.path[2], &seed);
    changed[2] = true;
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK, "rewritten cook: %s", terra_last_error());
    CHECK(r.outcome == TERRA_COOK_CACHE_CHANGED && r.change[2] == TERRA_COOK_INPUT_CHANGED, "changed");
    CHECK(r.change[1] == TERRA_COOK_INPUT_TOUCHED, "still touched: the no-op wrote no record");
    CHECK(!r.wrong && r.copied > 0 && r.copied < r.total, "partial: %llu of %llu copied, %d wrong",
          (unsigned long long)r.copied, (unsigned long long)r.total, r.wrong);
    CHECK(r.reusable == r.copied, "plan's count");
    CHECK(r.loaded > 0 && !r.missing_meshes, "finest meshes: %llu loaded, %llu reusable but not loaded",
          (unsigned long long)r.loaded, (unsigned long long)r.missing_meshes);
    CHECK(archive_is_fresh(&w), "partial archive = fresh");
    changed[2] = false;

    /* The absent texture appears: changed (appeared); once recorded present, removing it again is
     * a change (vanished), and absent again then matches. */
    write_bytes(w.path[FILES - 1], "png!", 4);
    changed[FILES - 1] = true;
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK, "appeared cook");
    CHECK(r.outcome == TERRA_COOK_CACHE_CHANGED && r.change[FILES - 1] == TERRA_COOK_INPUT_APPEARED, "appeared");
    CHECK(!r.wrong && archive_is_fresh(&w), "appeared: %d wrong", r.wrong);
    unlink(w.path[FILES - 1]);
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK, "vanished cook");
    CHECK(r.outcome == TERRA_COOK_CACHE_CHANGED && r.change[FILES - 1] == TERRA_COOK_INPUT_VANISHED, "vanished");
    CHECK(!r.wrong && archive_is_fresh(&w), "vanished: %d wrong", r.wrong);
    CHECK(cook_world(&w, none, false, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_UNCHANGED, "absent again agrees");
    changed[FILES - 1] = false;

    /* Options: afresh. */
    snprintf(w.options, sizeof w.options, "max_error=2;levels=%d", DEPTH + 1);
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_FRESH && !r.wrong && !r.copied,
          "options changed");
    CHECK(archive_is_fresh(&w), "after options");

    /* A grid or settings other than the record's: nothing reusable, even where inputs agree. */
    rewrite_same_size(w.path[0], &seed);
    w.tile_units = 32;
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_CHANGED, "grid changed");
    CHECK(!r.wrong && r.copied == 0 && archive_is_fresh(&w), "grid: %llu copied", (unsigned long long)r.copied);
    rewrite_same_size(w.path[0], &seed);
    snprintf(w.settings, sizeof w.settings, "layers=grass,rock");
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_CHANGED, "settings changed");
    CHECK(!r.wrong && r.copied == 0 && archive_is_fresh(&w), "settings: %llu copied", (unsigned long long)r.copied);

    /* The inputs in another order: afresh (where inputs overlap, the order may decide). */
    char tmp[512];
    memcpy(tmp, w.path[0], sizeof tmp);
    memcpy(w.path[0], w.path[1], sizeof tmp);
    memcpy(w.path[1], tmp, sizeof tmp);
    int rect[4];
    memcpy(rect, w.rect[0], sizeof rect);
    memcpy(w.rect[0], w.rect[1], sizeof rect);
    memcpy(w.rect[1], rect, sizeof rect);
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_FRESH && !r.wrong, "reordered");
    CHECK(archive_is_fresh(&w), "after reorder");

    /* No archive where the record says: afresh, quietly. */
    unlink(w.out);
    warnings = 0;
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_FRESH && !r.wrong, "no archive");
    CHECK(warnings == 0, "no warning for a missing archive");
    world_remove(&w);
}

/* ---- damage ------------------------------------------------------------------------------------ */

static void test_damaged_record(void) {
    unsigned long long seed = 5;
    world w;
    world_make(&w, &seed);
    cook_result r;
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK, "cook");
    char *rec;
    CHECK(terra_cook_cache_record_path(NULL, w.out, &rec) == TERRA_OK, "path");
    size_t n;
    uint8_t *good = slurp(rec, &n);
    CHECK(good && n > 100, "record of %zu bytes", n);
    if (!good) return;
    terra_cook_manifest *m;
    CHECK(terra_cook_manifest_create(w.options, &m) == TERRA_OK, "manifest");
    for (int i = 0; i < FILES; i++)
        CHECK((i < FILES - 2 ? terra_cook_manifest_add_input(m, w.path[i], NULL) : terra_cook_manifest_add_named(m, w.path[i], NULL)) == TERRA_OK,
              "add");
    /* Every truncation and many byte flips: ignored with one warning each, never trusted. */
    uint8_t *bad = malloc(n);
    int trials = 0, wrong = 0, silent = 0;
    for (size_t cut = 0; cut < n; cut += 1 + cut / 8, trials++) {
        write_bytes(rec, good, cut);
        warnings = 0;
        terra_cook_cache *c = NULL;
        CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK, "open");
        wrong += c && terra_cook_cache_get_outcome(c) != TERRA_COOK_CACHE_FRESH;
        silent += warnings != 1;
        terra_cook_cache_close(c);
    }
    for (int k = 0; k < 300; k++, trials++) {
        memcpy(bad, good, n);
        size_t at = (size_t)(test_rand_u64(&seed) % n);
        bad[at] ^= (uint8_t)(1u << (test_rand_u64(&seed) % 8));
        write_bytes(rec, bad, n);
        warnings = 0;
        terra_cook_cache *c = NULL;
        CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK, "open");
        wrong += c && terra_cook_cache_get_outcome(c) != TERRA_COOK_CACHE_FRESH;
        silent += warnings != 1;
        if (c && k == 0) CHECK(strstr(terra_cook_cache_reason(c), "record") != NULL, "%s", terra_cook_cache_reason(c));
        terra_cook_cache_close(c);
    }
    CHECK(!wrong && !silent, "%d of %d damaged records trusted, %d without one warning", wrong, trials, silent);
    /* The good record again: up to date. */
    write_bytes(rec, good, n);
    terra_cook_cache *c = NULL;
    CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK &&
              terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_UNCHANGED,
          "restored: %s", c ? terra_cook_cache_reason(c) : "");
    terra_cook_cache_close(c);

    /* A damaged archive (a payload byte flipped) fails terra_archive_verify: afresh, with a warning. */
    size_t an;
    uint8_t *arch = slurp(w.out, &an);
    CHECK(arch && an > 200, "archive");
    if (arch) {
        arch[an - 5] ^= 0x10;
        write_bytes(w.out, arch, an);
        warnings = 0;
        CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK &&
                  terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_FRESH && warnings == 1,
              "damaged archive: %s", c ? terra_cook_cache_reason(c) : "");
        terra_cook_cache_close(c);
        terra_free(arch);
    }
    /* Another good archive in its place: not the one recorded. */
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_FRESH, "recook");
    arch = slurp(w.out, &an);
    {
        terra_archive_write_desc d = {0};
        d.frame = TERRA_FRAME_LOCAL;
        terra_archive_writer *aw;
        CHECK(terra_archive_writer_create(w.out, &d, &aw) == TERRA_OK, "other");
        terra_archive_tile_info info = {1, 2, 0, 1};
        CHECK(terra_archive_writer_add(aw, terra_tile_key_make(0, 0, 0, 0), "x", 1, &info) == TERRA_OK, "add");
        CHECK(terra_archive_writer_finish(aw) == TERRA_OK, "finish");
        warnings = 0;
        CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK &&
                  terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_FRESH && warnings == 1,
              "other archive: %s", c ? terra_cook_cache_reason(c) : "");
        terra_cook_cache_close(c);
    }
    /* The recorded archive back (a copy, with a new time): it is the one, content decides. */
    if (arch) write_bytes(w.out, arch, an);
    CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK &&
              terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_UNCHANGED,
          "copied back: %s", c ? terra_cook_cache_reason(c) : "");
    terra_cook_cache_close(c);
    terra_free(arch);
    free(bad);
    terra_free(good);
    terra_free(rec);
    terra_cook_manifest_free(m);
    world_remove(&w);
}

/* Misuse the driver could make: a tile written that was never planned, a copy of a tile that is
 * not reusable. The failed commit leaves no record. */
static void test_driver_mistakes(void) {
    unsigned long long seed = 9;
    world w;
    world_make(&w, &seed);
    cook_result r;
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK, "cook");
    rewrite_same_size(w.path[0], &seed);
    terra_cook_manifest *m;
    CHECK(terra_cook_manifest_create(w.options, &m) == TERRA_OK, "manifest");
    for (int i = 0; i < FILES; i++)
        CHECK((i < FILES - 2 ? terra_cook_manifest_add_input(m, w.path[i], NULL) : terra_cook_manifest_add_named(m, w.path[i], NULL)) == TERRA_OK,
              "add");
    terra_cook_cache *c;
    CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK, "open");
    CHECK(terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_CHANGED, "changed");
    CHECK(strstr(terra_cook_cache_reason(c), "r0.hgt (changed)") != NULL, "reason: %s", terra_cook_cache_reason(c));
    terra_cook_grid g = world_grid(&w);
    CHECK(terra_cook_cache_commit(c) == TERRA_E_INVALID, "commit before plan");
    CHECK(terra_cook_cache_begin(c, &g, w.settings) == TERRA_OK, "begin");
    uint32_t in[1] = {0}, outside[1] = {FILES};
    CHECK(terra_cook_cache_set_finest(c, 0, 0, outside, 1) == TERRA_E_INVALID, "input outside the manifest");
    CHECK(terra_cook_cache_set_finest(c, 0, 0, in, 1) == TERRA_OK, "finest");
    CHECK(terra_cook_cache_set_finest(c, 0, 0, in, 1) == TERRA_OK, "taken now, refused at plan");
    CHECK(terra_cook_cache_plan(c, NULL, NULL) == TERRA_E_INVALID, "a finest tile twice");
    terra_cook_cache_close(c);
    CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK, "open");
    CHECK(terra_cook_cache_begin(c, &g, w.settings) == TERRA_OK, "begin");
    CHECK(terra_cook_cache_set_finest(c, 0, 0, in, 1) == TERRA_OK, "finest");
    CHECK(terra_cook_cache_plan(c, NULL, NULL) == TERRA_OK, "plan");
    CHECK(!terra_cook_cache_reusable(c, terra_cook_key(&g, 0, 0, 0)), "input 0 changed: not reusable");
    terra_archive_write_desc d = {0};
    d.frame = TERRA_FRAME_LOCAL;
    terra_archive_writer *aw;
    CHECK(terra_archive_writer_create(w.out, &d, &aw) == TERRA_OK, "writer");
    CHECK(terra_cook_cache_copy_tile(c, terra_cook_key(&g, 0, 0, 0), aw) == TERRA_E_INVALID, "copy refused");
    terra_archive_tile_info info = {1, 2, 0, 1};
    CHECK(terra_archive_writer_add(aw, terra_cook_key(&g, 0, 5, 5), "x", 1, &info) == TERRA_OK, "add");
    CHECK(terra_archive_writer_finish(aw) == TERRA_OK, "finish");
    CHECK(terra_cook_cache_commit(c) == TERRA_E_INVALID, "unplanned tile");
    CHECK(strstr(terra_last_error(), "0/5/5") != NULL, "names the tile: %s", terra_last_error());
    terra_cook_cache_close(c);
    warnings = 0;
    CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK &&
              terra_cook_cache_get_outcome(c) == TERRA_COOK_CACHE_FRESH && warnings == 0,
          "no record after the failed commit: %s", c ? terra_cook_cache_reason(c) : "");
    terra_cook_cache_close(c);
    terra_cook_manifest_free(m);
    world_remove(&w);
}

/* The store of finest meshes: damaged blobs and a truncated store are not loaded (the tiles are
 * made afresh and the archive is still right), a cook that is not committed leaves no temporary,
 * and a tile kept twice is refused. */
static void test_kept_meshes(void) {
    unsigned long long seed = 13;
    world w;
    world_make(&w, &seed);
    cook_result r;
    CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK, "cook");
    char mp[600];
    meshes_path(&w, mp, sizeof mp);
    size_t n;
    uint8_t *store = slurp(mp, &n);
    CHECK(store && n > 1000, "a store of %zu bytes", n);
    if (!store) return;
    /* A byte flipped every 37: every blob damaged, each loaded one refused with a warning. */
    for (size_t i = 0; i < n; i += 37) store[i] ^= 0x40;
    write_bytes(mp, store, n);
    bool changed[FILES] = {0};
    rewrite_same_size(w.path[0], &seed);
    changed[0] = true;
    warnings = 0;
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK && r.outcome == TERRA_COOK_CACHE_CHANGED, "damaged store");
    CHECK(r.loaded == 0 && r.missing_meshes > 0 && warnings == (int)r.missing_meshes && !r.wrong,
          "%llu loaded, %llu refused, %d warnings", (unsigned long long)r.loaded, (unsigned long long)r.missing_meshes,
          warnings);
    CHECK(archive_is_fresh(&w), "archive after a damaged store");
    /* The store that cook kept is whole again: the next partial cook loads. */
    rewrite_same_size(w.path[0], &seed);
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK && r.loaded > 0 && !r.missing_meshes, "store kept again");
    /* Truncated: not the recorded size, one warning, nothing loaded, the tiles still copied. */
    terra_free(store);
    store = slurp(mp, &n);
    if (store) write_bytes(mp, store, n / 2);
    rewrite_same_size(w.path[0], &seed);
    warnings = 0;
    CHECK(cook_world(&w, changed, false, &r) == TERRA_OK && r.loaded == 0 && r.missing_meshes > 0 && r.copied > 0,
          "truncated store: %llu loaded, %llu copied", (unsigned long long)r.loaded, (unsigned long long)r.copied);
    CHECK(warnings == 1 && archive_is_fresh(&w), "%d warnings", warnings);
    terra_free(store);

    /* Kept but not committed: no temporary left. Kept twice: refused at commit, no record. */
    terra_cook_manifest *m;
    CHECK(terra_cook_manifest_create(w.options, &m) == TERRA_OK, "manifest");
    for (int i = 0; i < FILES; i++)
        CHECK((i < FILES - 2 ? terra_cook_manifest_add_input(m, w.path[i], NULL) : terra_cook_manifest_add_named(m, w.path[i], NULL)) == TERRA_OK,
              "add");
    for (int pass = 0; pass < 2; pass++) {
        terra_cook_cache *c;
        CHECK(terra_cook_cache_open(NULL, w.out, m, &c) == TERRA_OK, "open");
        terra_cook_grid g = world_grid(&w);
        uint32_t in[1] = {0};
        CHECK(terra_cook_cache_begin(c, &g, w.settings) == TERRA_OK, "begin");
        CHECK(terra_cook_cache_set_finest(c, 0, 0, in, 1) == TERRA_OK, "finest");
        CHECK(terra_cook_cache_plan(c, NULL, NULL) == TERRA_OK, "plan");
        terra_cook_mesh mesh = {0};
        double e;
        finest_mesh(&w, 0, 0, &mesh, &e);
        CHECK(terra_cook_cache_keep_finest(c, 1, 0, &mesh, e) == TERRA_E_INVALID, "not planned");
        CHECK(terra_cook_cache_keep_finest(c, 0, 0, &mesh, e) == TERRA_OK, "keep");
        if (pass == 1) {
            CHECK(terra_cook_cache_keep_finest(c, 0, 0, &mesh, e) == TERRA_OK, "kept twice");
            terra_archive_write_desc d = {0};
            d.frame = TERRA_FRAME_LOCAL;
            terra_archive_writer *aw;
            terra_archive_tile_info info = {1, 2, 0, 1};
            CHECK(terra_archive_writer_create(w.out, &d, &aw) == TERRA_OK, "writer");
            CHECK(terra_archive_writer_add(aw, terra_cook_key(&g, 0, 0, 0), "x", 1, &info) == TERRA_OK, "add");
            CHECK(terra_archive_writer_finish(aw) == TERRA_OK, "finish");
            CHECK(terra_cook_cache_commit(c) == TERRA_E_INVALID, "kept twice: %s", terra_last_error());
        }
        terra_cook_mesh_free(&mesh);
        terra_cook_cache_close(c);
        char d[600];
        snprintf(d, sizeof d, "%s.cache", w.out);
        DIR *dh = opendir(d);
        struct dirent *de;
        int temps = 0;
        while (dh && (de = readdir(dh)) != NULL) temps += strstr(de->d_name, ".tmp") != NULL;
        if (dh) closedir(dh);
        CHECK(temps == 0, "pass %d: %d temporaries left in %s", pass, temps, d);
    }
    char *rec;
    CHECK(terra_cook_cache_record_path(NULL, w.out, &rec) == TERRA_OK && access(rec, F_OK) != 0, "no record");
    terra_free(rec);
    terra_cook_manifest_free(m);
    world_remove(&w);
}

/* ---- random rounds ----------------------------------------------------------------------------- */

static void test_reuse_rounds(void) {
    unsigned long long seed = 21;
    int worlds = 6, rounds = 14, wrong = 0, stale = 0, partial = 0, missing = 0;
    for (int wi = 0; wi < worlds; wi++) {
        world w;
        world_make(&w, &seed);
        cook_result r;
        CHECK(cook_world(&w, NULL, true, &r) == TERRA_OK, "first: %s", terra_last_error());
        for (int k = 0; k < rounds; k++) {
            bool changed[FILES] = {0}, fresh = false;
            int action = (int)(test_rand_u64(&seed) % 6), f = (int)(test_rand_u64(&seed) % (FILES - 1));
            terra_cook_cache_outcome want = TERRA_COOK_CACHE_CHANGED;
            if (action == 0) { /* nothing */
                want = TERRA_COOK_CACHE_UNCHANGED;
            } else if (action == 1) { /* touched only */
                touch_by(w.path[f], 1 + k);
                want = TERRA_COOK_CACHE_UNCHANGED;
            } else if (action == 2) { /* other bytes, same size and time */
                rewrite_same_size(w.path[f], &seed);
                changed[f] = true;
            } else if (action == 3) { /* a new size */
                write_random(w.path[f], 50 + (size_t)(test_rand_u64(&seed) % 300), &seed);
                changed[f] = true;
            } else if (action == 4) { /* the texture comes or goes */
                if (access(w.path[FILES - 1], F_OK) == 0)
                    unlink(w.path[FILES - 1]);
                else
                    write_bytes(w.path[FILES - 1], "tex", 3);
                changed[FILES - 1] = true;
            } else { /* two inputs at once */
                rewrite_same_size(w.path[f], &seed);
                rewrite_same_size(w.path[(f + 1) % (FILES - 1)], &seed);
                changed[f] = changed[(f + 1) % (FILES - 1)] = true;
            }
            CHECK(cook_world(&w, changed, fresh, &r) == TERRA_OK, "round %d: %s", k, terra_last_error());
            CHECK(r.outcome == want, "world %d round %d action %d: outcome %d", wi, k, action, r.outcome);
            wrong += r.wrong;
            missing += (int)r.missing_meshes;
            partial += r.outcome == TERRA_COOK_CACHE_CHANGED && r.copied > 0 && r.loaded > 0;
            stale += !archive_is_fresh(&w);
        }
        world_remove(&w);
    }
    CHECK(!wrong && !stale && !missing, "%d wrong reuse decisions, %d stale archives, %d reusable finest meshes not loaded",
          wrong, stale, missing);
    CHECK(partial > worlds, "partial cooks copied tiles (%d)", partial);
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/terra_cook_cache_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    terra_set_log(count_warnings, NULL);
    RUN(test_xxh64_values);
    RUN(test_manifest_hash_streams);
    RUN(test_manifest_rules);
    RUN(test_record_path);
    RUN(test_agreement);
    RUN(test_damaged_record);
    RUN(test_driver_mistakes);
    RUN(test_kept_meshes);
    RUN(test_reuse_rounds);
    remove_dir();
    return finish();
}
