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

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_TILES 128 /* decoded tiles kept (about 5.6 kB each at 32 cells) */

typedef struct dec_tile {
    terra_tile_key key;
    uint64_t stamp;   /* 0: empty */
    float *h;         /* (n+1)^2 heights, row-major from (0, 0) = the tile's lower x, lower z corner */
    terra_surface *s; /* (n+1)^2 surface ids */
} dec_tile;

typedef struct level_ranges {
    int32_t x0, y0, nx, ny; /* tiles present span [x0, x0+nx) x [y0, y0+ny) */
    float *lo, *hi;         /* nx*ny: the tile's range and its descendants'; lo > hi where absent */
} level_ranges;

typedef struct arc_src {
    terra_archive *a;
    char *path;
    int n, max_level;
    terra_tile_rules rules; /* the lattice rule: grid_cells = n */
    uint32_t *grid_vertex;  /* (n+1)^2, decode_tile's scratch */
    double tile0, s0;
    double area[4];
    int64_t g0[2], g1[2]; /* the area in level-0 lattice indices (x, z), inclusive */
    level_ranges lv[32];
    float glo, ghi, margin;
    pthread_mutex_t lock;
    uint64_t clock;
    dec_tile cache[CACHE_TILES];
} arc_src;

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ---- tiles ----------------------------------------------------------------------------------- */

/* Decodes tile `key` into d (arrays allocated once per slot). TERRA_E_NOT_FOUND if absent. The
 * tile passes terra_archive_check_tile with the archive's lattice rule, the same check as terra info
 * --verify, which also says where each grid point's vertex is: nothing here indexes by u, v. Lock
 * held (S->grid_vertex is shared scratch). */
static terra_status decode_tile(arc_src *S, terra_tile_key key, dec_tile *d) {
    const int st1 = S->n + 1;
    terra_archive_entry e;
    terra_status st = terra_archive_find(S->a, key, &e);
    if (st) return st;
    if (!d->h) d->h = terra_alloc((size_t)st1 * st1 * sizeof(float));
    if (!d->s) d->s = terra_alloc((size_t)st1 * st1); /* each alone: one may have failed before */
    if (!d->h || !d->s) return terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
    terra_qmesh m;
    st = terra_archive_check_tile(S->a, &e, &S->rules, &m, S->grid_vertex);
    if (st) return st;
    const double lo = m.header.min_height, hi = m.header.max_height;
    for (int at = 0; at < st1 * st1; at++) {
        const uint32_t k = S->grid_vertex[at];
        d->h[at] = (float)(lo + (hi - lo) * m.h[k] / (double)TERRA_QMESH_MAX_COORD); /* as terra bake rounds it */
        d->s[at] = m.materials ? (terra_surface)(m.materials[k] > 255 ? 255 : m.materials[k]) : TERRA_SURFACE_NONE;
    }
    terra_qmesh_free(&m);
    d->key = key;
    return TERRA_OK;
}

/* The decoded tile `key` from the cache (decoding it into the least recently used slot). Lock held. */
static terra_status get_tile(arc_src *S, terra_tile_key key, dec_tile **out) {
    dec_tile *victim = &S->cache[0];
    for (int i = 0; i < CACHE_TILES; i++) {
        dec_tile *d = &S->cache[i];
        if (d->stamp && d->key == key) {
            d->stamp = ++S->clock;
            *out = d;
            return TERRA_OK;
        }
        if (d->stamp < victim->stamp) victim = d;
    }
    victim->stamp = 0;
    terra_status st = decode_tile(S, key, victim);
    if (st) return st;
    victim->stamp = ++S->clock;
    *out = victim;
    return TERRA_OK;
}

static bool tile_present(const arc_src *S, int L, int64_t x, int64_t y) {
    const level_ranges *r = &S->lv[L];
    if (x < r->x0 || y < r->y0 || x >= (int64_t)r->x0 + r->nx || y >= (int64_t)r->y0 + r->ny) return false;
    size_t k = (size_t)(y - r->y0) * (size_t)r->nx + (size_t)(x - r->x0);
    return r->lo[k] <= r->hi[k];
}

/* Height and surface at level-0 lattice point (gx, gz), clamped into the area. Lock held. `memo`
 * remembers the last tile used on each level. */
static terra_status point_value(arc_src *S, int64_t gx, int64_t gz, dec_tile **memo, float *h, terra_surface *s) {
    gx = gx < S->g0[0] ? S->g0[0] : gx > S->g1[0] ? S->g1[0] : gx;
    gz = gz < S->g0[1] ? S->g0[1] : gz > S->g1[1] ? S->g1[1] : gz;
    uint64_t bits = (uint64_t)gx | (uint64_t)gz;
    int H = bits ? __builtin_ctzll(bits) : S->max_level;
    if (H > S->max_level) H = S->max_level;
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
    dec_tile *d = memo[H];
    if (!d || d->key != key || !d->stamp) {
        terra_status st = get_tile(S, key, &d);
        if (st) return st;
        memo[H] = d;
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
    dec_tile *memo[32] = {0};
    terra_status st = TERRA_OK;
    pthread_mutex_lock(&S->lock);
    for (int j = 0; j < req->nz && !st; j++)
        for (int i = 0; i < req->nx && !st; i++) {
            const size_t k = (size_t)j * (size_t)req->nx + (size_t)i;
            st = point_value(S, (req->ix0 + i) * ((int64_t)1 << L), (req->iz0 + j) * ((int64_t)1 << L), memo, &heights[k],
                             surfaces ? &surfaces[k] : NULL);
        }
    pthread_mutex_unlock(&S->lock);
    return st;
}

/* Inside the level-0 cell under (x, z): the two triangles of the drawn grid (split along v00-v11). */
static float arc_height(void *user, double x, double z) {
    arc_src *S = user;
    const double fx0 = x / S->s0, fz0 = z / S->s0;
    int64_t cx = (int64_t)floor(fx0), cz = (int64_t)floor(fz0);
    double fx = fx0 - (double)cx, fz = fz0 - (double)cz;
    float c[4];
    dec_tile *memo[32] = {0};
    terra_status st = TERRA_OK;
    pthread_mutex_lock(&S->lock);
    for (int k = 0; k < 4 && !st; k++) st = point_value(S, cx + (k & 1), cz + (k >> 1), memo, &c[k], NULL);
    pthread_mutex_unlock(&S->lock);
    if (st) return NAN;
    if (fx >= fz) return (float)(c[0] + fx * (c[1] - c[0]) + fz * (c[3] - c[1]));
    return (float)(c[0] + fz * (c[2] - c[0]) + fx * (c[3] - c[2]));
}

static terra_surface arc_surface(void *user, double x, double z) {
    arc_src *S = user;
    dec_tile *memo[32] = {0};
    float h;
    terra_surface s = TERRA_SURFACE_NONE;
    pthread_mutex_lock(&S->lock);
    if (point_value(S, (int64_t)floor(x / S->s0 + 0.5), (int64_t)floor(z / S->s0 + 0.5), memo, &h, &s)) s = TERRA_SURFACE_NONE;
    pthread_mutex_unlock(&S->lock);
    return s;
}

/* The union of the ranges of the tiles over the rectangle (clamped into the area) on the finest
 * level whose tiles are at least as large, each tile's range covering its descendants; widened by
 * a quantization step, since a point takes its height from its home level's tile. */
static terra_status arc_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    const arc_src *S = user;
    x0 = fmin(fmax(x0, S->area[0]), S->area[2]), x1 = fmin(fmax(x1, S->area[0]), S->area[2]);
    z0 = fmin(fmax(z0, S->area[1]), S->area[3]), z1 = fmin(fmax(z1, S->area[1]), S->area[3]);
    const double size = fmax(x1 - x0, z1 - z0);
    int L = 0;
    while (L < S->max_level && ldexp(S->tile0, L) < size) L++;
    const double side = ldexp(S->tile0, L);
    float l = INFINITY, h = -INFINITY;
    const level_ranges *r = &S->lv[L];
    /* only the level's tiles: a rectangle over a vast area costs no more than the index */
    const int64_t ya = (int64_t)floor(z0 / side), yb = (int64_t)floor(z1 / side);
    const int64_t xa = (int64_t)floor(x0 / side), xb = (int64_t)floor(x1 / side);
    for (int64_t y = ya > r->y0 ? ya : r->y0; y <= yb && y < (int64_t)r->y0 + r->ny; y++)
        for (int64_t x = xa > r->x0 ? xa : r->x0; x <= xb && x < (int64_t)r->x0 + r->nx; x++) {
            if (!tile_present(S, L, x, y)) continue;
            size_t k = (size_t)(y - r->y0) * (size_t)r->nx + (size_t)(x - r->x0);
            l = fminf(l, r->lo[k]);
            h = fmaxf(h, r->hi[k]);
        }
    if (l > h) l = S->glo, h = S->ghi;
    *lo = l - S->margin;
    *hi = h + S->margin;
    return TERRA_OK;
}

static void arc_destroy(void *user) {
    arc_src *S = user;
    if (!S) return;
    for (int i = 0; i < CACHE_TILES; i++) terra_free(S->cache[i].h), terra_free(S->cache[i].s);
    terra_free(S->grid_vertex);
    for (int L = 0; L < 32; L++) terra_free(S->lv[L].lo), terra_free(S->lv[L].hi);
    terra_archive_close(S->a);
    terra_free(S->path);
    pthread_mutex_destroy(&S->lock);
    terra_free(S);
}

/* ---- opening ---------------------------------------------------------------------------------- */

/* Reads the frame, tile size and bounds from the metadata. */
static terra_status read_metadata(arc_src *S) {
    const terra_archive_info *I = terra_archive_get_info(S->a);
    if (I->frame != TERRA_FRAME_LOCAL)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: a %s-frame archive (for Cesium clients); terra draws local-frame archives",
                          S->path, terra_frame_name(I->frame));
    cJSON *j = cJSON_Parse(I->metadata);
    const cJSON *ts = cJSON_GetObjectItem(j, "tile_size_m"), *b = cJSON_GetObjectItem(j, "bounds");
    terra_status st = TERRA_OK;
    if (!cJSON_IsNumber(ts) || !(ts->valuedouble > 0) || !isfinite(ts->valuedouble) || !cJSON_IsArray(b) ||
        cJSON_GetArraySize(b) != 4) {
        st = terra_fail(TERRA_E_CORRUPT, "%s: metadata lacks tile_size_m or bounds", S->path);
    } else {
        S->tile0 = ts->valuedouble;
        for (int i = 0; i < 4; i++) {
            const cJSON *v = cJSON_GetArrayItem(b, i);
            S->area[i] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        }
        if (!(S->area[0] < S->area[2] && S->area[1] < S->area[3]) || !isfinite(S->area[0]) || !isfinite(S->area[1]) ||
            !isfinite(S->area[2]) || !isfinite(S->area[3]))
            st = terra_fail(TERRA_E_CORRUPT, "%s: metadata bounds are not a rectangle", S->path);
    }
    cJSON_Delete(j);
    return st;
}

/* Lays out every level's tile ranges from the index, aggregated from the finest level up. */
static terra_status index_ranges(arc_src *S) {
    const terra_archive_info *I = terra_archive_get_info(S->a);
    int32_t mn[32][2], mx[32][2];
    bool any[32] = {0};
    terra_archive_entry e;
    S->max_level = -1;
    S->glo = INFINITY, S->ghi = -INFINITY;
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_status st = terra_archive_entry_at(S->a, i, &e);
        if (st) return st;
        int L = terra_tile_key_level(e.key);
        int32_t x = terra_tile_key_x(e.key), y = terra_tile_key_y(e.key);
        if (!any[L]) mn[L][0] = mx[L][0] = x, mn[L][1] = mx[L][1] = y, any[L] = true;
        if (x < mn[L][0]) mn[L][0] = x;
        if (y < mn[L][1]) mn[L][1] = y;
        if (x > mx[L][0]) mx[L][0] = x;
        if (y > mx[L][1]) mx[L][1] = y;
        if (L > S->max_level) S->max_level = L;
        S->glo = fminf(S->glo, e.min_height), S->ghi = fmaxf(S->ghi, e.max_height);
    }
    if (S->max_level < 0) return terra_fail(TERRA_E_UNSUPPORTED, "%s: the archive holds no tiles", S->path);
    for (int L = 0; L <= S->max_level; L++)
        if (!any[L]) return terra_fail(TERRA_E_UNSUPPORTED, "%s: level %d is missing (terra draws archives with every level from 0)", S->path, L);
    for (int L = 0; L <= S->max_level; L++) {
        level_ranges *r = &S->lv[L];
        r->x0 = mn[L][0], r->y0 = mn[L][1];
        r->nx = mx[L][0] - mn[L][0] + 1, r->ny = mx[L][1] - mn[L][1] + 1;
        size_t cnt = (size_t)r->nx * (size_t)r->ny;
        if (cnt > I->tile_count * 4 + 64)
            return terra_fail(TERRA_E_UNSUPPORTED, "%s: level %d's tiles are scattered over %d x %d tiles", S->path, L,
                              r->nx, r->ny);
        r->lo = terra_alloc(cnt * sizeof(float));
        r->hi = terra_alloc(cnt * sizeof(float));
        if (!r->lo || !r->hi) return terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
        for (size_t k = 0; k < cnt; k++) r->lo[k] = INFINITY, r->hi[k] = -INFINITY;
    }
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry_at(S->a, i, &e);
        level_ranges *r = &S->lv[terra_tile_key_level(e.key)];
        size_t k = (size_t)(terra_tile_key_y(e.key) - r->y0) * (size_t)r->nx + (size_t)(terra_tile_key_x(e.key) - r->x0);
        r->lo[k] = e.min_height, r->hi[k] = e.max_height;
    }
    for (int L = 1; L <= S->max_level; L++) {
        level_ranges *r = &S->lv[L], *c = &S->lv[L - 1];
        for (int32_t y = 0; y < c->ny; y++)
            for (int32_t x = 0; x < c->nx; x++) {
                size_t ck = (size_t)y * (size_t)c->nx + (size_t)x;
                if (c->lo[ck] > c->hi[ck]) continue;
                int64_t px = floor_div(c->x0 + x, 2), py = floor_div(c->y0 + y, 2);
                if (!tile_present(S, L, px, py))
                    return terra_fail(TERRA_E_UNSUPPORTED, "%s: tile %d/%d/%d has no parent on level %d", S->path, L - 1,
                                      c->x0 + x, c->y0 + y, L);
                size_t pk = (size_t)(py - r->y0) * (size_t)r->nx + (size_t)(px - r->x0);
                r->lo[pk] = fminf(r->lo[pk], c->lo[ck]);
                r->hi[pk] = fmaxf(r->hi[pk], c->hi[ck]);
            }
    }
    /* A quantized height departs from its sample by half a step of its tile's range; the step is
     * at most the whole range over 32767. */
    S->margin = (S->ghi - S->glo) / (float)TERRA_QMESH_MAX_COORD + 1e-3f;
    return TERRA_OK;
}

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
    if (!st) st = read_metadata(S);
    if (!st) st = index_ranges(S);
    if (!st) {
        /* The grid size from the coarsest tile, by the rule terra info --verify applies too. */
        st = terra_archive_tile_rules(S->a, &S->rules);
        const int n = S->rules.grid_cells;
        if (!st && terra_archive_is_tin(S->a))
            st = terra_fail(TERRA_E_UNSUPPORTED,
                            "%s: an archive of irregular (TIN) tiles, as terra cook writes; terra's renderer draws grid "
                            "archives (terra bake) only so far: serve or export this one for Cesium clients, and check "
                            "it with terra check",
                            path);
        else if (!st && (n < TERRA_GRID_MIN_CELLS || n > TERRA_GRID_MAX_CELLS))
            st = terra_fail(TERRA_E_UNSUPPORTED,
                            "%s: tiles are not grids of %d to %d cells a side (a power of two), as terra bake writes",
                            path, TERRA_GRID_MIN_CELLS, TERRA_GRID_MAX_CELLS);
        S->n = n;
        if (!st && !(S->grid_vertex = terra_alloc(((size_t)n + 1) * ((size_t)n + 1) * sizeof *S->grid_vertex)))
            st = terra_fail(TERRA_E_NOMEM, "archive source: out of memory");
    }
    if (!st) {
        S->s0 = S->tile0 / S->n;
        /* Tile coordinates are 28-bit and levels at most 31: a lattice index past 2^60 lies outside
         * every tile (and would not convert to an integer). */
        const double lim = 0x1p60;
        for (int i = 0; i < 4 && !st; i++)
            if (!(fabs(S->area[i] / S->s0) < lim))
                st = terra_fail(TERRA_E_CORRUPT, "%s: metadata bounds %g lie beyond any tile", path, S->area[i]);
    }
    if (!st) {
        S->g0[0] = (int64_t)ceil(S->area[0] / S->s0), S->g1[0] = (int64_t)floor(S->area[2] / S->s0);
        S->g0[1] = (int64_t)ceil(S->area[1] / S->s0), S->g1[1] = (int64_t)floor(S->area[3] / S->s0);
        if (S->g0[0] > S->g1[0] || S->g0[1] > S->g1[1])
            st = terra_fail(TERRA_E_UNSUPPORTED, "%s: the area holds no sample", path);
    }
    if (!st) {
        terra_source_desc sd = {.height_at = arc_height, .surface_at = arc_surface, .sample_grid = arc_sample,
                                .height_range = arc_range, .destroy = arc_destroy, .user = S, .name = S->path,
                                .min_height = S->glo - S->margin, .max_height = S->ghi + S->margin};
        st = terra_source_create(&sd, out);
        if (!st && info) {
            *info = (terra_archive_source_info){.grid = {.tile0_size = S->tile0, .cells = S->n},
                                                .levels = S->max_level + 1,
                                                .min_height = sd.min_height,
                                                .max_height = sd.max_height};
            memcpy(info->bounds, S->area, sizeof S->area);
        }
        if (!st) return TERRA_OK;
    }
    arc_destroy(S);
    return st;
}
