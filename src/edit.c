/* terra edit: a layer of brushes over any source, and its journal (edit.h). */
#include "terra/edit.h"
#include "terra/archive.h" /* terra_crc32c */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CELL 256.0           /* metres: the side of an index cell */
#define MAX_CELLS_EDIT 1024  /* an edit over more cells goes on the list of big ones */
#define JOURNAL_MAGIC "TERRAEJ1"
#define RECORD_PAYLOAD 64
#define RECORD_SIZE (4 + RECORD_PAYLOAD)

typedef struct stored_edit {
    terra_edit e;
    double b[4];       /* bounds */
    double c, s, stencil; /* box turn; smooth's stencil distance */
} stored_edit;

typedef struct cell {
    int64_t key; /* INT64_MIN: empty */
    uint32_t *ids;
    uint32_t n, cap;
} cell;

struct terra_edit_layer {
    const terra_source *base;
    terra_source *src;
    FILE *journal;
    char *journal_path;
    pthread_rwlock_t lock;
    stored_edit *edits;
    size_t n, cap;
    cell *cells; /* open addressing */
    size_t ncells, cells_cap;
    uint32_t *big;
    size_t nbig, big_cap;
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

/* ---- the index ------------------------------------------------------------------------------------ */

static int64_t cell_key(int64_t cx, int64_t cz) { return (int64_t)((uint64_t)cx << 32 ^ (uint64_t)(uint32_t)cz); }
static int64_t cell_of(double v) { return (int64_t)floor(v / CELL); }

static cell *cell_find(const terra_edit_layer *l, int64_t key) {
    if (!l->cells_cap) return NULL;
    size_t i = (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (l->cells_cap - 1);
    while (l->cells[i].key != INT64_MIN) {
        if (l->cells[i].key == key) return &l->cells[i];
        i = (i + 1) & (l->cells_cap - 1);
    }
    return NULL;
}

static bool push_id(uint32_t **ids, uint32_t *n, uint32_t *cap, uint32_t id) {
    if (*n == *cap) {
        const uint32_t c = *cap ? 2 * *cap : 4;
        uint32_t *p = terra_realloc(*ids, sizeof *p * c);
        if (!p) return false;
        *ids = p, *cap = c;
    }
    (*ids)[(*n)++] = id;
    return true;
}

static bool cells_grow(terra_edit_layer *l) {
    const size_t cap = l->cells_cap ? 2 * l->cells_cap : 256;
    cell *c = terra_alloc(sizeof *c * cap);
    if (!c) return false;
    for (size_t i = 0; i < cap; i++) c[i] = (cell){.key = INT64_MIN};
    cell *old = l->cells;
    const size_t old_cap = l->cells_cap;
    l->cells = c, l->cells_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key == INT64_MIN) continue;
        size_t j = (size_t)((uint64_t)old[i].key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
        while (c[j].key != INT64_MIN) j = (j + 1) & (cap - 1);
        c[j] = old[i];
    }
    terra_free(old);
    return true;
}

static bool index_edit(terra_edit_layer *l, uint32_t id) {
    const double *b = l->edits[id].b;
    const int64_t x0 = cell_of(b[0]), x1 = cell_of(b[2]), z0 = cell_of(b[1]), z1 = cell_of(b[3]);
    if ((double)(x1 - x0 + 1) * (double)(z1 - z0 + 1) > MAX_CELLS_EDIT) {
        uint32_t n = (uint32_t)l->nbig, cap = (uint32_t)l->big_cap;
        const bool ok = push_id(&l->big, &n, &cap, id);
        l->nbig = n, l->big_cap = cap;
        return ok;
    }
    for (int64_t cz = z0; cz <= z1; cz++)
        for (int64_t cx = x0; cx <= x1; cx++) {
            const int64_t key = cell_key(cx, cz);
            cell *c = cell_find(l, key);
            if (!c) {
                if (2 * (l->ncells + 1) > l->cells_cap && !cells_grow(l)) return false;
                size_t i = (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (l->cells_cap - 1);
                while (l->cells[i].key != INT64_MIN) i = (i + 1) & (l->cells_cap - 1);
                c = &l->cells[i];
                c->key = key;
                l->ncells++;
            }
            if (!push_id(&c->ids, &c->n, &c->cap, id)) return false;
        }
    return true;
}

/* The edits, in order, whose bounds meet the rectangle: from the cells it covers and the big list,
 * or every edit when the rectangle covers more cells than there are edits. *out: terra_free. */
static size_t edits_over(const terra_edit_layer *l, double x0, double z0, double x1, double z1, uint32_t **out) {
    *out = NULL;
    if (!l->n) return 0;
    uint32_t *ids = terra_alloc(sizeof *ids * l->n);
    uint8_t *seen = terra_calloc(l->n, 1);
    size_t k = 0;
    if (ids && seen) {
        const int64_t cx0 = cell_of(x0), cx1 = cell_of(x1), cz0 = cell_of(z0), cz1 = cell_of(z1);
        if ((double)(cx1 - cx0 + 1) * (double)(cz1 - cz0 + 1) > (double)l->n + MAX_CELLS_EDIT) {
            for (size_t i = 0; i < l->n; i++) seen[i] = 1;
        } else {
            for (size_t i = 0; i < l->nbig; i++) seen[l->big[i]] = 1;
            for (int64_t cz = cz0; cz <= cz1; cz++)
                for (int64_t cx = cx0; cx <= cx1; cx++) {
                    const cell *c = cell_find(l, cell_key(cx, cz));
                    for (uint32_t i = 0; c && i < c->n; i++) seen[c->ids[i]] = 1;
                }
        }
        for (size_t i = 0; i < l->n; i++) {
            const double *b = l->edits[i].b;
            if (seen[i] && b[0] <= x1 && b[2] >= x0 && b[1] <= z1 && b[3] >= z0) ids[k++] = (uint32_t)i;
        }
    }
    terra_free(seen);
    *out = ids;
    return k;
}

/* ---- the source ------------------------------------------------------------------------------------ */

static float edited(const terra_edit_layer *l, const uint32_t *ids, size_t n, double x, double z, float base,
                    terra_surface *surf) {
    double h = base;
    for (size_t k = 0; k < n; k++)
        if (holds(&l->edits[ids[k]], x, z)) h = apply_one(l, &l->edits[ids[k]], x, z, h, base, surf);
    return (float)h;
}

static terra_status layer_grid(void *user, const terra_grid_request *r, float *heights, terra_surface *surfaces) {
    terra_edit_layer *l = user;
    terra_status st = terra_source_sample(l->base, r, heights, surfaces);
    if (st) return st;
    pthread_rwlock_rdlock(&l->lock);
    uint32_t *ids;
    const size_t n = edits_over(l, (double)r->ix0 * r->spacing, (double)r->iz0 * r->spacing,
                                (double)(r->ix0 + r->nx - 1) * r->spacing, (double)(r->iz0 + r->nz - 1) * r->spacing, &ids);
    if (l->n && !ids) st = terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    for (int j = 0; n && j < r->nz; j++) {
        const double z = (double)(r->iz0 + j) * r->spacing;
        for (int i = 0; i < r->nx; i++) {
            const size_t k = (size_t)j * (size_t)r->nx + (size_t)i;
            terra_surface s = surfaces ? surfaces[k] : 0;
            heights[k] = edited(l, ids, n, (double)(r->ix0 + i) * r->spacing, z, heights[k], &s);
            if (surfaces) surfaces[k] = s;
        }
    }
    pthread_rwlock_unlock(&l->lock);
    terra_free(ids);
    return st;
}

/* A point: the edits of its cell and the big ones, merged in order; no allocation, no scan of all. */
static float point(terra_edit_layer *l, double x, double z, terra_surface *surf) {
    const float base = terra_source_height_raw(l->base, x, z);
    double h = base;
    pthread_rwlock_rdlock(&l->lock);
    const cell *c = cell_find(l, cell_key(cell_of(x), cell_of(z)));
    const uint32_t nc = c ? c->n : 0;
    for (uint32_t i = 0, j = 0; i < nc || j < l->nbig;) {
        const uint32_t id = j >= l->nbig || (i < nc && c->ids[i] < l->big[j]) ? c->ids[i++] : l->big[j++];
        if (holds(&l->edits[id], x, z)) h = apply_one(l, &l->edits[id], x, z, h, base, surf);
    }
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

static terra_status layer_range(void *user, double x0, double z0, double x1, double z1, float *lo_out, float *hi_out) {
    terra_edit_layer *l = user;
    float blo, bhi;
    terra_status st = terra_source_height_range(l->base, x0, z0, x1, z1, &blo, &bhi);
    if (st) return st;
    double lo = blo, hi = bhi;
    pthread_rwlock_rdlock(&l->lock);
    uint32_t *ids;
    const size_t n = edits_over(l, x0, z0, x1, z1, &ids);
    if (l->n && !ids) st = terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    for (size_t k = 0; k < n && !st; k++) {
        const stored_edit *s = &l->edits[ids[k]];
        const terra_edit *e = &s->e;
        switch (e->brush) {
        case TERRA_BRUSH_RAISE: hi += e->amount; break;
        case TERRA_BRUSH_LOWER: lo -= e->amount; break;
        case TERRA_BRUSH_FLATTEN: lo = fmin(lo, e->amount), hi = fmax(hi, e->amount); break;
        case TERRA_BRUSH_DIG: lo = fmin(lo, e->amount); break;
        case TERRA_BRUSH_SMOOTH: { /* the pull is at most the base's spread over the stencil's reach */
            const double d = s->stencil;
            float a, b;
            st = terra_source_height_range(l->base, fmax(x0, s->b[0]) - d, fmax(z0, s->b[1]) - d, fmin(x1, s->b[2]) + d,
                                           fmin(z1, s->b[3]) + d, &a, &b);
            lo -= e->amount * ((double)b - a), hi += e->amount * ((double)b - a);
            break;
        }
        case TERRA_BRUSH_PAINT: break;
        }
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

static terra_status add_edit(terra_edit_layer *l, const terra_edit *e) {
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        stored_edit *p = terra_realloc(l->edits, sizeof *p * cap);
        if (!p) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for %zu edits", cap);
        l->edits = p, l->cap = cap;
    }
    store(&l->edits[l->n], e);
    if (!index_edit(l, (uint32_t)l->n)) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory for its index");
    l->n++;
    return TERRA_OK;
}

/* Replays the journal; a torn last record is dropped and cut off. Leaves the file open to append. */
static terra_status replay(terra_edit_layer *l, const char *path) {
    FILE *f = fopen(path, "r+b");
    if (!f && errno == ENOENT) f = fopen(path, "w+b");
    if (!f) return terra_fail(TERRA_E_IO, "%s: %s", path, strerror(errno));
    l->journal = f;
    const size_t len = strlen(path) + 1;
    if (!(l->journal_path = terra_alloc(len))) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    memcpy(l->journal_path, path, len);
    char magic[8];
    const size_t got = fread(magic, 1, 8, f);
    if (got == 0) { /* new */
        if (fwrite(JOURNAL_MAGIC, 1, 8, f) != 8 || fflush(f))
            return terra_fail(TERRA_E_IO, "%s: cannot write the journal's header: %s", path, strerror(errno));
        return TERRA_OK;
    }
    if (got < 8 && !memcmp(magic, JOURNAL_MAGIC, got)) { /* its header torn as it was created */
        terra_log(TERRA_LOG_WARN, "%s: the journal's header was torn (%zu of 8 bytes): written again", path, got);
        if (ftruncate(fileno(f), 0) || fseek(f, 0, SEEK_SET) || fwrite(JOURNAL_MAGIC, 1, 8, f) != 8 || fflush(f))
            return terra_fail(TERRA_E_IO, "%s: cannot write the journal's header: %s", path, strerror(errno));
        return TERRA_OK;
    }
    if (got < 8 || memcmp(magic, JOURNAL_MAGIC, 8))
        return terra_fail(TERRA_E_FORMAT, "%s: not a terra edit journal (its first bytes are not %s)", path, JOURNAL_MAGIC);
    uint8_t rec[RECORD_SIZE];
    long good = 8;
    for (;;) {
        const size_t n = fread(rec, 1, RECORD_SIZE, f);
        if (n == 0) break;
        terra_edit e;
        char why[160] = "";
        const bool whole = n == RECORD_SIZE, sound = whole && decode(rec, &e);
        if (sound && !edit_valid(&e, why, sizeof why))
            return terra_fail(TERRA_E_CORRUPT, "%s: the edit at byte %ld: %s", path, good, why);
        if (!sound) {
            uint8_t more;
            if (whole && fread(&more, 1, 1, f) == 1)
                return terra_fail(TERRA_E_CORRUPT, "%s: the edit at byte %ld does not match its CRC, and edits follow it",
                                  path, good);
            terra_log(TERRA_LOG_WARN, "%s: the last edit (at byte %ld, %zu of %d bytes) was torn: dropped", path, good, n,
                      RECORD_SIZE);
            fflush(f);
            if (ftruncate(fileno(f), good))
                return terra_fail(TERRA_E_IO, "%s: cannot cut the torn edit off: %s", path, strerror(errno));
            break;
        }
        terra_status st = add_edit(l, &e);
        if (st) return st;
        good += RECORD_SIZE;
    }
    if (fseek(f, good, SEEK_SET)) return terra_fail(TERRA_E_IO, "%s: %s", path, strerror(errno));
    return TERRA_OK;
}

/* ---- the layer ---------------------------------------------------------------------------------------- */

terra_status terra_edit_layer_create(const terra_edit_layer_desc *desc, terra_edit_layer **out) {
    *out = NULL;
    if (!desc || !desc->base) return terra_fail(TERRA_E_INVALID, "edit layer: no base source given");
    terra_edit_layer *l = terra_calloc(1, sizeof *l);
    if (!l) return terra_fail(TERRA_E_NOMEM, "edit layer: out of memory");
    l->base = desc->base;
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
    if (l->journal) {
        if (fflush(l->journal) || fsync(fileno(l->journal)))
            terra_log(TERRA_LOG_WARN, "%s: the edit journal could not be synced to the disk: %s", l->journal_path,
                      strerror(errno));
        fclose(l->journal);
    }
    terra_free(l->journal_path);
    terra_source_destroy(l->src);
    for (size_t i = 0; i < l->cells_cap; i++)
        if (l->cells[i].key != INT64_MIN) terra_free(l->cells[i].ids);
    terra_free(l->cells);
    terra_free(l->big);
    terra_free(l->edits);
    pthread_rwlock_destroy(&l->lock);
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
    if (e->brush == TERRA_BRUSH_SMOOTH && isnan(terra_source_height_raw(l->base, e->x, e->z)))
        return terra_fail(TERRA_E_UNSUPPORTED, "edit: smoothing needs the base's point heights (height_at)");
    if (l->journal) {
        uint8_t rec[RECORD_SIZE];
        encode(e, rec);
        if (fwrite(rec, 1, RECORD_SIZE, l->journal) != RECORD_SIZE || fflush(l->journal))
            return terra_fail(TERRA_E_IO, "edit journal: cannot append: %s", strerror(errno));
    }
    pthread_rwlock_wrlock(&l->lock);
    const terra_status st = add_edit(l, e);
    pthread_rwlock_unlock(&l->lock);
    if (!st && region) terra_edit_bounds(e, region);
    return st;
}
