/* terra select: the CDLOD quadtree walk. */
#include "terra/select.h"

#include <math.h>
#include <string.h>

/* The height-range cache: one entry holds the ranges of four siblings (they are walked together),
 * keyed by their parent; 4-way set associative, least recently used entry replaced. */
#define RANGE_WAYS 4
typedef struct range_entry {
    terra_tile_key key; /* the parent's; ~0 when empty */
    float lo[4], hi[4]; /* child i = (x & 1) + 2 (y & 1) */
    uint32_t stamp;     /* frame of last use */
} range_entry;

struct terra_select {
    terra_select_desc d;
    const terra_source *src;
    double range[TERRA_TILE_MAX_LEVEL + 1], range2[TERRA_TILE_MAX_LEVEL + 1];
    double side[TERRA_TILE_MAX_LEVEL + 1];
    float morph_start[TERRA_TILE_MAX_LEVEL + 1], morph_end[TERRA_TILE_MAX_LEVEL + 1];
    double allowance2[TERRA_TILE_MAX_LEVEL + 1]; /* squared 3-D box diagonal a subdivided tile may have */
    double sse_k;       /* pixels per metre of error at 1 m: view_height_px / (2 tan(fov / 2)) */
    bool by_error;      /* tile_error given: screen-space error decides, no ranges, no morph */
    range_entry *cache;
    range_entry *recent[TERRA_TILE_MAX_LEVEL + 1]; /* entry last used at each level, and its parent */
    int32_t recent_x[TERRA_TILE_MAX_LEVEL + 1], recent_y[TERRA_TILE_MAX_LEVEL + 1];
    uint32_t set_mask;  /* sets - 1 */
    uint32_t frame;
    terra_selected_tile *out;
    int count;
    terra_select_stats stats;
    /* per-run state */
    terra_vec3 eye;
    const terra_frustum *frustum;
    terra_status error;
    bool bounded;
    /* per frustum plane, the indices into (min x, min y, min z, max x, max y, max z) of the box
     * corner farthest along its normal and of the nearest */
    uint8_t far_corner[6][3], near_corner[6][3];
};

/* The crack rule between two levels' ranges: morph_start_ratio x (r1 - r0) at least the diagonal of a
 * tile of the finer level's parent (the one of r1). */
static bool crack_rule_holds(double m, double r0, double r1, double parent_diag) { return m * (r1 - r0) >= parent_diag; }

/* Ranges from per-level errors: each level hands over to the next where the next's error projects to
 * tau (see cdlod_sse), but no sooner than the morph margin allows (range(L) - range(L-1) at least a
 * level-L tile's diagonal over morph_start_ratio: the crack rule, level by level), and no farther than
 * TERRA_SELECT_MAX_DERIVED_RANGE_TILES of the level's tiles (past that the next level takes over above
 * tau); the coarsest reaches twice as far as the one before (a lone level: the crack rule's least
 * range for a ratio of 2). A margin is rounded up until the rule holds in the arithmetic
 * terra_select_desc_resolve checks it with. */
static void derive_ranges(terra_select_desc *d, double sse_k) {
    const double m = d->morph_start_ratio;
    double prev = 0;
    for (int l = 0; l < d->levels; l++) {
        const double side = ldexp(d->grid.tile0_size, l), diag = side * sqrt(2.0);
        double r;
        if (d->levels == 1) {
            for (r = 2 * diag / m; !crack_rule_holds(m, r, 2 * r, 2 * diag);) r = nextafter(r, INFINITY);
        } else {
            for (r = prev + diag / m; l > 0 && !crack_rule_holds(m, prev, r, diag);) r = nextafter(r, INFINITY);
        }
        if (l + 1 < d->levels)
            r = fmax(r, fmin(d->level_error[l + 1] * sse_k / d->max_sse_px, TERRA_SELECT_MAX_DERIVED_RANGE_TILES * side));
        else r = fmax(r, 2 * prev);
        d->ranges[l] = prev = r;
    }
}

/* As many tiles as the ranges can select (4096 to 65536: a stream holds wanted lists of as many per
 * camera and focus): a level-L tile is drawn only where it or its
 * parent lies within range(L) of the eye, so it lies within range(L) + its parent's diagonal, a disc
 * holding at most pi (range(L) / side + 2 sqrt 2)^2 of its tiles. */
static int max_tiles_for(const terra_select_desc *d) {
    double n = d->levels;
    for (int l = 0; l < d->levels; l++) {
        const double k = d->ranges[l] / ldexp(d->grid.tile0_size, l) + 2 * sqrt(2.0);
        n += floor(3.14159265358979323846 * k * k);
    }
    return n < 4096 ? 4096 : n > 65536 ? 65536 : (int)n;
}

terra_status terra_select_desc_resolve(const terra_select_desc *in, terra_select_desc *out) {
    terra_select_desc d = in ? *in : (terra_select_desc){0};
    terra_status st = terra_grid_desc_resolve(&d.grid, &d.grid);
    if (st != TERRA_OK) return st;
    if (d.levels == 0) d.levels = 12;
    if (d.max_sse_px == 0) d.max_sse_px = 2.0;
    if (d.view_height_px == 0) d.view_height_px = 1080;
    if (d.view_fov_y_rad == 0) d.view_fov_y_rad = 60.0 * 3.14159265358979323846 / 180.0;
    if (!(d.max_sse_px > 0) || !isfinite(d.max_sse_px))
        return terra_fail(TERRA_E_INVALID, "select: max_sse_px must be a positive number of pixels (got %g)", d.max_sse_px);
    if (d.view_height_px < 1 || d.view_height_px > 65536)
        return terra_fail(TERRA_E_INVALID, "select: view_height_px must be from 1 to 65536 (got %d)", d.view_height_px);
    if (!(d.view_fov_y_rad > 0 && d.view_fov_y_rad < 3.1))
        return terra_fail(TERRA_E_INVALID, "select: view_fov_y_rad must lie in (0, 3.1) (got %g)", d.view_fov_y_rad);
    const double sse_k = d.view_height_px / (2.0 * tan(0.5 * d.view_fov_y_rad));
    const bool derive = d.level_error[0] > 0 && d.range0 == 0 && d.range_ratio == 0;
    for (int l = 0; l <= TERRA_TILE_MAX_LEVEL; l++)
        if (!(d.level_error[l] >= 0) || !isfinite(d.level_error[l]))
            return terra_fail(TERRA_E_INVALID, "select: level_error[%d] must be finite and not negative (got %g)", l,
                              (double)d.level_error[l]);
    if (d.morph_start_ratio == 0) d.morph_start_ratio = 0.5;
    if (d.levels < 1 || d.levels > 24)
        return terra_fail(TERRA_E_INVALID, "select: levels must be from 1 to 24 (got %d)", d.levels);
    if (!(d.morph_start_ratio > 0.0 && d.morph_start_ratio < 1.0))
        return terra_fail(TERRA_E_INVALID, "select: morph_start_ratio must lie strictly between 0 and 1 (got %g)",
                          d.morph_start_ratio);
    const bool given = d.ranges[0] > 0;
    if (given || derive) { /* per level: their first and their growth stand for range0 and ratio */
        if (derive) derive_ranges(&d, sse_k);
        for (int l = 1; l < d.levels; l++)
            if (!(d.ranges[l] > d.ranges[l - 1]) || !isfinite(d.ranges[l]))
                return terra_fail(TERRA_E_INVALID, "select: ranges must grow from level to level (level %d: %g m after %g m)",
                                  l, d.ranges[l], d.ranges[l - 1]);
        d.range0 = d.ranges[0];
        d.range_ratio = d.levels > 1 ? d.ranges[1] / d.ranges[0] : 2.0;
    }
    if (d.range_ratio == 0) d.range_ratio = 2.0;
    if (d.range_cache_size == 0) d.range_cache_size = 4096;
    if (!(d.range_ratio > 1.0) || !isfinite(d.range_ratio))
        return terra_fail(TERRA_E_INVALID, "select: range_ratio must be greater than 1 (got %g)", d.range_ratio);
    if (d.max_tiles < 0 || d.max_tiles > TERRA_SELECT_MAX_TILES)
        return terra_fail(TERRA_E_INVALID, "select: max_tiles must be from 1 to 2^20, or 0 for as many as the ranges can select (got %d)", d.max_tiles);
    if (d.range_cache_size < 4 || d.range_cache_size > (1 << 24) || (d.range_cache_size & (d.range_cache_size - 1)))
        return terra_fail(TERRA_E_INVALID, "select: range_cache_size must be a power of two from 4 to 2^24 (got %d)",
                          d.range_cache_size);
    const bool bounded = d.bounds[0] != 0 || d.bounds[1] != 0 || d.bounds[2] != 0 || d.bounds[3] != 0;
    if (bounded && !(d.bounds[0] < d.bounds[2] && d.bounds[1] < d.bounds[3]))
        return terra_fail(TERRA_E_INVALID, "select: bounds must have min < max (got x %g..%g, z %g..%g)", d.bounds[0],
                          d.bounds[2], d.bounds[1], d.bounds[3]);
    const double diag0 = d.grid.tile0_size * sqrt(2.0);
    const double min_range0 = 2.0 * diag0 / (d.morph_start_ratio * (d.range_ratio - 1.0));
    if (d.range0 == 0) d.range0 = 1.5 * min_range0;
    /* the crack rule between levels 0 and 1, on the ranges themselves where they are given or derived
     * (their ratio, a quotient, would round) */
    const double range1 = (given || derive) && d.levels > 1 ? d.ranges[1] : d.range0 * d.range_ratio;
    if (!isfinite(d.range0) || !crack_rule_holds(d.morph_start_ratio, d.range0, range1, 2.0 * diag0))
        return terra_fail(TERRA_E_INVALID,
                          "select: range0 %g m is too short: morph_start_ratio x (range_ratio - 1) x range0 must be "
                          "at least twice a level-0 tile's diagonal (%.1f m), so range0 >= %.1f m here; otherwise a "
                          "neighbour changes level before a tile has finished morphing and a crack opens",
                          d.range0, 2.0 * diag0, min_range0);
    /* The coarsest level bounds every loop and every coordinate: the walk and the streamer lay out
     * (2 x range / side)^2 coarsest tiles around each eye, and the ground they reach must stay where
     * doubles and tile keys are exact. */
    const double top_side = ldexp(d.grid.tile0_size, d.levels - 1);
    if (!(top_side <= TERRA_SELECT_MAX_SIDE))
        return terra_fail(TERRA_E_INVALID,
                          "select: the coarsest tiles, tile0_size x 2^(levels - 1) = %g m, must be at most 2^44 m "
                          "(%g m): fewer levels or a smaller tile0_size",
                          top_side, TERRA_SELECT_MAX_SIDE);
    if (!given && !derive)
        for (int l = 0; l < d.levels; l++) d.ranges[l] = d.range0 * pow(d.range_ratio, l);
    for (int l = d.levels; l <= TERRA_TILE_MAX_LEVEL; l++) d.ranges[l] = 0;
    if (d.max_tiles == 0) d.max_tiles = max_tiles_for(&d);
    const double top_range = d.ranges[d.levels - 1], top_side_now = ldexp(d.grid.tile0_size, d.levels - 1);
    if (!(top_range <= TERRA_SELECT_MAX_RANGE_TILES * top_side_now) && derive)
        return terra_fail(TERRA_E_INVALID,
                          "select: with morph_start_ratio %g the morph margins alone take the coarsest level's range to "
                          "%g m, past %d of its tiles (%g m): a larger morph_start_ratio or fewer levels",
                          d.morph_start_ratio, top_range, TERRA_SELECT_MAX_RANGE_TILES, TERRA_SELECT_MAX_RANGE_TILES * top_side_now);
    if (!(top_range <= TERRA_SELECT_MAX_RANGE_TILES * top_side_now))
        return terra_fail(TERRA_E_INVALID,
                          "select: the coarsest level's range, range0 x range_ratio^(levels - 1) = %g m, must be at "
                          "most %d of its tiles (%g m): a shorter range0, a smaller range_ratio or fewer levels",
                          top_range, TERRA_SELECT_MAX_RANGE_TILES, TERRA_SELECT_MAX_RANGE_TILES * top_side_now);
    *out = d;
    return TERRA_OK;
}

int terra_select_derived_capped(const terra_select_desc *d, double *sse_px) {
    const double sse_k = d->view_height_px / (2.0 * tan(0.5 * d->view_fov_y_rad));
    int finest = -1;
    double worst = 0;
    for (int l = d->levels - 2; l >= 0; l--) {
        const double e = d->level_error[l + 1] * sse_k;
        if (d->ranges[l] * d->max_sse_px * (1 + 1e-9) >= e) continue; /* level l + 1's error projects within tau past it */
        finest = l;
        worst = fmax(worst, e / d->ranges[l]);
    }
    if (sse_px) *sse_px = worst;
    return finest;
}

terra_status terra_select_create(const terra_select_desc *desc, const terra_source *src, terra_select **out) {
    *out = NULL;
    terra_select_desc d;
    terra_status st = terra_select_desc_resolve(desc, &d);
    if (st != TERRA_OK) return st;
    if (!src) return terra_fail(TERRA_E_INVALID, "select: no source given");
    terra_select *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "select: out of memory");
    s->d = d;
    s->src = src;
    s->sse_k = d.view_height_px / (2.0 * tan(0.5 * d.view_fov_y_rad));
    s->by_error = d.tile_error != NULL;
    s->bounded = d.bounds[0] != 0 || d.bounds[1] != 0 || d.bounds[2] != 0 || d.bounds[3] != 0;
    s->cache = terra_alloc((size_t)d.range_cache_size * sizeof *s->cache);
    s->out = terra_alloc((size_t)d.max_tiles * sizeof *s->out);
    if (!s->cache || !s->out) {
        terra_select_destroy(s);
        return terra_fail(TERRA_E_NOMEM, "select: out of memory");
    }
    for (int i = 0; i < d.range_cache_size; i++) s->cache[i] = (range_entry){.key = ~(terra_tile_key)0};
    s->set_mask = (uint32_t)(d.range_cache_size / RANGE_WAYS) - 1;
    for (int l = 0; l < d.levels; l++) {
        s->range[l] = d.ranges[l];
        s->range2[l] = s->range[l] * s->range[l];
        s->side[l] = terra_grid_tile_side(&d.grid, l);
        double band_lo = l ? s->range[l - 1] : 0.0;
        s->morph_start[l] = (float)(band_lo + (s->range[l] - band_lo) * d.morph_start_ratio);
        s->morph_end[l] = (float)s->range[l];
        if (s->by_error) s->morph_start[l] = s->morph_end[l] = 0; /* drawn unmorphed */
    }
    for (int l = 1; l < d.levels; l++) {
        double a = (s->morph_start[l] - s->range[l - 1]);
        s->allowance2[l] = a * a;
    }
    *out = s;
    return TERRA_OK;
}

void terra_select_destroy(terra_select *s) {
    if (!s) return;
    terra_free(s->cache);
    terra_free(s->out);
    terra_free(s);
}

const terra_select_desc *terra_select_get_desc(const terra_select *s) { return &s->d; }

void terra_select_set_source(terra_select *s, const terra_source *src) {
    s->src = src;
    for (int i = 0; i < s->d.range_cache_size; i++) s->cache[i] = (range_entry){.key = ~(terra_tile_key)0};
    memset(s->recent, 0, sizeof s->recent);
}
const terra_select_stats *terra_select_get_stats(const terra_select *s) { return &s->stats; }
double terra_select_range(const terra_select *s, int level) { return s->range[level]; }
double terra_select_tile_side(const terra_select *s, int level) { return s->side[level]; }
double terra_select_sse_px(const terra_select *s, double error_m, double distance_m) {
    return error_m * s->sse_k / fmax(distance_m, 1e-9);
}
void terra_select_morph(const terra_select *s, int level, float *start, float *end) {
    *start = s->morph_start[level];
    *end = s->morph_end[level];
}

static inline uint32_t key_hash(terra_tile_key k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

/* Asks the source for the ranges of the four children of `parent` into the set's least recently
 * used entry; NULL (and s->error set) when the source fails. */
static range_entry *fill_entry(terra_select *s, range_entry *set, int level, terra_tile_key parent, int32_t px,
                               int32_t py) {
    range_entry *e = &set[0];
    for (int w = 1; w < RANGE_WAYS; w++)
        if (set[w].stamp < e->stamp) e = &set[w];
    const double side = s->side[level];
    for (int c = 0; c < 4; c++) {
        const double x0 = (px * 2 + (c & 1)) * side, z0 = (py * 2 + (c >> 1)) * side;
        terra_status st = terra_source_height_range(s->src, x0, z0, x0 + side, z0 + side, &e->lo[c], &e->hi[c]);
        if (st != TERRA_OK) {
            e->key = ~(terra_tile_key)0;
            s->error = st;
            return NULL;
        }
    }
    e->key = parent;
    s->stats.range_misses++;
    return e;
}

/* A tile's world bounding box, its height range from the cache or the source. */
/* Boxes inside the walk are six doubles: min x, min y, min z, max x, max y, max z. */
enum { BX0, BY0, BZ0, BX1, BY1, BZ1 };

static bool tile_box(terra_select *s, int level, int32_t x, int32_t y, double b[6]) {
    const double side = s->side[level];
    b[BX0] = x * side, b[BX1] = (x + 1) * side;
    b[BZ0] = y * side, b[BZ1] = (y + 1) * side;
    const int32_t px = x >> 1, py = y >> 1; /* arithmetic shift: floor division by 2 */
    /* siblings are walked one after another: the entry the last sibling used is usually it */
    range_entry *e = s->recent[level];
    if (!e || s->recent_x[level] != px || s->recent_y[level] != py) {
        const terra_tile_key parent = terra_tile_key_make(0, level + 1, px, py);
        range_entry *set = &s->cache[(size_t)(key_hash(parent) & s->set_mask) * RANGE_WAYS];
        e = NULL;
        for (int w = 0; w < RANGE_WAYS; w++)
            if (set[w].key == parent) e = &set[w];
        if (!e) e = fill_entry(s, set, level, parent, px, py);
        if (!e) return false;
        e->stamp = s->frame; /* the memo is cleared each frame, so every entry used is stamped */
        s->recent[level] = e;
        s->recent_x[level] = px, s->recent_y[level] = py;
    }
    const int c = (x & 1) + 2 * (y & 1);
    b[BY0] = e->lo[c], b[BY1] = e->hi[c];
    return true;
}

static __attribute__((noinline)) void output_full(terra_select *s) {
    if (s->error == TERRA_OK)
        s->error = terra_fail(TERRA_E_CAPACITY, "select: more than max_tiles (%d) tiles selected; raise max_tiles",
                              s->d.max_tiles);
}

static inline __attribute__((always_inline)) void emit(terra_select *s, int level, int32_t x, int32_t y,
                                                       const double b[6], double sse) {
    if (level > 0 && sse > s->stats.sse_px_max) s->stats.sse_px_max = sse;
    if (s->count >= s->d.max_tiles) {
        output_full(s);
        return;
    }
    s->out[s->count++] = (terra_selected_tile){terra_tile_key_make(0, level, x, y), level, s->morph_start[level],
                                               s->morph_end[level],
                                               {{b[BX0], b[BY0], b[BZ0]}, {b[BX1], b[BY1], b[BZ1]}}};
    s->stats.per_level[level]++;
}

/* Tests a box against the frustum planes in `mask`: -1 when it is outside one of them, else the
 * mask of planes it still straddles (0: wholly inside, so its subtree skips further tests). Each
 * plane's nearest and farthest box corners were chosen once per frame (terra_select_run). */
static int cull_box(const terra_select *s, const double v[6], int mask) {
    int straddles = 0;
    while (mask) {
        const int i = __builtin_ctz((unsigned)mask);
        mask &= mask - 1;
        const terra_plane *p = &s->frustum->planes[i];
        const uint8_t *far = s->far_corner[i], *near = s->near_corner[i];
        if (p->a * v[far[0]] + p->b * v[far[1]] + p->c * v[far[2]] + p->d < 0) return -1;
        if (p->a * v[near[0]] + p->b * v[near[1]] + p->c * v[near[2]] + p->d < 0) straddles |= 1 << i;
    }
    return straddles;
}

enum { NODE_OUT_OF_RANGE = 0, NODE_HANDLED = 1 };

static inline double box_distance2(const terra_select *s, const double box[6]) {
    const double dx0 = box[BX0] - s->eye.x, dx1 = s->eye.x - box[BX1];
    const double dy0 = box[BY0] - s->eye.y, dy1 = s->eye.y - box[BY1];
    const double dz0 = box[BZ0] - s->eye.z, dz1 = s->eye.z - box[BZ1];
    const double ex = dx0 > 0 ? dx0 : (dx1 > 0 ? dx1 : 0), ey = dy0 > 0 ? dy0 : (dy1 > 0 ? dy1 : 0);
    const double ez = dz0 > 0 ? dz0 : (dz1 > 0 ? dz1 : 0);
    return ex * ex + ey * ey + ez * ez;
}

/* The projected error of a CDLOD tile whose box is d from the eye. A vertex morphing by k toward
 * its target on the parent's grid is taken to depart from the ground by the blend of the two
 * levels' errors, (1 - k) e(L) + k e(L+1); over distance that blend divided by the distance is
 * largest at one end of the morph, so the tile's worst is at its nearest point or where it has
 * become its parent (its range), past which the parent's error only shrinks on screen. */
static double cdlod_sse(const terra_select *s, int level, double d) {
    const double eL = s->d.level_error[level];
    double e = eL / fmax(d, 1e-9);
    if (level + 1 < s->d.levels) {
        const double eP = s->d.level_error[level + 1];
        const double k = terra_morph_factor(d, s->morph_start[level], s->morph_end[level]);
        e = fmax((eL + k * (eP - eL)) / fmax(d, 1e-9), eP / fmax(d, s->range[level]));
    }
    return e * s->sse_k;
}

/* Walks one tile; `planes` are the frustum planes its parent straddles. Returns NODE_OUT_OF_RANGE
 * when the tile is visible but beyond its level's range, with its box in *box, so its parent draws
 * it (fully morphed); NODE_HANDLED otherwise. */
static int select_node(terra_select *s, int level, int32_t x, int32_t y, int planes, double box[6]) {
    if (s->bounded) {
        const double side = s->side[level];
        if ((x + 1) * side <= s->d.bounds[0] || x * side >= s->d.bounds[2] || (y + 1) * side <= s->d.bounds[1] ||
            y * side >= s->d.bounds[3])
            return NODE_HANDLED; /* off the world */
    }
    float error = 0;
    if (s->by_error && !((error = s->d.tile_error(s->d.tile_error_user, terra_tile_key_make(0, level, x, y))) >= 0))
        return NODE_HANDLED; /* no such tile: no ground here */
    if (!tile_box(s, level, x, y, box)) return NODE_HANDLED;
    s->stats.visited++;
    if (planes) {
        planes = cull_box(s, box, planes);
        if (planes < 0) {
            s->stats.culled++;
            return NODE_HANDLED;
        }
    }
    const double dist2 = box_distance2(s, box); /* squared distance from the eye to the box */
    if (s->by_error) { /* refined while the screen could tell it from finer ground */
        const double sse = error * s->sse_k / fmax(sqrt(dist2), 1e-9);
        if (level == 0 || sse <= s->d.max_sse_px) {
            emit(s, level, x, y, box, sse);
        } else {
            double cb[6];
            for (int c = 0; c < 4; c++) select_node(s, level - 1, x * 2 + (c & 1), y * 2 + (c >> 1), planes, cb);
        }
        return NODE_HANDLED;
    }
    if (dist2 > s->range2[level]) return NODE_OUT_OF_RANGE;
    if (level == 0 || dist2 > s->range2[level - 1]) {
        emit(s, level, x, y, box, cdlod_sse(s, level, sqrt(dist2)));
        return NODE_HANDLED;
    }
    /* The crack rule with heights: this tile's whole box must fit in the part of the next coarser
     * band before its morph starts, or a coarser neighbour of its children may already be morphing
     * where they meet it. Options guarantee it for flat ground; steeper boxes are counted (the box's
     * height range is conservative, so a count is a risk, not a crack). */
    const double sx = box[BX1] - box[BX0], sy = box[BY1] - box[BY0], sz = box[BZ1] - box[BZ0];
    if (sx * sx + sy * sy + sz * sz > s->allowance2[level]) s->stats.crack_risk++;
    for (int c = 0; c < 4; c++) {
        int32_t cx = x * 2 + (c & 1), cy = y * 2 + (c >> 1);
        double cb[6];
        if (select_node(s, level - 1, cx, cy, planes, cb) == NODE_OUT_OF_RANGE)
            emit(s, level - 1, cx, cy, cb, cdlod_sse(s, level - 1, sqrt(box_distance2(s, cb))));
    }
    return NODE_HANDLED;
}

terra_status terra_select_run(terra_select *s, terra_vec3 eye, const terra_frustum *frustum,
                              const terra_selected_tile **tiles, int *count) {
    if (!isfinite(eye.x) || !isfinite(eye.y) || !isfinite(eye.z))
        return terra_fail(TERRA_E_INVALID, "select: eye is not finite (%g, %g, %g)", eye.x, eye.y, eye.z);
    memset(&s->stats, 0, sizeof s->stats);
    memset(s->recent, 0, sizeof s->recent);
    s->count = 0;
    s->frame++;
    s->eye = eye;
    s->frustum = frustum;
    s->error = TERRA_OK;
    const int top = s->d.levels - 1;
    const double side = s->side[top], r = s->range[top];
    const double lim = ldexp(1.0, 27) * side; /* tile coordinates are 28-bit signed */
    if (fabs(eye.x) + r >= lim || fabs(eye.z) + r >= lim)
        return terra_fail(TERRA_E_INVALID, "select: eye (%g, %g) is beyond the tile key range (%g m)", eye.x, eye.z,
                          lim);
    const int32_t x0 = (int32_t)floor((eye.x - r) / side), x1 = (int32_t)floor((eye.x + r) / side);
    const int32_t y0 = (int32_t)floor((eye.z - r) / side), y1 = (int32_t)floor((eye.z + r) / side);
    /* planes to test: all six, less a far plane that never culls (terra_camera_frustum's far_m = 0) */
    int planes = 0;
    if (frustum) {
        for (int i = 0; i < 6; i++) {
            const terra_plane *p = &frustum->planes[i];
            const double n[3] = {p->a, p->b, p->c};
            for (int k = 0; k < 3; k++) {
                s->far_corner[i][k] = (uint8_t)(n[k] >= 0 ? 3 + k : k);
                s->near_corner[i][k] = (uint8_t)(n[k] >= 0 ? k : 3 + k);
            }
        }
        planes = 0x3f;
        const terra_plane *far = &frustum->planes[5];
        if (far->a == 0 && far->b == 0 && far->c == 0 && far->d >= 0) planes = 0x1f;
    }
    double box[6];
    for (int32_t y = y0; y <= y1 && s->error == TERRA_OK; y++)
        for (int32_t x = x0; x <= x1 && s->error == TERRA_OK; x++) select_node(s, top, x, y, planes, box);
    if (s->error != TERRA_OK) return s->error;
    s->stats.drawn = s->count;
    *tiles = s->out;
    *count = s->count;
    return TERRA_OK;
}

bool terra_select_origin_shift(const terra_select *s, terra_vec3 cam, double threshold_m, terra_vec3 *shift) {
    if (threshold_m <= 0) threshold_m = 1000.0;
    *shift = (terra_vec3){0, 0, 0};
    if (fabs(cam.x) <= threshold_m && fabs(cam.z) <= threshold_m) return false;
    double snap = s->side[0];
    for (int l = 1; l < s->d.levels && s->side[l] <= threshold_m; l++) snap = s->side[l];
    shift->x = round(cam.x / snap) * snap;
    shift->z = round(cam.z / snap) * snap;
    return shift->x != 0 || shift->z != 0;
}
