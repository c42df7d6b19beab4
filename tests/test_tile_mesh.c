/* Mesh tiles (tile_mesh.h): checking and expanding for drawing. Over many random meshes (grids of
 * random size with random diagonals, jittered vertices, vertices and triangles in random order,
 * unused vertices; and random index soups with degenerate and non-manifold triangles): every
 * output triangle's corners have three colours, the tile's triangles come out in their order with
 * the positions the header's formulas give, none lost, copies are bit-identical but for the
 * colour, skirts hang from exactly the outer-side edges no other triangle shares; a grid whose
 * cells are all split alike needs no copies; and the copies made on random diagonals are counted.
 * Hostile inputs (indices out of range, truncated or padded bytes, counts that overflow, values
 * that are not finite or not a range) are refused with the status that names them, reading
 * nothing outside the bytes (each case lies in a buffer of exactly its size: run under ASan). */
#include "check.h"
#include "terra/tile_mesh.h"

#include <math.h>
#include <string.h>

typedef unsigned long long rng;

static uint32_t rnd(rng *s, uint32_t n) { return (uint32_t)(test_rand_u64(s) % n); }

/* A mesh tile built in memory: header, vertices, indices. */
typedef struct mesh {
    terra_tile_mesh h;
    terra_tile_mesh_vertex *v;
    uint32_t *idx;
} mesh;

static void mesh_free(mesh *m) {
    free(m->v);
    free(m->idx);
}

/* The tile's bytes in a buffer of exactly their size. */
static uint8_t *mesh_bytes(const mesh *m, size_t *n) {
    *n = terra_tile_mesh_bytes(m->h.vertex_count, m->h.index_count);
    uint8_t *b = calloc(1, *n);
    memcpy(b, &m->h, sizeof m->h);
    memcpy(b + sizeof m->h, m->v, sizeof *m->v * m->h.vertex_count);
    memcpy(b + (*n - 4 * (size_t)m->h.index_count), m->idx, 4 * (size_t)m->h.index_count);
    return b;
}

static void random_header(rng *s, mesh *m, uint32_t nv, uint32_t ni, bool skirt) {
    const float lo = (float)test_rand_range(s, -500, 500);
    m->h = (terra_tile_mesh){.magic = TERRA_TILE_MESH_MAGIC, .vertex_count = nv, .index_count = ni,
                             .size_x = (float)ldexp(64.0, (int)rnd(s, 6)), .min_height = lo,
                             .max_height = lo + (float)test_rand_range(s, 0, 300),
                             .skirt_m = skirt ? (float)test_rand_range(s, 0.5, 40) : 0.0f,
                             .geometric_error = (float)test_rand_range(s, 0, 5)};
    m->h.size_z = m->h.size_x;
}

static terra_tile_mesh_vertex random_vertex(rng *s, uint16_t u, uint16_t v) {
    return (terra_tile_mesh_vertex){.u = u, .v = v, .h = (uint16_t)rnd(s, 32768),
                                    .normal = {(int8_t)(rnd(s, 255) - 127), (int8_t)(rnd(s, 255) - 127)},
                                    .surface = (terra_surface)rnd(s, 256)};
}

/* A grid of nx x nz cells over the whole tile, interior vertices jittered (less than half a
 * step, so the triangulation stays valid), side vertices jittered along their side; each cell
 * split along a random diagonal (or all alike), vertex ids and triangle order shuffled, corners
 * rotated, `unused` extra vertices no triangle uses. */
static void grid_mesh(rng *s, mesh *m, int nx, int nz, bool random_diagonals, bool skirt, int unused) {
    const uint32_t grid_v = (uint32_t)((nx + 1) * (nz + 1)), nv = grid_v + (uint32_t)unused;
    const uint32_t ni = (uint32_t)(6 * nx * nz);
    random_header(s, m, nv, ni, skirt);
    m->v = malloc(sizeof *m->v * nv);
    m->idx = malloc(sizeof *m->idx * ni);
    uint32_t *id = malloc(sizeof *id * nv); /* shuffled ids */
    for (uint32_t i = 0; i < nv; i++) id[i] = i;
    for (uint32_t i = nv - 1; i > 0; i--) {
        uint32_t j = rnd(s, i + 1), t = id[i];
        id[i] = id[j], id[j] = t;
    }
    const double jit = test_rand_range(s, 0, 0.45);
    for (int j = 0; j <= nz; j++)
        for (int i = 0; i <= nx; i++) {
            double u = 32767.0 * i / nx, v = 32767.0 * j / nz;
            if (i > 0 && i < nx) u += test_rand_range(s, -jit, jit) * 32767.0 / nx;
            if (j > 0 && j < nz) v += test_rand_range(s, -jit, jit) * 32767.0 / nz;
            m->v[id[j * (nx + 1) + i]] = random_vertex(s, (uint16_t)lrint(u), (uint16_t)lrint(v));
        }
    for (uint32_t k = grid_v; k < nv; k++) m->v[id[k]] = random_vertex(s, (uint16_t)rnd(s, 32768), (uint16_t)rnd(s, 32768));
    uint32_t t = 0;
    const bool flip_all = rnd(s, 2);
    for (int j = 0; j < nz; j++)
        for (int i = 0; i < nx; i++) {
            const uint32_t a = id[j * (nx + 1) + i], b = id[j * (nx + 1) + i + 1], c = id[(j + 1) * (nx + 1) + i + 1],
                           d = id[(j + 1) * (nx + 1) + i];
            const bool flip = random_diagonals ? rnd(s, 2) : flip_all;
            const uint32_t tri[2][3] = {{a, d, flip ? b : c}, {flip ? b : a, flip ? d : c, flip ? c : b}};
            for (int q = 0; q < 2; q++, t++)
                for (int k = 0; k < 3; k++) m->idx[3 * t + k] = tri[q][k];
        }
    /* shuffle triangles, rotate corners (winding kept) */
    for (uint32_t x = ni / 3 - 1; x > 0; x--) {
        uint32_t y = rnd(s, x + 1);
        for (int k = 0; k < 3; k++) {
            uint32_t tmp = m->idx[3 * x + k];
            m->idx[3 * x + k] = m->idx[3 * y + k], m->idx[3 * y + k] = tmp;
        }
    }
    for (uint32_t x = 0; x < ni / 3; x++) {
        const uint32_t r = rnd(s, 3), c0 = m->idx[3 * x], c1 = m->idx[3 * x + 1], c2 = m->idx[3 * x + 2];
        const uint32_t c[3] = {c0, c1, c2};
        for (int k = 0; k < 3; k++) m->idx[3 * x + k] = c[(k + r) % 3];
    }
    free(id);
}

/* Any triangles at all: random indices (degenerate and non-manifold ones included), vertices
 * often on the tile's sides, so many edges are outer ones. */
static void soup_mesh(rng *s, mesh *m) {
    const uint32_t nv = 3 + rnd(s, 40), ni = 3 * (1 + rnd(s, 80));
    random_header(s, m, nv, ni, true);
    m->v = malloc(sizeof *m->v * nv);
    m->idx = malloc(sizeof *m->idx * ni);
    static const uint16_t picks[4] = {0, 32767, 0, 32767};
    for (uint32_t i = 0; i < nv; i++)
        m->v[i] = random_vertex(s, rnd(s, 3) ? picks[rnd(s, 4)] : (uint16_t)rnd(s, 32768),
                                rnd(s, 3) ? picks[rnd(s, 4)] : (uint16_t)rnd(s, 32768));
    for (uint32_t i = 0; i < ni; i++) m->idx[i] = rnd(s, 5) ? rnd(s, nv) : rnd(s, nv < 4 ? nv : 4);
}

/* What the header's formulas give for input vertex i. */
static terra_grid_vertex expected(const mesh *m, uint32_t i, int level) {
    const terra_tile_mesh_vertex *v = &m->v[i];
    const float x = (float)(v->u / 32767.0 * m->h.size_x), z = (float)(v->v / 32767.0 * m->h.size_z);
    const float y = (float)(m->h.min_height + v->h / 32767.0 * ((double)m->h.max_height - m->h.min_height));
    return (terra_grid_vertex){.x = x, .y = y, .z = z, .mx = x, .my = y, .mz = z, .normal = {v->normal[0], v->normal[1]},
                               .surface = v->surface, .level = (uint8_t)level,
                               .morph_normal = {v->normal[0], v->normal[1]}};
}

static bool same_but_colour(terra_grid_vertex a, terra_grid_vertex b) {
    a.colour = b.colour = 0;
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool outer(const mesh *m, uint32_t a, uint32_t b) {
    const terra_tile_mesh_vertex *x = &m->v[a], *y = &m->v[b];
    return (x->u == 0 && y->u == 0) || (x->u == 32767 && y->u == 32767) || (x->v == 0 && y->v == 0) ||
           (x->v == 32767 && y->v == 32767);
}

typedef struct totals {
    long cases, used, duplicates, skirts, triangles;
} totals;

/* Expands m and checks every promise; returns false on the first broken one. */
static bool expand_and_verify(const mesh *m, totals *tot) {
    size_t n;
    uint8_t *bytes = mesh_bytes(m, &n);
    terra_tile_mesh_limits lim;
    bool ok = true;
    CHECK(terra_tile_mesh_limits_for(m->h.vertex_count, m->h.index_count, &lim) == TERRA_OK);
    terra_grid_vertex *out = malloc(sizeof *out * lim.vertices);
    uint32_t *oi = malloc(sizeof *oi * lim.indices);
    void *scratch = malloc(lim.scratch_bytes);
    terra_tile_mesh_info info;
    const int level = 3;
    const terra_tile_key key = terra_tile_key_make(0, level, 5, 2);
    terra_status st = terra_tile_mesh_expand(bytes, n, key, out, oi, scratch, &info);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    if (st != TERRA_OK) {
        ok = false;
        goto done;
    }
    const uint32_t nt = m->h.index_count / 3, nv = m->h.vertex_count;
    ok = ok && info.triangles == nt && info.indices == 3 * (nt + info.skirt_triangles) && info.vertices <= lim.vertices &&
         info.indices <= lim.indices;
    CHECK(ok, "counts: %u triangles, %u indices, %u vertices (limits %zu, %zu)", info.triangles, info.indices,
          info.vertices, lim.vertices, lim.indices);
    const uint32_t tile_v = info.vertices - info.skirt_triangles; /* two new vertices per skirt quad */
    /* every index in range; every triangle three colours */
    for (uint32_t i = 0; ok && i < info.indices; i++) ok = oi[i] < info.vertices;
    CHECK(ok, "an index past the vertices written");
    for (uint32_t t = 0; ok && t < info.indices / 3; t++) {
        const uint16_t a = out[oi[3 * t]].colour, b = out[oi[3 * t + 1]].colour, c = out[oi[3 * t + 2]].colour;
        ok = a < 3 && b < 3 && c < 3 && a != b && b != c && a != c;
        CHECK(ok, "triangle %u (of %u, %u the tile's) has colours %u %u %u", t, info.indices / 3, nt, a, b, c);
    }
    /* the tile's triangles, in order, with the header's positions; copies bit-identical */
    int32_t *source = malloc(sizeof *source * (tile_v ? tile_v : 1)); /* input vertex of each output one */
    uint8_t *colours = calloc(nv, 1);                                  /* bit per colour in which it came out */
    for (uint32_t i = 0; i < tile_v; i++) source[i] = -1;
    for (uint32_t k = 0; ok && k < 3 * nt; k++) {
        const uint32_t in = m->idx[k], o = oi[k];
        ok = o < tile_v && same_but_colour(out[o], expected(m, in, level)) && (source[o] < 0 || source[o] == (int32_t)in);
        CHECK(ok, "corner %u: output vertex %u is not input vertex %u (or is two inputs)", k, o, in);
        if (!ok) break;
        source[o] = (int32_t)in;
    }
    uint32_t copies = 0, used = 0;
    for (uint32_t o = 0; ok && o < tile_v; o++) {
        ok = source[o] >= 0;
        CHECK(ok, "output vertex %u is used by no triangle", o);
        if (!ok) break;
        const uint8_t bit = (uint8_t)(1u << out[o].colour);
        ok = !(colours[source[o]] & bit);
        CHECK(ok, "input vertex %d came out twice in colour %u", source[o], out[o].colour);
        colours[source[o]] |= bit;
        copies++;
    }
    for (uint32_t i = 0; i < nv; i++) used += colours[i] != 0;
    CHECK(!ok || (info.used_vertices == used && info.duplicates == copies - used), "used %u (%u said), duplicates %u (%u said)",
          used, info.used_vertices, copies - used, info.duplicates);
    /* skirts: exactly the outer edges that one triangle alone has */
    {
        uint32_t want = 0;
        uint32_t *edge_t = malloc(sizeof *edge_t * 3 * nt);
        uint8_t *edge_k = malloc(3 * nt);
        uint8_t *matched = calloc(3 * nt, 1);
        for (uint32_t t = 0; t < nt; t++)
            for (uint32_t k = 0; k < 3; k++) {
                const uint32_t a = m->idx[3 * t + k], b = m->idx[3 * t + (k + 1) % 3];
                if (a == b || !outer(m, a, b)) continue;
                int users = 0;
                for (uint32_t x = 0; x < 3 * nt; x++) {
                    const uint32_t p = m->idx[x], q = m->idx[x - x % 3 + (x % 3 + 1) % 3];
                    users += (p == a && q == b) || (p == b && q == a);
                }
                if (users == 1) edge_t[want] = t, edge_k[want] = (uint8_t)k, want++;
            }
        const uint32_t quads = info.skirt_triangles / 2;
        ok = ok && info.skirt_triangles % 2 == 0 && quads == (m->h.skirt_m > 0 ? want : 0);
        CHECK(ok, "%u skirt quads for %u outer edges (skirt %g m)", quads, want, m->h.skirt_m);
        for (uint32_t q = 0; ok && q < quads; q++) {
            const uint32_t *s6 = oi + 3 * nt + 6 * q;
            const uint32_t A = s6[0], B = s6[1], Bl = s6[2], Al = s6[5];
            ok = s6[3] == A && s6[4] == Bl && Bl >= tile_v && Al >= tile_v && Al != Bl;
            terra_grid_vertex lb = out[B], la = out[A];
            lb.y = lb.my = out[B].y - m->h.skirt_m;
            la.y = la.my = out[A].y - m->h.skirt_m;
            ok = ok && same_but_colour(out[Bl], lb) && same_but_colour(out[Al], la);
            bool found = false;
            for (uint32_t w = 0; ok && w < want && !found; w++) {
                const uint32_t t = edge_t[w], k = edge_k[w];
                if (!matched[w] && oi[3 * t + k] == A && oi[3 * t + (k + 1) % 3] == B) matched[w] = 1, found = true;
            }
            ok = ok && found;
            CHECK(ok, "skirt quad %u is not a drop of an outer edge", q);
        }
        if (tot) tot->skirts += quads;
        free(edge_t), free(edge_k), free(matched);
    }
    if (tot) {
        tot->cases++;
        tot->used += used;
        tot->duplicates += copies - used;
        tot->triangles += nt;
    }
    free(source);
    free(colours);
done:
    free(bytes), free(out), free(oi), free(scratch);
    return ok;
}

static void random_grids_expand(void) {
    rng s = 11;
    totals tot = {0};
    for (int c = 0; c < 400; c++) {
        mesh m;
        grid_mesh(&s, &m, 1 + (int)rnd(&s, 24), 1 + (int)rnd(&s, 24), true, rnd(&s, 4) != 0, rnd(&s, 3) ? 0 : (int)rnd(&s, 9));
        if (!expand_and_verify(&m, &tot)) printf("  case %d failed\n", c);
        mesh_free(&m);
    }
    CHECK(tot.skirts > 0);
    const double ratio = (double)tot.duplicates / (double)tot.used;
    printf("  %ld random grids (random diagonals): %ld triangles, %ld vertices used, %ld copies (%.1f%%), %ld skirt quads\n",
           tot.cases, tot.triangles, tot.used, tot.duplicates, 100 * ratio, tot.skirts);
    CHECK(ratio < 0.31, "%.1f%% of the vertices copied", 100 * ratio);
}

/* Every cell split alike: the mesh is 3-colourable with shared vertices, and breadth-first
 * colouring finds it whatever the order of vertices and triangles. */
static void uniform_grids_need_no_copies(void) {
    rng s = 12;
    totals tot = {0};
    for (int c = 0; c < 100; c++) {
        mesh m;
        grid_mesh(&s, &m, 1 + (int)rnd(&s, 30), 1 + (int)rnd(&s, 30), false, true, 0);
        expand_and_verify(&m, &tot);
        mesh_free(&m);
    }
    CHECK(tot.duplicates == 0, "%ld copies over %ld vertices", tot.duplicates, tot.used);
    printf("  %ld uniform grids: %ld vertices, %ld copies\n", tot.cases, tot.used, tot.duplicates);
}

/* A 64 x 64 grid with random diagonals, as a cooked tile's size: the copy ratio on a big mesh. */
static void big_grid_ratio(void) {
    rng s = 13;
    totals tot = {0};
    for (int c = 0; c < 4; c++) {
        mesh m;
        grid_mesh(&s, &m, 64, 64, true, true, 0);
        expand_and_verify(&m, &tot);
        mesh_free(&m);
    }
    const double ratio = (double)tot.duplicates / (double)tot.used;
    printf("  64 x 64 grids, random diagonals: %.1f%% of the vertices copied\n", 100 * ratio);
    CHECK(ratio < 0.38, "%.1f%% copied", 100 * ratio);
}

static void index_soups_expand(void) {
    rng s = 14;
    totals tot = {0};
    for (int c = 0; c < 2000; c++) {
        mesh m;
        soup_mesh(&s, &m);
        if (!expand_and_verify(&m, &tot)) printf("  soup %d failed\n", c);
        mesh_free(&m);
    }
    printf("  %ld index soups: %ld triangles, %ld skirt quads, %ld copies\n", tot.cases, tot.triangles, tot.skirts,
           tot.duplicates);
}

/* ---- hostile -------------------------------------------------------------------------------------- */

static terra_status check_buf(const uint8_t *b, size_t n, bool expand) {
    uint8_t *exact = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past them */
    memcpy(exact, b, n);
    terra_status st = terra_tile_mesh_check(exact, n);
    if (expand) {
        /* expand must refuse the same way, writing nothing (its arrays are too small to hold much) */
        terra_grid_vertex v[4];
        uint32_t idx[4];
        uint64_t scratch[4];
        terra_status st2 = terra_tile_mesh_expand(exact, n, terra_tile_key_make(0, 0, 0, 0), v, idx, scratch, NULL);
        CHECK(st2 == st, "check says %d, expand %d", st, st2);
    }
    free(exact);
    return st;
}

typedef struct hostile {
    const char *what, *message; /* message: a word the error must contain */
    terra_status want;
} hostile;

static void hostile_inputs_refused(void) {
    rng s = 15;
    mesh m;
    grid_mesh(&s, &m, 3, 2, true, true, 0);
    size_t n;
    uint8_t *good = mesh_bytes(&m, &n);
    CHECK(terra_tile_mesh_check(good, n) == TERRA_OK, "%s", terra_last_error());
    uint8_t *b = calloc(1, n + 64);
    const size_t ioff = n - 4 * (size_t)m.h.index_count;
    int cases = 0;
#define HOSTILE(status, word, ...)                                                                                 \
    do {                                                                                                           \
        memcpy(b, good, n);                                                                                        \
        size_t len = n;                                                                                            \
        terra_tile_mesh *hd = (terra_tile_mesh *)(void *)b;                                                        \
        (void)hd;                                                                                                  \
        __VA_ARGS__;                                                                                               \
        terra_status st = check_buf(b, len, true);                                                                 \
        CHECK(st == (status) && strstr(terra_last_error(), word), "%s: status %d, \"%s\"", #__VA_ARGS__, st,        \
              terra_last_error());                                                                                 \
        cases++;                                                                                                   \
    } while (0)
    /* indices */
    for (uint32_t i = 0; i < m.h.index_count; i++) {
        const uint32_t bad[3] = {m.h.vertex_count, m.h.vertex_count + 1, UINT32_MAX};
        for (int k = 0; k < 3; k++) HOSTILE(TERRA_E_CORRUPT, "past the", memcpy(b + ioff + 4 * i, &bad[k], 4));
    }
    /* bytes */
    for (size_t cut = 0; cut < n; cut += (cut < 48 ? 1 : 7)) HOSTILE(TERRA_E_CORRUPT, "bytes", len = cut);
    HOSTILE(TERRA_E_CORRUPT, "bytes", len = n + 4);
    HOSTILE(TERRA_E_CORRUPT, "bytes", len = n + 1);
    /* counts */
    HOSTILE(TERRA_E_CORRUPT, "multiple of 3", hd->index_count = 0);
    HOSTILE(TERRA_E_CORRUPT, "multiple of 3", hd->index_count -= 1);
    HOSTILE(TERRA_E_CORRUPT, "more than", hd->index_count = UINT32_MAX);
    HOSTILE(TERRA_E_CORRUPT, "more than", hd->index_count = 0xFFFFFFFCu - 0xFFFFFFFCu % 3);
    HOSTILE(TERRA_E_CORRUPT, "more than", hd->index_count = TERRA_TILE_MESH_MAX_INDICES + 3);
    HOSTILE(TERRA_E_CORRUPT, "bytes", hd->index_count += 3);
    HOSTILE(TERRA_E_CORRUPT, "bytes", hd->vertex_count += 1);
    HOSTILE(TERRA_E_CORRUPT, "vertices", hd->vertex_count = UINT32_MAX);
    HOSTILE(TERRA_E_CORRUPT, "vertices", hd->vertex_count = TERRA_TILE_MESH_MAX_VERTICES + 1);
    HOSTILE(TERRA_E_CORRUPT, "vertices", hd->vertex_count = 2);
    HOSTILE(TERRA_E_CORRUPT, "vertices", hd->vertex_count = 0);
    /* header values */
    const float bad_floats[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        const float f = bad_floats[k];
        HOSTILE(TERRA_E_CORRUPT, "size_x", hd->size_x = f);
        HOSTILE(TERRA_E_CORRUPT, "size_z", hd->size_z = f);
        HOSTILE(TERRA_E_CORRUPT, "min_height", hd->min_height = f);
        HOSTILE(TERRA_E_CORRUPT, "max_height", hd->max_height = f);
        HOSTILE(TERRA_E_CORRUPT, "skirt_m", hd->skirt_m = f);
        HOSTILE(TERRA_E_CORRUPT, "geometric_error", hd->geometric_error = f);
    }
    HOSTILE(TERRA_E_CORRUPT, "not positive", hd->size_x = 0);
    HOSTILE(TERRA_E_CORRUPT, "not positive", hd->size_z = -64);
    HOSTILE(TERRA_E_CORRUPT, "above", hd->min_height = hd->max_height + 1);
    HOSTILE(TERRA_E_CORRUPT, "negative", hd->skirt_m = -1);
    HOSTILE(TERRA_E_CORRUPT, "past a float", hd->min_height = -3e38f; hd->skirt_m = 3e38f);
    HOSTILE(TERRA_E_FORMAT, "magic", hd->magic ^= 1);
    HOSTILE(TERRA_E_UNSUPPORTED, "flags", hd->flags = 4);
    /* vertex values */
    for (uint32_t i = 0; i < m.h.vertex_count; i++)
        for (int f = 0; f < 3; f++) {
            const uint16_t big = (uint16_t)(32768 + rnd(&s, 32768));
            HOSTILE(TERRA_E_CORRUPT, "at most", memcpy(b + sizeof(terra_tile_mesh) + 10 * i + 2 * f, &big, 2));
        }
    /* no data at all */
    CHECK(terra_tile_mesh_check(NULL, 0) == TERRA_E_CORRUPT);
#undef HOSTILE
    printf("  %d hostile tiles refused\n", cases);
    /* and random damage: refused, or (when still valid) expanded with every promise kept */
    int refused = 0, valid = 0;
    for (int c = 0; c < 3000; c++) {
        memcpy(b, good, n);
        const int flips = 1 + (int)rnd(&s, 4);
        for (int f = 0; f < flips; f++) b[rnd(&s, (uint32_t)n)] ^= (uint8_t)(1u << rnd(&s, 8));
        const terra_status st = check_buf(b, n, false);
        CHECK(st == TERRA_OK || st == TERRA_E_CORRUPT || st == TERRA_E_FORMAT || st == TERRA_E_UNSUPPORTED);
        if (st != TERRA_OK) {
            refused++;
            continue;
        }
        valid++;
        mesh d;
        memcpy(&d.h, b, sizeof d.h);
        d.v = malloc(sizeof *d.v * d.h.vertex_count);
        d.idx = malloc(4 * (size_t)d.h.index_count);
        memcpy(d.v, b + sizeof d.h, sizeof *d.v * d.h.vertex_count);
        memcpy(d.idx, b + (n - 4 * (size_t)d.h.index_count), 4 * (size_t)d.h.index_count);
        expand_and_verify(&d, NULL);
        mesh_free(&d);
    }
    printf("  3000 damaged tiles: %d refused, %d still valid and expanded correctly\n", refused, valid);
    free(b), free(good);
    mesh_free(&m);
}

static void limits_refuse_bad_counts(void) {
    terra_tile_mesh_limits l;
    CHECK(terra_tile_mesh_limits_for(2, 3, &l) == TERRA_E_CORRUPT);
    CHECK(terra_tile_mesh_limits_for(3, 4, &l) == TERRA_E_CORRUPT);
    CHECK(terra_tile_mesh_limits_for(3, 0, &l) == TERRA_E_CORRUPT);
    CHECK(terra_tile_mesh_limits_for(TERRA_TILE_MESH_MAX_VERTICES, TERRA_TILE_MESH_MAX_INDICES, &l) == TERRA_OK);
    CHECK(l.vertices <= UINT32_MAX, "the largest tile's expansion must be indexable by uint32");
    CHECK(terra_tile_mesh_limits_for(3, 3, &l) == TERRA_OK && l.vertices == 3 + 6 && l.indices == 21);
}

int main(void) {
    RUN(random_grids_expand);
    RUN(uniform_grids_need_no_copies);
    RUN(big_grid_ratio);
    RUN(index_soups_expand);
    RUN(hostile_inputs_refused);
    RUN(limits_refuse_bad_counts);
    return finish();
}
