/* terra tile mesh: checking an irregular tile and expanding it for drawing (3-coloured corners,
 * skirts). See tile_mesh.h. */
#include "terra/tile_mesh.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define NONE UINT32_MAX
#define QMAX 32767u

/* The bytes need no alignment: every read goes through memcpy (a plain load where it may). */
static uint32_t load_u32(const uint8_t *p, size_t i) {
    uint32_t x;
    memcpy(&x, p + 4 * i, sizeof x);
    return x;
}

static terra_tile_mesh_vertex load_vertex(const uint8_t *p, size_t i) {
    terra_tile_mesh_vertex v;
    memcpy(&v, p + i * sizeof v, sizeof v);
    return v;
}

static terra_status check_counts(uint32_t vertex_count, uint32_t index_count) {
    if (vertex_count < 3 || vertex_count > TERRA_TILE_MESH_MAX_VERTICES)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: %u vertices (3 .. %u allowed)", vertex_count,
                          TERRA_TILE_MESH_MAX_VERTICES);
    if (index_count == 0 || index_count % 3 != 0)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: %u indices is not a positive multiple of 3", index_count);
    if (index_count > TERRA_TILE_MESH_MAX_INDICES)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: %u indices is more than %u (six per vertex of the largest tile)",
                          index_count, TERRA_TILE_MESH_MAX_INDICES);
    return TERRA_OK;
}

terra_status terra_tile_mesh_limits_for(uint32_t vertex_count, uint32_t index_count, terra_tile_mesh_limits *out) {
    terra_status st = check_counts(vertex_count, index_count);
    if (st != TERRA_OK) return st;
    const size_t v = vertex_count, i = index_count, t = i / 3;
    out->vertices = (3 * v < i ? 3 * v : i) + 2 * i;
    out->indices = 7 * i;
    /* sorted half-edges, ring of each edge's half-edges, counts, copies per colour, queue, perms */
    out->scratch_bytes = sizeof(uint32_t) * (2 * i + (v + 1) + 3 * v + t) + t;
    return TERRA_OK;
}

static bool finite_f(float x) { return isfinite(x); }

terra_status terra_tile_mesh_check(const void *data, size_t bytes) {
    const uint8_t *p = data;
    terra_tile_mesh h;
    if (!data || bytes < sizeof h)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: %zu bytes is shorter than its %zu-byte header", data ? bytes : 0,
                          sizeof h);
    memcpy(&h, p, sizeof h);
    if (h.magic != TERRA_TILE_MESH_MAGIC)
        return terra_fail(TERRA_E_FORMAT, "mesh tile: magic 0x%08x is not 0x%08x (\"MESH\")", h.magic,
                          TERRA_TILE_MESH_MAGIC);
    if (h.flags != 0) return terra_fail(TERRA_E_UNSUPPORTED, "mesh tile: flags 0x%x are reserved (must be 0)", h.flags);
    terra_status st = check_counts(h.vertex_count, h.index_count);
    if (st != TERRA_OK) return st;
    /* counts are bounded now: the size cannot overflow */
    const size_t want = terra_tile_mesh_bytes(h.vertex_count, h.index_count);
    if (bytes != want)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: %zu bytes, but %u vertices and %u indices take %zu", bytes,
                          h.vertex_count, h.index_count, want);
    const float hv[6] = {h.size_x, h.size_z, h.min_height, h.max_height, h.skirt_m, h.geometric_error};
    static const char *const names[6] = {"size_x", "size_z", "min_height", "max_height", "skirt_m", "geometric_error"};
    for (int k = 0; k < 6; k++)
        if (!finite_f(hv[k])) return terra_fail(TERRA_E_CORRUPT, "mesh tile: %s is %g, not a finite number", names[k], hv[k]);
    if (!(h.size_x > 0) || !(h.size_z > 0))
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: size %g x %g m is not positive", h.size_x, h.size_z);
    if (h.min_height > h.max_height)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: min_height %g is above max_height %g", h.min_height, h.max_height);
    if (h.skirt_m < 0) return terra_fail(TERRA_E_CORRUPT, "mesh tile: skirt_m %g is negative", h.skirt_m);
    if ((double)h.min_height - h.skirt_m < -(double)FLT_MAX)
        return terra_fail(TERRA_E_CORRUPT, "mesh tile: a skirt %g m below %g m is past a float", h.skirt_m, h.min_height);
    const uint8_t *vp = p + sizeof h;
    for (uint32_t i = 0; i < h.vertex_count; i++) {
        const terra_tile_mesh_vertex v = load_vertex(vp, i);
        if (v.u > QMAX || v.v > QMAX || v.h > QMAX)
            return terra_fail(TERRA_E_CORRUPT, "mesh tile: vertex %u has u, v, h = %u, %u, %u (at most %u)", i, v.u, v.v,
                              v.h, QMAX);
    }
    const uint8_t *ip = p + (want - (size_t)h.index_count * 4);
    for (uint32_t i = 0; i < h.index_count; i++) {
        const uint32_t x = load_u32(ip, i);
        if (x >= h.vertex_count)
            return terra_fail(TERRA_E_CORRUPT, "mesh tile: index %u (triangle %u) is %u, past the %u vertices", i, i / 3, x,
                              h.vertex_count);
    }
    return TERRA_OK;
}

/* The six ways to give a triangle's corners the colours 0, 1, 2. */
static const uint8_t PERMS[6][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};

typedef struct expander {
    terra_tile_mesh h;
    const uint8_t *vp, *ip;
    terra_grid_vertex *out;
    uint32_t nout;
    uint8_t level;
} expander;

static terra_grid_vertex make_vertex(const expander *e, uint32_t i, uint16_t colour) {
    const terra_tile_mesh_vertex v = load_vertex(e->vp, i);
    /* x = u / 32767 * size_x etc., in double, rounded once: the same for every tile */
    const float x = (float)((double)v.u / 32767.0 * (double)e->h.size_x);
    const float z = (float)((double)v.v / 32767.0 * (double)e->h.size_z);
    const float y = (float)((double)e->h.min_height +
                            (double)v.h / 32767.0 * ((double)e->h.max_height - (double)e->h.min_height));
    return (terra_grid_vertex){.x = x, .y = y, .z = z, .mx = x, .my = y, .mz = z,
                               .normal = {v.normal[0], v.normal[1]}, .surface = v.surface, .level = e->level,
                               .morph_normal = {v.normal[0], v.normal[1]}, .colour = colour};
}

terra_status terra_tile_mesh_expand(const void *data, size_t bytes, terra_tile_key key, terra_grid_vertex *vertices,
                                    uint32_t *indices, void *scratch, terra_tile_mesh_info *info) {
    terra_status st = terra_tile_mesh_check(data, bytes);
    if (st != TERRA_OK) {
        char why[200];
        snprintf(why, sizeof why, "%s", terra_last_error());
        return terra_fail(st, "tile (level %d, %d, %d): %s", terra_tile_key_level(key), terra_tile_key_x(key),
                          terra_tile_key_y(key), why);
    }
    expander e = {.out = vertices, .level = (uint8_t)terra_tile_key_level(key)};
    memcpy(&e.h, data, sizeof e.h);
    e.vp = (const uint8_t *)data + sizeof e.h;
    e.ip = (const uint8_t *)data + (bytes - (size_t)e.h.index_count * 4);
    const uint32_t nv = e.h.vertex_count, ni = e.h.index_count, nt = ni / 3;

    /* scratch: half-edges sorted by their edge, the ring of each edge's half-edges, counts, the copy
     * of each vertex in each colour, the breadth-first queue, each triangle's permutation */
    uint32_t *sorted = scratch;
    uint32_t *ring = sorted + ni;
    uint32_t *count = ring + ni;
    uint32_t *copies = count + (nv + 1);
    uint32_t *queue = copies + 3 * (size_t)nv;
    uint8_t *perm = (uint8_t *)(queue + nt);

    /* half-edge h = 3t + k runs from corner k to corner k + 1 of triangle t; its edge is the pair
     * (lo, hi) of vertex ids. Sorted by (lo, hi): by hi with a counting sort into ring (as a
     * temporary), then stably by lo into sorted. */
#define HE_A(hh) load_u32(e.ip, (hh))
#define HE_B(hh) load_u32(e.ip, (hh) - (hh) % 3 + ((hh) % 3 + 1) % 3)
#define HE_LO(hh) (HE_A(hh) < HE_B(hh) ? HE_A(hh) : HE_B(hh))
#define HE_HI(hh) (HE_A(hh) < HE_B(hh) ? HE_B(hh) : HE_A(hh))
    for (int pass = 0; pass < 2; pass++) {
        memset(count, 0, sizeof *count * ((size_t)nv + 1));
        uint32_t *src = pass ? ring : NULL, *dst = pass ? sorted : ring;
        for (uint32_t k = 0; k < ni; k++) {
            const uint32_t hh = src ? src[k] : k;
            count[(pass ? HE_LO(hh) : HE_HI(hh)) + 1]++;
        }
        for (uint32_t v = 0; v < nv; v++) count[v + 1] += count[v];
        for (uint32_t k = 0; k < ni; k++) {
            const uint32_t hh = src ? src[k] : k;
            dst[count[pass ? HE_LO(hh) : HE_HI(hh)]++] = hh;
        }
    }
    /* runs of one edge: each half-edge's ring links to the next of its run (cyclically) */
    for (uint32_t s = 0; s < ni;) {
        const uint32_t lo = HE_LO(sorted[s]), hi = HE_HI(sorted[s]);
        uint32_t end = s + 1;
        while (end < ni && HE_LO(sorted[end]) == lo && HE_HI(sorted[end]) == hi) end++;
        for (uint32_t k = s; k < end; k++) ring[sorted[k]] = sorted[k + 1 < end ? k + 1 : s];
        s = end;
    }

    /* 1. colour the triangles, growing over shared edges from a seed: the pending triangle queued
     * last goes first (the coloured region grows depth-first, closing the fans it opens soon).
     * Each takes the permutation that reuses the most (vertex, colour) pairs already in use; on a
     * tie, the one whose new copy is of the vertex with the most corners left to colour (the copy
     * will serve them). uses[3v + c]: v's corners coloured c so far; count[v]: v's corners not yet
     * coloured. queue[0, head): the order coloured. */
    memset(count, 0, sizeof *count * ((size_t)nv + 1));
    for (uint32_t k = 0; k < ni; k++) count[load_u32(e.ip, k)]++;
    uint32_t *uses = copies;
    memset(uses, 0, sizeof *uses * 3 * (size_t)nv);
    memset(perm, 0xff, nt);
    uint32_t tail = 0;
    for (uint32_t seed = 0; seed < nt; seed++) {
        if (perm[seed] != 0xff) continue;
        uint32_t head = tail;
        queue[tail++] = seed;
        perm[seed] = 0xfe; /* queued */
        while (head < tail) {
            const uint32_t t = queue[tail - 1]; /* the last queued; the oldest pending takes its place */
            queue[tail - 1] = queue[head];
            queue[head++] = t;
            uint32_t c[3];
            for (int k = 0; k < 3; k++) c[k] = load_u32(e.ip, 3 * (size_t)t + k);
            int best = 0, best_score = -1;
            uint32_t best_left = 0;
            for (int p = 0; p < 6; p++) {
                int score = 0;
                uint32_t left = 0;
                for (int k = 0; k < 3; k++) {
                    const uint32_t *u = &uses[3 * (size_t)c[k]];
                    const bool has = u[PERMS[p][k]] != 0;
                    score += has;
                    if (!has && (u[0] | u[1] | u[2])) left += count[c[k]]; /* p makes a copy of c[k] */
                }
                if (score > best_score || (score == best_score && left > best_left))
                    best = p, best_score = score, best_left = left;
            }
            perm[t] = (uint8_t)best;
            for (int k = 0; k < 3; k++) {
                count[c[k]]--;
                uses[3 * (size_t)c[k] + PERMS[best][k]]++;
            }
            for (int k = 0; k < 3; k++)
                for (uint32_t hh = ring[3 * t + k]; hh != 3 * t + k; hh = ring[hh]) {
                    const uint32_t u = hh / 3;
                    if (perm[u] == 0xff) {
                        perm[u] = 0xfe;
                        queue[tail++] = u;
                    }
                }
        }
    }
    /* 2. local search: each triangle in turn moves to the permutation that leaves the fewest
     * (vertex, colour) pairs in use (staying on a tie), until a sweep moves none or two sweeps
     * (the first saves 1-2% of the vertices, later ones almost nothing) */
    for (int sweep = 0; sweep < 2; sweep++) {
        uint32_t moved = 0;
        for (uint32_t q = 0; q < nt; q++) {
            const uint32_t t = queue[q];
            uint32_t c[3];
            for (int k = 0; k < 3; k++) {
                c[k] = load_u32(e.ip, 3 * (size_t)t + k);
                uses[3 * (size_t)c[k] + PERMS[perm[t]][k]]--;
            }
            int best = perm[t], best_made = 4;
            for (int p = 0; p < 6; p++) {
                int made = 0;
                for (int k = 0; k < 3; k++) made += uses[3 * (size_t)c[k] + PERMS[p][k]]++ == 0;
                for (int k = 0; k < 3; k++) uses[3 * (size_t)c[k] + PERMS[p][k]]--;
                if (made < best_made || (made == best_made && p == perm[t])) best = p, best_made = made;
            }
            for (int k = 0; k < 3; k++) uses[3 * (size_t)c[k] + PERMS[best][k]]++;
            moved += best != perm[t];
            perm[t] = (uint8_t)best;
        }
        if (!moved) break;
    }
    /* 3. one vertex per (vertex, colour) in use, in the order coloured */
    uint32_t used = 0;
    for (size_t k = 0; k < 3 * (size_t)nv; k++) copies[k] = uses[k] ? NONE - 1 : NONE;
    for (uint32_t q = 0; q < nt; q++) {
        const uint32_t t = queue[q];
        for (int k = 0; k < 3; k++) {
            const uint32_t v = load_u32(e.ip, 3 * (size_t)t + k);
            uint32_t *slot = &copies[3 * (size_t)v + PERMS[perm[t]][k]];
            if (*slot == NONE - 1) {
                const uint32_t *cp = &copies[3 * (size_t)v];
                used += cp[0] >= NONE - 1 && cp[1] >= NONE - 1 && cp[2] >= NONE - 1;
                *slot = e.nout;
                e.out[e.nout++] = make_vertex(&e, v, PERMS[perm[t]][k]);
            }
            indices[3 * (size_t)t + k] = *slot;
        }
    }
    const uint32_t tile_vertices = e.nout;

    /* skirts: edges on the tile's outer side that no other triangle shares */
    uint32_t ix = ni, skirt_tris = 0;
    if (e.h.skirt_m > 0) {
        for (uint32_t k = 0; k < ni; k++) {
            const uint32_t hh = sorted[k];
            if (ring[hh] != hh) continue; /* shared */
            const uint32_t a = HE_A(hh), b = HE_B(hh);
            if (a == b) continue;
            const terra_tile_mesh_vertex va = load_vertex(e.vp, a), vb = load_vertex(e.vp, b);
            const bool outer = (va.u == 0 && vb.u == 0) || (va.u == QMAX && vb.u == QMAX) || (va.v == 0 && vb.v == 0) ||
                               (va.v == QMAX && vb.v == QMAX);
            if (!outer) continue;
            const uint32_t t = hh / 3, ka = hh % 3, kb = (ka + 1) % 3;
            const uint32_t A = indices[3 * t + ka], B = indices[3 * t + kb];
            const uint16_t cb = e.out[B].colour, cc = (uint16_t)(3 - e.out[A].colour - cb);
            /* A, B, B' and A, B', A': B' takes the third colour, A' then B's */
            terra_grid_vertex lb = e.out[B], la = e.out[A];
            lb.y = lb.my = lb.y - e.h.skirt_m;
            la.y = la.my = la.y - e.h.skirt_m;
            lb.colour = cc;
            la.colour = cb;
            const uint32_t Bl = e.nout++, Al = e.nout++;
            e.out[Bl] = lb;
            e.out[Al] = la;
            indices[ix++] = A, indices[ix++] = B, indices[ix++] = Bl;
            indices[ix++] = A, indices[ix++] = Bl, indices[ix++] = Al;
            skirt_tris += 2;
        }
    }
#undef HE_A
#undef HE_B
#undef HE_LO
#undef HE_HI
    if (info)
        *info = (terra_tile_mesh_info){.vertices = e.nout, .indices = ix, .triangles = nt, .skirt_triangles = skirt_tris,
                                       .used_vertices = used, .duplicates = tile_vertices - used};
    return TERRA_OK;
}
