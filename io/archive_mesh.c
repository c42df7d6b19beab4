/* libterra-io: an archive's tiles decoded for drawing (see terra/archive_mesh.h). */
#include "terra/archive_mesh.h"
#include "terra/archive_io.h"

#include "archive_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define POINT_TILES 8 /* finest tiles kept decoded for height queries */
#define BUCKETS 32     /* a point tile's triangles binned on BUCKETS x BUCKETS squares */

/* A finest tile decoded for height queries, its triangles binned by the squares their bounds
 * (a u, v step wider each way) touch, each square's in index order (CSR: start[BUCKETS^2 + 1]). */
typedef struct point_tile {
    terra_tile_mesh *t;
    uint32_t *start, *tri;
} point_tile;

struct terra_archive_mesh {
    terra_archive *a;
    pthread_mutex_t lock; /* the point cache */
    struct {
        terra_tile_key key;
        uint64_t stamp; /* 0: empty */
        point_tile p;
    } point[POINT_TILES];
    uint64_t clock;
    arc_index x;
    terra_tile_rules rules; /* the archive's (terra_archive_validate): every tile decoded passes them */
    terra_archive_mesh_info info;
    terra_source *src;
    double latency_ms;
    atomic_ullong prefetched;
};

/* ---- decoding --------------------------------------------------------------------------------- */

terra_status terra_archive_mesh_decode(const terra_archive_mesh *m, terra_tile_key key, void *buffer, size_t capacity,
                                       size_t *bytes) {
    terra_archive_entry e;
    terra_status st = terra_archive_find(m->a, key, &e);
    if (st) return st;
    terra_qmesh q;
    if ((st = terra_archive_check_tile(m->a, &e, &m->rules, &q, NULL))) return st;
    const uint32_t V = q.vertex_count, I = 3 * q.triangle_count;
    const size_t need = terra_tile_mesh_bytes(V, I);
    if (need > capacity) { /* the tile check saw to 3..TERRA_TILE_MESH_MAX_VERTICES vertices and a triangle */
        st = terra_fail(TERRA_E_CAPACITY, "%s: tile %d/%d/%d: %u vertices and %u triangles (%zu bytes decoded; room for %zu)",
                        terra_archive_path(m->a), terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key),
                        V, q.triangle_count, need, capacity);
        terra_qmesh_free(&q);
        return st;
    }
    const double side = ldexp(m->x.tile0, terra_tile_key_level(key));
    const float lo = q.header.min_height, hi = q.header.max_height;
    terra_tile_mesh *h = buffer;
    *h = (terra_tile_mesh){TERRA_TILE_MESH_MAGIC, V, I, 0, (float)side, (float)side, lo, hi, 0, e.geometric_error};
    /* skirts: a height step, and four horizontal steps on a slope of 4, at least half a metre */
    h->skirt_m = fmaxf(0.5f, (hi - lo) / 32767.0f + (float)(16.0 * side / 32767.0));
    terra_tile_mesh_vertex *v = (terra_tile_mesh_vertex *)(void *)(h + 1);
    for (uint32_t i = 0; i < V; i++) {
        v[i] = (terra_tile_mesh_vertex){q.u[i], q.v[i], q.h[i], {0, 127}, TERRA_SURFACE_NONE, 0};
        if (q.normals) { /* scenery axes (x, y up, z) to terra's encoding, +y the pole */
            double n[3];
            terra_qmesh_oct_decode(q.normals + 2 * (size_t)i, n);
            const float t[3] = {(float)n[0], (float)n[2], (float)n[1]};
            terra_oct_encode(t, v[i].normal);
        } else {
            const float up[3] = {0, 0, 1};
            terra_oct_encode(up, v[i].normal);
        }
        if (q.materials) v[i].surface = (terra_surface)(q.materials[i] > 255 ? 255 : q.materials[i]);
    }
    memcpy((void *)terra_tile_mesh_indices(h), q.indices, (size_t)I * sizeof(uint32_t));
    terra_qmesh_free(&q);
    *bytes = need;
    return TERRA_OK;
}

/* ---- the streamer's tiles ------------------------------------------------------------------- */

/* A tile for the streamer's pool (terra_stream_desc.make), then its children read ahead: a tile
 * decoded is about to be drawn, and its children are what the view asks for next as it nears them
 * (four index searches and a hint to the system per tile, beside a decode of milliseconds). */
static terra_status make_tile(void *user, terra_tile_key key, void *buffer, size_t capacity, size_t *bytes) {
    terra_archive_mesh *m = user;
    if (m->latency_ms > 0) {
        struct timespec ts = {(time_t)(m->latency_ms / 1e3), (long)(fmod(m->latency_ms, 1e3) * 1e6)};
        nanosleep(&ts, NULL);
    }
    const terra_status st = terra_archive_mesh_decode(m, key, buffer, capacity, bytes);
    const int L = terra_tile_key_level(key);
    const int32_t x = terra_tile_key_x(key), y = terra_tile_key_y(key);
    for (int c = 0; st == TERRA_OK && L > 0 && c < 4; c++) {
        const int32_t cx = 2 * x + (c & 1), cy = 2 * y + (c >> 1);
        terra_archive_entry e;
        if (arc_index_present(&m->x, L - 1, cx, cy) &&
            terra_archive_find(m->a, terra_tile_key_make(0, L - 1, cx, cy), &e) == TERRA_OK && terra_archive_prefetch(m->a, &e))
            atomic_fetch_add(&m->prefetched, 1);
    }
    return st;
}

/* ---- the source: ranges only ------------------------------------------------------------------ */

static terra_status mesh_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    arc_index_range(&((const terra_archive_mesh *)user)->x, x0, z0, x1, z1, lo, hi);
    return TERRA_OK;
}

static int bucket_of(double u) { /* u, v in 0 .. 32767 */
    const int b = (int)(u * BUCKETS / 32768.0);
    return b < 0 ? 0 : b >= BUCKETS ? BUCKETS - 1 : b;
}

static void point_tile_free(point_tile *p) {
    terra_free(p->t), terra_free(p->start), terra_free(p->tri);
    *p = (point_tile){0};
}

/* Bins t's triangles (counted, then placed: two passes). False when out of memory. */
static bool point_tile_bin(point_tile *p) {
    const terra_tile_mesh *t = p->t;
    const terra_tile_mesh_vertex *v = terra_tile_mesh_vertices(t);
    const uint32_t *idx = terra_tile_mesh_indices(t);
    const uint32_t n = t->index_count / 3;
    p->start = terra_calloc(BUCKETS * BUCKETS + 1, sizeof *p->start);
    if (!p->start) return false;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t k = 0; k < n; k++) {
            const terra_tile_mesh_vertex *a = &v[idx[3 * k]], *b = &v[idx[3 * k + 1]], *c = &v[idx[3 * k + 2]];
            const int u0 = bucket_of(fmin(a->u, fmin(b->u, c->u)) - 1), u1 = bucket_of(fmax(a->u, fmax(b->u, c->u)) + 1);
            const int v0 = bucket_of(fmin(a->v, fmin(b->v, c->v)) - 1), v1 = bucket_of(fmax(a->v, fmax(b->v, c->v)) + 1);
            for (int j = v0; j <= v1; j++)
                for (int i = u0; i <= u1; i++) {
                    if (pass == 0) p->start[j * BUCKETS + i + 1]++;
                    else p->tri[p->start[j * BUCKETS + i]++] = k;
                }
        }
        if (pass == 0) {
            for (int b = 0; b < BUCKETS * BUCKETS; b++) p->start[b + 1] += p->start[b];
            if (!(p->tri = terra_alloc(sizeof *p->tri * ((size_t)p->start[BUCKETS * BUCKETS] + 1)))) return false;
        }
    }
    /* placing moved each start to the next square's: back by one square */
    memmove(p->start + 1, p->start, sizeof *p->start * BUCKETS * BUCKETS);
    p->start[0] = 0;
    return true;
}

/* The height of the tile at (x, z) metres from its origin: in the first triangle (in index order)
 * that holds the point, interpolated, or (in a hole) at the nearest vertex. */
static float tile_height(const point_tile *p, double x, double z) {
    const terra_tile_mesh *t = p->t;
    const terra_tile_mesh_vertex *v = terra_tile_mesh_vertices(t);
    const uint32_t *idx = terra_tile_mesh_indices(t);
    const double su = t->size_x / 32767.0, sv = t->size_z / 32767.0, sh = (t->max_height - t->min_height) / 32767.0;
    const double pu = x / su, pv = z / sv; /* in u, v steps */
    const int b = bucket_of(pv) * BUCKETS + bucket_of(pu);
    for (uint32_t q = p->start[b]; q < p->start[b + 1]; q++) {
        const uint32_t i = 3 * p->tri[q];
        const terra_tile_mesh_vertex *a = &v[idx[i]], *bb = &v[idx[i + 1]], *c = &v[idx[i + 2]];
        /* signed: decoded tiles turn clockwise in (u, v) (v runs along +z, the archive's south) */
        const double area = ((double)bb->u - a->u) * ((double)c->v - a->v) - ((double)bb->v - a->v) * ((double)c->u - a->u);
        if (area == 0) continue;
        const double la = (((double)bb->u - pu) * ((double)c->v - pv) - ((double)bb->v - pv) * ((double)c->u - pu)) / area;
        const double lb = (((double)c->u - pu) * ((double)a->v - pv) - ((double)c->v - pv) * ((double)a->u - pu)) / area;
        const double lc = 1.0 - la - lb;
        if (la < -1e-9 || lb < -1e-9 || lc < -1e-9) continue;
        return (float)(t->min_height + sh * (la * a->h + lb * bb->h + lc * c->h));
    }
    double best = INFINITY;
    float h = t->min_height;
    for (uint32_t i = 0; i < t->vertex_count; i++) {
        const double du = (v[i].u - pu) * su, dv = (v[i].v - pv) * sv;
        if (du * du + dv * dv < best) best = du * du + dv * dv, h = (float)(t->min_height + sh * v[i].h);
    }
    return h;
}

/* Heights from the finest tile under the point (clamped into the area). */
static float mesh_height(void *user, double x, double z) {
    terra_archive_mesh *m = user;
    const double *A = m->x.area;
    x = fmin(fmax(x, A[0]), A[2]), z = fmin(fmax(z, A[1]), A[3]);
    const double side = m->x.tile0;
    int32_t tx = (int32_t)floor(x / side), tz = (int32_t)floor(z / side);
    /* the area's far edges belong to the tile before */
    if (!arc_index_present(&m->x, 0, tx, tz) && arc_index_present(&m->x, 0, tx - 1, tz) && x == tx * side) tx--;
    if (!arc_index_present(&m->x, 0, tx, tz) && arc_index_present(&m->x, 0, tx, tz - 1) && z == tz * side) tz--;
    if (!arc_index_present(&m->x, 0, tx, tz)) return NAN;
    const terra_tile_key key = terra_tile_key_make(0, 0, tx, tz);
    const double lx = x - tx * side, lz = z - tz * side;
    float h = NAN;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < POINT_TILES; i++)
        if (m->point[i].stamp && m->point[i].key == key) {
            m->point[i].stamp = ++m->clock;
            h = tile_height(&m->point[i].p, lx, lz);
        }
    pthread_mutex_unlock(&m->lock);
    if (!isnan(h)) return h;
    /* decoded and binned outside the lock; the tile joins the cache, the least recently used one
     * leaves */
    point_tile p = {terra_alloc(m->info.tile_bytes), NULL, NULL};
    size_t bytes;
    if (!p.t || terra_archive_mesh_decode(m, key, p.t, m->info.tile_bytes, &bytes) != TERRA_OK || !point_tile_bin(&p)) {
        point_tile_free(&p);
        return NAN;
    }
    h = tile_height(&p, lx, lz);
    pthread_mutex_lock(&m->lock);
    int victim = 0;
    for (int i = 1; i < POINT_TILES; i++)
        if (m->point[i].stamp < m->point[victim].stamp) victim = i;
    point_tile_free(&m->point[victim].p);
    m->point[victim].key = key, m->point[victim].p = p, m->point[victim].stamp = ++m->clock;
    pthread_mutex_unlock(&m->lock);
    return h;
}

float terra_archive_mesh_tile_error(void *user, terra_tile_key key) {
    return arc_index_error(&((const terra_archive_mesh *)user)->x, key);
}

/* ---- opening ---------------------------------------------------------------------------------- */

void terra_archive_mesh_close(terra_archive_mesh *m) {
    if (!m) return;
    terra_source_destroy(m->src);
    for (int i = 0; i < POINT_TILES; i++) point_tile_free(&m->point[i].p);
    pthread_mutex_destroy(&m->lock);
    arc_index_free(&m->x);
    terra_archive_close(m->a);
    terra_free(m);
}

terra_status terra_archive_mesh_open(const char *path, const terra_archive_mesh_desc *desc, terra_archive_mesh **out,
                                     terra_archive_mesh_info *info) {
    *out = NULL;
    const terra_archive_mesh_desc d = desc ? *desc : (terra_archive_mesh_desc){0};
    if (!(d.latency_ms >= 0)) return terra_fail(TERRA_E_INVALID, "archive mesh: latency_ms must not be negative");
    terra_archive_mesh *m = terra_calloc(1, sizeof *m);
    if (!m) return terra_fail(TERRA_E_NOMEM, "archive mesh: out of memory");
    pthread_mutex_init(&m->lock, NULL);
    m->latency_ms = d.latency_ms;
    terra_status st = terra_archive_open(path, NULL, &m->a);
    terra_archive_layout layout;
    if (!st) st = arc_index_build(m->a, &layout, &m->x);
    if (!st) {
        m->rules = layout.rules;
        m->info = (terra_archive_mesh_info){.tile0_size = m->x.tile0, .levels = m->x.max_level + 1,
                                            .min_height = m->x.glo - m->x.margin, .max_height = m->x.ghi + m->x.margin,
                                            .tin = layout.tin,
                                            .tiles = terra_archive_get_info(m->a)->tile_count,
                                            .tile_bytes = 2 * (size_t)m->x.max_raw + 64};
        memcpy(m->info.bounds, m->x.area, sizeof m->x.area);
        terra_source_desc sd = {.height_at = mesh_height, .height_range = mesh_range, .user = m,
                                .name = terra_archive_path(m->a)};
        st = terra_source_create(&sd, &m->src);
    }
    if (st) {
        terra_archive_mesh_close(m);
        return st;
    }
    if (info) *info = m->info;
    *out = m;
    return TERRA_OK;
}

const terra_source *terra_archive_mesh_source(const terra_archive_mesh *m) { return m->src; }
void terra_archive_mesh_get_info(const terra_archive_mesh *m, terra_archive_mesh_info *info) { *info = m->info; }
uint64_t terra_archive_mesh_prefetched(const terra_archive_mesh *m) { return atomic_load(&m->prefetched); }

void terra_archive_mesh_stream_desc(terra_archive_mesh *m, terra_stream_desc *desc) {
    desc->source = m->src;
    desc->loader = (terra_stream_loader){0};
    desc->make = make_tile, desc->make_user = m, desc->make_bytes = m->info.tile_bytes;
    desc->select.levels = m->info.levels;
    desc->select.grid.tile0_size = m->info.tile0_size;
    memcpy(desc->select.bounds, m->info.bounds, sizeof m->info.bounds);
    desc->select.tile_error = terra_archive_mesh_tile_error;
    desc->select.tile_error_user = m;
}
