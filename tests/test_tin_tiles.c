/* tin tiles (levels of detail, stable borders, parallel) and two-layer ground (walls). */
#include "check.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct seg {
    int a, b;                   /* positions along the shared side, a < b */
} seg;

static int cmp_seg(const void *x, const void *y) {
    const seg *p = x, *q = y;
    return p->a != q->a ? (p->a > q->a) - (p->a < q->a) : (p->b > q->b) - (p->b < q->b);
}

/* Edges of level `l` of tile `t` lying on its side: 0 left, 1 right, 2 top, 3 bottom. Sorted. */
static size_t side_edges(const terra_tin_tile *t, int l, int side, seg *out, size_t cap) {
    const terra_tin_level *lv = &t->mesh.levels[l];
    const int32_t *xy = t->mesh.xy;
    size_t n = 0;
    for (size_t k = 0; k < lv->triangle_count; k++)
        for (int i = 0; i < 3; i++) {
            uint32_t a = lv->triangles[3 * k + i], b = lv->triangles[3 * k + (i + 1) % 3];
            int ax = xy[2 * a], ay = xy[2 * a + 1], bx = xy[2 * b], by = xy[2 * b + 1];
            int on, pa, pb;
            if (side < 2) {
                int x = side == 0 ? 0 : t->w - 1;
                on = ax == x && bx == x, pa = ay, pb = by;
            } else {
                int y = side == 2 ? 0 : t->h - 1;
                on = ay == y && by == y, pa = ax, pb = bx;
            }
            if (!on || n == cap) continue;
            out[n].a = pa < pb ? pa : pb, out[n].b = pa < pb ? pb : pa;
            n++;
        }
    qsort(out, n, sizeof *out, cmp_seg);
    return n;
}

static bool chain_covers(const seg *s, size_t n, int len) {
    if (n == 0 || s[0].a != 0 || s[n - 1].b != len - 1) return false;
    for (size_t i = 1; i < n; i++)
        if (s[i].a != s[i - 1].b) return false;
    return true;
}

/* A 512 x 512 ground without GDAL (so the test runs under ThreadSanitizer): ridges of several
 * wavelengths, a cliff and a flat lake, heights quantised to 0.1 m like Terrain-RGB. */
static void synthetic_ground(terra_raster *r) {
    memset(r, 0, sizeof *r);
    r->width = r->height = 512;
    r->heights = terra_alloc(512 * 512 * sizeof(float));
    unsigned long long seed = 11;
    double ph[8];
    for (int i = 0; i < 8; i++) ph[i] = test_rand_range(&seed, 0, 6.283);
    for (int y = 0; y < 512; y++)
        for (int x = 0; x < 512; x++) {
            double h = 0, f = 0.01, a = 300;
            for (int o = 0; o < 4; o++, f *= 2.3, a *= 0.45)
                h += a * sin(f * x + ph[2 * o]) * cos(f * 0.8 * y + ph[2 * o + 1]);
            if (x + y / 3 > 380) h += 150; /* cliff */
            if ((x - 100) * (x - 100) + (y - 400) * (y - 400) < 2500) h = -200; /* lake */
            r->heights[y * 512 + x] = (float)(round(h * 10) / 10);
        }
}

static void test_tiles_stable_borders(void) {
    terra_raster r;
    synthetic_ground(&r);
    /* Holes too: a no-data blob across a tile corner. */
    for (int y = 120; y < 140; y++)
        for (int x = 118; x < 140; x++) r.heights[y * r.width + x] = NAN;
    const double levels[3] = {16, 4, 0.5};
    terra_status s;
    terra_tin_tiles_desc d = {0};
    d.width = r.width, d.height = r.height, d.heights = r.heights, d.tile_size = 128, d.levels = levels;
    d.level_count = 3, d.threads = 2;
    terra_tin_tiles T;
    s = terra_tin_tiles_build(&d, &T);
    CHECK(s == TERRA_OK, "%s", terra_last_error());
    if (s != TERRA_OK) goto out;
    CHECK(T.tiles_x == 5 && T.tiles_y == 5, "%d x %d", T.tiles_x, T.tiles_y); /* 511 / 127 -> 5 */
    size_t cap = 4096;
    seg *sa = malloc(cap * sizeof(seg)), *sb = malloc(cap * sizeof(seg));
    int pairs = 0;
    for (int ty = 0; ty < T.tiles_y; ty++)
        for (int tx = 0; tx < T.tiles_x; tx++) {
            terra_tin_tile *t = &T.tiles[ty * T.tiles_x + tx];
            /* Every level within its bound on the tile's own samples. */
            float *hs = malloc((size_t)t->w * t->h * sizeof(float));
            for (int y = 0; y < t->h; y++)
                memcpy(hs + (size_t)y * t->w, r.heights + (size_t)(t->y0 + y) * r.width + t->x0, (size_t)t->w * 4);
            for (int l = 0; l < 3; l++) {
                terra_tin_level *lv = &t->mesh.levels[l];
                terra_tin_check_result cr;
                terra_tin_check(hs, t->w, t->h, t->mesh.xy, t->mesh.z, lv->vertex_count, lv->triangles,
                                lv->triangle_count, NULL, &cr);
                CHECK(cr.max_error <= levels[l] && cr.holes_covered == 0 && cr.uncovered == 0,
                      "tile %d,%d level %d: max %g", tx, ty, l, cr.max_error);
                if (l) CHECK(lv->vertex_count >= t->mesh.levels[l - 1].vertex_count);
            }
            free(hs);
            /* Every neighbour (right, below) at every pair of levels shares exactly the same edges. */
            for (int dir = 0; dir < 2; dir++) {
                int nx = tx + (dir == 0), ny = ty + (dir == 1);
                if (nx >= T.tiles_x || ny >= T.tiles_y) continue;
                terra_tin_tile *u = &T.tiles[ny * T.tiles_x + nx];
                for (int la = 0; la < 3; la++)
                    for (int lb = 0; lb < 3; lb++) {
                        size_t na = side_edges(t, la, dir == 0 ? 1 : 3, sa, cap);
                        size_t nb = side_edges(u, lb, dir == 0 ? 0 : 2, sb, cap);
                        int len = dir == 0 ? t->h : t->w;
                        bool same = na == nb && !memcmp(sa, sb, na * sizeof(seg));
                        CHECK(same, "tiles %d,%d and %d,%d levels %d/%d: %zu vs %zu border edges", tx, ty, nx, ny, la, lb,
                              na, nb);
                        /* Away from the hole (tiles 0..1 x 0..1) a shared side is one full chain. */
                        if (tx > 1 || ty > 1 || nx > 1 || ny > 1)
                            CHECK(chain_covers(sa, na, len), "tiles %d,%d / %d,%d", tx, ty, nx, ny);
                        pairs++;
                    }
            }
        }
    CHECK(pairs == 2 * 5 * 4 * 9, "%d", pairs);
    size_t total = 0;
    for (int i = 0; i < T.tiles_x * T.tiles_y; i++) total += T.tiles[i].mesh.levels[2].triangle_count;
    printf("  %d x %d tiles, %zu triangles at %g m, %d neighbour/level pairs checked\n", T.tiles_x, T.tiles_y, total,
           levels[2], pairs);
    CHECK(total > 50000, "%zu", total);
    /* Same result on one thread, and on a caller's pool of three: deterministic. */
    terra_pool *pool = NULL;
    CHECK(terra_pool_create(&(terra_pool_desc){.threads = 3}, &pool) == TERRA_OK);
    for (int run = 0; run < 2; run++) {
        d.threads = 1, d.pool = run ? pool : NULL;
        terra_tin_tiles T1;
        CHECK(terra_tin_tiles_build(&d, &T1) == TERRA_OK, "%s", terra_last_error());
        for (int i = 0; i < T.tiles_x * T.tiles_y; i++) {
            terra_tin_mesh *a = &T.tiles[i].mesh, *b = &T1.tiles[i].mesh;
            CHECK(a->vertex_count == b->vertex_count && !memcmp(a->xy, b->xy, 8 * a->vertex_count));
            CHECK(a->levels[2].triangle_count == b->levels[2].triangle_count &&
                  !memcmp(a->levels[2].triangles, b->levels[2].triangles, 12 * a->levels[2].triangle_count));
        }
        terra_tin_tiles_free(&T1);
    }
    terra_pool_destroy(pool);
    free(sa);
    free(sb);
    terra_tin_tiles_free(&T);
out:
    terra_raster_free(&r);
}

static void test_tiles_full_chains(void) {
    /* Without holes every shared side is one chain from end to end, at every level. */
    enum { W = 100, H = 70 };
    float *hs = malloc(W * H * sizeof(float));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) hs[y * W + x] = (float)(20 * sin(x * 0.17) * cos(y * 0.11) + 0.05 * x * y);
    const double levels[2] = {3, 0.3};
    terra_tin_tiles_desc d = {W, H, hs, 17, levels, 2, 2, NULL};
    terra_tin_tiles T;
    CHECK(terra_tin_tiles_build(&d, &T) == TERRA_OK, "%s", terra_last_error());
    seg s[512];
    for (int i = 0; i < T.tiles_x * T.tiles_y; i++)
        for (int l = 0; l < 2; l++)
            for (int side = 0; side < 4; side++) {
                terra_tin_tile *t = &T.tiles[i];
                size_t n = side_edges(t, l, side, s, 512);
                CHECK(chain_covers(s, n, side < 2 ? t->h : t->w), "tile %d level %d side %d", i, l, side);
            }
    terra_tin_tiles_free(&T);
    free(hs);
}

/* ---- two-layer ground ------------------------------------------------------------------------ */

typedef struct scene {
    const char *name;
    int w, h;
    float *lower, *upper;
    double thickness;
} scene;

static void make_scene(scene *s, int kind) {
    const int W = 64, H = 48;
    s->w = W, s->h = H;
    s->lower = malloc(W * H * sizeof(float));
    s->upper = malloc(W * H * sizeof(float));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float lo, up = NAN;
            if (kind == 0) { /* bridge: a deck at 25 m over a river channel, ends abrupt at both sides */
                s->name = "bridge";
                lo = (x >= 26 && x <= 38) ? 8.0f : 20.0f + 0.1f * y;
                if (y >= 20 && y <= 27 && x >= 18 && x <= 46) up = 25.0f;
                s->thickness = 1.5;
            } else if (kind == 1) { /* tunnel: a floor under a hill, the hill is the upper layer */
                s->name = "tunnel";
                float hill = 60.0f - 0.04f * (float)((x - 32) * (x - 32)) - 0.05f * (float)((y - 24) * (y - 24));
                if (hill < 5) hill = 5;
                lo = hill;
                if (y >= 21 && y <= 27 && x >= 12 && x <= 52) lo = 5.0f, up = hill;
                s->thickness = 0;
            } else { /* cliff with an overhang: the top reaches out over the foot */
                s->name = "cliff";
                lo = x < 32 ? 2.0f + 0.02f * y : 40.0f + 0.1f * (x - 32);
                if (x >= 22 && x < 32 && y >= 6 && y < 42) up = 40.0f - 0.05f * (32 - x);
                s->thickness = 3;
            }
            s->lower[y * W + x] = lo;
            s->upper[y * W + x] = up;
        }
}

static void test_two_layers(void) {
    for (int kind = 0; kind < 3; kind++) {
        scene sc;
        make_scene(&sc, kind);
        terra_tin_layers_desc d = {sc.w, sc.h, sc.lower, sc.upper, 0.25, sc.thickness};
        terra_tin_layers L;
        terra_status s = terra_tin_layers_build(&d, &L);
        CHECK(s == TERRA_OK, "%s: %s", sc.name, terra_last_error());
        if (s != TERRA_OK) continue;
        const terra_tin_mesh *m = &L.mesh;
        const terra_tin_level *lv = &m->levels[0];
        /* Both layers within the bound, each on its own samples; the upper covers no absent sample. */
        terra_tin_check_result cr;
        terra_tin_check(sc.lower, sc.w, sc.h, m->xy, m->z, lv->vertex_count, lv->triangles, lv->triangle_count, NULL,
                        &cr);
        CHECK(cr.max_error <= 0.25 && cr.uncovered == 0 && cr.area_exact, "%s lower: %g", sc.name, cr.max_error);
        terra_tin_check(sc.upper, sc.w, sc.h, m->xy, m->z_upper, lv->vertex_count, lv->upper_triangles,
                        lv->upper_triangle_count, NULL, &cr);
        CHECK(cr.max_error <= 0.25 && cr.uncovered == 0 && cr.holes_covered == 0, "%s upper: %g, %zu %zu", sc.name,
              cr.max_error, cr.uncovered, cr.holes_covered);
        CHECK(lv->upper_triangle_count > 0);
        /* The layers do not cross: top >= underside >= ground at every vertex of the upper layer. */
        for (size_t v = 0; v < m->vertex_count; v++) {
            if (isnan(m->z_upper[v])) continue;
            CHECK(m->z_upper[v] >= L.z_under[v] && L.z_under[v] >= m->z[v], "%s vertex %zu", sc.name, v);
        }
        /* Walls: each appears once, each on a border edge of the upper layer, every such edge has one. */
        CHECK(L.wall_count > 0, "%s has no wall", sc.name);
        size_t border = 0, matched = 0;
        for (size_t t = 0; t < lv->upper_triangle_count; t++)
            for (int i = 0; i < 3; i++) {
                uint32_t a = lv->upper_triangles[3 * t + i], b = lv->upper_triangles[3 * t + (i + 1) % 3];
                bool twin = false;
                for (size_t u = 0; u < lv->upper_triangle_count && !twin; u++)
                    for (int k = 0; k < 3; k++)
                        if (lv->upper_triangles[3 * u + k] == b && lv->upper_triangles[3 * u + (k + 1) % 3] == a)
                            twin = true;
                if (twin) continue;
                int ax = m->xy[2 * a], ay = m->xy[2 * a + 1], bx = m->xy[2 * b], by = m->xy[2 * b + 1];
                bool on_raster_edge =
                    (ax == bx && (ax == 0 || ax == sc.w - 1)) || (ay == by && (ay == 0 || ay == sc.h - 1));
                if (on_raster_edge) continue;
                border++;
                size_t found = 0;
                for (size_t w = 0; w < L.wall_count; w++) {
                    uint32_t wa = L.walls[2 * w], wb = L.walls[2 * w + 1];
                    if ((wa == a && wb == b) || (wa == b && wb == a)) found++;
                }
                CHECK(found == 1, "%s: border edge %u-%u has %zu walls", sc.name, a, b, found);
                matched += found;
            }
        CHECK(matched == L.wall_count && border == L.wall_count, "%s: %zu walls, %zu border edges", sc.name,
              L.wall_count, border);
        /* The soup is closed around the walls: positions are finite and triangles index it. */
        for (size_t t = 0; t < 3 * L.soup_triangle_count; t++) CHECK(L.soup_triangles[t] < L.soup_vertex_count);
        printf("  %s: %zu points, %zu lower + %zu upper triangles, %zu walls\n", sc.name, m->vertex_count,
               lv->triangle_count, lv->upper_triangle_count, L.wall_count);
        terra_tin_layers_free(&L);
        free(sc.lower);
        free(sc.upper);
    }
    /* Bad input: an upper layer under the lower one. */
    float lo[4] = {1, 1, 1, 1}, up[4] = {2, 0.5f, NAN, NAN};
    terra_tin_layers_desc d = {2, 2, lo, up, 0.1, 0};
    terra_tin_layers L;
    CHECK(terra_tin_layers_build(&d, &L) == TERRA_E_SOURCE);
}

int main(void) {
    RUN(test_tiles_stable_borders);
    RUN(test_tiles_full_chains);
    RUN(test_two_layers);
    return finish();
}
