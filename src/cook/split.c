/* One cook shared by several processes (terra/cook.h): the plan of rounds, and part files. */
#include "terra/cook.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan ---------------------------------------------------------------------------------- */

static int32_t floor_shift(int32_t v, int d) { return (int32_t)floor(ldexp((double)v, -d)); }

typedef struct root_ref {
    int32_t tx, ty;
    uint64_t work;
} root_ref;

static int ref_cmp_xy(const void *a, const void *b) {
    const root_ref *p = a, *q = b;
    return p->ty != q->ty ? (p->ty > q->ty) - (p->ty < q->ty) : (p->tx > q->tx) - (p->tx < q->tx);
}

/* Largest work first; ties in row, then column order (deterministic). */
static int ref_cmp_work(const void *a, const void *b) {
    const root_ref *p = a, *q = b;
    if (p->work != q->work) return p->work < q->work ? 1 : -1;
    return ref_cmp_xy(a, b);
}

/* The distinct roots of depth d over the finest tiles, in row order, each with the source samples
 * under it. */
static terra_status roots_at(const terra_cook_grid *g, const int32_t *finest, size_t n, const terra_cook_footprint *in,
                             size_t ni, int d, root_ref **out, size_t *count) {
    root_ref *r = terra_alloc(n * sizeof *r + 1);
    if (!r) return terra_fail(TERRA_E_NOMEM, "cook plan: out of memory for %zu tiles", n);
    for (size_t i = 0; i < n; i++) r[i] = (root_ref){floor_shift(finest[2 * i], d), floor_shift(finest[2 * i + 1], d), 0};
    qsort(r, n, sizeof *r, ref_cmp_xy);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || ref_cmp_xy(&r[i], &r[u - 1])) r[u++] = r[i];
    /* each footprint's samples over the roots its rectangle meets, by the area they share */
    const double side = g->tile_units * ldexp(1, d);
    for (size_t k = 0; k < ni; k++) {
        const double *f = in[k].rect;
        const int64_t x0 = (int64_t)floor(f[0] / side), x1 = (int64_t)floor(f[2] / side);
        const int64_t y0 = (int64_t)floor(f[1] / side), y1 = (int64_t)floor(f[3] / side);
        for (int64_t y = y0; y <= y1; y++)
            for (int64_t x = x0; x <= x1; x++) {
                const root_ref key = {(int32_t)x, (int32_t)y, 0};
                root_ref *hit = bsearch(&key, r, u, sizeof *r, ref_cmp_xy);
                if (!hit) continue;
                /* the share of the footprint in the root, along each axis (a footprint of no width
                 * lies wholly in the root that holds its line) */
                const double fx = f[2] > f[0] ? fmax(0, fmin(f[2], (x + 1) * side) - fmax(f[0], x * side)) / (f[2] - f[0]) : 1;
                const double fy = f[3] > f[1] ? fmax(0, fmin(f[3], (y + 1) * side) - fmax(f[1], y * side)) / (f[3] - f[1]) : 1;
                hit->work += (uint64_t)llround(fx * fy * (double)in[k].samples);
            }
    }
    *out = r;
    *count = u;
    return TERRA_OK;
}

/* Largest first, each to the least loaded process (the lowest numbered of equals): the round's
 * roots back in row order with their owners; returns the largest load over the mean. */
static double share_out(root_ref *r, size_t n, int ranks, int32_t *owner_by_row) {
    uint64_t *load = terra_calloc((size_t)ranks, sizeof *load);
    root_ref *by_work = terra_alloc(n * sizeof *by_work + 1);
    if (!load || !by_work) {
        terra_free(load), terra_free(by_work);
        return INFINITY;
    }
    memcpy(by_work, r, n * sizeof *r);
    qsort(by_work, n, sizeof *by_work, ref_cmp_work);
    uint64_t total = 0, most = 0;
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int k = 1; k < ranks; k++)
            if (load[k] < load[best]) best = k;
        load[best] += by_work[i].work;
        total += by_work[i].work;
        root_ref *row = bsearch(&by_work[i], r, n, sizeof *r, ref_cmp_xy);
        if (owner_by_row) owner_by_row[row - r] = best;
    }
    for (int k = 0; k < ranks; k++) most = load[k] > most ? load[k] : most;
    terra_free(load), terra_free(by_work);
    return total ? (double)most * ranks / (double)total : 1.0;
}

void terra_cook_split_plan_free(terra_cook_split_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->round_count; i++) {
        terra_free(p->round[i].roots);
        terra_free(p->round[i].work);
        terra_free(p->round[i].owner);
    }
    memset(p, 0, sizeof *p);
}

static terra_status add_round(terra_cook_split_plan *p, int bottom, int top, root_ref *r, size_t n) {
    terra_cook_split_round *R = &p->round[p->round_count];
    R->bottom = bottom, R->top = top, R->root_count = n;
    R->roots = terra_alloc(2 * n * sizeof *R->roots + 1);
    R->work = terra_alloc(n * sizeof *R->work + 1);
    R->owner = terra_alloc(n * sizeof *R->owner + 1);
    p->round_count++;
    if (!R->roots || !R->work || !R->owner) return terra_fail(TERRA_E_NOMEM, "cook plan: out of memory");
    for (size_t i = 0; i < n; i++) R->roots[2 * i] = r[i].tx, R->roots[2 * i + 1] = r[i].ty, R->work[i] = r[i].work;
    const double imb = share_out(r, n, p->ranks, R->owner);
    if (isinf(imb)) return terra_fail(TERRA_E_NOMEM, "cook plan: out of memory");
    if (p->round_count == 1) p->imbalance = imb;
    return TERRA_OK;
}

terra_status terra_cook_split_plan_make(const terra_cook_grid *g, const int32_t *finest, size_t finest_count,
                                        const terra_cook_footprint *inputs, size_t input_count, int ranks,
                                        terra_cook_split_plan *out) {
    memset(out, 0, sizeof *out);
    if (!g || (finest_count && !finest) || (input_count && !inputs) || ranks < 1 || g->depth < 0 || g->depth > 30 ||
        !(g->tile_units > 0))
        return terra_fail(TERRA_E_INVALID, "cook plan: bad arguments (%d processes)", ranks);
    out->ranks = ranks;
    out->imbalance = 1;
    if (ranks == 1 || g->depth < 1 || !finest_count) return TERRA_OK; /* everything on process 0 */
    /* the first round: the highest depth whose roots share out within 5% (and at least one a process),
     * else the best share */
    int first = 0;
    double best = INFINITY;
    for (int d = 1; d <= g->depth; d++) {
        root_ref *r;
        size_t n;
        terra_status st = roots_at(g, finest, finest_count, inputs, input_count, d, &r, &n);
        if (st != TERRA_OK) return st;
        const double imb = n >= (size_t)ranks ? share_out(r, n, ranks, NULL) : INFINITY;
        terra_free(r);
        if (imb <= 1.05) first = d;
        else if (!first && imb < best) best = imb, first = -d;
        if (n < (size_t)ranks) break;
    }
    if (first == 0) return TERRA_OK; /* fewer roots than processes at every depth */
    /* one round: a higher depth has fewer roots, so a second could not keep every process busy */
    root_ref *r = NULL;
    size_t n;
    terra_status st = roots_at(g, finest, finest_count, inputs, input_count, abs(first), &r, &n);
    if (st == TERRA_OK) st = add_round(out, 0, abs(first), r, n);
    terra_free(r);
    if (st != TERRA_OK) {
        terra_cook_split_plan_free(out);
        return st;
    }
    out->top_bottom = out->round[out->round_count - 1].top;
    return TERRA_OK;
}

/* ---- part files -------------------------------------------------------------------------------- */

#define PART_MAGIC "TRPART1"
#define PART_HEAD 72
#define PART_TILE_HEAD 48

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }
static void putf(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(p, u);
}
static float getf(const uint8_t *p) {
    uint32_t u = get32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void putd(uint8_t *p, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    put64(p, u);
}
static double getd(const uint8_t *p) {
    uint64_t u = get64(p);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* Bytes of the mesh arrays and finest list. */
static uint64_t body_bytes(uint64_t v, uint64_t t, uint64_t f, bool normals, bool materials) {
    return v * (16 + 4 + (normals ? 12 : 0) + (materials ? 2 : 0)) + t * 12 + f * 8;
}

terra_status terra_cook_part_encode(const terra_cook_part *p, uint8_t **out, size_t *size) {
    const terra_cook_mesh *m = &p->root.mesh;
    const bool nrm = m->normal != NULL, mat = m->material != NULL;
    uint64_t n = PART_HEAD + body_bytes(m->vertex_count, m->triangle_count, p->root.finest_count, nrm, mat) + 4;
    for (size_t i = 0; i < p->tile_count; i++) n += PART_TILE_HEAD + (uint64_t)p->tiles[i].entry.size;
    uint8_t *b = n <= SIZE_MAX ? terra_alloc((size_t)n) : NULL;
    if (!b) return terra_fail(TERRA_E_NOMEM, "cook part: out of memory for %llu bytes", (unsigned long long)n);
    memcpy(b, PART_MAGIC, 8);
    put32(b + 8, 1);
    put32(b + 12, (nrm ? 1u : 0u) | (mat ? 2u : 0u));
    put64(b + 16, p->fingerprint);
    put32(b + 24, (uint32_t)p->bottom), put32(b + 28, (uint32_t)p->depth);
    put32(b + 32, (uint32_t)p->root.tx), put32(b + 36, (uint32_t)p->root.ty);
    putd(b + 40, p->root.error), putd(b + 48, p->root.finest_error);
    put32(b + 56, m->vertex_count), put32(b + 60, m->triangle_count);
    put32(b + 64, (uint32_t)p->root.finest_count), put32(b + 68, (uint32_t)p->tile_count);
    uint8_t *q = b + PART_HEAD;
    for (size_t i = 0; i < 2 * (size_t)m->vertex_count; i++, q += 8) putd(q, m->xy[i]);
    for (size_t i = 0; i < m->vertex_count; i++, q += 4) putf(q, m->z[i]);
    for (size_t i = 0; nrm && i < 3 * (size_t)m->vertex_count; i++, q += 4) putf(q, m->normal[i]);
    for (size_t i = 0; mat && i < m->vertex_count; i++, q += 2) q[0] = (uint8_t)m->material[i], q[1] = (uint8_t)(m->material[i] >> 8);
    for (size_t i = 0; i < 3 * (size_t)m->triangle_count; i++, q += 4) put32(q, m->tri[i]);
    for (size_t i = 0; i < 2 * p->root.finest_count; i++, q += 4) put32(q, (uint32_t)p->root.finest[i]);
    for (size_t i = 0; i < p->tile_count; i++) {
        const terra_archive_entry *e = &p->tiles[i].entry;
        put64(q, e->key), put32(q + 8, e->size), put32(q + 12, e->raw_size);
        q[16] = e->compression, q[17] = q[18] = q[19] = 0;
        putf(q + 20, e->geometric_error), putf(q + 24, e->longest_edge), putf(q + 28, e->min_height);
        putf(q + 32, e->max_height);
        put32(q + 36, p->tiles[i].vertices), put32(q + 40, p->tiles[i].triangles), putf(q + 44, p->tiles[i].quantization);
        memcpy(q + PART_TILE_HEAD, p->tiles[i].data, e->size);
        q += PART_TILE_HEAD + e->size;
    }
    put32(q, terra_crc32c(0, b, (size_t)(q - b)));
    *out = b;
    *size = (size_t)n;
    return TERRA_OK;
}

void terra_cook_part_free(terra_cook_part *p) {
    if (!p) return;
    terra_cook_mesh_free(&p->root.mesh);
    terra_free(p->root.finest);
    terra_free(p->tiles);
    memset(p, 0, sizeof *p);
}

terra_status terra_cook_part_key_read(const uint8_t *b, size_t n, terra_cook_part_key *out) {
    memset(out, 0, sizeof *out);
    if (n < TERRA_COOK_PART_KEY_BYTES || memcmp(b, PART_MAGIC, 8))
        return terra_fail(TERRA_E_CORRUPT, "cook part: not a part file (%zu bytes, no '%s' at byte 0)", n, PART_MAGIC);
    if (get32(b + 8) != 1) return terra_fail(TERRA_E_CORRUPT, "cook part: version %u at byte 8, not 1", get32(b + 8));
    *out = (terra_cook_part_key){.fingerprint = get64(b + 16), .bottom = (int32_t)get32(b + 24), .depth = (int32_t)get32(b + 28),
                                 .tx = (int32_t)get32(b + 32), .ty = (int32_t)get32(b + 36)};
    if (out->bottom < 0 || out->depth <= out->bottom || out->depth > 30)
        return terra_fail(TERRA_E_CORRUPT, "cook part: depths %d..%d at bytes 24..31 are not a round's", out->bottom, out->depth);
    return TERRA_OK;
}

terra_status terra_cook_part_decode(const uint8_t *b, size_t n, terra_cook_part *out) {
    memset(out, 0, sizeof *out);
    terra_cook_part_key key;
    terra_status st = terra_cook_part_key_read(b, n, &key);
    if (st != TERRA_OK) return st;
    if (n < PART_HEAD + 4)
        return terra_fail(TERRA_E_CORRUPT, "cook part: %zu bytes, fewer than a part's head and checksum", n);
    if (get32(b + n - 4) != terra_crc32c(0, b, n - 4))
        return terra_fail(TERRA_E_CORRUPT, "cook part: the checksum at byte %zu does not match (truncated or damaged)", n - 4);
    const uint32_t flags = get32(b + 12);
    if (flags > 3) return terra_fail(TERRA_E_CORRUPT, "cook part: unknown flags %#x at byte 12", flags);
    const bool nrm = flags & 1, mat = flags & 2;
    out->fingerprint = key.fingerprint;
    out->bottom = key.bottom, out->depth = key.depth;
    terra_cook_root *r = &out->root;
    r->tx = key.tx, r->ty = key.ty;
    r->error = getd(b + 40), r->finest_error = getd(b + 48);
    const uint32_t nv = get32(b + 56), nt = get32(b + 60), nf = get32(b + 64), tiles = get32(b + 68);
    const uint64_t body = body_bytes(nv, nt, nf, nrm, mat);
    if (body > n - PART_HEAD - 4 || (uint64_t)tiles * PART_TILE_HEAD > n - PART_HEAD - 4 - body)
        return terra_fail(TERRA_E_CORRUPT, "cook part: %u vertices, %u triangles, %u finest tiles and %u tiles (bytes 56..71) "
                          "do not fit in %zu bytes", nv, nt, nf, tiles, n);
    st = terra_cook_mesh_reserve(&r->mesh, nv, nt, nrm, mat);
    r->finest = terra_alloc(2 * (size_t)nf * sizeof *r->finest + 1);
    out->tiles = terra_alloc((size_t)tiles * sizeof *out->tiles + 1);
    if (st == TERRA_OK && (!r->finest || !out->tiles)) st = terra_fail(TERRA_E_NOMEM, "cook part: out of memory");
    if (st != TERRA_OK) {
        terra_cook_part_free(out);
        return st;
    }
    const uint8_t *q = b + PART_HEAD;
    terra_cook_mesh *m = &r->mesh;
    for (size_t i = 0; i < 2 * (size_t)nv; i++, q += 8) m->xy[i] = getd(q);
    for (size_t i = 0; i < nv; i++, q += 4) m->z[i] = getf(q);
    for (size_t i = 0; nrm && i < 3 * (size_t)nv; i++, q += 4) m->normal[i] = getf(q);
    for (size_t i = 0; mat && i < nv; i++, q += 2) m->material[i] = (uint16_t)(q[0] | q[1] << 8);
    for (size_t i = 0; i < 3 * (size_t)nt; i++, q += 4) {
        m->tri[i] = get32(q);
        if (m->tri[i] >= nv) {
            terra_cook_part_free(out);
            return terra_fail(TERRA_E_CORRUPT, "cook part: byte %zu: triangle %zu uses vertex %u of %u", (size_t)(q - b),
                              i / 3, get32(q), nv);
        }
    }
    m->vertex_count = nv, m->triangle_count = nt;
    for (size_t i = 0; i < 2 * (size_t)nf; i++, q += 4) r->finest[i] = (int32_t)get32(q);
    r->finest_count = nf;
    const uint8_t *end = b + n - 4;
    for (uint32_t i = 0; i < tiles; i++) {
        if ((size_t)(end - q) >= PART_TILE_HEAD && (q[17] | q[18] | q[19])) {
            const size_t at = (size_t)(q - b) + 17;
            terra_cook_part_free(out);
            return terra_fail(TERRA_E_CORRUPT, "cook part: byte %zu: tile %u's reserved bytes are not 0", at, i);
        }
        if ((size_t)(end - q) < PART_TILE_HEAD || get32(q + 8) > (size_t)(end - q) - PART_TILE_HEAD) {
            const size_t at = (size_t)(q - b);
            terra_cook_part_free(out);
            return terra_fail(TERRA_E_CORRUPT, "cook part: byte %zu: tile %u of %u runs past the end", at, i, tiles);
        }
        terra_archive_entry *e = &out->tiles[i].entry;
        memset(e, 0, sizeof *e);
        e->key = get64(q), e->size = get32(q + 8), e->raw_size = get32(q + 12), e->compression = q[16];
        e->geometric_error = getf(q + 20), e->longest_edge = getf(q + 24);
        e->min_height = getf(q + 28), e->max_height = getf(q + 32);
        out->tiles[i].vertices = get32(q + 36), out->tiles[i].triangles = get32(q + 40);
        out->tiles[i].quantization = getf(q + 44);
        out->tiles[i].data = q + PART_TILE_HEAD;
        q += PART_TILE_HEAD + e->size;
    }
    out->tile_count = tiles;
    if (q != end) {
        const size_t at = (size_t)(q - b);
        terra_cook_part_free(out);
        return terra_fail(TERRA_E_CORRUPT, "cook part: %zu bytes left over at byte %zu", (size_t)(end - q), at);
    }
    return TERRA_OK;
}
