/* A height source read from a local-frame archive of regular grid tiles (what `terra bake` writes).
 * See terra/archive_io.h.
 *
 * The lattice rule holds across levels: a level-0 lattice point takes its value from its home
 * level, the coarsest baked level whose lattice holds it (the point's index, in level-0 samples, is
 * divisible by 2^home), and on that level from the tile that owns it (the one whose lower-left
 * corner is at or before it; the last row and column of the archive belong to the tile before).
 * So every request, whatever its level, gets the same height at the same point, neighbours' edges
 * are bit-identical and a fully morphed tile is its parent's surface, as grid.h promises; coarse
 * requests read coarse tiles only. Points outside the baked area take the value of the nearest
 * point inside. */
#include "terra/archive_io.h"

#include "archive_index.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cache of decoded tiles, found by a hash of the key (chained buckets). Its lock guards the
 * table, the list and the reference counts only, and is never held while a tile is read,
 * decompressed or decoded: a call that misses decodes into a tile of its own outside the lock, then
 * inserts it (or, when another thread got there first, takes that one and drops its own). A call
 * holds a reference to every tile it reads until it returns (at most CALL_HOLDS at a time), so no
 * tile it uses is freed under it, and the heights of a tile in the table never change, so they are
 * read without the lock. Tiles no call holds are evicted least recently released first whenever
 * the table holds more than CACHE_TILES; so it holds at most CACHE_TILES, or more only while
 * running calls hold them (CALL_HOLDS a call at most). */
#ifndef CACHE_TILES          /* (tests/test_archive.c builds this file again with a tiny cache) */
#define CACHE_TILES 128      /* decoded tiles kept (about 5.6 kB each at 32 cells) */
#endif
#define CACHE_BUCKET_BITS 8  /* 256 buckets: twice the tiles */
#ifndef CALL_HOLDS
#define CALL_HOLDS 16        /* tiles one call holds before it lets them all go and starts again */
#endif

typedef struct dec_tile {
    terra_tile_key key;
    struct dec_tile *next;          /* the bucket's chain */
    struct dec_tile *newer, *older; /* the list of the tiles no call holds, newest first */
    int refs;                       /* calls holding it */
    float *h;                       /* (n+1)^2 heights, row-major from (0, 0) = the tile's lower x, lower z corner */
    terra_surface *s;               /* (n+1)^2 surface ids */
} dec_tile;

/* The tiles one call (a grid request, a height, a surface) holds. */
typedef struct tile_holds {
    dec_tile *memo[32]; /* the last tile used on each level */
    dec_tile *held[CALL_HOLDS];
    int n;
} tile_holds;

typedef struct arc_src {
    terra_archive *a;
    char *path;
    int n;
    terra_tile_rules rules; /* the lattice rule: grid_cells = n */
    arc_index x;          /* metadata and index, per level */
    double s0;
    int64_t g0[2], g1[2]; /* the area in level-0 lattice indices (x, z), inclusive */
    pthread_mutex_t lock; /* the cache's table, list, count and reference counts; held for lookups only */
    dec_tile *bucket[1 << CACHE_BUCKET_BITS];
    dec_tile *newest, *oldest; /* the tiles in the table no call holds */
    int cached;                /* tiles in the table */
} arc_src;

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ---- tiles ----------------------------------------------------------------------------------- */

/* Decodes tile `key` into a new tile of the caller's own (one allocation, refs 0, in no table).
 * The tile passes terra_archive_check_tile with the archive's lattice rule, the same check as terra
 * info --verify, which also says where each grid point's vertex is: nothing here indexes by u, v.
 * Takes no lock: the archive reader is thread-safe and the scratch is this call's. */
static terra_status decode_tile(const arc_src *S, terra_tile_key key, dec_tile **out) {
    const size_t st1 = (size_t)S->n + 1, pts = st1 * st1;
    terra_archive_entry e;
    terra_status st = terra_archive_find(S->a, key, &e);
    if (st) return st;
    /* sizeof (dec_tile) is a multiple of its pointers' alignment, which suffices for floats */
    dec_tile *d = terra_alloc(sizeof *d + pts * sizeof(float) + pts);
    uint32_t *grid_vertex = terra_alloc(pts * sizeof *grid_vertex);
    if (!d || !grid_vertex) {
        terra_free(d), terra_free(grid_vertex);
        return terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
    }
    *d = (dec_tile){.key = key, .h = (float *)(d + 1)};
    d->s = (terra_surface *)(d->h + pts);
    terra_qmesh m;
    st = terra_archive_check_tile(S->a, &e, &S->rules, &m, grid_vertex);
    if (st) {
        terra_free(d), terra_free(grid_vertex);
        return st;
    }
    const double lo = m.header.min_height, hi = m.header.max_height;
    for (size_t at = 0; at < pts; at++) {
        const uint32_t k = grid_vertex[at];
        d->h[at] = (float)(lo + (hi - lo) * m.h[k] / (double)TERRA_QMESH_MAX_COORD); /* as terra bake rounds it */
        d->s[at] = m.materials ? (terra_surface)(m.materials[k] > 255 ? 255 : m.materials[k]) : TERRA_SURFACE_NONE;
    }
    terra_qmesh_free(&m);
    terra_free(grid_vertex);
    *out = d;
    return TERRA_OK;
}

static dec_tile **bucket_of(arc_src *S, terra_tile_key key) {
    return &S->bucket[(key * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BUCKET_BITS)]; /* Fibonacci hashing */
}

/* The cache's lock. Its holders do a few pointer steps, so a caller that finds it taken tries again
 * a little before it sleeps (a sleep and a wake-up cost more than the wait). */
static void cache_lock(arc_src *S) {
    for (int i = 0; i < 100; i++) {
        if (pthread_mutex_trylock(&S->lock) == 0) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
    pthread_mutex_lock(&S->lock);
}

static void cache_unlock(arc_src *S) { pthread_mutex_unlock(&S->lock); }

/* Lock held, for the rest of the cache's functions. */

/* The cached tile `key`, or NULL. */
static dec_tile *table_find(arc_src *S, terra_tile_key key) {
    dec_tile *d = *bucket_of(S, key);
    while (d && d->key != key) d = d->next;
    return d;
}

static void list_unlink(arc_src *S, dec_tile *d) {
    if (d->newer) d->newer->older = d->older;
    else S->newest = d->older;
    if (d->older) d->older->newer = d->newer;
    else S->oldest = d->newer;
    d->newer = d->older = NULL;
}

/* Over CACHE_TILES: takes the oldest tile no call holds out of the table and returns it (to be freed
 * once the lock is released); NULL when the table is within bounds or every tile in it is held. At
 * most one is ever due: each call follows a single insertion or release. */
static dec_tile *evict(arc_src *S) {
    dec_tile *d = S->oldest;
    if (S->cached <= CACHE_TILES || !d) return NULL;
    list_unlink(S, d);
    dec_tile **p = bucket_of(S, d->key);
    while (*p != d) p = &(*p)->next;
    *p = d->next;
    S->cached--;
    return d;
}

static void hold(arc_src *S, dec_tile *d) {
    if (d->refs++ == 0) list_unlink(S, d);
}

/* Lets go of d; returns the tile evicted for it, or NULL. */
static dec_tile *let_go(arc_src *S, dec_tile *d) {
    if (--d->refs > 0) return NULL;
    d->newer = NULL, d->older = S->newest; /* the newest of the tiles no call holds */
    if (S->newest) S->newest->newer = d;
    else S->oldest = d;
    S->newest = d;
    return evict(S);
}

/* Lets go of every tile the call holds and forgets them. */
static void release_all(arc_src *S, tile_holds *T) {
    if (!T->n) return;
    cache_lock(S);
    for (int i = 0; i < T->n; i++) T->held[i] = let_go(S, T->held[i]);
    cache_unlock(S);
    for (int i = 0; i < T->n; i++) terra_free(T->held[i]);
    memset(T, 0, sizeof *T);
}

/* Tile `key`, held by the call until release_all: one it holds already, the cache's, or decoded now
 * (outside the lock) and put in the cache. */
static terra_status get_tile(arc_src *S, tile_holds *T, terra_tile_key key, dec_tile **out) {
    for (int i = 0; i < T->n; i++)
        if (T->held[i]->key == key) return *out = T->held[i], TERRA_OK;
    if (T->n == CALL_HOLDS) release_all(S, T);
    cache_lock(S);
    dec_tile *d = table_find(S, key);
    if (d) hold(S, d);
    cache_unlock(S);
    if (!d) {
        dec_tile *fresh, *drop;
        terra_status st = decode_tile(S, key, &fresh);
        if (st) return st;
        cache_lock(S);
        d = table_find(S, key);
        if (d) { /* another call decoded it meanwhile: one copy is kept */
            hold(S, d);
            drop = fresh;
        } else {
            d = fresh;
            d->refs = 1;
            dec_tile **b = bucket_of(S, key);
            d->next = *b, *b = d;
            S->cached++;
            drop = evict(S);
        }
        cache_unlock(S);
        terra_free(drop);
    }
    T->held[T->n++] = d;
    *out = d;
    return TERRA_OK;
}

static bool tile_present(const arc_src *S, int L, int64_t x, int64_t y) { return arc_index_present(&S->x, L, x, y); }

/* Height and surface at level-0 lattice point (gx, gz), clamped into the area, from a tile the call
 * holds (T: its tiles and the last one used on each level). The lock is taken only to find a tile
 * the call does not hold yet. */
static terra_status point_value(arc_src *S, int64_t gx, int64_t gz, tile_holds *T, float *h, terra_surface *s) {
    gx = gx < S->g0[0] ? S->g0[0] : gx > S->g1[0] ? S->g1[0] : gx;
    gz = gz < S->g0[1] ? S->g0[1] : gz > S->g1[1] ? S->g1[1] : gz;
    uint64_t bits = (uint64_t)gx | (uint64_t)gz;
    int H = bits ? __builtin_ctzll(bits) : S->x.max_level;
    if (H > S->x.max_level) H = S->x.max_level;
    const int64_t n = S->n, hx = gx / ((int64_t)1 << H), hz = gz / ((int64_t)1 << H); /* exact: divisible */
    int64_t tx = floor_div(hx, n), tz = floor_div(hz, n);
    int64_t i = hx - tx * n, j = hz - tz * n;
    if (i == 0 && !tile_present(S, H, tx, tz) && tile_present(S, H, tx - 1, tz)) tx--, i = n;
    if (j == 0 && !tile_present(S, H, tx, tz) && tile_present(S, H, tx, tz - 1)) tz--, j = n;
    if (i == 0 && j == 0 && !tile_present(S, H, tx, tz) && tile_present(S, H, tx - 1, tz - 1)) tx--, tz--, i = j = n;
    if (!tile_present(S, H, tx, tz))
        return terra_fail(TERRA_E_CORRUPT, "%s: no tile %d/%" PRId64 "/%" PRId64 " for the point at %g, %g m",
                          S->path, H, tx, tz, (double)gx * S->s0, (double)gz * S->s0);
    const terra_tile_key key = terra_tile_key_make(0, H, (int32_t)tx, (int32_t)tz);
    dec_tile *d = T->memo[H];
    if (!d || d->key != key) {
        terra_status st = get_tile(S, T, key, &d);
        if (st) return st;
        T->memo[H] = d;
    }
    const size_t at = (size_t)j * (size_t)(n + 1) + (size_t)i;
    *h = d->h[at];
    if (s) *s = d->s[at];
    return TERRA_OK;
}

/* ---- source callbacks ------------------------------------------------------------------------- */

static terra_status arc_sample(void *user, const terra_grid_request *req, float *heights, terra_surface *surfaces) {
    arc_src *S = user;
    int e = 0;
    const double r = frexp(req->spacing / S->s0, &e); /* spacing = s0 * 2^(e-1) exactly when r == 0.5 */
    const int L = e - 1;
    if (r != 0.5 || L < 0 || L > 40)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: spacing %g m is not a level of the archive (level 0: %g m, doubling)",
                          S->path, req->spacing, S->s0);
    tile_holds T = {0};
    terra_status st = TERRA_OK;
    for (int j = 0; j < req->nz && !st; j++)
        for (int i = 0; i < req->nx && !st; i++) {
            const size_t k = (size_t)j * (size_t)req->nx + (size_t)i;
            st = point_value(S, (req->ix0 + i) * ((int64_t)1 << L), (req->iz0 + j) * ((int64_t)1 << L), &T, &heights[k],
                             surfaces ? &surfaces[k] : NULL);
        }
    release_all(S, &T);
    return st;
}

/* Inside the level-0 cell under (x, z): the two triangles of the drawn grid (split along v00-v11). */
static float arc_height(void *user, double x, double z) {
    arc_src *S = user;
    const double fx0 = x / S->s0, fz0 = z / S->s0;
    int64_t cx = (int64_t)floor(fx0), cz = (int64_t)floor(fz0);
    double fx = fx0 - (double)cx, fz = fz0 - (double)cz;
    float c[4];
    tile_holds T = {0};
    terra_status st = TERRA_OK;
    for (int k = 0; k < 4 && !st; k++) st = point_value(S, cx + (k & 1), cz + (k >> 1), &T, &c[k], NULL);
    release_all(S, &T);
    if (st) return NAN;
    if (fx >= fz) return (float)(c[0] + fx * (c[1] - c[0]) + fz * (c[3] - c[1]));
    return (float)(c[0] + fz * (c[2] - c[0]) + fx * (c[3] - c[2]));
}

static terra_surface arc_surface(void *user, double x, double z) {
    arc_src *S = user;
    tile_holds T = {0};
    float h;
    terra_surface s = TERRA_SURFACE_NONE;
    if (point_value(S, (int64_t)floor(x / S->s0 + 0.5), (int64_t)floor(z / S->s0 + 0.5), &T, &h, &s)) s = TERRA_SURFACE_NONE;
    release_all(S, &T);
    return s;
}

/* The index's ranges (archive_index.h), widened by a quantization step: a point takes its height
 * from its home level's tile. */
static terra_status arc_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    arc_index_range(&((const arc_src *)user)->x, x0, z0, x1, z1, lo, hi);
    return TERRA_OK;
}

static void arc_destroy(void *user) {
    arc_src *S = user;
    if (!S) return;
    for (int b = 0; b < 1 << CACHE_BUCKET_BITS; b++) /* no call runs */
        for (dec_tile *d = S->bucket[b], *next; d; d = next) next = d->next, terra_free(d);
    arc_index_free(&S->x);
    terra_archive_close(S->a);
    terra_free(S->path);
    pthread_mutex_destroy(&S->lock);
    terra_free(S);
}

/* ---- opening ---------------------------------------------------------------------------------- */

terra_status terra_archive_source_create(const char *path, terra_source **out, terra_archive_source_info *info) {
    if (!path || !out) return terra_fail(TERRA_E_INVALID, "archive source: NULL argument");
    *out = NULL;
    arc_src *S = terra_calloc(1, sizeof *S);
    if (!S) return terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
    pthread_mutex_init(&S->lock, NULL);
    size_t pl = strlen(path) + 1;
    S->path = terra_alloc(pl);
    terra_status st = S->path ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
    if (!st) memcpy(S->path, path, pl);
    if (!st) st = terra_archive_open(path, NULL, &S->a);
    terra_archive_layout layout;
    if (!st) st = arc_index_build(S->a, &layout, &S->x); /* validated: bounds, levels, pyramid, grid cells */
    if (!st && layout.tin)
        st = terra_fail(TERRA_E_UNSUPPORTED,
                        "%s: an archive of irregular (TIN) tiles, as terra cook writes: it is drawn by its own tiles "
                        "(terra/archive_mesh.h; terra render --archive), not answered as grid heights",
                        path);
    else if (!st && layout.rules.grid_cells < TERRA_GRID_MIN_CELLS)
        st = terra_fail(TERRA_E_UNSUPPORTED, "%s: tiles are grids of %d cells a side; terra draws grids of %d to %d",
                        path, layout.rules.grid_cells, TERRA_GRID_MIN_CELLS, TERRA_GRID_MAX_CELLS);
    if (!st) {
        S->rules = layout.rules;
        S->n = layout.rules.grid_cells;
        S->s0 = S->x.tile0 / S->n;
        /* the bounds lie within the tiles' 28-bit coordinates and hold a lattice point */
        S->g0[0] = (int64_t)ceil(S->x.area[0] / S->s0), S->g1[0] = (int64_t)floor(S->x.area[2] / S->s0);
        S->g0[1] = (int64_t)ceil(S->x.area[1] / S->s0), S->g1[1] = (int64_t)floor(S->x.area[3] / S->s0);
    }
    if (!st) {
        terra_source_desc sd = {.height_at = arc_height, .surface_at = arc_surface, .sample_grid = arc_sample,
                                .height_range = arc_range, .destroy = arc_destroy, .user = S, .name = S->path,
                                .min_height = S->x.glo - S->x.margin, .max_height = S->x.ghi + S->x.margin};
        st = terra_source_create(&sd, out);
        if (!st && info) {
            *info = (terra_archive_source_info){.grid = {.tile0_size = S->x.tile0, .cells = S->n},
                                                .levels = S->x.max_level + 1,
                                                .min_height = sd.min_height,
                                                .max_height = sd.max_height};
            memcpy(info->bounds, S->x.area, sizeof S->x.area);
        }
        if (!st) return TERRA_OK;
    }
    arc_destroy(S);
    return st;
}
