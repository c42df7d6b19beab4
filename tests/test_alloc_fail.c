/* Allocation failure, swept: every allocation terra makes on the main paths of the library is made
 * to fail in turn, and each time the library must cope.
 *
 * An allocator hook counts the allocations (terra_alloc, terra_calloc and terra_realloc) and fails
 * the Nth one by returning NULL. Each path below runs once with nothing failing, which counts its
 * allocations K, then again for every N from 1 to K (past the first 200, another 200 spread evenly
 * up to K; 100 under the sanitizers) with the Nth failing. After each run it proves:
 *  - nothing crashed (under AddressSanitizer: nothing was read or written out of bounds either);
 *  - the call that met the failure returned TERRA_E_NOMEM, and terra_last_error() says in a
 *    sentence what broke. A call may carry on without the memory only where that is right: a
 *    shrinking realloc that fails leaves the block as it was, the cook's simplifier keeps the
 *    triangles as they came, and the clean-up of stale temporaries and the counting of the bytes
 *    stored after a bake or a cook are only skipped; what such a call made is then checked (the
 *    archive verifies, every tile is there);
 *  - nothing leaked: once what the call made is destroyed, as many allocations are live as before;
 *  - a file written through a temporary (bake, cook) is not at its final name after a failure, and
 *    no temporary is left beside it;
 *  - an object that lives on past a failed call (the archive as a source, with its tile cache)
 *    answers as before once memory is back.
 * The paths: the default world and a user source; a selection and one run; a streamer with its own
 * worker pool and with the caller's, through a few frames, a source replaced and a focus removed;
 * the ground with queries, collider blocks, a transform and a new source; quantized-mesh reordered,
 * encoded, decoded, gzipped and zstd'ed; the TIN mesher (levels and seeds, two layers, tiles, a slab
 * with walls); bakes into archives (local, geographic, on two threads); a cook of a 65 x 65 raster
 * into a TIN archive of packed tiles (on one thread and on two); and archives opened and read every
 * way the readers have (mapped and with pread, every tile decoded, verified, layer.json, the archive
 * as a source). Where threads share the work, which allocation is the Nth varies from run to run,
 * and an N that a run never reaches only has to leave it as it was.
 * $TERRA_SWEEP_PATH=name runs only the paths whose name holds it, $TERRA_SWEEP_ALL=1 fails every N,
 * $TERRA_SWEEP_VERBOSE=1 names each run on stderr before it starts. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/bake.h"
#include "terra/cook_io.h"
#include "terra/ground.h"
#include "terra/stream.h"
#include "terra/tin.h"

#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the failing allocator ---------------------------------------------------------------------- */

static atomic_long calls;   /* allocations asked for (alloc and realloc) since the last reset */
static atomic_long fail_at; /* the one to fail (1-based); 0: none */
static atomic_long failed;  /* how many were failed (0 or 1) */
static atomic_bool shrink;  /* the one failed was a realloc to no more than the block held */
static atomic_long live;    /* blocks handed out and not yet freed */

/* Each block carries its size in front (16 bytes keep the alignment malloc gives). */
enum { HDR = 16 };
static size_t block_size(void *p) { return *(size_t *)(void *)((char *)p - HDR); }

static bool fail_now(void) {
    long k = atomic_fetch_add(&calls, 1) + 1;
    if (k != atomic_load(&fail_at)) return false;
    atomic_fetch_add(&failed, 1);
    return true;
}
static void *hook_alloc(size_t n, void *u) {
    (void)u;
    if (fail_now() || n > SIZE_MAX - HDR) return NULL;
    char *b = malloc(HDR + n);
    if (!b) return NULL;
    *(size_t *)(void *)b = n;
    atomic_fetch_add(&live, 1);
    return b + HDR;
}
static void *hook_realloc(void *p, size_t n, void *u) {
    (void)u;
    if (!p) return hook_alloc(n, u);
    if (fail_now()) {
        atomic_store(&shrink, n <= block_size(p)); /* C lets even a shrink fail: p must then stay */
        return NULL;                               /* p stays live, as realloc leaves it */
    }
    if (n > SIZE_MAX - HDR) return NULL;
    char *b = realloc((char *)p - HDR, HDR + n);
    if (!b) return NULL;
    *(size_t *)(void *)b = n;
    return b + HDR;
}
static void hook_free(void *p, void *u) {
    (void)u;
    if (!p) return;
    atomic_fetch_sub(&live, 1);
    free((char *)p - HDR);
}

static void arm(long n) {
    atomic_store(&fail_at, n);
    atomic_store(&failed, 0);
    atomic_store(&shrink, false);
    atomic_store(&calls, 0);
}

/* Checks of what a call made run with the hook out of the way: they allocate too. */
static long paused_at;
static void pause_faults(void) {
    paused_at = atomic_load(&calls);
    atomic_store(&fail_at, -atomic_load(&fail_at));
}
static void resume_faults(void) {
    atomic_store(&fail_at, -atomic_load(&fail_at));
    atomic_store(&calls, paused_at);
}

/* ---- the sweep ---------------------------------------------------------------------------------- */

/* One path: runs the calls, checks what they made where they succeed (setting *bad with a reason
 * when something made is wrong), destroys it all and returns the first status that was not OK. */
typedef struct sweep_path {
    const char *name;
    terra_status (*run)(void *ctx, const char **bad);
    void *ctx;
    /* Calls on this path may succeed without the memory (what they made is checked). */
    bool may_degrade;
    /* Called after every run: false with a reason when the run left something behind (files). */
    bool (*clean)(void *ctx, const char **why);
    /* Every N up to `first`, then `spread` more evenly up to K; 0: FIRST_POINTS, SPREAD_POINTS. */
    int first, spread;
} sweep_path;

static bool verbose;       /* $TERRA_SWEEP_VERBOSE: each run on stderr before it starts */
static const char *only;   /* $TERRA_SWEEP_PATH: only the paths whose name holds it */
static bool every;         /* $TERRA_SWEEP_ALL: every N up to K, however many */
static int g_runs;
static double g_seconds;

/* Under the sanitizers each run costs several times as much: fewer points past the first ones. */
#ifdef TERRA_SANITIZED
enum { FIRST_POINTS = 200, SPREAD_POINTS = 100 };
#else
enum { FIRST_POINTS = 200, SPREAD_POINTS = 200 };
#endif

static bool sentence(const char *s) {
    size_t n = strlen(s);
    if (n < 8 || !strchr(s, ' ')) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

/* Returns K, the allocations of one run with nothing failing. */
static long sweep(const sweep_path *p) {
    if (only && !strstr(p->name, only)) return 0;
    const double t0 = terra_now_s();
    const char *bad = NULL, *why = NULL;
    arm(0);
    long before = atomic_load(&live);
    terra_fail(TERRA_OK, "%s", "");
    terra_status st = p->run(p->ctx, &bad);
    const long K = atomic_load(&calls);
    long leaked = atomic_load(&live) - before;
    CHECK(st == TERRA_OK, "%s: fails with nothing failing: %s", p->name, terra_last_error());
    CHECK(!bad, "%s: with nothing failing: %s", p->name, bad);
    CHECK(leaked == 0, "%s: %ld allocations left live with nothing failing", p->name, leaked);
    CHECK(!p->clean || p->clean(p->ctx, &why), "%s: with nothing failing: %s", p->name, why);
    CHECK(K > 0, "%s: the hook saw no allocation", p->name);
    if (st != TERRA_OK) return K;
    /* which N: every one up to `first`, then `spread` more evenly over the rest, K last */
    const long first = p->first ? p->first : FIRST_POINTS, spread = p->spread ? p->spread : SPREAD_POINTS;
    const bool all = every || K <= first + spread;
    const long points = all ? K : first + spread;
    int errors = 0, degraded = 0, unreached = 0;
    for (long i = 0; i < points && errors < 10; i++) {
        const long n = all || i < first ? i + 1 : first + 1 + (K - first - 1) * (i - first) / (spread - 1);
        if (verbose) fprintf(stderr, "%s: failing allocation %ld of %ld\n", p->name, n, K);
        bad = why = NULL;
        before = atomic_load(&live);
        terra_fail(TERRA_OK, "%s", "");
        arm(n);
        st = p->run(p->ctx, &bad);
        const bool hit = atomic_load(&failed) > 0, shrunk = atomic_load(&shrink);
        atomic_store(&fail_at, 0);
        leaked = atomic_load(&live) - before;
        g_runs++;
        const int was = check_failures_;
        if (!hit) {
            /* not reached (an allocation count that depends on threads): it ran as the first time */
            unreached++;
            CHECK(st == TERRA_OK, "%s, allocation %ld (never reached): %s", p->name, n, terra_last_error());
        } else if (st == TERRA_OK) {
            /* a failed shrink leaves the block as it was: carrying on is then right */
            CHECK(p->may_degrade || shrunk, "%s, allocation %ld failed: the call still returned OK", p->name, n);
            if (verbose) fprintf(stderr, "%s: allocation %ld failed, carried on\n", p->name, n);
            degraded++;
        } else {
            CHECK(st == TERRA_E_NOMEM, "%s, allocation %ld failed: status %s (%s), not out of memory", p->name, n,
                  terra_error_string(st), terra_last_error());
            CHECK(sentence(terra_last_error()), "%s, allocation %ld failed: terra_last_error() is \"%s\"", p->name,
                  n, terra_last_error());
        }
        CHECK(!bad, "%s, allocation %ld failed: %s", p->name, n, bad);
        CHECK(leaked == 0, "%s, allocation %ld failed: %ld allocations leaked", p->name, n, leaked);
        CHECK(!p->clean || p->clean(p->ctx, &why), "%s, allocation %ld failed: %s", p->name, n, why);
        if (check_failures_ != was) errors++;
    }
    const double dt = terra_now_s() - t0;
    g_seconds += dt;
    printf("  %-28s %6ld allocations, %4ld failed in turn (%d carried on, %d not reached", p->name, K,
           points, degraded, unreached);
    printf("), %.2f s\n", dt);
    return K;
}

/* ---- files -------------------------------------------------------------------------------------- */

static char dir[256];

/* Whether the directory holds only `keep` (may be NULL); else why not. */
static bool dir_holds_only(const char *d, const char *keep, const char **why) {
    static char msg[1024];
    DIR *dh = opendir(d);
    if (!dh) return true;
    struct dirent *e;
    bool ok = true;
    while ((e = readdir(dh)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (keep && !strcmp(e->d_name, keep)) continue;
        snprintf(msg, sizeof msg, "%s/%s is left behind", d, e->d_name);
        ok = false;
        break;
    }
    closedir(dh);
    if (!ok) *why = msg;
    return ok;
}

static bool exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

/* ---- sources ---------------------------------------------------------------------------------- */

static float hill(void *u, double x, double z) {
    (void)u;
    return (float)(20 * sin(x * 0.01) * cos(z * 0.013) + 0.002 * x);
}

static terra_status run_world(void *ctx, const char **bad) {
    (void)ctx, (void)bad;
    terra_source *w, *u;
    terra_status st = terra_world_create(&(terra_world_desc){.seed = 11, .scale = 2}, &w);
    if (st != TERRA_OK) return st;
    float h[9 * 9], lo, hi;
    st = terra_source_sample(w, &(terra_grid_request){.ix0 = -4, .iz0 = 3, .spacing = 2, .nx = 9, .nz = 9}, h, NULL);
    if (st == TERRA_OK) st = terra_source_height_range(w, 0, 0, 500, 500, &lo, &hi);
    terra_source_destroy(w);
    if (st != TERRA_OK) return st;
    st = terra_source_create(&(terra_source_desc){.height_at = hill, .min_height = -30, .max_height = 30}, &u);
    if (st != TERRA_OK) return st;
    st = terra_source_height(u, 3, 4, &lo);
    terra_source_destroy(u);
    return st;
}

/* ---- selection ------------------------------------------------------------------------------------ */

/* Two worlds made once (a path may switch to the other), and how the streamer gets its pool. */
typedef struct world_ctx {
    terra_source *world, *other;
    bool shared_pool;        /* the streamer meshes on a pool of the caller's, made on the path */
} world_ctx;

static terra_status run_select(void *ctx, const char **bad) {
    world_ctx *c = ctx;
    terra_select *s;
    terra_status st = terra_select_create(&(terra_select_desc){.levels = 8, .max_tiles = 2048, .range_cache_size = 256},
                                          c->world, &s);
    if (st != TERRA_OK) return st;
    terra_camera cam = {.eye = {120, 900, -340}, .pitch_rad = -0.4, .yaw_rad = 0.3};
    terra_frustum fr;
    terra_camera_frustum(&cam, &fr);
    const terra_selected_tile *tiles;
    int count = 0;
    st = terra_select_run(s, cam.eye, &fr, &tiles, &count);
    if (st == TERRA_OK && count <= 0) *bad = "the selection is empty";
    terra_select_destroy(s);
    return st;
}

/* ---- streaming ------------------------------------------------------------------------------------ */

static terra_stream_desc stream_desc(const world_ctx *c, terra_pool *pool) {
    terra_stream_desc d = {.source = c->world, .capacity_tiles = 48, .max_in_flight = 4, .max_foci = 2,
                           .max_cameras = 1, .load_radius = 600, .pool = pool};
    d.select.grid.cells = 16;
    d.select.levels = 5;
    d.select.range_cache_size = 64;
    return d;
}

static terra_status run_stream(void *ctx, const char **bad) {
    world_ctx *c = ctx;
    terra_pool *pool = NULL;
    terra_status st = c->shared_pool ? terra_pool_create(&(terra_pool_desc){.threads = 1}, &pool) : TERRA_OK;
    if (st != TERRA_OK) return st;
    const terra_stream_desc d = stream_desc(c, pool);
    terra_stream *s;
    if ((st = terra_stream_create(&d, &s)) != TERRA_OK) {
        terra_pool_destroy(pool);
        return st;
    }
    terra_focus cam, body;
    terra_camera camera = {.eye = {40, 300, 40}, .pitch_rad = -0.5};
    st = terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = camera}, &cam);
    if (st == TERRA_OK)
        st = terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .collision = true}, &body);
    for (int f = 0; f < 8 && st == TERRA_OK; f++) {
        camera.eye.x += 30;
        st = terra_stream_update_focus(s, cam, &camera);
        if (st == TERRA_OK) st = terra_stream_update(s);
        if (f == 2) nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL); /* let the workers finish a few */
        if (f == 4 && st == TERRA_OK) st = terra_stream_set_source(s, c->other);
        if (f == 5 && st == TERRA_OK) st = terra_stream_remove_focus(s, body);
    }
    const terra_stream_draw *draws;
    int n;
    if (st == TERRA_OK) st = terra_stream_draws(s, cam, &draws, &n);
    if (st == TERRA_OK && terra_stream_get_stats(s)->total_failed) *bad = "tiles failed to load";
    terra_stream_destroy(s);
    terra_pool_destroy(pool);
    return st;
}

/* ---- the ground ------------------------------------------------------------------------------------ */

static terra_status run_ground(void *ctx, const char **bad) {
    world_ctx *c = ctx;
    terra_ground_desc d = {.source = c->world, .grid = {.tile0_size = 64, .cells = 64}, .collider_cells = 16,
                           .collider_radius = 40, .max_blocks = 24, .budget_ms = 1e9};
    terra_ground *g;
    terra_status st = terra_ground_create(&d, &g);
    if (st != TERRA_OK) return st;
    double y;
    st = terra_ground_height_at(g, 12.5, -7.25, &y);
    terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {10, 0, 10}, .collision = true,
                             .velocity = {5, 0, 0}};
    if (st == TERRA_OK) st = terra_ground_update(g, &body, 1);
    if (st == TERRA_OK && !terra_ground_is_ready_at(g, 10, 10)) *bad = "no collider block under the body";
    body.position.x += 30;
    if (st == TERRA_OK) st = terra_ground_update(g, &body, 1);
    double xz[4] = {1, 2, 3, 4};
    terra_ground_hit hits[2];
    if (st == TERRA_OK) st = terra_ground_query(g, xz, 2, hits);
    terra_transform t = {.translation = {5, 10, -5}, .rotation = {cos(0.1), 0, sin(0.1), 0}, .scale = 2};
    if (st == TERRA_OK) st = terra_ground_set_transform(g, &t);
    if (st == TERRA_OK) st = terra_ground_set_source(g, c->other);
    if (st == TERRA_OK) st = terra_ground_update(g, &body, 1);
    terra_vec3 nrm;
    terra_surface sf;
    if (st == TERRA_OK) st = terra_ground_normal_at(g, 30, 11, &nrm);
    if (st == TERRA_OK) st = terra_ground_surface_at(g, 30, 11, &sf);
    terra_ground_destroy(g);
    return st;
}

/* ---- quantized-mesh ------------------------------------------------------------------------------- */

typedef struct qmesh_ctx {
    terra_qmesh mesh; /* a 9 x 9 grid, vertices out of first-use order, every extension */
    uint8_t *buf;
    size_t cap;
} qmesh_ctx;

static void qmesh_ctx_init(qmesh_ctx *c) {
    enum { N = 9, V = N * N, T = 2 * (N - 1) * (N - 1) };
    terra_qmesh *m = &c->mesh;
    memset(m, 0, sizeof *m);
    m->vertex_count = V, m->triangle_count = T;
    m->u = malloc(V * 2), m->v = malloc(V * 2), m->h = malloc(V * 2);
    m->normals = malloc(V * 2);
    m->materials = malloc(V * 2);
    m->indices = malloc(3 * T * 4);
    static uint8_t water[1] = {1};
    static char meta[] = "{\"available\":[]}";
    m->water_mask = water, m->water_mask_size = 1;
    m->metadata = meta, m->metadata_size = (uint32_t)strlen(meta);
    m->extensions = TERRA_QMESH_HAS_NORMALS | TERRA_QMESH_HAS_WATER_MASK | TERRA_QMESH_HAS_METADATA |
                    TERRA_QMESH_HAS_MATERIAL;
    /* vertex (i, j) stored at index V - 1 - (j * N + i): the reverse of first use */
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++) {
            int k = V - 1 - (j * N + i);
            m->u[k] = (uint16_t)(i * 32767 / (N - 1)), m->v[k] = (uint16_t)(j * 32767 / (N - 1));
            m->h[k] = (uint16_t)((i * 977 + j * 3001) % 32768);
            m->normals[2 * k] = (uint8_t)(i * 20), m->normals[2 * k + 1] = (uint8_t)(j * 20);
            m->materials[k] = (uint16_t)(1 + (i + j) % 3);
        }
    uint32_t *t = m->indices;
    for (int j = 0; j < N - 1; j++)
        for (int i = 0; i < N - 1; i++) {
            uint32_t a = (uint32_t)(V - 1 - (j * N + i)), b = a - 1, cc = a - N, dd = a - N - 1;
            *t++ = a, *t++ = b, *t++ = dd;
            *t++ = a, *t++ = dd, *t++ = cc;
        }
    for (int e = 0; e < 4; e++) {
        m->edge_count[e] = N;
        m->edges[e] = malloc(N * 4);
        for (int k = 0; k < N; k++) {
            int i = e == TERRA_QMESH_WEST ? 0 : e == TERRA_QMESH_EAST ? N - 1 : k;
            int j = e == TERRA_QMESH_SOUTH ? 0 : e == TERRA_QMESH_NORTH ? N - 1 : k;
            m->edges[e][k] = (uint32_t)(V - 1 - (j * N + i));
        }
    }
    m->header.max_height = 100;
    c->cap = terra_qmesh_encoded_size(m);
    c->buf = malloc(c->cap);
}

static void qmesh_ctx_free(qmesh_ctx *c) {
    terra_qmesh *m = &c->mesh;
    free(m->u), free(m->v), free(m->h), free(m->normals), free(m->materials), free(m->indices);
    for (int e = 0; e < 4; e++) free(m->edges[e]);
    free(c->buf);
}

static terra_status run_qmesh(void *ctx, const char **bad) {
    qmesh_ctx *c = ctx;
    enum { V = 81, T = 128 };
    /* a copy to reorder in place */
    terra_qmesh m = c->mesh;
    uint16_t u[V], v[V], h[V], mat[V];
    uint8_t nrm[2 * V];
    uint32_t idx[3 * T], edges[4][9];
    memcpy(u, m.u, sizeof u), memcpy(v, m.v, sizeof v), memcpy(h, m.h, sizeof h), memcpy(mat, m.materials, sizeof mat);
    memcpy(nrm, m.normals, sizeof nrm), memcpy(idx, m.indices, sizeof idx);
    m.u = u, m.v = v, m.h = h, m.materials = mat, m.normals = nrm, m.indices = idx;
    for (int e = 0; e < 4; e++) memcpy(edges[e], m.edges[e], sizeof edges[e]), m.edges[e] = edges[e];
    uint32_t remap[V];
    terra_status st = terra_qmesh_reorder(&m, remap);
    if (st != TERRA_OK) return st;
    size_t n = 0;
    if ((st = terra_qmesh_encode(&m, c->buf, c->cap, &n)) != TERRA_OK) return st;
    terra_qmesh back;
    if ((st = terra_qmesh_decode(c->buf, n, NULL, &back)) != TERRA_OK) return st;
    if (back.vertex_count != V || back.triangle_count != T || memcmp(back.h, h, sizeof h) ||
        back.metadata_size != m.metadata_size)
        *bad = "the tile decodes to other values";
    terra_qmesh_free(&back);
    uint8_t *gz;
    size_t gn;
    if ((st = terra_compress(TERRA_COMPRESS_GZIP, 0, c->buf, n, &gz, &gn)) != TERRA_OK) return st;
    st = terra_qmesh_decode_any(gz, gn, NULL, &back);
    terra_free(gz);
    if (st != TERRA_OK) return st;
    if (back.vertex_count != V || memcmp(back.u, u, sizeof u)) *bad = "the gzipped tile decodes to other values";
    terra_qmesh_free(&back);
    uint8_t *zs, *raw;
    size_t zn, rn;
    if ((st = terra_compress(TERRA_COMPRESS_ZSTD, 0, c->buf, n, &zs, &zn)) != TERRA_OK) return st;
    st = terra_decompress(TERRA_COMPRESS_ZSTD, zs, zn, n, &raw, &rn);
    terra_free(zs);
    if (st != TERRA_OK) return st;
    if (rn != n || memcmp(raw, c->buf, n)) *bad = "zstd gives other bytes back";
    terra_free(raw);
    return st;
}

/* ---- the TIN mesher -------------------------------------------------------------------------------- */

enum { TW = 65, TH = 65 };
typedef struct tin_ctx {
    float heights[TW * TH], upper[TW * TH];
    int threads; /* the tiles' workers */
} tin_ctx;

static void tin_ctx_init(tin_ctx *c) {
    for (int j = 0; j < TH; j++)
        for (int i = 0; i < TW; i++) {
            double x = i, y = j;
            c->heights[j * TW + i] = (float)(30 * sin(x * 0.17) * cos(y * 0.11) + 0.05 * x * y);
            if ((i - 40) * (i - 40) + (j - 20) * (j - 20) < 30) c->heights[j * TW + i] = NAN; /* a hole */
            c->upper[j * TW + i] = i > 20 && i < 40 && j > 28 && j < 36 ? c->heights[j * TW + i] + 15 : NAN; /* a deck */
        }
}

static terra_status run_tin(void *ctx, const char **bad) {
    tin_ctx *c = ctx;
    static const double levels[] = {4, 1.5};
    static const int32_t seeds[] = {32, 0, 32, 64, 0, 32};
    terra_tin_desc d = {.width = TW, .height = TH, .heights = c->heights, .max_error = 0.5, .levels = levels,
                        .level_count = 2, .seed_xy = seeds, .seed_count = 3};
    terra_tin_mesh m;
    terra_status st = terra_tin_build(&d, &m);
    if (st != TERRA_OK) return st;
    const terra_tin_level *lv = &m.levels[m.level_count - 1];
    terra_tin_check_result r;
    float *err = malloc(sizeof(float) * TW * TH);
    st = terra_tin_check(c->heights, TW, TH, m.xy, m.z, lv->vertex_count, lv->triangles, lv->triangle_count, err, &r);
    free(err);
    if (st == TERRA_OK && (r.max_error > 0.5 || r.uncovered || r.holes_covered || m.level_count != 3))
        *bad = "the mesh breaks its bound";
    terra_tin_mesh_free(&m);
    if (st != TERRA_OK) return st;

    /* two layers in one mesh */
    d = (terra_tin_desc){.width = TW, .height = TH, .heights = c->heights, .upper = c->upper, .max_error = 1};
    if ((st = terra_tin_build(&d, &m)) != TERRA_OK) return st;
    terra_tin_mesh_free(&m);

    terra_tin_tiles tiles;
    static const double tl[] = {3, 1};
    st = terra_tin_tiles_build(&(terra_tin_tiles_desc){.width = TW, .height = TH, .heights = c->heights, .tile_size = 33,
                                                      .levels = tl, .level_count = 2, .threads = c->threads},
                               &tiles);
    if (st != TERRA_OK) return st;
    if (tiles.tiles_x != 2 || tiles.tiles_y != 2) *bad = "not 2 x 2 tiles";
    terra_tin_tiles_free(&tiles);

    terra_tin_layers layers;
    st = terra_tin_layers_build(&(terra_tin_layers_desc){.width = TW, .height = TH, .lower = c->heights,
                                                        .upper = c->upper, .max_error = 1, .thickness_m = 2},
                                &layers);
    if (st != TERRA_OK) return st;
    if (!layers.wall_count || !layers.soup_triangle_count) *bad = "the deck has no walls";
    terra_tin_layers_free(&layers);
    return st;
}

/* ---- bake ------------------------------------------------------------------------------------------ */

typedef struct file_ctx {
    const terra_source *world;
    char dir[300], path[400];
    terra_bake_desc bake; /* bake: what to bake */
    int threads;          /* cook: workers */
    uint64_t tiles;       /* what the first run wrote */
} file_ctx;

static bool archive_good(const char *path) {
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) return false;
    uint64_t nbad = 1;
    terra_status st = terra_archive_verify_tiles(a, NULL, NULL, &nbad);
    terra_archive_close(a);
    return st == TERRA_OK && nbad == 0;
}

static const terra_bake_desc BAKE = {.levels = 2, .cells = 16, .tile0_size = 64, .area = {0, 0, 192, 128},
                                     .compression = TERRA_COMPRESS_GZIP, .threads = 1, .name = "sweep"};

static terra_status run_bake(void *ctx, const char **bad) {
    file_ctx *c = ctx;
    terra_bake_stats stats;
    terra_status st = terra_bake(c->world, c->path, &c->bake, &stats);
    if (st == TERRA_OK) {
        pause_faults();
        if (!archive_good(c->path)) *bad = "the archive does not verify";
        else if (!c->tiles) c->tiles = stats.tiles;
        else if (stats.tiles != c->tiles) *bad = "tiles missing";
        resume_faults();
    } else if (exists(c->path)) {
        *bad = "an archive stands at the final name after a failure";
    }
    unlink(c->path);
    return st;
}

static bool bake_clean(void *ctx, const char **why) { return dir_holds_only(((file_ctx *)ctx)->dir, NULL, why); }

/* ---- cook -------------------------------------------------------------------------------------------- */

enum { CW = 65, CH = 65 };
typedef struct cook_ctx {
    file_ctx f;
    terra_raster raster;
    float heights[CW * CH];
} cook_ctx;

static void cook_ctx_init(cook_ctx *c) {
    for (int j = 0; j < CH; j++)
        for (int i = 0; i < CW; i++) {
            double x = i, y = j;
            float h = (float)(40 * sin(x * 0.07) * cos(y * 0.05) + 10 * sin(x * 0.31 + y * 0.23) + 0.1 * x);
            if ((i - 45) * (i - 45) + (j - 20) * (j - 20) < 30) h = NAN; /* a lake of no-data */
            c->heights[j * CW + i] = h;
        }
    c->raster = (terra_raster){.width = CW, .height = CH, .heights = c->heights, .geo = {0, 1, 0, 0, 0, 1},
                               .spacing_x = 1, .spacing_y = 1, .min_z = -60, .max_z = 70};
    for (int k = 0; k < CW * CH; k++) c->raster.nodata_count += isnan(c->heights[k]);
}

static terra_status run_cook(void *ctx, const char **bad) {
    cook_ctx *c = ctx;
    terra_cook_input in = {.path = "sweep.tif", .raster = &c->raster};
    terra_cook_desc d = {.inputs = &in, .input_count = 1, .output = c->f.path, .max_error = 0.5, .tile_size = 16,
                         .frame = TERRA_COOK_FRAME_LOCAL, .threads = c->f.threads,
                         .compression = TERRA_COMPRESS_PACKED, .options_json = "{\"z_scale\":1}"};
    terra_cook_report rep;
    terra_status st = terra_cook(&d, &rep);
    if (st == TERRA_OK) {
        pause_faults();
        if (!archive_good(c->f.path)) *bad = "the archive does not verify";
        else if (!c->f.tiles) c->f.tiles = rep.tiles;
        else if (rep.tiles != c->f.tiles) *bad = "tiles missing";
        resume_faults();
    } else if (exists(c->f.path)) {
        *bad = "an archive stands at the final name after a failure";
    }
    unlink(c->f.path);
    return st;
}

/* ---- archives read ------------------------------------------------------------------------------------ */

typedef struct read_ctx {
    char grid[400], tin[400]; /* a bake's archive, a cook's (packed tiles) */
    float want[2][11 * 11];   /* what the bake's archive as a source answers to REQ */
} read_ctx;

static const terra_grid_request REQ[2] = {{.ix0 = 3, .iz0 = 2, .spacing = 8, .nx = 11, .nz = 11},
                                          {.ix0 = 0, .iz0 = 0, .spacing = 16, .nx = 11, .nz = 11}};

static terra_status sample_both(const terra_source *src, const read_ctx *c, bool *same) {
    float h[11 * 11];
    *same = true;
    for (int r = 0; r < 2; r++) {
        terra_status st = terra_source_sample(src, &REQ[r], h, NULL);
        if (st != TERRA_OK) return st;
        *same = *same && !memcmp(h, c->want[r], sizeof h);
    }
    return TERRA_OK;
}

static terra_status read_all(const char *path, bool pread_, bool grid, const char **bad) {
    terra_archive *a;
    terra_status st = terra_archive_open(path, &(terra_archive_open_desc){.use_pread = pread_}, &a);
    if (st != TERRA_OK) return st;
    const terra_archive_info *I = terra_archive_get_info(a);
    for (uint64_t i = 0; st == TERRA_OK && i < I->tile_count; i++) {
        terra_archive_entry e;
        if ((st = terra_archive_entry_at(a, i, &e)) != TERRA_OK) break;
        uint8_t *raw;
        size_t rn;
        if ((st = terra_archive_read_tile(a, e.key, &raw, &rn, NULL)) != TERRA_OK) break;
        terra_qmesh q;
        st = terra_qmesh_decode_any(raw, rn, NULL, &q);
        terra_free(raw);
        if (st != TERRA_OK) break;
        if (!q.vertex_count || !q.triangle_count) *bad = "an empty tile";
        terra_qmesh_free(&q);
    }
    terra_tile_rules rules;
    if (st == TERRA_OK) st = terra_archive_tile_rules(a, &rules);
    if (st == TERRA_OK && (rules.grid_cells != 0) != grid) *bad = "the lattice rule is not the archive's";
    uint64_t nbad = 0;
    if (st == TERRA_OK) st = terra_archive_verify_tiles(a, NULL, NULL, &nbad);
    terra_tms_map map;
    if (st == TERRA_OK) st = terra_archive_tms_map(a, &map);
    char *json = NULL;
    if (st == TERRA_OK) st = terra_archive_layer_json(a, &map, &json);
    if (st == TERRA_OK && (!json || !strstr(json, "\"tms\""))) *bad = "layer.json says no tms";
    terra_free(json);
    terra_archive_close(a);
    return st;
}

static terra_status run_read(void *ctx, const char **bad) {
    read_ctx *c = ctx;
    terra_status st = read_all(c->grid, false, true, bad);
    if (st == TERRA_OK) st = read_all(c->grid, true, true, bad);
    if (st == TERRA_OK) st = read_all(c->tin, false, false, bad);
    if (st != TERRA_OK) return st;
    terra_source *src;
    terra_archive_source_info info;
    if ((st = terra_archive_source_create(c->grid, &src, &info)) != TERRA_OK) return st;
    bool same;
    st = sample_both(src, c, &same);
    if (st == TERRA_OK && !same) *bad = "the archive as a source answers other heights";
    if (st != TERRA_OK) {
        /* its tile cache outlives a failed request: with memory back it answers as before */
        pause_faults();
        if (sample_both(src, c, &same) != TERRA_OK || !same) *bad = "after a failure the archive source answers wrong";
        resume_faults();
    }
    float lo, hi;
    if (st == TERRA_OK) st = terra_source_height_range(src, 0, 0, 100, 100, &lo, &hi);
    terra_source_destroy(src);
    return st;
}

/* ---- main --------------------------------------------------------------------------------------------- */

static void quiet(terra_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user;
}

static world_ctx g_world;

static void sweep_world(void) { sweep(&(sweep_path){.name = "world and source", .run = run_world}); }
static void sweep_select(void) { sweep(&(sweep_path){.name = "select", .run = run_select, .ctx = &g_world}); }
static void sweep_stream(void) {
    world_ctx c = g_world;
    sweep(&(sweep_path){.name = "stream", .run = run_stream, .ctx = &c});
    c.shared_pool = true;
    sweep(&(sweep_path){.name = "stream on a caller's pool", .run = run_stream, .ctx = &c});
}
static void sweep_ground(void) { sweep(&(sweep_path){.name = "ground", .run = run_ground, .ctx = &g_world}); }
static void sweep_qmesh(void) {
    qmesh_ctx c;
    qmesh_ctx_init(&c);
    sweep(&(sweep_path){.name = "qmesh encode and decode", .run = run_qmesh, .ctx = &c});
    qmesh_ctx_free(&c);
}
static void sweep_tin(void) {
    tin_ctx *c = calloc(1, sizeof *c);
    tin_ctx_init(c);
    c->threads = 1;
    sweep(&(sweep_path){.name = "tin", .run = run_tin, .ctx = c});
    /* two workers: which allocation is the Nth depends on them, the rules do not */
    c->threads = 2;
    sweep(&(sweep_path){.name = "tin, tiles on 2 threads", .run = run_tin, .ctx = c, .first = 50, .spread = 100});
    free(c);
}
static void file_ctx_init(file_ctx *c, const char *sub) {
    c->world = g_world.world;
    snprintf(c->dir, sizeof c->dir, "%s/%s", dir, sub);
    mkdir(c->dir, 0755);
    snprintf(c->path, sizeof c->path, "%s/out.terra", c->dir);
    c->bake = BAKE;
    c->threads = 1;
    c->tiles = 0;
}
static void sweep_bake(void) {
    file_ctx c = {0};
    file_ctx_init(&c, "bake");
    /* carrying on: the stale temporaries beside the output are swept when there is memory for it,
     * and the stored bytes are counted when the archive opens again afterwards */
    sweep(&(sweep_path){.name = "bake", .run = run_bake, .ctx = &c, .may_degrade = true, .clean = bake_clean});
    file_ctx_init(&c, "bake-geographic");
    c.bake.frame = TERRA_FRAME_GEOGRAPHIC;
    c.bake.bounds[0] = 7, c.bake.bounds[1] = 45, c.bake.bounds[2] = 7.2, c.bake.bounds[3] = 45.1;
    c.bake.levels = 9;
    c.bake.compression = TERRA_COMPRESS_ZSTD;
    sweep(&(sweep_path){.name = "bake, geographic", .run = run_bake, .ctx = &c, .may_degrade = true,
                        .clean = bake_clean, .first = 100, .spread = 100});
    file_ctx_init(&c, "bake-threads");
    c.bake.threads = 2;
    sweep(&(sweep_path){.name = "bake on 2 threads", .run = run_bake, .ctx = &c, .may_degrade = true,
                        .clean = bake_clean, .first = 50, .spread = 100});
}
static void sweep_cook(void) {
    cook_ctx *c = calloc(1, sizeof *c);
    cook_ctx_init(c);
    file_ctx_init(&c->f, "cook");
    /* carrying on: the simplifier keeps the triangles as they came, and the stored bytes of the
     * report are counted when the archive opens again afterwards */
    sweep(&(sweep_path){.name = "cook", .run = run_cook, .ctx = c, .may_degrade = true, .clean = bake_clean});
    file_ctx_init(&c->f, "cook-threads");
    c->f.threads = 2;
    sweep(&(sweep_path){.name = "cook on 2 threads", .run = run_cook, .ctx = c, .may_degrade = true,
                        .clean = bake_clean, .first = 50, .spread = 100});
    free(c);
}
static void sweep_read(void) {
    read_ctx c;
    snprintf(c.grid, sizeof c.grid, "%s/grid.terra", dir);
    snprintf(c.tin, sizeof c.tin, "%s/tin.terra", dir);
    terra_bake_desc bd = BAKE;
    bd.compression = TERRA_COMPRESS_ZSTD;
    CHECK(terra_bake(g_world.world, c.grid, &bd, NULL) == TERRA_OK, "%s", terra_last_error());
    cook_ctx *k = calloc(1, sizeof *k);
    cook_ctx_init(k);
    terra_cook_input in = {.path = "sweep.tif", .raster = &k->raster};
    terra_cook_desc d = {.inputs = &in, .input_count = 1, .output = c.tin, .max_error = 0.5, .tile_size = 16,
                         .frame = TERRA_COOK_FRAME_LOCAL, .threads = 1, .compression = TERRA_COMPRESS_PACKED};
    CHECK(terra_cook(&d, NULL) == TERRA_OK, "%s", terra_last_error());
    free(k);
    terra_source *src;
    CHECK(terra_archive_source_create(c.grid, &src, NULL) == TERRA_OK, "%s", terra_last_error());
    for (int r = 0; src && r < 2; r++) CHECK(terra_source_sample(src, &REQ[r], c.want[r], NULL) == TERRA_OK);
    terra_source_destroy(src);
    sweep(&(sweep_path){.name = "archive open and read", .run = run_read, .ctx = &c});
    unlink(c.grid);
    unlink(c.tin);
}

int main(void) {
    verbose = getenv("TERRA_SWEEP_VERBOSE") != NULL;
    only = getenv("TERRA_SWEEP_PATH");
    every = getenv("TERRA_SWEEP_ALL") != NULL;
    snprintf(dir, sizeof dir, "alloc_fail_%ld", (long)getpid());
    mkdir(dir, 0755);
    terra_set_log(quiet, NULL);
    terra_set_allocator(&(terra_allocator){hook_alloc, hook_realloc, hook_free, NULL});
    CHECK(terra_world_create(&(terra_world_desc){.seed = 5}, &g_world.world) == TERRA_OK);
    CHECK(terra_world_create(&(terra_world_desc){.seed = 6}, &g_world.other) == TERRA_OK);
    RUN(sweep_world);
    RUN(sweep_select);
    RUN(sweep_stream);
    RUN(sweep_ground);
    RUN(sweep_qmesh);
    RUN(sweep_tin);
    RUN(sweep_bake);
    RUN(sweep_cook);
    RUN(sweep_read);
    terra_source_destroy(g_world.world);
    terra_source_destroy(g_world.other);
    const long left = atomic_load(&live);
    CHECK(left == 0, "%ld allocations live at the end", left);
    terra_set_allocator(NULL);
    terra_set_log(NULL, NULL);
    printf("  %d runs with an allocation failing, %.1f s\n", g_runs, g_seconds);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return finish();
}
