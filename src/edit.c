/* terra edit: a layer of brushes over any source, and its journal (edit.h). */
#include "terra/edit.h"
#include "terra/archive.h" /* terra_crc32c */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The index: level k has square cells of CELL0 * 2^k metres, aligned so each holds four of the
 * level below. An edit lies at the lowest level whose cells are at least as wide as its bounds, so
 * it is listed in at most 2 x 2 cells there; every cell with edits at or under it exists, with its
 * ancestors up to the top level. A point meets one cell a level. */
#define CELL0_LOG2 4 /* 16 m */
#define LEVELS 24    /* cells up to 16 m x 2^23 = 134,000 km: wider than the widest edit's bounds */
#define RANGE_EXACT 64  /* a range over at most this many edits takes each in turn */
#define RANGE_CELLS 64  /* a range over many looks at up to this many cells a level, then their subtrees' maps */
#define JOURNAL_MAGIC "TERRAEJ1"
#define HEADER_SIZE 8
#define RECORD_PAYLOAD 64
#define RECORD_SIZE (4 + RECORD_PAYLOAD)

typedef struct stored_edit {
    terra_edit e;
    double b[4];       /* bounds */
    double c, s, stencil; /* box turn; smooth's stencil distance */
} stored_edit;

/* What edits in order can do to a height range: lo -> min(lo - a, b), hi -> max(hi + c, d). */
typedef struct range_map {
    double a, b, c, d;
} range_map;

typedef struct cell {
    uint64_t key;    /* level + 1, column, row (never 0) */
    uint32_t *ids;   /* the edits of this level whose bounds meet the cell, in order */
    uint32_t n, cap;
    uint32_t load;   /* its edits' work (edit_work) */
    uint32_t below;  /* the most work the cells under it list over any one point */
    range_map map;   /* its edits' map, composed in order */
    range_map under; /* the widest of its children's subtrees' maps (sub_map) */
} cell;

struct terra_edit_layer {
    const terra_source *base;
    terra_source *src;
    int journal;            /* file descriptor, -1: none */
    bool read_only;
    bool behind; /* the journal holds an edit the index could not take (out of memory): no more edits */
    char *journal_path;
    pthread_mutex_t apply;  /* one edit lands at a time (journal order = replay order) */
    pthread_rwlock_t lock;  /* samplers read; an edit landing writes */
    stored_edit *edits;
    size_t n, cap;
    cell *cells;
    size_t ncells, cells_cap;
    uint32_t *slots; /* open addressing: cell index + 1, 0: empty */
    size_t slots_cap;
    uint32_t used;               /* levels that list edits */
    uint32_t deepest;            /* the most work a point query meets anywhere */
    double all[4];               /* the bounds of every edit together */
    double level_box[LEVELS][4]; /* ... of the edits of each level */
};

/* ---- shapes and brushes ------------------------------------------------------------------------ */

static bool edit_valid(const terra_edit *e, char *why, size_t n) {
    const double X = TERRA_EDIT_MAX_EXTENT;
    if (!((unsigned)e->brush <= TERRA_BRUSH_PAINT)) return snprintf(why, n, "brush %d is not one of edit.h's", (int)e->brush), false;
    if (!((unsigned)e->shape <= TERRA_SHAPE_PIT)) return snprintf(why, n, "shape %d is not one of edit.h's", (int)e->shape), false;
    if (!(fabs(e->x) <= X && fabs(e->z) <= X)) return snprintf(why, n, "centre %g, %g is past %g m", e->x, e->z, X), false;
    if (!(e->radius > 0 && e->radius <= X)) return snprintf(why, n, "radius %g is not above 0 and at most %g m", e->radius, X), false;
    if (!(e->half_z >= 0 && e->half_z <= X)) return snprintf(why, n, "half_z %g is not from 0 to %g m", e->half_z, X), false;
    if (!(e->falloff >= 0 && e->falloff <= X)) return snprintf(why, n, "falloff %g is not from 0 to %g m", e->falloff, X), false;
    if (!(fabs(e->yaw) <= 1e3)) return snprintf(why, n, "yaw %g is not a turn in radians", e->yaw), false;
    if (!(fabs(e->amount) <= TERRA_EDIT_MAX_AMOUNT)) return snprintf(why, n, "amount %g is past %g", e->amount, TERRA_EDIT_MAX_AMOUNT), false;
    if ((e->brush == TERRA_BRUSH_RAISE || e->brush == TERRA_BRUSH_LOWER) && e->amount < 0)
        return snprintf(why, n, "a raise or lower by %g m: the amount is at least 0 (the brush gives the sign)", e->amount), false;
    if (e->brush == TERRA_BRUSH_SMOOTH && !(e->amount >= 0 && e->amount <= 1))
        return snprintf(why, n, "smooth by %g: a fraction from 0 to 1", e->amount), false;
    if (e->brush == TERRA_BRUSH_PAINT && e->surface == TERRA_SURFACE_NONE)
        return snprintf(why, n, "a paint of surface 0, which names no surface: the surface is 1..255"), false;
    return true;
}

static void store(stored_edit *s, const terra_edit *e) {
    s->e = *e;
    if (s->e.half_z == 0) s->e.half_z = e->radius;
    s->c = cos(e->yaw), s->s = sin(e->yaw);
    s->stencil = fmax(1.0, e->falloff / 2);
    terra_edit_bounds(&s->e, s->b);
}

void terra_edit_bounds(const terra_edit *e, double out[4]) {
    double ex = e->radius + e->falloff, ez = ex;
    if (e->shape == TERRA_SHAPE_BOX) {
        const double c = fabs(cos(e->yaw)), s = fabs(sin(e->yaw)), hz = e->half_z > 0 ? e->half_z : e->radius;
        ex = c * e->radius + s * hz + e->falloff;
        ez = s * e->radius + c * hz + e->falloff;
    }
    /* a hair wider: the bounds hold every point the double arithmetic below gives weight to */
    ex = ex * (1 + 1e-12) + 1e-9, ez = ez * (1 + 1e-12) + 1e-9;
    out[0] = e->x - ex, out[1] = e->z - ez, out[2] = e->x + ex, out[3] = e->z + ez;
}

/* Distance from the shape (0 inside) and, for a pit, the distance from its axis. */
static double shape_distance(const stored_edit *s, double x, double z, double *r_axis) {
    const double dx = x - s->e.x, dz = z - s->e.z;
    if (s->e.shape == TERRA_SHAPE_BOX) {
        const double lx = dx * s->c + dz * s->s, lz = -dx * s->s + dz * s->c;
        const double ox = fmax(fabs(lx) - s->e.radius, 0), oz = fmax(fabs(lz) - s->e.half_z, 0);
        return sqrt(ox * ox + oz * oz);
    }
    const double r = sqrt(dx * dx + dz * dz);
    *r_axis = r;
    return fmax(r - s->e.radius, 0);
}

static double weight(const stored_edit *s, double d) {
    if (d <= 0) return 1;
    if (d >= s->e.falloff) return 0;
    const double t = 1 - d / s->e.falloff;
    return t * t * (3 - 2 * t);
}

static bool holds(const stored_edit *s, double x, double z) {
    return x >= s->b[0] && x <= s->b[2] && z >= s->b[1] && z <= s->b[3];
}

static bool meets(const double *b, double x0, double z0, double x1, double z1) {
    return b[0] <= x1 && b[2] >= x0 && b[1] <= z1 && b[3] >= z0;
}

/* One edit at (x, z): the height h (the base's there is b), the surface *surf. */
static double apply_one(const terra_edit_layer *l, const stored_edit *s, double x, double z, double h, double b,
                        terra_surface *surf) {
    double r = 0;
    const double w = weight(s, shape_distance(s, x, z, &r));
    if (w <= 0) return h;
    const terra_edit *e = &s->e;
    switch (e->brush) {
    case TERRA_BRUSH_RAISE: return h + w * e->amount;
    case TERRA_BRUSH_LOWER: return h - w * e->amount;
    case TERRA_BRUSH_FLATTEN: return h + w * (e->amount - h);
    case TERRA_BRUSH_SMOOTH: {
        const double d = s->stencil;
        const double mean = ((double)terra_source_height_raw(l->base, x + d, z) + terra_source_height_raw(l->base, x - d, z) +
                             terra_source_height_raw(l->base, x, z + d) + terra_source_height_raw(l->base, x, z - d)) /
                            4;
        return h + w * e->amount * (mean - b);
    }
    case TERRA_BRUSH_DIG: {
        double floor = e->amount;
        if (e->shape == TERRA_SHAPE_PIT) {
            const double q = fmin(r, e->radius);
            floor = e->amount + e->radius - sqrt(e->radius * e->radius - q * q);
        }
        return h - w * fmax(0, h - floor);
    }
    case TERRA_BRUSH_PAINT:
        if (w >= 0.5) *surf = e->surface;
        return h;
    }
    return h;
}

/* ---- range maps ---------------------------------------------------------------------------------- */

static const range_map NO_CHANGE = {0, INFINITY, 0, -INFINITY};

/* f, then g */
static range_map map_then(range_map f, range_map g) {
    return (range_map){f.a + g.a, fmin(f.b - g.a, g.b), f.c + g.c, fmax(f.d + g.c, g.d)};
}
/* f's edits and g's, interleaved in any order (each one's in its own) */
static range_map map_with(range_map f, range_map g) {
    return (range_map){f.a + g.a, fmin(f.b - g.a, g.b - f.a), f.c + g.c, fmax(f.d + g.c, g.d + f.c)};
}
/* f or g */
static range_map map_either(range_map f, range_map g) {
    return (range_map){fmax(f.a, g.a), fmin(f.b, g.b), fmax(f.c, g.c), fmax(f.d, g.d)};
}

/* What one edit can do anywhere in its bounds (a smooth: pull by its fraction of the base's spread
 * within its stencil's reach of them). */
static terra_status edit_map(const terra_edit_layer *l, const stored_edit *s, range_map *out) {
    const terra_edit *e = &s->e;
    *out = NO_CHANGE;
    switch (e->brush) {
    case TERRA_BRUSH_RAISE: out->c = e->amount; break;
    case TERRA_BRUSH_LOWER: out->a = e->amount; break;
    case TERRA_BRUSH_FLATTEN: out->b = out->d = e->amount; break;
    case TERRA_BRUSH_DIG: out->b = e->amount; break;
    case TERRA_BRUSH_SMOOTH: {
        const double d = s->stencil;
        float lo, hi;
        terra_status st = terra_source_height_range(l->base, s->b[0] - d, s->b[1] - d, s->b[2] + d, s->b[3] + d, &lo, &hi);
        if (st) return st;
        out->a = out->c = e->amount * ((double)hi - lo);
        break;
    }
    case TERRA_BRUSH_PAINT: break;
    }
    return TERRA_OK;
}

/* ---- the index ------------------------------------------------------------------------------------ */

static double cell_side(int k) { return ldexp(1.0, CELL0_LOG2 + k); }
static int64_t cell_of(double v, int k) { return (int64_t)floor(ldexp(v, -(CELL0_LOG2 + k))); }
static int64_t up(int64_t v, int n) { return v >= 0 ? v >> n : -1 - ((-1 - v) >> n); } /* floor(v / 2^n) */
static uint64_t cell_key(int k, int64_t cx, int64_t cz) {
    return (uint64_t)(k + 1) << 58 | ((uint64_t)cx & 0x1FFFFFFFu) << 29 | ((uint64_t)cz & 0x1FFFFFFFu);
}
static int level_of(const double *b) {
    const double w = fmax(b[2] - b[0], b[3] - b[1]);
    int k = 0;
    while (k < LEVELS - 1 && cell_side(k) < w) k++;
    return k;
}

/* What the edits of a cell and of the cells under it can do to a point of it together. */
static range_map sub_map(const cell *c) { return map_with(c->map, c->under); }

static size_t slot_of(uint64_t key, size_t cap) { /* splitmix64's finaliser */
    key = (key ^ key >> 30) * 0xBF58476D1CE4E5B9ull;
    key = (key ^ key >> 27) * 0x94D049BB133111EBull;
    return (size_t)(key ^ key >> 31) & (cap - 1);
}

static cell *cell_find(const terra_edit_layer *l, int k, int64_t cx, int64_t cz) {
    if (!l->slots_cap) return NULL;
    const uint64_t key = cell_key(k, cx, cz);
    for (size_t i = slot_of(key, l->slots_cap);; i = (i + 1) & (l->slots_cap - 1)) {
        const uint32_t s = l->slots[i];
        if (!s) return NULL;
        if (l->cells[s - 1].key == key) return &l->cells[s - 1];
    }
}

/* The cell's index, made (with its ancestors) if need be; SIZE_MAX when out of memory. */
static size_t cell_make(terra_edit_layer *l, int k, int64_t cx, int64_t cz) {
    const cell *c = cell_find(l, k, cx, cz);
    if (c) return (size_t)(c - l->cells);
    if (k + 1 < LEVELS && cell_make(l, k + 1, up(cx, 1), up(cz, 1)) == SIZE_MAX) return SIZE_MAX;
    if (l->ncells == l->cells_cap) {
        const size_t cap = l->cells_cap ? 2 * l->cells_cap : 256;
        cell *p = terra_realloc(l->cells, sizeof *p * cap);
        if (!p) return SIZE_MAX;
        l->cells = p, l->cells_cap = cap;
    }
    if (2 * (l->ncells + 1) > l->slots_cap) {
        const size_t cap = l->slots_cap ? 2 * l->slots_cap : 512;
        uint32_t *s = terra_calloc(cap, sizeof *s);
        if (!s) return SIZE_MAX;
        for (size_t i = 0; i < l->ncells; i++) {
            size_t j = slot_of(l->cells[i].key, cap);
            while (s[j]) j = (j + 1) & (cap - 1);
            s[j] = (uint32_t)i + 1;
        }
        terra_free(l->slots);
        l->slots = s, l->slots_cap = cap;
    }
    const size_t i = l->ncells++;
    l->cells[i] = (cell){.key = cell_key(k, cx, cz), .map = NO_CHANGE, .under = NO_CHANGE};
    size_t j = slot_of(l->cells[i].key, l->slots_cap);
    while (l->slots[j]) j = (j + 1) & (l->slots_cap - 1);
    l->slots[j] = (uint32_t)i + 1;
    return i;
}

/* What an edit costs a point query that meets it, as TERRA_EDIT_MAX_OVERLAP counts: one, a smooth
 * its four samples of the base. */
#define SMOOTH_WORK 4
static uint32_t edit_work(const terra_edit *e) { return e->brush == TERRA_BRUSH_SMOOTH ? SMOOTH_WORK : 1; }

/* The most work a point query would meet in cell (k, cx, cz) once an edit of work w is listed there. */
static size_t depth_with(const terra_edit_layer *l, int k, int64_t cx, int64_t cz, uint32_t w) {
    const cell *c = cell_find(l, k, cx, cz);
    size_t d = w + (c ? (size_t)c->load + c->below : 0);
    for (int j = k + 1; j < LEVELS; j++) {
        cx = up(cx, 1), cz = up(cz, 1);
        const cell *a = l->used & 1u << j ? cell_find(l, j, cx, cz) : NULL;
        d += a ? a->load : 0;
    }
    return d;
}

/* Whether an edit would take some point past TERRA_EDIT_MAX_OVERLAP; *at: where (in the cell
 * that would, nearest the edit's centre). */
static bool too_deep(const terra_edit_layer *l, const stored_edit *s, double at[2]) {
    const uint32_t w = edit_work(&s->e);
    if (l->deepest + w <= TERRA_EDIT_MAX_OVERLAP) return false;
    const double *b = s->b;
    const int k = level_of(b);
    for (int64_t cz = cell_of(b[1], k); cz <= cell_of(b[3], k); cz++)
        for (int64_t cx = cell_of(b[0], k); cx <= cell_of(b[2], k); cx++)
            if (depth_with(l, k, cx, cz, w) > TERRA_EDIT_MAX_OVERLAP) {
                const double side = cell_side(k);
                at[0] = fmin(fmax(s->e.x, (double)cx * side), (double)(cx + 1) * side);
                at[1] = fmin(fmax(s->e.z, (double)cz * side), (double)(cz + 1) * side);
                return true;
            }
    return false;
}

/* Lists edit `id` (stored, with its map) in its cells, and (`ancestors`) brings the depths and maps
 * of the cells above up to date; without, index_finish does it for every edit at once. Checked by
 * too_deep first. */
static terra_status index_edit(terra_edit_layer *l, uint32_t id, range_map m, bool ancestors) {
    const double *b = l->edits[id].b;
    const int k = level_of(b);
    for (int64_t cz = cell_of(b[1], k); cz <= cell_of(b[3], k); cz++)
        for (int64_t cx = cell_of(b[0], k); cx <= cell_of(b[2], k); cx++) {
            const size_t i = cell_make(l, k, cx, cz);
            if (i == SIZE_MAX) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for its index");
            cell *c = &l->cells[i];
            if (c->n == c->cap) {
                const uint32_t cap = c->cap ? 2 * c->cap : 2;
                uint32_t *p = terra_realloc(c->ids, sizeof *p * cap);
                if (!p) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for its index");
                c->ids = p, c->cap = cap;
            }
            c->ids[c->n++] = id;
            c->load += edit_work(&l->edits[id].e);
            c->map = map_then(c->map, m);
            if (!ancestors) continue;
            /* the depth and the map under each ancestor (both only grow) */
            uint32_t d = c->load + c->below;
            range_map sub = sub_map(c);
            int64_t ax = cx, az = cz;
            for (int j = k + 1; j < LEVELS; j++) {
                ax = up(ax, 1), az = up(az, 1);
                cell *a = cell_find(l, j, ax, az);
                const range_map under = map_either(a->under, sub);
                if (a->below >= d && !memcmp(&under, &a->under, sizeof under)) break;
                if (a->below < d) a->below = d;
                a->under = under;
                d = a->load + a->below, sub = sub_map(a);
            }
            const cell *top = k == LEVELS - 1 ? c : cell_find(l, LEVELS - 1, up(cx, LEVELS - 1 - k), up(cz, LEVELS - 1 - k));
            if (top->load + top->below > l->deepest) l->deepest = top->load + top->below;
        }
    double *box = l->level_box[k];
    if (!(l->used & 1u << k)) memcpy(box, b, sizeof l->level_box[k]);
    if (!l->n) memcpy(l->all, b, sizeof l->all);
    box[0] = fmin(box[0], b[0]), box[1] = fmin(box[1], b[1]), box[2] = fmax(box[2], b[2]), box[3] = fmax(box[3], b[3]);
    l->all[0] = fmin(l->all[0], b[0]), l->all[1] = fmin(l->all[1], b[1]);
    l->all[2] = fmax(l->all[2], b[2]), l->all[3] = fmax(l->all[3], b[3]);
    l->used |= 1u << k;
    return TERRA_OK;
}

/* The depths and maps under every cell, from the bottom level up, and the deepest place. */
static terra_status index_finish(terra_edit_layer *l) {
    size_t *order = terra_alloc(sizeof *order * (l->ncells + 1)), start[LEVELS + 1] = {0};
    if (!order) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for its index");
    for (size_t i = 0; i < l->ncells; i++) start[(l->cells[i].key >> 58) - 1 + 1]++;
    for (int k = 0; k < LEVELS; k++) start[k + 1] += start[k];
    for (size_t i = 0; i < l->ncells; i++) order[start[(l->cells[i].key >> 58) - 1]++] = i;
    l->deepest = 0;
    for (size_t q = 0; q < l->ncells; q++) {
        const cell *c = &l->cells[order[q]];
        const int k = (int)(c->key >> 58) - 1;
        if (k == LEVELS - 1) {
            if (c->load + c->below > l->deepest) l->deepest = c->load + c->below;
            continue;
        }
        /* the column and row back from the key's 29-bit fields */
        const int64_t cx = (int64_t)((c->key >> 29 & 0x1FFFFFFFu) ^ 0x10000000u) - 0x10000000;
        const int64_t cz = (int64_t)((c->key & 0x1FFFFFFFu) ^ 0x10000000u) - 0x10000000;
        cell *a = cell_find(l, k + 1, up(cx, 1), up(cz, 1));
        if (a->below < c->load + c->below) a->below = c->load + c->below;
        a->under = map_either(a->under, sub_map(c));
    }
    terra_free(order);
    return TERRA_OK;
}

static int id_cmp(const void *a, const void *b) {
    const uint32_t p = *(const uint32_t *)a, q = *(const uint32_t *)b;
    return (p > q) - (p < q);
}

/* The edits whose bounds meet the rectangle, in order, into *out (terra_free) — or false when
 * there are more than `limit` of them or more than `cells` cells of a level to look at (*out
 * NULL; *count SIZE_MAX when out of memory). Each edit is taken from the one of its cells that
 * holds the corner of its bounds' overlap with the rectangle. */
static bool edits_over(const terra_edit_layer *l, double x0, double z0, double x1, double z1, size_t cells, size_t limit,
                       uint32_t **out, size_t *count) {
    *out = NULL, *count = 0;
    if (!l->n || !meets(l->all, x0, z0, x1, z1)) return true;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    for (int k = 0; k < LEVELS; k++) {
        const double *box = l->level_box[k];
        if (!(l->used & 1u << k) || !meets(box, x0, z0, x1, z1)) continue;
        const double cx0 = fmax(x0, box[0]), cz0 = fmax(z0, box[1]), cx1 = fmin(x1, box[2]), cz1 = fmin(z1, box[3]);
        const int64_t i0 = cell_of(cx0, k), i1 = cell_of(cx1, k), j0 = cell_of(cz0, k), j1 = cell_of(cz1, k);
        if ((double)(i1 - i0 + 1) * (double)(j1 - j0 + 1) > (double)cells) goto too_many;
        for (int64_t j = j0; j <= j1; j++)
            for (int64_t i = i0; i <= i1; i++) {
                const cell *c = cell_find(l, k, i, j);
                for (uint32_t q = 0; c && q < c->n; q++) {
                    const double *b = l->edits[c->ids[q]].b;
                    if (!meets(b, cx0, cz0, cx1, cz1) || cell_of(fmax(b[0], cx0), k) != i || cell_of(fmax(b[1], cz0), k) != j)
                        continue;
                    if (n == limit) goto too_many;
                    if (n == cap) {
                        cap = cap ? 2 * cap : 64;
                        uint32_t *p = terra_realloc(ids, sizeof *p * cap);
                        if (!p) {
                            terra_free(ids);
                            *count = SIZE_MAX; /* out of memory */
                            return false;
                        }
                        ids = p;
                    }
                    ids[n++] = c->ids[q];
                }
            }
    }
    if (n) qsort(ids, n, sizeof *ids, id_cmp);
    *out = ids, *count = n;
    return true;
too_many:
    terra_free(ids);
    return false;
}

/* ---- the source ------------------------------------------------------------------------------------ */

/* The edits at a point, in order, applied to its base height: the cells that hold it, one a level,
 * merged by edit number. No allocation. */
static double replay_at(const terra_edit_layer *l, double x, double z, double base, terra_surface *surf) {
    double h = base;
    if (!l->n || !meets(l->all, x, z, x, z)) return h;
    const uint32_t *ids[LEVELS];
    uint32_t left[LEVELS];
    int lists = 0;
    for (int k = 0; k < LEVELS; k++) {
        if (!(l->used & 1u << k)) continue;
        const cell *c = cell_find(l, k, cell_of(x, k), cell_of(z, k));
        if (c && c->n) ids[lists] = c->ids, left[lists++] = c->n;
    }
    while (lists) {
        int m = 0;
        for (int i = 1; i < lists; i++)
            if (*ids[i] < *ids[m]) m = i;
        const stored_edit *s = &l->edits[*ids[m]++];
        if (!--left[m]) ids[m] = ids[--lists], left[m] = left[lists];
        if (holds(s, x, z)) h = apply_one(l, s, x, z, h, base, surf);
    }
    return h;
}

/* A sample index near v, within 0 .. n - 1 */
static int sample_index(double v, int n) { return !(v > 0) ? 0 : v >= n - 1 ? n - 1 : (int)v; }

static terra_status layer_grid(void *user, const terra_grid_request *r, float *heights, terra_surface *surfaces) {
    terra_edit_layer *l = user;
    terra_status st = terra_source_sample(l->base, r, heights, surfaces);
    if (st) return st;
    const size_t samples = (size_t)r->nx * (size_t)r->nz;
    const double x0 = (double)r->ix0 * r->spacing, z0 = (double)r->iz0 * r->spacing;
    const double x1 = (double)(r->ix0 + r->nx - 1) * r->spacing, z1 = (double)(r->iz0 + r->nz - 1) * r->spacing;
    pthread_rwlock_rdlock(&l->lock);
    uint32_t *ids = NULL;
    size_t n = 0;
    double *h = NULL;
    terra_surface none = 0;
    if (edits_over(l, x0, z0, x1, z1, samples, 64 + 4 * samples, &ids, &n)) {
        /* few edits over it: each applied, in order, to the samples its bounds hold */
        h = n ? terra_alloc(sizeof *h * samples) : NULL;
        if (n && !h) st = terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
        for (size_t k = 0; n && !st && k < samples; k++) h[k] = heights[k];
        for (size_t q = 0; q < n && !st; q++) {
            const stored_edit *s = &l->edits[ids[q]];
            /* the samples whose index lies within the bounds, a sample wider (holds() decides) */
            const int i0 = sample_index(s->b[0] / r->spacing - (double)r->ix0 - 1, r->nx);
            const int i1 = sample_index(s->b[2] / r->spacing - (double)r->ix0 + 1, r->nx);
            const int j0 = sample_index(s->b[1] / r->spacing - (double)r->iz0 - 1, r->nz);
            const int j1 = sample_index(s->b[3] / r->spacing - (double)r->iz0 + 1, r->nz);
            for (int j = j0; j <= j1; j++) {
                const double z = (double)(r->iz0 + j) * r->spacing;
                for (int i = i0; i <= i1; i++) {
                    const double x = (double)(r->ix0 + i) * r->spacing;
                    const size_t k = (size_t)j * (size_t)r->nx + (size_t)i;
                    if (holds(s, x, z)) h[k] = apply_one(l, s, x, z, h[k], heights[k], surfaces ? &surfaces[k] : &none);
                }
            }
        }
        for (size_t k = 0; n && !st && k < samples; k++) heights[k] = (float)h[k];
    } else if (n == SIZE_MAX) {
        st = terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    } else { /* edits everywhere: each sample's own */
        for (int j = 0; j < r->nz; j++) {
            const double z = (double)(r->iz0 + j) * r->spacing;
            for (int i = 0; i < r->nx; i++) {
                const size_t k = (size_t)j * (size_t)r->nx + (size_t)i;
                terra_surface s = surfaces ? surfaces[k] : 0;
                heights[k] = (float)replay_at(l, (double)(r->ix0 + i) * r->spacing, z, heights[k], &s);
                if (surfaces) surfaces[k] = s;
            }
        }
    }
    pthread_rwlock_unlock(&l->lock);
    terra_free(ids);
    terra_free(h);
    return st;
}

static float point(terra_edit_layer *l, double x, double z, terra_surface *surf) {
    const float base = terra_source_height_raw(l->base, x, z);
    pthread_rwlock_rdlock(&l->lock);
    const double h = replay_at(l, x, z, base, surf);
    pthread_rwlock_unlock(&l->lock);
    return (float)h;
}

static float layer_height(void *user, double x, double z) {
    terra_surface s = 0;
    return point(user, x, z, &s);
}

static terra_surface layer_surface(void *user, double x, double z) {
    terra_edit_layer *l = user;
    terra_surface s = terra_source_surface_raw(l->base, x, z);
    (void)point(l, x, z, &s);
    return s;
}

/* Few edits over the rectangle: each in turn widens the range by what it can do there. */
static terra_status range_each(const terra_edit_layer *l, const uint32_t *ids, size_t n, double x0, double z0, double x1,
                               double z1, double *lo, double *hi) {
    for (size_t k = 0; k < n; k++) {
        const stored_edit *s = &l->edits[ids[k]];
        const terra_edit *e = &s->e;
        switch (e->brush) {
        case TERRA_BRUSH_RAISE: *hi += e->amount; break;
        case TERRA_BRUSH_LOWER: *lo -= e->amount; break;
        case TERRA_BRUSH_FLATTEN: *lo = fmin(*lo, e->amount), *hi = fmax(*hi, e->amount); break;
        case TERRA_BRUSH_DIG: *lo = fmin(*lo, e->amount); break;
        case TERRA_BRUSH_SMOOTH: { /* the pull is at most the base's spread over the stencil's reach */
            const double d = s->stencil;
            float a, b;
            terra_status st = terra_source_height_range(l->base, fmax(x0, s->b[0]) - d, fmax(z0, s->b[1]) - d,
                                                        fmin(x1, s->b[2]) + d, fmin(z1, s->b[3]) + d, &a, &b);
            if (st) return st;
            *lo -= e->amount * ((double)b - a), *hi += e->amount * ((double)b - a);
            break;
        }
        case TERRA_BRUSH_PAINT: break;
        }
    }
    return TERRA_OK;
}

/* Many: what the edits over any one point of the rectangle can do together. A point's edits are
 * listed in its cells, one a level, whose own edits do at most their cell's map, the levels'
 * interleaved. From the top down, each cell meeting the rectangle either passes its map to its
 * children there or, when it lies inside the rectangle or the cells looked at would pass
 * RANGE_CELLS a level, gives its subtree's widest. */
static range_map range_cells(const terra_edit_layer *l, double x0, double z0, double x1, double z1) {
    typedef struct { const cell *c; int64_t cx, cz; range_map above; } node;
    node a[4 * RANGE_CELLS], b[4 * RANGE_CELLS], *now = a, *next = b;
    size_t n = 0;
    x0 = fmax(x0, l->all[0]), z0 = fmax(z0, l->all[1]), x1 = fmin(x1, l->all[2]), z1 = fmin(z1, l->all[3]);
    if (!(x0 <= x1 && z0 <= z1)) return NO_CHANGE;
    for (int64_t cz = cell_of(z0, LEVELS - 1); cz <= cell_of(z1, LEVELS - 1); cz++)
        for (int64_t cx = cell_of(x0, LEVELS - 1); cx <= cell_of(x1, LEVELS - 1); cx++) {
            const cell *c = cell_find(l, LEVELS - 1, cx, cz);
            if (c) now[n++] = (node){c, cx, cz, NO_CHANGE};
        }
    range_map all = NO_CHANGE;
    for (int k = LEVELS - 1; n; k--) {
        const bool open = k > 0 && n <= RANGE_CELLS;
        const double side = cell_side(k);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const node *p = &now[i];
            const bool inside = (double)p->cx * side >= x0 && (double)(p->cx + 1) * side <= x1 &&
                                (double)p->cz * side >= z0 && (double)(p->cz + 1) * side <= z1;
            if (!open || inside) {
                all = map_either(all, map_with(p->above, sub_map(p->c)));
                continue;
            }
            const range_map above = map_with(p->above, p->c->map); /* a point with no edits under */
            all = map_either(all, above);
            for (int q = 0; q < 4; q++) {
                const int64_t cx = 2 * p->cx + (q & 1), cz = 2 * p->cz + (q >> 1);
                if ((double)(cx + 1) * cell_side(k - 1) < x0 || (double)cx * cell_side(k - 1) > x1 ||
                    (double)(cz + 1) * cell_side(k - 1) < z0 || (double)cz * cell_side(k - 1) > z1)
                    continue;
                const cell *c = cell_find(l, k - 1, cx, cz);
                if (c) next[m++] = (node){c, cx, cz, above};
            }
        }
        node *t = now;
        now = next, next = t, n = m;
    }
    return all;
}

static terra_status layer_range(void *user, double x0, double z0, double x1, double z1, float *lo_out, float *hi_out) {
    terra_edit_layer *l = user;
    float blo, bhi;
    terra_status st = terra_source_height_range(l->base, x0, z0, x1, z1, &blo, &bhi);
    if (st) return st;
    double lo = blo, hi = bhi;
    pthread_rwlock_rdlock(&l->lock);
    uint32_t *ids;
    size_t n;
    if (edits_over(l, x0, z0, x1, z1, RANGE_CELLS, RANGE_EXACT, &ids, &n)) {
        st = range_each(l, ids, n, x0, z0, x1, z1, &lo, &hi);
    } else if (n == SIZE_MAX) {
        st = terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    } else {
        const range_map m = range_cells(l, x0, z0, x1, z1);
        lo = fmin(lo - m.a, m.b), hi = fmax(hi + m.c, m.d);
    }
    pthread_rwlock_unlock(&l->lock);
    terra_free(ids);
    if (st) return st;
    /* outward, past what rounding the heights to float can give */
    const double margin = 1e-6 * fmax(fabs(lo), fabs(hi)) + 1e-4;
    *lo_out = (float)(lo - margin), *hi_out = (float)(hi + margin);
    return TERRA_OK;
}

/* ---- the journal ----------------------------------------------------------------------------------- */

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void encode(const terra_edit *e, uint8_t rec[RECORD_SIZE]) {
    uint8_t *p = rec + 4;
    memset(p, 0, RECORD_PAYLOAD);
    p[0] = (uint8_t)e->brush, p[1] = (uint8_t)e->shape, p[2] = e->surface;
    const double v[7] = {e->x, e->z, e->radius, e->half_z, e->yaw, e->falloff, e->amount};
    for (int i = 0; i < 7; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], 8);
        put_u64(p + 8 + 8 * i, bits);
    }
    const uint32_t crc = terra_crc32c(0, p, RECORD_PAYLOAD);
    for (int i = 0; i < 4; i++) rec[i] = (uint8_t)(crc >> (8 * i));
}

static bool decode(const uint8_t rec[RECORD_SIZE], terra_edit *e) {
    const uint8_t *p = rec + 4;
    const uint32_t crc = (uint32_t)rec[0] | (uint32_t)rec[1] << 8 | (uint32_t)rec[2] << 16 | (uint32_t)rec[3] << 24;
    if (crc != terra_crc32c(0, p, RECORD_PAYLOAD)) return false;
    double v[7];
    for (int i = 0; i < 7; i++) {
        const uint64_t bits = get_u64(p + 8 + 8 * i);
        memcpy(&v[i], &bits, 8);
    }
    *e = (terra_edit){.brush = (terra_brush)p[0], .shape = (terra_shape)p[1], .surface = p[2], .x = v[0], .z = v[1],
                      .radius = v[2], .half_z = v[3], .yaw = v[4], .falloff = v[5], .amount = v[6]};
    return true;
}

/* The first of a record's five reserved bytes (record bytes 7..11) that is not 0, or -1. */
static int reserved_set(const uint8_t rec[RECORD_SIZE]) {
    for (int i = 7; i < 12; i++)
        if (rec[i]) return i;
    return -1;
}

/* Whether an edit may land (the overlap cap), and what it can do to ranges; changes nothing. */
static terra_status prepare(const terra_edit_layer *l, const terra_edit *e, stored_edit *s, range_map *m) {
    store(s, e);
    double at[2];
    if (too_deep(l, s, at))
        return terra_fail(TERRA_E_CAPACITY, "the edits reaching the ground at x %.1f, z %.1f would pass the most one place "
                          "takes (%d, a smooth counting %d): every query there replays them all", at[0], at[1],
                          TERRA_EDIT_MAX_OVERLAP, SMOOTH_WORK);
    return edit_map(l, s, m);
}

/* Stores and indexes a prepared edit (index_edit's `ancestors`). */
static terra_status commit(terra_edit_layer *l, const stored_edit *s, range_map m, bool ancestors) {
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        stored_edit *p = cap <= UINT32_MAX ? terra_realloc(l->edits, sizeof *p * cap) : NULL;
        if (!p) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for %zu edits", cap);
        l->edits = p, l->cap = cap;
    }
    l->edits[l->n] = *s;
    const terra_status st = index_edit(l, (uint32_t)l->n, m, ancestors);
    if (!st) l->n++;
    return st;
}

/* The journal's whole-file lock: shared while read, exclusive while appended or repaired. */
static int journal_lock(int fd, short type) {
    struct flock f = {.l_type = type, .l_whence = SEEK_SET};
    int rc;
    while ((rc = fcntl(fd, F_SETLKW, &f)) == -1 && errno == EINTR) {}
    return rc;
}

static bool write_all(int fd, const void *p, size_t n) {
    while (n) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p = (const uint8_t *)p + w, n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n, off_t at) {
    while (n) {
        const ssize_t r = pread(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p = (uint8_t *)p + r, n -= (size_t)r, at += r;
    }
    return true;
}

/* Cuts a torn last record off (the journal locked exclusively). */
static terra_status cut_to(terra_edit_layer *l, off_t size) {
    if (ftruncate(l->journal, size))
        return terra_fail(TERRA_E_IO, "%s: cannot cut the torn edit off: %s", l->journal_path, strerror(errno));
    return TERRA_OK;
}

/* Replays the journal under its lock (shared when read-only); a torn last record is dropped and,
 * unless read-only, cut off. */
static terra_status replay_locked(terra_edit_layer *l) {
    const char *path = l->journal_path;
    struct stat sb;
    if (fstat(l->journal, &sb)) return terra_fail(TERRA_E_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return terra_fail(TERRA_E_IO, "%s: not a regular file (an edit journal is one)", path);
    const off_t size = sb.st_size;
    char magic[HEADER_SIZE];
    const size_t got = size < HEADER_SIZE ? (size_t)size : HEADER_SIZE;
    if (!read_all(l->journal, magic, got, 0)) return terra_fail(TERRA_E_IO, "%s: cannot read: %s", path, strerror(errno));
    if (got < HEADER_SIZE && !memcmp(magic, JOURNAL_MAGIC, got)) { /* new, or its header torn as it was created */
        if (got) terra_log(TERRA_LOG_WARN, "%s: the journal's header was torn (%zu of 8 bytes): %s", path, got,
                           l->read_only ? "read as empty" : "written again");
        if (!l->read_only && (ftruncate(l->journal, 0) || !write_all(l->journal, JOURNAL_MAGIC, HEADER_SIZE)))
            return terra_fail(TERRA_E_IO, "%s: cannot write the journal's header: %s", path, strerror(errno));
        return TERRA_OK;
    }
    if (got < HEADER_SIZE || memcmp(magic, JOURNAL_MAGIC, HEADER_SIZE))
        return terra_fail(TERRA_E_FORMAT, "%s: not a terra edit journal (its first bytes are not %s)", path, JOURNAL_MAGIC);
    const size_t records = (size_t)((size - HEADER_SIZE) / RECORD_SIZE), tail = (size_t)((size - HEADER_SIZE) % RECORD_SIZE);
    enum { CHUNK = 4096 };
    uint8_t *buf = terra_alloc((size_t)CHUNK * RECORD_SIZE);
    if (!buf) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    terra_status st = TERRA_OK;
    size_t kept = records;
    for (size_t first = 0; first < records && !st; first += CHUNK) {
        const size_t n = records - first < CHUNK ? records - first : CHUNK;
        if (!read_all(l->journal, buf, n * RECORD_SIZE, (off_t)(HEADER_SIZE + first * RECORD_SIZE))) {
            st = terra_fail(TERRA_E_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        for (size_t i = 0; i < n && !st; i++) {
            const size_t rec = first + i;
            const long long at = HEADER_SIZE + (long long)rec * RECORD_SIZE;
            char why[160];
            int zero;
            terra_edit e;
            stored_edit s;
            range_map m;
            if (!decode(buf + i * RECORD_SIZE, &e)) {
                if (rec + 1 < records || tail)
                    st = terra_fail(TERRA_E_CORRUPT, "%s: edit %zu, at byte %lld, does not match its CRC, and edits follow it",
                                    path, rec + 1, at);
                else
                    kept = rec;
            } else if ((zero = reserved_set(buf + i * RECORD_SIZE)) >= 0) {
                st = terra_fail(TERRA_E_CORRUPT, "%s: edit %zu, at byte %lld: its reserved byte %d (file byte %lld) is not 0",
                                path, rec + 1, at, zero, at + zero);
            } else if (!edit_valid(&e, why, sizeof why)) {
                st = terra_fail(TERRA_E_CORRUPT, "%s: edit %zu, at byte %lld: %s", path, rec + 1, at, why);
            } else if ((st = prepare(l, &e, &s, &m)) || (st = commit(l, &s, m, false))) {
                st = terra_fail(st, "%s: edit %zu, at byte %lld: %s", path, rec + 1, at, terra_last_error());
            }
        }
    }
    terra_free(buf);
    if (!st) st = index_finish(l);
    if (!st && l->deepest > TERRA_EDIT_MAX_OVERLAP) { /* the first edit past the cap, indexed again one by one */
        const size_t n = l->n;
        for (size_t i = 0; i < l->ncells; i++) terra_free(l->cells[i].ids);
        memset(l->slots, 0, sizeof *l->slots * l->slots_cap);
        l->ncells = 0, l->used = 0, l->deepest = 0, l->n = 0;
        for (size_t i = 0; i < n && !st; i++) {
            const terra_edit e = l->edits[i].e;
            stored_edit s;
            range_map m;
            if ((st = prepare(l, &e, &s, &m)) || (st = commit(l, &s, m, true)))
                st = terra_fail(st, "%s: edit %zu, at byte %lld: %s", path, i + 1, HEADER_SIZE + (long long)i * RECORD_SIZE,
                                terra_last_error());
        }
    }
    if (st || (kept == records && !tail)) return st;
    const off_t good = HEADER_SIZE + (off_t)kept * RECORD_SIZE;
    terra_log(TERRA_LOG_WARN, "%s: the last edit (at byte %lld, %lld of %d bytes) was torn: %s", path, (long long)good,
              (long long)(size - good), RECORD_SIZE, l->read_only ? "left out (the journal is only read)" : "dropped");
    return l->read_only ? TERRA_OK : cut_to(l, good);
}

static terra_status replay(terra_edit_layer *l, const char *path) {
    const size_t len = strlen(path) + 1;
    if (!(l->journal_path = terra_alloc(len))) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    memcpy(l->journal_path, path, len);
    /* not blocking on a FIFO: replay_locked refuses anything but a regular file */
    l->journal = l->read_only ? open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                              : open(path, O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0666);
    if (l->journal < 0) return terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: %s", path, strerror(errno));
    if (journal_lock(l->journal, l->read_only ? F_RDLCK : F_WRLCK))
        return terra_fail(TERRA_E_IO, "%s: cannot lock the journal: %s", path, strerror(errno));
    const terra_status st = replay_locked(l);
    journal_lock(l->journal, F_UNLCK);
    return st;
}

/* Appends a record under the journal's exclusive lock, first cutting off a torn record another
 * writer of the same journal left at its end. */
static terra_status append(terra_edit_layer *l, const uint8_t rec[RECORD_SIZE]) {
    if (journal_lock(l->journal, F_WRLCK))
        return terra_fail(TERRA_E_IO, "%s: cannot lock the journal: %s", l->journal_path, strerror(errno));
    terra_status st = TERRA_OK;
    struct stat sb;
    if (fstat(l->journal, &sb)) {
        st = terra_fail(TERRA_E_IO, "%s: %s", l->journal_path, strerror(errno));
    } else if (sb.st_size > HEADER_SIZE && (sb.st_size - HEADER_SIZE) % RECORD_SIZE) {
        const off_t good = sb.st_size - (sb.st_size - HEADER_SIZE) % RECORD_SIZE;
        terra_log(TERRA_LOG_WARN, "%s: a torn edit at byte %lld (another writer's): dropped", l->journal_path, (long long)good);
        st = cut_to(l, good);
    }
    if (!st && !write_all(l->journal, rec, RECORD_SIZE))
        st = terra_fail(TERRA_E_IO, "%s: cannot append an edit: %s", l->journal_path, strerror(errno));
    journal_lock(l->journal, F_UNLCK);
    return st;
}

/* ---- the layer ---------------------------------------------------------------------------------------- */

terra_status terra_edit_layer_create(const terra_edit_layer_desc *desc, terra_edit_layer **out) {
    *out = NULL;
    if (!desc || !desc->base) return terra_fail(TERRA_E_INVALID, "edit layer: no base source given");
    if (desc->read_only && !desc->journal) return terra_fail(TERRA_E_INVALID, "edit layer: read_only without a journal");
    terra_edit_layer *l = terra_calloc(1, sizeof *l);
    if (!l) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    l->base = desc->base;
    l->journal = -1;
    l->read_only = desc->read_only;
    pthread_mutex_init(&l->apply, NULL);
    pthread_rwlock_init(&l->lock, NULL);
    terra_status st = desc->journal ? replay(l, desc->journal) : TERRA_OK;
    if (!st) {
        terra_source_desc sd = {.height_at = layer_height, .surface_at = layer_surface, .sample_grid = layer_grid,
                                .height_range = layer_range, .user = l, .name = terra_source_name(desc->base)};
        st = terra_source_create(&sd, &l->src);
    }
    if (st) {
        terra_edit_layer_destroy(l);
        return st;
    }
    *out = l;
    return TERRA_OK;
}

void terra_edit_layer_destroy(terra_edit_layer *l) {
    if (!l) return;
    if (l->journal >= 0) {
        if (!l->read_only && fsync(l->journal))
            terra_log(TERRA_LOG_WARN, "%s: the edit journal could not be synced to the disk: %s", l->journal_path,
                      strerror(errno));
        close(l->journal);
    }
    terra_free(l->journal_path);
    terra_source_destroy(l->src);
    for (size_t i = 0; i < l->ncells; i++) terra_free(l->cells[i].ids);
    terra_free(l->cells);
    terra_free(l->slots);
    terra_free(l->edits);
    pthread_rwlock_destroy(&l->lock);
    pthread_mutex_destroy(&l->apply);
    terra_free(l);
}

terra_source *terra_edit_layer_source(terra_edit_layer *l) { return l->src; }

size_t terra_edit_count(const terra_edit_layer *l) {
    pthread_rwlock_rdlock((pthread_rwlock_t *)&l->lock);
    const size_t n = l->n;
    pthread_rwlock_unlock((pthread_rwlock_t *)&l->lock);
    return n;
}

terra_status terra_edit_apply(terra_edit_layer *l, const terra_edit *e, double region[4]) {
    char why[160];
    if (!edit_valid(e, why, sizeof why)) return terra_fail(TERRA_E_INVALID, "edit: %s", why);
    if (l->read_only) return terra_fail(TERRA_E_INVALID, "edit: %s is open read-only", l->journal_path);
    if (e->brush == TERRA_BRUSH_SMOOTH && isnan(terra_source_height_raw(l->base, e->x, e->z)))
        return terra_fail(TERRA_E_UNSUPPORTED, "edit: smoothing needs the base's point heights (height_at)");
    pthread_mutex_lock(&l->apply);
    /* checked before the journal takes it (only this thread changes the index) */
    stored_edit s;
    range_map m;
    terra_status st = l->behind ? terra_fail(TERRA_E_NOMEM, "edit: %s holds an edit this layer ran out of memory "
                                             "taking: open the layer again to replay it", l->journal_path)
                                : prepare(l, e, &s, &m);
    if (st && !l->behind) st = terra_fail(st, "edit: %s", terra_last_error());
    const bool logged = !st && l->journal >= 0;
    if (logged) {
        uint8_t rec[RECORD_SIZE];
        encode(e, rec);
        st = append(l, rec);
    }
    if (!st) {
        pthread_rwlock_wrlock(&l->lock);
        st = commit(l, &s, m, true);
        pthread_rwlock_unlock(&l->lock);
        /* only memory fails here; the journal, which other processes may append to, keeps the edit
         * and a replay takes it: this layer takes no edit after one it lacks */
        if (st && logged) l->behind = true;
    }
    pthread_mutex_unlock(&l->apply);
    if (!st && region) terra_edit_bounds(e, region);
    return st;
}
