/* terra planet: CDLOD over the six face quadtrees, frustum and horizon culling by bounding spheres. */
#include "terra/planet.h"

#include "../keymap.h"
#include "cap.h"

#include <math.h>
#include <string.h>

/* Bounding spheres of four siblings, cached by their parent (4-way set associative, least recently
 * used replaced): a tile's height range costs the planet's noise at its centre, a sphere's corners
 * four tangents. */
/* how many levels below a tile its range is narrowed by (tile_range): 1 keeps 4.0% of the tiles drawn
 * wholly over the horizon in test_planet's views, 0 5.2%, 2 3.5% for four times the work */
#define RANGE_DEPTH 1
#define WAYS 4
#define SETS 1024
typedef struct tile_b {
    terra_vec3 c; /* bounding sphere */
    double r;
    terra_vec3 dir;           /* the tile's centre direction */
    double reach, cos_reach, sin_reach; /* its cap's angle plus its top's horizon angle (terra_horizon_hides) */
    /* its ground as a cap seen from the centre (terra_planet_tile_cap): within gang (cos, sin) of
     * gdir, rlo to rhi from the centre */
    terra_vec3 gdir;
    double cos_gang, sin_gang, rlo, rhi;
} tile_b;
typedef struct sib_entry {
    terra_tile_key key; /* the parent's; ~0 empty */
    tile_b b[4];
    uint32_t stamp;
} sib_entry;

struct terra_planet_select {
    terra_planet_select_desc d;
    const terra_planet *p;
    int levels;
    double range[TERRA_PLANET_MAX_LEVELS], range2[TERRA_PLANET_MAX_LEVELS];
    float morph_start[TERRA_PLANET_MAX_LEVELS], morph_end[TERRA_PLANET_MAX_LEVELS];
    double allowance2[TERRA_PLANET_MAX_LEVELS];
    float error[TERRA_PLANET_MAX_LEVELS];
    float hi;               /* the planet's highest ground */
    double sse_k, occluder; /* occluder: the ball's radius in the horizon's scaled space */
    double ia, ib;          /* the scaled space: x / a, y / b, z / a (a sphere's: all / radius) */
    double stretch, lean_k; /* an ellipsoid's: angles grow by a / b at most; a height leans by lean_k per unit */
    tile_b root[6];
    sib_entry *cache;
    uint32_t frame;
    terra_planet_tile *out;
    int count;
    terra_planet_select_stats stats;
    terra_vec3 eye, eye_dir;
    terra_vec3 eye_unit; /* the eye's direction from the centre and its distance */
    double eye_len;
    double eye_reach, cos_eye, sin_eye; /* the eye's horizon angle; eye_reach < 0: inside the ball */
    const terra_frustum *frustum;
    terra_status status;
};

static double level_diagonal(const terra_planet *p, int level, float hi) {
    /* the largest tile of a level lies at a face's middle or corner: measure both, at the highest ground */
    const int32_t n = terra_planet_tiles_per_side(p, level);
    const int N = terra_planet_get_desc(p)->cells;
    double best = 0;
    const int32_t at[3] = {0, n / 2, n - 1};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const terra_tile_key k = terra_tile_key_make(0, level, at[a], at[b]);
            const terra_vec3 c00 = terra_planet_tile_dir(p, k, 0, 0), c11 = terra_planet_tile_dir(p, k, N, N);
            const terra_vec3 c10 = terra_planet_tile_dir(p, k, N, 0), c01 = terra_planet_tile_dir(p, k, 0, N);
            const double d1 = sqrt((c11.x - c00.x) * (c11.x - c00.x) + (c11.y - c00.y) * (c11.y - c00.y) +
                                   (c11.z - c00.z) * (c11.z - c00.z));
            const double d2 = sqrt((c10.x - c01.x) * (c10.x - c01.x) + (c10.y - c01.y) * (c10.y - c01.y) +
                                   (c10.z - c01.z) * (c10.z - c01.z));
            best = fmax(best, fmax(d1, d2));
        }
    const terra_planet_desc *pd = terra_planet_get_desc(p);
    return best * (pd->radius_m * pd->radius_m / pd->polar_radius_m + hi); /* the largest radius of curvature */
}

/* A tile's range: its own, narrowed to the hull of its children's and grandchildren's (interval
 * bounds tighten on smaller pieces; all of them hold, so their intersection does). */
static terra_status tile_range(const terra_planet *p, terra_tile_key k, int depth, float *lo, float *hi) {
    terra_status st = terra_planet_height_range(p, k, lo, hi);
    if (st != TERRA_OK || depth == 0 || terra_tile_key_level(k) == 0) return st;
    float clo = INFINITY, chi = -INFINITY;
    for (int c = 0; c < 4; c++) {
        float a, b;
        st = tile_range(p, terra_tile_key_child(k, c), depth - 1, &a, &b);
        if (st != TERRA_OK) return st;
        clo = fminf(clo, a), chi = fmaxf(chi, b);
    }
    *lo = fmaxf(*lo, clo), *hi = fminf(*hi, chi);
    return TERRA_OK;
}

static terra_status measure(const terra_planet_select *s, terra_tile_key k, tile_b *b) {
    float lo, hi;
    terra_status st = tile_range(s->p, k, RANGE_DEPTH, &lo, &hi);
    if (st != TERRA_OK) return st;
    double angle;
    terra_planet_tile_bounds(s->p, k, lo, hi, &b->c, &b->r, &angle);
    double gang;
    terra_planet_tile_cap(s->p, k, lo, hi, &b->gdir, &gang, &b->rlo, &b->rhi);
    b->cos_gang = cos(fmin(gang, 3.14159265358979323846)), b->sin_gang = sin(fmin(gang, 3.14159265358979323846));
    terra_vec3 d = b->c;
    double top = 1 + hi * s->ia;
    if (s->stretch > 1) { /* the cap in the scaled space: its centre's image, angles stretched, heights leaning */
        const int half = terra_planet_get_desc(s->p)->cells / 2;
        const terra_vec3 n = terra_planet_tile_dir(s->p, k, half, half);
        const double hmax = fmax(fabs((double)lo), fabs((double)hi)) * s->ib;
        d = (terra_vec3){n.x / s->ia, n.y / s->ib, n.z / s->ia};
        angle = angle * s->stretch + s->lean_k * hmax / fmax(1 - hmax, 0.5);
        top = 1 + fmax(hi, 0) * s->ib;
    }
    const double len = sqrt(d.x * d.x + d.y * d.y + d.z * d.z);
    b->dir = (terra_vec3){d.x / len, d.y / len, d.z / len};
    b->reach = angle + acos(fmin(s->occluder / fmax(top, s->occluder), 1.0)) + 1e-9;
    b->cos_reach = cos(b->reach), b->sin_reach = sin(b->reach);
    return TERRA_OK;
}

/* Each level's range and morph from tau, the view and the level errors. */
static void set_ranges(terra_planet_select *s) {
    const terra_planet_select_desc d = s->d;
    const terra_planet *p = s->p;
    const float hi = s->hi;
    s->sse_k = d.view_height_px / (2.0 * tan(0.5 * d.view_fov_y_rad));
    /* ranges: the next level's error projects to tau there (so a tile is split exactly where by_error
     * splits it); with morph_margin, as on the plane (select.c, derive_ranges), no sooner than the
     * morph margin of this level's diagonal allows. The face's own level draws however far (it has
     * no parent to hand over to). */
    double prev = 0;
    for (int l = 0; l < s->levels; l++) {
        s->error[l] = terra_planet_level_error(p, l);
        double r = d.morph_margin ? prev + level_diagonal(p, l, hi) / d.morph_start_ratio : 0;
        if (l + 1 < s->levels) r = fmax(r, terra_planet_level_error(p, l + 1) * s->sse_k / d.max_sse_px);
        else r = fmax(r, 2 * prev);
        r = fmax(r, prev * (1 + 1e-6) + 1e-3); /* a level whose error is no more than the one below draws nowhere */
        s->range[l] = r, s->range2[l] = r * r;
        s->morph_start[l] = (float)(prev + (r - prev) * d.morph_start_ratio);
        s->morph_end[l] = (float)r;
        if (l > 0) {
            const double a = s->morph_start[l] - s->range[l - 1];
            s->allowance2[l] = a * a;
        }
        prev = r;
    }
    s->morph_start[s->levels - 1] = s->morph_end[s->levels - 1] = 0; /* faces never morph */
    if (d.by_error)
        for (int l = 0; l < s->levels; l++) s->morph_start[l] = s->morph_end[l] = 0;
}

terra_status terra_planet_select_create(const terra_planet_select_desc *desc, const terra_planet *p,
                                        terra_planet_select **out) {
    *out = NULL;
    terra_planet_select_desc d = desc ? *desc : (terra_planet_select_desc){0};
    if (!p) return terra_fail(TERRA_E_INVALID, "planet select: no planet given");
    if (d.max_sse_px == 0) d.max_sse_px = 2.0;
    if (d.view_height_px == 0) d.view_height_px = 1080;
    if (d.view_fov_y_rad == 0) d.view_fov_y_rad = 60.0 * 3.14159265358979323846 / 180.0;
    if (d.morph_start_ratio == 0) d.morph_start_ratio = 0.5;
    if (d.max_tiles == 0) d.max_tiles = 4096;
    if (!(d.max_sse_px > 0) || !isfinite(d.max_sse_px))
        return terra_fail(TERRA_E_INVALID, "planet select: max_sse_px must be a positive number of pixels (got %g)", d.max_sse_px);
    if (d.view_height_px < 1 || d.view_height_px > 65536)
        return terra_fail(TERRA_E_INVALID, "planet select: view_height_px must be from 1 to 65536 (got %d)", d.view_height_px);
    if (!(d.view_fov_y_rad > 0 && d.view_fov_y_rad < 3.1))
        return terra_fail(TERRA_E_INVALID, "planet select: view_fov_y_rad must lie in (0, 3.1) (got %g)", d.view_fov_y_rad);
    if (!(d.morph_start_ratio > 0 && d.morph_start_ratio < 1))
        return terra_fail(TERRA_E_INVALID, "planet select: morph_start_ratio must lie strictly between 0 and 1 (got %g)",
                          d.morph_start_ratio);
    if (d.max_tiles < 1 || d.max_tiles > TERRA_SELECT_MAX_TILES)
        return terra_fail(TERRA_E_INVALID, "planet select: max_tiles must be from 1 to 2^20 (got %d)", d.max_tiles);
    terra_planet_select *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "planet select: out of memory");
    s->d = d;
    s->p = p;
    s->levels = terra_planet_get_desc(p)->levels;
    s->cache = terra_alloc(sizeof *s->cache * SETS * WAYS);
    s->out = terra_alloc(sizeof *s->out * (size_t)d.max_tiles);
    if (!s->cache || !s->out) {
        terra_planet_select_destroy(s);
        return terra_fail(TERRA_E_NOMEM, "planet select: out of memory");
    }
    for (int i = 0; i < SETS * WAYS; i++) s->cache[i] = (sib_entry){.key = ~(terra_tile_key)0};
    float lo, hi;
    terra_planet_height_bounds(p, &lo, &hi);
    {
        const double a = terra_planet_get_desc(p)->radius_m, b = terra_planet_get_desc(p)->polar_radius_m;
        s->ia = 1 / a, s->ib = 1 / b;
        /* ground at heights >= 0 lies outside the ellipsoid, which is the unit ball here; lower ground
         * outside the ball shrunk by lo / b (a length shrinks by at most 1 / b) */
        s->occluder = a == b ? 1 + lo / a : 1 + fmin(lo, 0) / b;
        s->stretch = a / b;
        /* a height h along a normal n moves the scaled point by h (n.x / a, n.y / b, n.z / a): off the
         * image of n by at most twice the largest angle the scaling turns a vector, atan((k - 1) / (2 sqrt k)) */
        s->lean_k = a == b ? 0 : 2.02 * atan((s->stretch - 1) / (2 * sqrt(s->stretch)));
    }
    s->hi = hi;
    set_ranges(s);
    for (int f = 0; f < 6; f++) {
        terra_status st = measure(s, terra_tile_key_make(f, s->levels - 1, 0, 0), &s->root[f]);
        if (st != TERRA_OK) {
            terra_planet_select_destroy(s);
            return st;
        }
    }
    *out = s;
    return TERRA_OK;
}

void terra_planet_select_destroy(terra_planet_select *s) {
    if (!s) return;
    terra_free(s->cache);
    terra_free(s->out);
    terra_free(s);
}

const terra_planet_select_stats *terra_planet_select_get_stats(const terra_planet_select *s) { return &s->stats; }
double terra_planet_select_range(const terra_planet_select *s, int level) {
    return level >= 0 && level < s->levels ? s->range[level] : 0;
}


/* The bounding spheres of the four children of `parent`, from the cache or measured. */
static const sib_entry *children(terra_planet_select *s, terra_tile_key parent) {
    sib_entry *set = &s->cache[(hash_key(parent) & (SETS - 1)) * WAYS];
    sib_entry *e = &set[0];
    for (int w = 0; w < WAYS; w++) {
        if (set[w].key == parent) {
            set[w].stamp = s->frame;
            return &set[w];
        }
        if (set[w].stamp < e->stamp) e = &set[w];
    }
    const int level = terra_tile_key_level(parent) - 1, face = terra_tile_key_face(parent);
    const int32_t px = terra_tile_key_x(parent), py = terra_tile_key_y(parent);
    for (int c = 0; c < 4; c++) {
        terra_status st = measure(s, terra_tile_key_make(face, level, px * 2 + (c & 1), py * 2 + (c >> 1)), &e->b[c]);
        if (st != TERRA_OK) {
            s->status = st;
            e->key = ~(terra_tile_key)0;
            return NULL;
        }
    }
    e->key = parent;
    e->stamp = s->frame;
    return e;
}

/* -1: outside a plane of `mask`; else the planes it still straddles. */
static int cull_sphere(const terra_frustum *f, terra_vec3 c, double r, int mask) {
    int straddles = 0;
    while (mask) {
        const int i = __builtin_ctz((unsigned)mask);
        mask &= mask - 1;
        const terra_plane *p = &f->planes[i];
        const double dist = p->a * c.x + p->b * c.y + p->c * c.z + p->d;
        if (dist < -r) return -1;
        if (dist < r) straddles |= 1 << i;
    }
    return straddles;
}

/* Lower bounds of the distance from the eye to the tile's ground: to its bounding sphere (cheap), and
 * to its cap (terra_cap_distance), nearer the truth for tiles wide against their distance. The walk
 * takes the cap's only where the sphere's would split the tile. */
static inline double sphere_distance(const terra_planet_select *s, const tile_b *b) {
    const double dx = b->c.x - s->eye.x, dy = b->c.y - s->eye.y, dz = b->c.z - s->eye.z;
    return fmax(sqrt(dx * dx + dy * dy + dz * dz) - b->r, 0);
}

static inline double cap_distance(const terra_planet_select *s, const tile_b *b) {
    return terra_cap_distance_(s->eye_len, s->eye_unit, b->gdir, b->cos_gang, b->sin_gang, b->rlo, b->rhi);
}

static inline double tile_distance(const terra_planet_select *s, const tile_b *b) {
    return fmax(sphere_distance(s, b), cap_distance(s, b));
}

static void emit(terra_planet_select *s, terra_tile_key key, int level, const tile_b *b) {
    if (s->count >= s->d.max_tiles) {
        if (s->status == TERRA_OK)
            s->status = terra_fail(TERRA_E_CAPACITY, "planet select: more than max_tiles (%d) tiles selected; raise max_tiles",
                                   s->d.max_tiles);
        return;
    }
    if (level > 0 && s->error[level] * s->sse_k > s->stats.sse_px_max * sphere_distance(s, b)) { /* may be the largest */
        const double sse = s->error[level] * s->sse_k / fmax(tile_distance(s, b), 1e-9);
        if (sse > s->stats.sse_px_max) s->stats.sse_px_max = sse;
    }
    s->out[s->count++] = (terra_planet_tile){key, level, s->morph_start[level], s->morph_end[level], b->c, b->r};
    s->stats.per_level[level]++;
}

enum { OUT_OF_RANGE, HANDLED };

/* The horizon test of terra_horizon_hides with the tile's angles measured once: hidden when the angle
 * from the eye's direction to the tile's exceeds the eye's reach plus the tile's (cosines compared). */
static inline bool over_horizon(const terra_planet_select *s, const tile_b *b) {
    if (s->eye_reach < 0 || s->eye_reach + b->reach >= 3.14159265358979) return false;
    const double cos_sum = s->cos_eye * b->cos_reach - s->sin_eye * b->sin_reach;
    const double cos_gamma = s->eye_dir.x * b->dir.x + s->eye_dir.y * b->dir.y + s->eye_dir.z * b->dir.z;
    return cos_gamma < cos_sum - 1e-12;
}

static int node(terra_planet_select *s, terra_tile_key key, const tile_b *b, int planes) {
    const int level = terra_tile_key_level(key);
    s->stats.visited++;
    if (planes) {
        planes = cull_sphere(s->frustum, b->c, b->r, planes);
        if (planes < 0) {
            s->stats.culled_frustum++;
            return HANDLED;
        }
    }
    if (!s->d.no_horizon_culling && over_horizon(s, b)) {
        s->stats.culled_horizon++;
        return HANDLED;
    }
    double dist = sphere_distance(s, b);
    for (int tight = 0;; tight++) { /* the sphere's distance, then the cap's where that would refine */
        if (s->d.by_error) {
            if (level == 0 || s->error[level] * s->sse_k <= s->d.max_sse_px * dist) {
                emit(s, key, level, b);
                return HANDLED;
            }
        } else {
            if (dist > s->range[level] && level != s->levels - 1) return OUT_OF_RANGE;
            if (level == 0 || dist > s->range[level - 1]) {
                emit(s, key, level, b);
                return HANDLED;
            }
        }
        if (tight) break;
        dist = fmax(dist, cap_distance(s, b));
    }
    if (!s->d.by_error && 4 * b->r * b->r > s->allowance2[level]) s->stats.crack_risk++;
    const sib_entry *e = children(s, key);
    if (!e) return HANDLED;
    const sib_entry kids = *e; /* the walk below may replace the entry */
    for (int k = 0; k < 4; k++) {
        const terra_tile_key ck = terra_tile_key_make(terra_tile_key_face(key), level - 1,
                                                      terra_tile_key_x(key) * 2 + (k & 1), terra_tile_key_y(key) * 2 + (k >> 1));
        if (node(s, ck, &kids.b[k], planes) == OUT_OF_RANGE)
            emit(s, ck, level - 1, &kids.b[k]);
    }
    return HANDLED;
}

terra_status terra_planet_select_set_sse(terra_planet_select *s, double max_sse_px) {
    if (!(max_sse_px > 0) || !isfinite(max_sse_px))
        return terra_fail(TERRA_E_INVALID, "planet select: max_sse_px must be a positive number of pixels (got %g)", max_sse_px);
    s->d.max_sse_px = max_sse_px;
    set_ranges(s);
    return TERRA_OK;
}

double terra_planet_select_sse(const terra_planet_select *s) { return s->d.max_sse_px; }

terra_status terra_planet_select_run(terra_planet_select *s, terra_vec3 eye, const terra_frustum *frustum,
                                     const terra_planet_tile **tiles, int *count) {
    if (!isfinite(eye.x) || !isfinite(eye.y) || !isfinite(eye.z))
        return terra_fail(TERRA_E_INVALID, "planet select: eye is not finite (%g, %g, %g)", eye.x, eye.y, eye.z);
    memset(&s->stats, 0, sizeof s->stats);
    s->count = 0;
    s->frame++;
    s->eye = eye;
    s->eye_len = sqrt(eye.x * eye.x + eye.y * eye.y + eye.z * eye.z);
    s->eye_unit = s->eye_len > 0 ? (terra_vec3){eye.x / s->eye_len, eye.y / s->eye_len, eye.z / s->eye_len} : (terra_vec3){0, 1, 0};
    const terra_vec3 es = {eye.x * s->ia, eye.y * s->ib, eye.z * s->ia};
    const double de = sqrt(es.x * es.x + es.y * es.y + es.z * es.z);
    s->eye_reach = -1;
    if (de > s->occluder) {
        s->eye_dir = (terra_vec3){es.x / de, es.y / de, es.z / de};
        s->cos_eye = s->occluder / de, s->sin_eye = sqrt(1 - s->cos_eye * s->cos_eye);
        s->eye_reach = acos(s->cos_eye);
    }
    s->frustum = frustum;
    s->status = TERRA_OK;
    int planes = 0;
    if (frustum) {
        planes = 0x3f;
        const terra_plane *far = &frustum->planes[5];
        if (far->a == 0 && far->b == 0 && far->c == 0 && far->d >= 0) planes = 0x1f;
    }
    for (int f = 0; f < 6 && s->status == TERRA_OK; f++)
        node(s, terra_tile_key_make(f, s->levels - 1, 0, 0), &s->root[f], planes);
    if (s->status != TERRA_OK) return s->status;
    s->stats.drawn = s->count;
    *tiles = s->out;
    *count = s->count;
    return TERRA_OK;
}
