/* terra select: the CDLOD quadtree walk. */
#include "terra/select.h"

#include <math.h>
#include <string.h>

typedef struct range_entry {
    terra_tile_key key; /* ~0 when empty */
    float lo, hi;
} range_entry;

struct terra_select {
    terra_select_desc d;
    const terra_source *src;
    double range[TERRA_TILE_MAX_LEVEL + 1];
    double side[TERRA_TILE_MAX_LEVEL + 1];
    float morph_start[TERRA_TILE_MAX_LEVEL + 1], morph_end[TERRA_TILE_MAX_LEVEL + 1];
    double allowance2[TERRA_TILE_MAX_LEVEL + 1]; /* squared 3-D box diagonal a subdivided tile may have */
    range_entry *cache;
    uint32_t cache_mask;
    terra_selected_tile *out;
    int count;
    terra_select_stats stats;
    /* per-run state */
    terra_vec3 eye;
    const terra_frustum *frustum;
    terra_status error;
};

terra_status terra_select_desc_resolve(const terra_select_desc *in, terra_select_desc *out) {
    terra_select_desc d = in ? *in : (terra_select_desc){0};
    terra_status st = terra_grid_desc_resolve(&d.grid, &d.grid);
    if (st != TERRA_OK) return st;
    if (d.levels == 0) d.levels = 12;
    if (d.range_ratio == 0) d.range_ratio = 2.0;
    if (d.morph_start_ratio == 0) d.morph_start_ratio = 0.5;
    if (d.max_tiles == 0) d.max_tiles = 4096;
    if (d.range_cache_size == 0) d.range_cache_size = 16384;
    if (d.levels < 1 || d.levels > 24)
        return terra_fail(TERRA_E_INVALID, "select: levels must be from 1 to 24 (got %d)", d.levels);
    if (!(d.range_ratio > 1.0) || !isfinite(d.range_ratio))
        return terra_fail(TERRA_E_INVALID, "select: range_ratio must be greater than 1 (got %g)", d.range_ratio);
    if (!(d.morph_start_ratio > 0.0 && d.morph_start_ratio < 1.0))
        return terra_fail(TERRA_E_INVALID, "select: morph_start_ratio must lie strictly between 0 and 1 (got %g)",
                          d.morph_start_ratio);
    if (d.max_tiles < 1) return terra_fail(TERRA_E_INVALID, "select: max_tiles must be positive (got %d)", d.max_tiles);
    if (d.range_cache_size < 1 || (d.range_cache_size & (d.range_cache_size - 1)))
        return terra_fail(TERRA_E_INVALID, "select: range_cache_size must be a power of two (got %d)",
                          d.range_cache_size);
    const double diag0 = d.grid.tile0_size * sqrt(2.0);
    const double min_range0 = 2.0 * diag0 / (d.morph_start_ratio * (d.range_ratio - 1.0));
    if (d.range0 == 0) d.range0 = 1.5 * min_range0;
    if (!isfinite(d.range0) || d.range0 < min_range0)
        return terra_fail(TERRA_E_INVALID,
                          "select: range0 %g m is too short: morph_start_ratio x (range_ratio - 1) x range0 must be "
                          "at least twice a level-0 tile's diagonal (%.1f m), so range0 >= %.1f m here; otherwise a "
                          "neighbour changes level before a tile has finished morphing and a crack opens",
                          d.range0, 2.0 * diag0, min_range0);
    *out = d;
    return TERRA_OK;
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
    s->cache = terra_alloc((size_t)d.range_cache_size * sizeof *s->cache);
    s->out = terra_alloc((size_t)d.max_tiles * sizeof *s->out);
    if (!s->cache || !s->out) {
        terra_select_destroy(s);
        return terra_fail(TERRA_E_NOMEM, "select: out of memory");
    }
    for (int i = 0; i < d.range_cache_size; i++) s->cache[i].key = ~(terra_tile_key)0;
    s->cache_mask = (uint32_t)d.range_cache_size - 1;
    for (int l = 0; l < d.levels; l++) {
        s->range[l] = d.range0 * pow(d.range_ratio, l);
        s->side[l] = terra_grid_tile_side(&d.grid, l);
        double band_lo = l ? s->range[l - 1] : 0.0;
        s->morph_start[l] = (float)(band_lo + (s->range[l] - band_lo) * d.morph_start_ratio);
        s->morph_end[l] = (float)s->range[l];
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
const terra_select_stats *terra_select_get_stats(const terra_select *s) { return &s->stats; }
double terra_select_range(const terra_select *s, int level) { return s->range[level]; }
double terra_select_tile_side(const terra_select *s, int level) { return s->side[level]; }
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

/* A tile's world bounding box, its height range from the cache or the source. */
static bool tile_box(terra_select *s, int level, int32_t x, int32_t y, terra_box3 *b) {
    const double side = s->side[level];
    b->min.x = x * side, b->max.x = (x + 1) * side;
    b->min.z = y * side, b->max.z = (y + 1) * side;
    terra_tile_key key = terra_tile_key_make(0, level, x, y);
    range_entry *e = &s->cache[key_hash(key) & s->cache_mask];
    if (e->key != key) {
        float lo, hi;
        terra_status st = terra_source_height_range(s->src, b->min.x, b->min.z, b->max.x, b->max.z, &lo, &hi);
        if (st != TERRA_OK) {
            s->error = st;
            return false;
        }
        e->key = key, e->lo = lo, e->hi = hi;
        s->stats.range_misses++;
    }
    b->min.y = e->lo, b->max.y = e->hi;
    return true;
}

static void emit(terra_select *s, int level, int32_t x, int32_t y, const terra_box3 *box) {
    if (s->count >= s->d.max_tiles) {
        if (s->error == TERRA_OK)
            s->error = terra_fail(TERRA_E_CAPACITY, "select: more than max_tiles (%d) tiles selected; raise max_tiles",
                                  s->d.max_tiles);
        return;
    }
    terra_selected_tile *t = &s->out[s->count++];
    t->key = terra_tile_key_make(0, level, x, y);
    t->level = level;
    t->morph_start = s->morph_start[level];
    t->morph_end = s->morph_end[level];
    t->box = *box;
    s->stats.drawn++;
    s->stats.per_level[level]++;
}

enum { NODE_OUT_OF_RANGE = 0, NODE_HANDLED = 1 };

/* Walks one tile. Returns NODE_OUT_OF_RANGE when the tile is visible but beyond its level's range,
 * so its parent draws it (fully morphed); NODE_HANDLED otherwise. */
static int select_node(terra_select *s, int level, int32_t x, int32_t y, bool inside) {
    terra_box3 box;
    if (!tile_box(s, level, x, y, &box)) return NODE_HANDLED;
    s->stats.visited++;
    if (!inside && s->frustum) {
        terra_cull c = terra_frustum_test_box(s->frustum, &box);
        if (c == TERRA_CULL_OUTSIDE) {
            s->stats.culled++;
            return NODE_HANDLED;
        }
        inside = c == TERRA_CULL_INSIDE;
    }
    const double dist = terra_box3_distance(&box, s->eye);
    if (dist > s->range[level]) return NODE_OUT_OF_RANGE;
    if (level == 0 || dist > s->range[level - 1]) {
        emit(s, level, x, y, &box);
        return NODE_HANDLED;
    }
    /* The crack rule with heights: this tile's whole box must fit in the part of the next coarser
     * band before its morph starts, or a coarser neighbour of its children may already be morphing
     * where they meet it. Options guarantee it for flat ground; steeper boxes are counted (the box's
     * height range is conservative, so a count is a risk, not a crack). */
    const double dx = box.max.x - box.min.x, dy = box.max.y - box.min.y, dz = box.max.z - box.min.z;
    if (dx * dx + dy * dy + dz * dz > s->allowance2[level]) s->stats.crack_risk++;
    for (int c = 0; c < 4; c++) {
        int32_t cx = x * 2 + (c & 1), cy = y * 2 + (c >> 1);
        if (select_node(s, level - 1, cx, cy, inside) == NODE_OUT_OF_RANGE) {
            terra_box3 cb;
            if (tile_box(s, level - 1, cx, cy, &cb)) emit(s, level - 1, cx, cy, &cb);
        }
    }
    return NODE_HANDLED;
}

terra_status terra_select_run(terra_select *s, terra_vec3 eye, const terra_frustum *frustum,
                              const terra_selected_tile **tiles, int *count) {
    if (!isfinite(eye.x) || !isfinite(eye.y) || !isfinite(eye.z))
        return terra_fail(TERRA_E_INVALID, "select: eye is not finite (%g, %g, %g)", eye.x, eye.y, eye.z);
    memset(&s->stats, 0, sizeof s->stats);
    s->count = 0;
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
    for (int32_t y = y0; y <= y1 && s->error == TERRA_OK; y++)
        for (int32_t x = x0; x <= x1 && s->error == TERRA_OK; x++) select_node(s, top, x, y, false);
    if (s->error != TERRA_OK) return s->error;
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
