/* terra ground: height, normal and surface queries on the finest drawn triangles, and collider
 * blocks around bodies. */
#include "terra/ground.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "keymap.h"

#define MAX_LATTICE 1099511627776.0 /* 2^40 lattice cells from the origin at most */

typedef struct block_slot {
    terra_collider_block b;
    float *heights;
    terra_surface *surfaces;
    uint32_t source_version; /* the source version it was stood from */
    bool standing;
} block_slot;

typedef struct candidate {
    int32_t bx, bz;
    double dist;
} candidate;

struct terra_ground {
    terra_ground_desc d;
    const terra_source *src;
    double s0;               /* lattice spacing, local metres */
    int C;                   /* cells per block */
    double R[3][3];          /* rotation, local -> world */
    double scale;
    terra_vec3 T;
    uint32_t source_version;
    terra_surface_physics physics[256];

    block_slot *slots;
    int nslots;
    int *free_slots;
    int nfree;
    key_map index;           /* block key -> slot */
    terra_collider_block *list; /* standing blocks, for terra_ground_blocks */
    int nlist;
    candidate *cand;
    int max_cand;

    double cost_sum;
    long cost_n;
    bool starved;
    uint64_t frame;
    terra_ground_stats stats;
};

static double now_ms(const terra_ground *g) {
    return (g->d.clock ? g->d.clock(g->d.clock_user) : terra_now_s()) * 1e3;
}

/* ---- transform ------------------------------------------------------------------------------------ */

static terra_status set_transform(terra_ground *g, const terra_transform *t) {
    double w = t->rotation[0], x = t->rotation[1], y = t->rotation[2], z = t->rotation[3];
    double n = w * w + x * x + y * y + z * z;
    if (n == 0) w = 1, n = 1;
    double s = t->scale == 0 ? 1.0 : t->scale;
    if (!isfinite(n) || fabs(n - 1.0) > 1e-6 || !(s > 0) || !isfinite(s) || !isfinite(t->translation.x) ||
        !isfinite(t->translation.y) || !isfinite(t->translation.z))
        return terra_fail(TERRA_E_INVALID,
                          "ground: the transform needs a unit quaternion, a positive scale and a finite translation");
    g->R[0][0] = 1 - 2 * (y * y + z * z), g->R[0][1] = 2 * (x * y - w * z), g->R[0][2] = 2 * (x * z + w * y);
    g->R[1][0] = 2 * (x * y + w * z), g->R[1][1] = 1 - 2 * (x * x + z * z), g->R[1][2] = 2 * (y * z - w * x);
    g->R[2][0] = 2 * (x * z - w * y), g->R[2][1] = 2 * (y * z + w * x), g->R[2][2] = 1 - 2 * (x * x + y * y);
    g->scale = s;
    g->T = t->translation;
    g->d.transform = *t;
    return TERRA_OK;
}

static terra_vec3 to_world(const terra_ground *g, terra_vec3 p) {
    terra_vec3 q = {p.x * g->scale, p.y * g->scale, p.z * g->scale};
    return (terra_vec3){g->T.x + g->R[0][0] * q.x + g->R[0][1] * q.y + g->R[0][2] * q.z,
                        g->T.y + g->R[1][0] * q.x + g->R[1][1] * q.y + g->R[1][2] * q.z,
                        g->T.z + g->R[2][0] * q.x + g->R[2][1] * q.y + g->R[2][2] * q.z};
}

/* World direction (no translation, no scale) into local, and back. */
static terra_vec3 dir_to_local(const terra_ground *g, terra_vec3 v) {
    return (terra_vec3){g->R[0][0] * v.x + g->R[1][0] * v.y + g->R[2][0] * v.z,
                        g->R[0][1] * v.x + g->R[1][1] * v.y + g->R[2][1] * v.z,
                        g->R[0][2] * v.x + g->R[1][2] * v.y + g->R[2][2] * v.z};
}
static terra_vec3 dir_to_world(const terra_ground *g, terra_vec3 v) {
    return (terra_vec3){g->R[0][0] * v.x + g->R[0][1] * v.y + g->R[0][2] * v.z,
                        g->R[1][0] * v.x + g->R[1][1] * v.y + g->R[1][2] * v.z,
                        g->R[2][0] * v.x + g->R[2][1] * v.y + g->R[2][2] * v.z};
}

static terra_vec3 to_local(const terra_ground *g, terra_vec3 p) {
    terra_vec3 v = dir_to_local(g, (terra_vec3){p.x - g->T.x, p.y - g->T.y, p.z - g->T.z});
    return (terra_vec3){v.x / g->scale, v.y / g->scale, v.z / g->scale};
}

/* ---- samples: from a standing block when there is one, else from the source ------------------------ */

static inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static const block_slot *block_of_point(const terra_ground *g, int64_t i, int64_t j) {
    const int64_t bx = floor_div(i, g->C), bz = floor_div(j, g->C);
    int32_t k = map_get(&g->index, terra_tile_key_make(7, 0, (int32_t)bx, (int32_t)bz));
    if (k < 0) return NULL;
    const block_slot *s = &g->slots[k];
    return s->standing && s->source_version == g->source_version ? s : NULL;
}

/* Heights of the four corners of cell (i, j): h[0] (i,j), h[1] (i+1,j), h[2] (i,j+1), h[3] (i+1,j+1). */
static terra_status cell_heights(const terra_ground *g, int64_t i, int64_t j, float h[4]) {
    const block_slot *b = block_of_point(g, i, j);
    if (b) { /* the cell lies wholly in its block: blocks hold their far edge too */
        const int n = g->C + 1;
        const float *p = b->heights + (size_t)(j - b->b.iz0) * n + (size_t)(i - b->b.ix0);
        h[0] = p[0], h[1] = p[1], h[2] = p[n], h[3] = p[n + 1];
        return TERRA_OK;
    }
    terra_grid_request r = {.ix0 = i, .iz0 = j, .spacing = g->s0, .nx = 2, .nz = 2};
    return terra_source_sample(g->src, &r, h, NULL);
}

static terra_status sample_surface(const terra_ground *g, int64_t i, int64_t j, terra_surface *out) {
    const block_slot *b = block_of_point(g, i, j);
    if (b) {
        *out = b->surfaces[(size_t)(j - b->b.iz0) * (g->C + 1) + (size_t)(i - b->b.ix0)];
        return TERRA_OK;
    }
    float h;
    terra_grid_request r = {.ix0 = i, .iz0 = j, .spacing = g->s0, .nx = 1, .nz = 1};
    return terra_source_sample(g->src, &r, &h, out);
}

/* The plane of the triangle of cell (i, j) over (u, w) in [0,1]²: y = h0 + b·u + c·w. The cell is
 * split from (0,0) to (1,1): w >= u is the triangle (00, 01, 11), else (00, 11, 10). */
static void triangle_plane(const float h[4], bool upper, double *b, double *c) {
    if (upper) *b = (double)h[3] - h[2], *c = (double)h[2] - h[0];
    else *b = (double)h[1] - h[0], *c = (double)h[3] - h[1];
}

typedef struct local_hit {
    terra_vec3 p;      /* local point */
    double b, c;       /* its triangle's slopes per cell */
} local_hit;

/* Ground under a local vertical line at (x, z). */
static terra_status vertical_hit(const terra_ground *g, double x, double z, local_hit *hit) {
    const double fx = x / g->s0, fz = z / g->s0;
    if (!(fabs(fx) < MAX_LATTICE && fabs(fz) < MAX_LATTICE))
        return terra_fail(TERRA_E_INVALID, "ground: point (%g, %g) is outside the supported range", x, z);
    const int64_t i = (int64_t)floor(fx), j = (int64_t)floor(fz);
    const double u = fx - (double)i, w = fz - (double)j;
    float h[4];
    terra_status st = cell_heights(g, i, j, h);
    if (st != TERRA_OK) return st;
    triangle_plane(h, w >= u, &hit->b, &hit->c);
    hit->p = (terra_vec3){x, h[0] + hit->b * u + hit->c * w, z};
    return TERRA_OK;
}

/* First ground met by the local ray a + t·d (t >= 0, d.y < 0), walking the cells its horizontal
 * projection crosses between the heights the source says the ground can have there. */
static terra_status slanted_hit(const terra_ground *g, terra_vec3 a, terra_vec3 d, local_hit *hit) {
    float lo, hi;
    terra_status st = terra_source_height_range(g->src, a.x - g->s0, a.z - g->s0, a.x + g->s0, a.z + g->s0, &lo, &hi);
    if (st != TERRA_OK) return st;
    double t0 = 0, t1 = 0;
    for (int it = 0; it < 32; it++) { /* widen [lo, hi] until it holds over the ray's footprint */
        t0 = (hi + 1.0 - a.y) / d.y, t1 = (lo - 1.0 - a.y) / d.y; /* from above the top to below the bottom */
        double x0 = fmin(a.x + t0 * d.x, a.x + t1 * d.x), x1 = fmax(a.x + t0 * d.x, a.x + t1 * d.x);
        double z0 = fmin(a.z + t0 * d.z, a.z + t1 * d.z), z1 = fmax(a.z + t0 * d.z, a.z + t1 * d.z);
        float l2, h2;
        st = terra_source_height_range(g->src, x0 - g->s0, z0 - g->s0, x1 + g->s0, z1 + g->s0, &l2, &h2);
        if (st != TERRA_OK) return st;
        if (l2 >= lo && h2 <= hi) break;
        lo = fminf(lo, l2), hi = fmaxf(hi, h2);
    }
    /* walk the cells from t0 to t1 (2-D DDA) */
    const double s = g->s0;
    double px = (a.x + t0 * d.x) / s, pz = (a.z + t0 * d.z) / s;
    int64_t i = (int64_t)floor(px), j = (int64_t)floor(pz);
    const double dx = d.x / s, dz = d.z / s;
    const int sx = dx > 0 ? 1 : -1, sz = dz > 0 ? 1 : -1;
    const double tdx = dx != 0 ? fabs(1.0 / dx) : INFINITY, tdz = dz != 0 ? fabs(1.0 / dz) : INFINITY;
    double tx = dx != 0 ? t0 + ((dx > 0 ? (double)(i + 1) - px : px - (double)i) * tdx) : INFINITY;
    double tz = dz != 0 ? t0 + ((dz > 0 ? (double)(j + 1) - pz : pz - (double)j) * tdz) : INFINITY;
    double t_enter = t0;
    for (long steps = 0; t_enter <= t1; steps++) {
        if (steps > 4000000) return terra_fail(TERRA_E_UNSUPPORTED, "ground: the landscape is tilted too far to query");
        const double t_exit = fmin(fmin(tx, tz), t1);
        float h[4];
        st = cell_heights(g, i, j, h);
        if (st != TERRA_OK) return st;
        double best = INFINITY;
        for (int tri = 0; tri < 2; tri++) {
            double b, c;
            triangle_plane(h, tri == 0, &b, &c);
            /* a.y + t d.y = h0 + b (ax/s + t dx - i) + c (az/s + t dz - j) */
            double den = d.y - b * dx - c * dz;
            if (den == 0) continue;
            double t = (h[0] + b * (a.x / s - (double)i) + c * (a.z / s - (double)j) - a.y) / den;
            if (t < t_enter - 1e-9 || t > t_exit + 1e-9) continue;
            double u = a.x / s + t * dx - (double)i, w = a.z / s + t * dz - (double)j;
            if ((tri == 0) != (w >= u)) continue;
            if (t < best) {
                best = t;
                hit->b = b, hit->c = c;
            }
        }
        if (best < INFINITY) {
            hit->p = (terra_vec3){a.x + best * d.x, a.y + best * d.y, a.z + best * d.z};
            return TERRA_OK;
        }
        if (tx < tz) i += sx, t_enter = tx, tx += tdx;
        else j += sz, t_enter = tz, tz += tdz;
    }
    return terra_fail(TERRA_E_NOT_FOUND, "ground: no ground under this point");
}

/* The local hit under world (x, z). */
static terra_status world_hit(const terra_ground *g, double x, double z, local_hit *hit) {
    if (!isfinite(x) || !isfinite(z)) return terra_fail(TERRA_E_INVALID, "ground: query at a non-finite point (%g, %g)", x, z);
    terra_vec3 down = dir_to_local(g, (terra_vec3){0, -1, 0});
    if (fabs(down.x) < 1e-12 && fabs(down.z) < 1e-12) { /* no tilt: one vertical line */
        if (down.y > 0) return terra_fail(TERRA_E_NOT_FOUND, "ground: the landscape is upside down");
        terra_vec3 l = to_local(g, (terra_vec3){x, 0, z});
        return vertical_hit(g, l.x, l.z, hit);
    }
    if (down.y >= 0) return terra_fail(TERRA_E_NOT_FOUND, "ground: the landscape is tilted past vertical");
    terra_vec3 a = to_local(g, (terra_vec3){x, g->T.y, z}); /* a point of the line; it runs both ways */
    if (!(fabs(a.x) < MAX_LATTICE * g->s0 && fabs(a.z) < MAX_LATTICE * g->s0))
        return terra_fail(TERRA_E_INVALID, "ground: point (%g, %g) is outside the supported range", x, z);
    return slanted_hit(g, a, down, hit);
}

static terra_vec3 hit_normal(const terra_ground *g, const local_hit *h) {
    terra_vec3 n = {-h->b / g->s0, 1.0, -h->c / g->s0};
    n = dir_to_world(g, n);
    double len = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
    return (terra_vec3){n.x / len, n.y / len, n.z / len};
}

static terra_status hit_surface(const terra_ground *g, const local_hit *h, terra_surface *out) {
    return sample_surface(g, (int64_t)floor(h->p.x / g->s0 + 0.5), (int64_t)floor(h->p.z / g->s0 + 0.5), out);
}

terra_status terra_ground_height_at(terra_ground *g, double x, double z, double *y) {
    local_hit h;
    terra_status st = world_hit(g, x, z, &h);
    if (st == TERRA_OK) *y = to_world(g, h.p).y;
    return st;
}

terra_status terra_ground_normal_at(terra_ground *g, double x, double z, terra_vec3 *normal) {
    local_hit h;
    terra_status st = world_hit(g, x, z, &h);
    if (st == TERRA_OK) *normal = hit_normal(g, &h);
    return st;
}

terra_status terra_ground_surface_at(terra_ground *g, double x, double z, terra_surface *surface) {
    local_hit h;
    terra_status st = world_hit(g, x, z, &h);
    return st == TERRA_OK ? hit_surface(g, &h, surface) : st;
}

terra_status terra_ground_query(terra_ground *g, const double *xz, int n, terra_ground_hit *hits) {
    terra_status all = TERRA_OK;
    for (int k = 0; k < n; k++) {
        local_hit h;
        terra_ground_hit *o = &hits[k];
        o->status = world_hit(g, xz[2 * k], xz[2 * k + 1], &h);
        if (o->status == TERRA_OK) {
            o->y = to_world(g, h.p).y;
            o->normal = hit_normal(g, &h);
            o->status = hit_surface(g, &h, &o->surface);
        }
        if (o->status != TERRA_OK && all == TERRA_OK) all = o->status;
    }
    return all;
}

void terra_ground_set_physics(terra_ground *g, terra_surface id, terra_surface_physics p) { g->physics[id] = p; }
terra_surface_physics terra_ground_physics(const terra_ground *g, terra_surface id) { return g->physics[id]; }

/* ---- creation ----------------------------------------------------------------------------------------- */

void terra_ground_destroy(terra_ground *g) {
    if (!g) return;
    if (g->slots)
        for (int i = 0; i < g->nslots; i++) {
            terra_free(g->slots[i].heights);
            terra_free(g->slots[i].surfaces);
        }
    terra_free(g->slots);
    terra_free(g->free_slots);
    terra_free(g->list);
    terra_free(g->cand);
    map_free(&g->index);
    terra_free(g);
}

terra_status terra_ground_create(const terra_ground_desc *desc, terra_ground **out) {
    *out = NULL;
    if (!desc || !desc->source) return terra_fail(TERRA_E_INVALID, "ground: a source is required");
    terra_ground_desc d = *desc;
    terra_status st = terra_grid_desc_resolve(&d.grid, &d.grid);
    if (st != TERRA_OK) return st;
    if (d.collider_cells == 0) d.collider_cells = 32;
    if (d.collider_radius == 0) d.collider_radius = 160;
    if (d.max_blocks == 0) d.max_blocks = 1024;
    if (d.budget_ms == 0) d.budget_ms = 2;
    if (d.lookahead_s == 0) d.lookahead_s = 0.1;
    if (d.collider_cells < 2 || d.collider_cells > 1024)
        return terra_fail(TERRA_E_INVALID, "ground: collider_cells must be from 2 to 1024 (got %d)", d.collider_cells);
    if (!(d.collider_radius > 0) || !isfinite(d.collider_radius) || d.max_blocks < 1 || !(d.budget_ms > 0))
        return terra_fail(TERRA_E_INVALID, "ground: collider_radius, max_blocks and budget_ms must be positive");
    terra_ground *g = terra_calloc(1, sizeof *g);
    if (!g) return terra_fail(TERRA_E_NOMEM, "ground: out of memory");
    g->d = d;
    g->src = d.source;
    g->s0 = d.grid.tile0_size / d.grid.cells;
    g->C = d.collider_cells;
    g->source_version = 1;
    for (int i = 0; i < 256; i++) g->physics[i] = (terra_surface_physics){0.8, 0.1};
    st = set_transform(g, &d.transform);
    if (st != TERRA_OK) {
        terra_free(g);
        return st;
    }
    const int n = (g->C + 1) * (g->C + 1);
    g->nslots = d.max_blocks;
    /* candidates: blocks within the radius of one focus, times a few foci; more are dropped */
    const double span = g->C * g->s0;
    const int per_focus = (int)pow(2 * ceil(d.collider_radius / span) + 3, 2);
    g->max_cand = per_focus * 16;
    bool ok = (g->slots = terra_calloc((size_t)g->nslots, sizeof *g->slots)) != NULL;
    ok = ok && (g->free_slots = terra_alloc(sizeof(int) * (size_t)g->nslots)) != NULL;
    ok = ok && (g->list = terra_alloc(sizeof *g->list * (size_t)g->nslots)) != NULL;
    ok = ok && (g->cand = terra_alloc(sizeof *g->cand * (size_t)g->max_cand)) != NULL;
    ok = ok && map_init(&g->index, g->nslots);
    for (int i = 0; ok && i < g->nslots; i++) {
        ok = (g->slots[i].heights = terra_alloc(sizeof(float) * (size_t)n)) != NULL &&
             (g->slots[i].surfaces = terra_alloc((size_t)n)) != NULL;
        g->free_slots[g->nfree++] = g->nslots - 1 - i;
    }
    if (!ok) {
        terra_ground_destroy(g);
        return terra_fail(TERRA_E_NOMEM, "ground: out of memory for %d collider blocks", d.max_blocks);
    }
    *out = g;
    return TERRA_OK;
}

terra_status terra_ground_set_source(terra_ground *g, const terra_source *src) {
    if (!src) return terra_fail(TERRA_E_INVALID, "ground: no source given");
    g->src = src;
    g->source_version++;
    return TERRA_OK;
}

terra_status terra_ground_invalidate(terra_ground *g, const double region[4]) {
    if (!(region[0] <= region[2] && region[1] <= region[3]))
        return terra_fail(TERRA_E_INVALID, "ground: region %g, %g .. %g, %g is not a rectangle", region[0], region[1],
                          region[2], region[3]);
    for (int k = 0; k < g->nslots; k++) {
        block_slot *s = &g->slots[k];
        if (!s->standing) continue;
        const double x0 = (double)s->b.ix0 * g->s0, z0 = (double)s->b.iz0 * g->s0, side = g->C * g->s0;
        if (x0 <= region[2] && x0 + side >= region[0] && z0 <= region[3] && z0 + side >= region[1])
            s->source_version = 0; /* stood again as if the source were new; queries read the source */
    }
    return TERRA_OK;
}

terra_status terra_ground_set_transform(terra_ground *g, const terra_transform *t) { return set_transform(g, t); }

/* ---- collider blocks ----------------------------------------------------------------------------------- */

static terra_tile_key block_key(int32_t bx, int32_t bz) { return terra_tile_key_make(7, 0, bx, bz); }

static terra_status build_block(terra_ground *g, int32_t bx, int32_t bz, bool forced) {
    const terra_tile_key key = block_key(bx, bz);
    int32_t k = map_get(&g->index, key);
    if (k < 0) {
        if (g->nfree == 0) return terra_fail(TERRA_E_CAPACITY, "ground: more than max_blocks (%d) blocks", g->nslots);
        k = g->free_slots[--g->nfree];
        map_put(&g->index, key, k);
    }
    block_slot *s = &g->slots[k];
    const double t0 = now_ms(g);
    const int n = g->C + 1;
    terra_grid_request r = {.ix0 = (int64_t)bx * g->C, .iz0 = (int64_t)bz * g->C, .spacing = g->s0, .nx = n, .nz = n};
    terra_status st = terra_source_sample(g->src, &r, s->heights, s->surfaces);
    if (st != TERRA_OK) {
        map_del(&g->index, key);
        s->standing = false;
        g->free_slots[g->nfree++] = k;
        return st;
    }
    s->b = (terra_collider_block){bx, bz, r.ix0, r.iz0, g->C, g->s0, s->heights, s->surfaces, s->b.version + 1, g->frame};
    s->standing = true;
    s->source_version = g->source_version;
    const double ms = now_ms(g) - t0;
    g->cost_sum += ms;
    g->cost_n++;
    g->stats.build_ms += ms;
    g->stats.blocks_built++;
    g->stats.blocks_forced += forced;
    return TERRA_OK;
}

static bool block_ready(const terra_ground *g, int32_t bx, int32_t bz) {
    int32_t k = map_get(&g->index, block_key(bx, bz));
    return k >= 0 && g->slots[k].standing && g->slots[k].source_version == g->source_version;
}

static double block_distance(const terra_ground *g, int32_t bx, int32_t bz, double x, double z) {
    const double span = g->C * g->s0, x0 = bx * span, z0 = bz * span;
    const double dx = x < x0 ? x0 - x : (x > x0 + span ? x - x0 - span : 0);
    const double dz = z < z0 ? z0 - z : (z > z0 + span ? z - z0 - span : 0);
    return sqrt(dx * dx + dz * dz);
}

static int cmp_candidate(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->dist != y->dist) return x->dist < y->dist ? -1 : 1;
    if (x->bx != y->bx) return x->bx < y->bx ? -1 : 1;
    return (x->bz > y->bz) - (x->bz < y->bz);
}

terra_status terra_ground_update(terra_ground *g, const terra_focus_info *foci, int count) {
    memset(&g->stats, 0, sizeof g->stats);
    g->frame++;
    const double span = g->C * g->s0;
    const double radius = g->d.collider_radius / g->scale; /* local metres */
    const double t_start = now_ms(g);
    terra_status first_error = TERRA_OK;
    int ncand = 0;
    for (int f = 0; f < count; f++) {
        if (foci[f].kind != TERRA_FOCUS_ENTITY || !foci[f].collision) continue;
        terra_vec3 p = to_local(g, foci[f].position);
        if (!isfinite(p.x) || !isfinite(p.z) || fabs(p.x / g->s0) > MAX_LATTICE || fabs(p.z / g->s0) > MAX_LATTICE)
            continue;
        const int32_t cx = (int32_t)floor(p.x / span), cz = (int32_t)floor(p.z / span);
        /* the block under the body, and the blocks on its way over the lookahead, now, whatever the
         * budget: a body over no ground falls */
        /* every block within the distance the body covers over the lookahead, in any direction
         * (a bounce may turn it), with its velocity's speed; none given: the block under it */
        terra_vec3 v = dir_to_local(g, foci[f].velocity);
        double reach_m = sqrt(v.x * v.x + v.z * v.z) * g->d.lookahead_s / g->scale;
        reach_m = isfinite(reach_m) ? fmin(reach_m, 8 * span) : 0;
        const int32_t x0 = (int32_t)floor((p.x - reach_m) / span), x1 = (int32_t)floor((p.x + reach_m) / span);
        const int32_t z0 = (int32_t)floor((p.z - reach_m) / span), z1 = (int32_t)floor((p.z + reach_m) / span);
        for (int32_t bz = z0; bz <= z1; bz++)
            for (int32_t bx = x0; bx <= x1; bx++) {
                if (block_ready(g, bx, bz) || block_distance(g, bx, bz, p.x, p.z) > reach_m) continue;
                terra_status st = build_block(g, bx, bz, true);
                if (st != TERRA_OK && first_error == TERRA_OK) first_error = st;
            }
        const int reach = (int)ceil(radius / span) + 1;
        for (int dz = -reach; dz <= reach; dz++)
            for (int dx = -reach; dx <= reach; dx++) {
                const int32_t bx = cx + dx, bz = cz + dz;
                const double dist = block_distance(g, bx, bz, p.x, p.z);
                if (dist > radius || block_ready(g, bx, bz) || ncand >= g->max_cand) continue;
                g->cand[ncand++] = (candidate){bx, bz, dist};
            }
    }
    /* the rest nearest first, within the budget (one block past it if the last frame built none) */
    qsort(g->cand, (size_t)ncand, sizeof *g->cand, cmp_candidate);
    bool built_any = false;
    for (int k = 0; k < ncand; k++) {
        if (block_ready(g, g->cand[k].bx, g->cand[k].bz)) continue; /* a duplicate from another focus */
        const double mean = g->cost_n ? g->cost_sum / (double)g->cost_n : 0;
        const double spent = now_ms(g) - t_start;
        if (spent + mean > g->d.budget_ms && !(g->starved && !built_any)) {
            g->starved = !built_any;
            break;
        }
        terra_status st = build_block(g, g->cand[k].bx, g->cand[k].bz, false);
        if (st == TERRA_E_CAPACITY) break;
        if (st != TERRA_OK && first_error == TERRA_OK) first_error = st;
        built_any = true;
        g->starved = false;
    }
    /* let go of blocks a block's span past the radius of every body */
    g->nlist = 0;
    for (int i = 0; i < g->nslots; i++) {
        block_slot *s = &g->slots[i];
        if (!s->standing) continue;
        bool keep = false;
        for (int f = 0; f < count && !keep; f++) {
            if (foci[f].kind != TERRA_FOCUS_ENTITY || !foci[f].collision) continue;
            terra_vec3 p = to_local(g, foci[f].position);
            keep = block_distance(g, s->b.bx, s->b.bz, p.x, p.z) <= radius + span;
        }
        if (!keep) {
            map_del(&g->index, block_key(s->b.bx, s->b.bz));
            s->standing = false;
            g->free_slots[g->nfree++] = i;
            g->stats.blocks_released++;
            continue;
        }
        if (s->source_version == g->source_version) g->list[g->nlist++] = s->b;
    }
    g->stats.blocks_standing = g->nlist;
    g->stats.build_ms_per_block = g->cost_n ? g->cost_sum / (double)g->cost_n : 0;
    return first_error;
}

const terra_collider_block *terra_ground_block_at(const terra_ground *g, double x, double z) {
    if (!isfinite(x) || !isfinite(z)) return NULL;
    terra_vec3 p = to_local(g, (terra_vec3){x, g->T.y, z});
    const double span = g->C * g->s0;
    if (fabs(p.x / span) > 1e8 || fabs(p.z / span) > 1e8) return NULL;
    const int32_t bx = (int32_t)floor(p.x / span), bz = (int32_t)floor(p.z / span);
    if (!block_ready(g, bx, bz)) return NULL;
    return &g->slots[map_get(&g->index, block_key(bx, bz))].b;
}

bool terra_ground_is_ready_at(const terra_ground *g, double x, double z) { return terra_ground_block_at(g, x, z) != NULL; }

uint64_t terra_ground_frame(const terra_ground *g) { return g->frame; }

int terra_ground_blocks(const terra_ground *g, const terra_collider_block **blocks) {
    *blocks = g->list;
    return g->nlist;
}

const terra_ground_stats *terra_ground_get_stats(const terra_ground *g) { return &g->stats; }

terra_vec3 terra_ground_block_point(const terra_ground *g, const terra_collider_block *b, int i, int j) {
    const int n = b->cells + 1;
    terra_vec3 p = {(double)(b->ix0 + i) * b->spacing, b->heights[(size_t)j * n + (size_t)i],
                    (double)(b->iz0 + j) * b->spacing};
    return to_world(g, p);
}
