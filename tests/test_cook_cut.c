/* The scenery cut (src/cook/cut.c): random ground soups (jittered TINs with holes, vertices on grid
 * lines, walls across and on grid lines, random grids) cut into finest tiles, and what the cut
 * promises checked on every tile: the pieces cover the source's area exactly once, holes stay
 * holes, heights are the source's, a vertex on a shared tile side is in the neighbour bit for bit
 * (normal and material too), walls are laid once, materials ride along, tiles can be made on many
 * threads at once. */
#include "check.h"
#include "terra/scenery.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- soups ------------------------------------------------------------------------------------- */

typedef struct soup {
    terra_scenery s;
    size_t vcap, tcap;
    double ground_area;   /* plane units^2, triangles with area in the plane */
    double wall_area;     /* m^2, 3-D, triangles without */
} soup;

static uint32_t soup_vertex(soup *u, double x, double y, double z, uint16_t mat) {
    if (u->s.vertex_count == u->vcap) {
        u->vcap = u->vcap ? 2 * u->vcap : 64;
        u->s.position = realloc(u->s.position, u->vcap * 3 * sizeof(double));
        u->s.material = realloc(u->s.material, u->vcap * sizeof(uint16_t));
    }
    double *p = u->s.position + 3 * u->s.vertex_count;
    p[0] = x, p[1] = y, p[2] = z;
    u->s.material[u->s.vertex_count] = mat;
    return (uint32_t)u->s.vertex_count++;
}

static void soup_tri(soup *u, uint32_t a, uint32_t b, uint32_t c) {
    if (u->s.triangle_count == u->tcap) {
        u->tcap = u->tcap ? 2 * u->tcap : 64;
        u->s.tri = realloc(u->s.tri, u->tcap * 3 * sizeof(uint32_t));
    }
    uint32_t *t = u->s.tri + 3 * u->s.triangle_count++;
    t[0] = a, t[1] = b, t[2] = c;
}

static void soup_free(soup *u) {
    free(u->s.position);
    free(u->s.material);
    free(u->s.tri);
    memset(u, 0, sizeof *u);
}

/* Plane position (plane units) and height of source vertex v. */
static void plane_of(const terra_cook_grid *g, const soup *u, uint32_t v, double out[3]) {
    const double *p = u->s.position + 3 * (size_t)v;
    out[0] = (p[0] - g->origin[0]) / g->unit[0];
    out[1] = (p[2] - g->origin[1]) / g->unit[1];
    out[2] = p[1];
}

static double orient2(const double *a, const double *b, const double *c) {
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/* Twice the 3-D area in metres of a triangle in plane coordinates. */
static double area3(const terra_cook_grid *g, const double *a, const double *b, const double *c) {
    double e1[3] = {(b[0] - a[0]) * g->unit[0], (b[1] - a[1]) * g->unit[1], b[2] - a[2]};
    double e2[3] = {(c[0] - a[0]) * g->unit[0], (c[1] - a[1]) * g->unit[1], c[2] - a[2]};
    double x = e1[1] * e2[2] - e1[2] * e2[1], y = e1[2] * e2[0] - e1[0] * e2[2], z = e1[0] * e2[1] - e1[1] * e2[0];
    return sqrt(x * x + y * y + z * z);
}

static void soup_areas(const terra_cook_grid *g, soup *u) {
    u->ground_area = u->wall_area = 0;
    for (size_t t = 0; t < u->s.triangle_count; t++) {
        double p[3][3];
        for (int k = 0; k < 3; k++) plane_of(g, u, u->s.tri[3 * t + k], p[k]);
        double o = orient2(p[0], p[1], p[2]);
        if (o != 0) u->ground_area += fabs(o) / 2;
        else u->wall_area += area3(g, p[0], p[1], p[2]) / 2;
    }
}

/* A wall: base p1 -> p2 (scenery x, z), bottom heights and a top `tall` above. */
static void soup_wall(soup *u, double x1, double z1, double x2, double z2, double bottom, double tall, uint16_t mat) {
    uint32_t a = soup_vertex(u, x1, bottom, z1, mat), b = soup_vertex(u, x2, bottom + 0.3, z2, mat);
    uint32_t c = soup_vertex(u, x2, bottom + 0.3 + tall, z2, mat), d = soup_vertex(u, x1, bottom + tall, z1, mat);
    soup_tri(u, a, b, c);
    soup_tri(u, a, c, d);
}

typedef struct gen_opts {
    bool walls, holes, snap, shuffle_winding;
} gen_opts;

/* A random case: grid (S, unit, origin) and soup. */
static void random_case(unsigned long long *seed, terra_cook_grid *g, soup *u, gen_opts o) {
    static const double sides[] = {0.75, 1, 2.5, 4, 10};
    memset(g, 0, sizeof *g);
    g->frame = TERRA_FRAME_LOCAL;
    g->tile_units = sides[test_rand_u64(seed) % 5];
    g->unit[0] = g->unit[1] = test_rand_u64(seed) % 3 == 0 ? 0.5 : 1;
    g->origin[0] = (double)(int)(test_rand_u64(seed) % 801) / 8 - 50;
    g->origin[1] = (double)(int)(test_rand_u64(seed) % 801) / 8 - 50;
    g->depth = 4;
    memset(u, 0, sizeof *u);
    int nx = 4 + (int)(test_rand_u64(seed) % 13), ny = 4 + (int)(test_rand_u64(seed) % 13);
    double sp = test_rand_range(seed, 0.5, 3), bx = g->origin[0] + test_rand_range(seed, -20, 20),
           bz = g->origin[1] + test_rand_range(seed, -20, 20);
    double line = g->tile_units * g->unit[0];
    for (int j = 0; j <= ny; j++)
        for (int i = 0; i <= nx; i++) {
            double x = bx + i * sp + test_rand_range(seed, -0.3, 0.3) * sp;
            double z = bz + j * sp + test_rand_range(seed, -0.3, 0.3) * sp;
            if (o.snap && test_rand_u64(seed) % 6 == 0) {
                /* onto the nearest grid line if it is near the lattice point (the TIN stays valid) */
                double kx = round((bx + i * sp - g->origin[0]) / line), kz = round((bz + j * sp - g->origin[1]) / line);
                if (fabs(g->origin[0] + kx * line - (bx + i * sp)) < 0.3 * sp) x = g->origin[0] + kx * line;
                if (test_rand_u64(seed) % 2 && fabs(g->origin[1] + kz * line - (bz + j * sp)) < 0.3 * sp)
                    z = g->origin[1] + kz * line;
            }
            double y = 5 * sin(x * 0.3) + 3 * cos(z * 0.2) + test_rand_range(seed, -0.5, 0.5);
            soup_vertex(u, x, y, z, (uint16_t)(test_rand_u64(seed) % 4));
        }
    double hx = bx + test_rand_range(seed, 0, nx * sp), hz = bz + test_rand_range(seed, 0, ny * sp);
    double hr = o.holes ? test_rand_range(seed, 0, 3 * sp) : 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            uint32_t a = (uint32_t)(j * (nx + 1) + i), b = a + 1, c = a + (uint32_t)nx + 1, d = c + 1;
            uint32_t t[2][3];
            if (test_rand_u64(seed) % 2) {
                uint32_t t0[2][3] = {{a, b, d}, {a, d, c}};
                memcpy(t, t0, sizeof t);
            } else {
                uint32_t t0[2][3] = {{a, b, c}, {b, d, c}};
                memcpy(t, t0, sizeof t);
            }
            for (int k = 0; k < 2; k++) {
                double cx = 0, cz = 0;
                for (int m = 0; m < 3; m++) cx += u->s.position[3 * t[k][m]] / 3, cz += u->s.position[3 * t[k][m] + 2] / 3;
                if ((cx - hx) * (cx - hx) + (cz - hz) * (cz - hz) < hr * hr) continue; /* the hole */
                if (o.shuffle_winding && test_rand_u64(seed) % 2) soup_tri(u, t[k][0], t[k][2], t[k][1]);
                else soup_tri(u, t[k][0], t[k][1], t[k][2]);
            }
        }
    int walls = o.walls ? (int)(test_rand_u64(seed) % 5) : 0;
    for (int w = 0; w < walls; w++) {
        double x1 = bx + test_rand_range(seed, 0, nx * sp), z1 = bz + test_rand_range(seed, 0, ny * sp);
        double x2 = bx + test_rand_range(seed, 0, nx * sp), z2 = bz + test_rand_range(seed, 0, ny * sp);
        int kind = (int)(test_rand_u64(seed) % 4);
        if (kind == 0) x1 = x2 = g->origin[0] + round((x1 - g->origin[0]) / line) * line; /* on an x line */
        if (kind == 1) z1 = z2 = g->origin[1] + round((z1 - g->origin[1]) / line) * line; /* on a y line */
        soup_wall(u, x1, z1, x2, z2, test_rand_range(seed, -10, 10), test_rand_range(seed, 1, 4),
                  (uint16_t)(test_rand_u64(seed) % 4));
    }
    soup_areas(g, u);
}

/* ---- the cut's tiles, checked ------------------------------------------------------------------ */

typedef struct cut_tiles {
    terra_scenery_cut *cut;
    const int32_t *xy;
    size_t n;
    terra_cook_mesh *mesh;
} cut_tiles;

static bool make_tiles(const terra_cook_grid *g, const soup *u, double tol, cut_tiles *ct) {
    memset(ct, 0, sizeof *ct);
    terra_scenery_cut_desc d = {.grid = g, .weld_tolerance = tol};
    terra_status st = terra_scenery_cut_build(&u->s, &d, &ct->cut);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    if (st != TERRA_OK) return false;
    ct->xy = terra_scenery_cut_tiles(ct->cut, &ct->n);
    ct->mesh = calloc(ct->n ? ct->n : 1, sizeof(terra_cook_mesh));
    for (size_t i = 0; i < ct->n; i++) {
        double err = -1;
        st = terra_scenery_cut_tile(ct->cut, ct->xy[2 * i], ct->xy[2 * i + 1], &ct->mesh[i], &err);
        CHECK(st == TERRA_OK && err == 0, "%s", terra_last_error());
        CHECK(ct->mesh[i].triangle_count > 0, "listed tile %d,%d is empty", ct->xy[2 * i], ct->xy[2 * i + 1]);
        if (i) CHECK(ct->xy[2 * i + 1] > ct->xy[2 * i - 1] || (ct->xy[2 * i + 1] == ct->xy[2 * i - 1] &&
                                                                ct->xy[2 * i] > ct->xy[2 * i - 2]));
    }
    return true;
}

static void free_tiles(cut_tiles *ct) {
    for (size_t i = 0; i < ct->n; i++) terra_cook_mesh_free(&ct->mesh[i]);
    free(ct->mesh);
    terra_scenery_cut_free(ct->cut);
}

static const terra_cook_mesh *find_tile(const cut_tiles *ct, int32_t tx, int32_t ty) {
    for (size_t i = 0; i < ct->n; i++)
        if (ct->xy[2 * i] == tx && ct->xy[2 * i + 1] == ty) return &ct->mesh[i];
    return NULL;
}

static void mesh_tri(const terra_cook_mesh *m, uint32_t t, double p[3][3]) {
    for (int k = 0; k < 3; k++) {
        uint32_t v = m->tri[3 * (size_t)t + k];
        p[k][0] = m->xy[2 * (size_t)v], p[k][1] = m->xy[2 * (size_t)v + 1], p[k][2] = m->z[v];
    }
}

/* A piece is a wall when its plane area is nothing against its 3-D area. */
static bool is_wall(const terra_cook_grid *g, double p[3][3]) {
    double o = fabs(orient2(p[0], p[1], p[2])) * g->unit[0] * g->unit[1];
    return o <= 1e-7 * area3(g, p[0], p[1], p[2]);
}

/* -1: (x, y) is within eps of the triangle's boundary; 1 inside; 0 outside. *h: height there. */
static int locate(double p[3][3], double x, double y, double eps, double *h) {
    double q[2] = {x, y}, area = orient2(p[0], p[1], p[2]);
    double l[3] = {orient2(p[1], p[2], q) / area, orient2(p[2], p[0], q) / area, orient2(p[0], p[1], q) / area};
    double lo = fmin(l[0], fmin(l[1], l[2]));
    *h = l[0] * p[0][2] + l[1] * p[1][2] + l[2] * p[2][2];
    return lo > eps ? 1 : lo >= -eps ? -1 : 0;
}

/* Everything the cut promises, on one case. */
static void check_case(const terra_cook_grid *g, const soup *u, const cut_tiles *ct, unsigned long long *seed,
                       const char *what) {
    const double S = g->tile_units;
    double ground = 0, wall = 0;
    for (size_t i = 0; i < ct->n; i++) {
        const terra_cook_mesh *m = &ct->mesh[i];
        double rect[4];
        terra_cook_tile_rect(g, 0, ct->xy[2 * i], ct->xy[2 * i + 1], rect);
        for (uint32_t v = 0; v < m->vertex_count; v++) {
            double x = m->xy[2 * (size_t)v], y = m->xy[2 * (size_t)v + 1];
            CHECK(x >= rect[0] && x <= rect[2] && y >= rect[1] && y <= rect[3],
                  "%s: vertex %.17g,%.17g outside tile %d,%d", what, x, y, ct->xy[2 * i], ct->xy[2 * i + 1]);
            const float *n = m->normal + 3 * (size_t)v;
            CHECK(fabsf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2] - 1) < 1e-5f, "%s: normal not unit", what);
            CHECK(m->material[v] < 4);
        }
        for (uint32_t t = 0; t < m->triangle_count; t++) {
            bool ok = true;
            for (int k = 0; k < 3; k++) ok = ok && m->tri[3 * (size_t)t + k] < m->vertex_count;
            CHECK(ok, "%s: index out of range", what);
            if (!ok) return;
            double p[3][3];
            mesh_tri(m, t, p);
            double o = orient2(p[0], p[1], p[2]);
            CHECK(o >= 0, "%s: tile %d,%d triangle %u turns clockwise (%g)", what, ct->xy[2 * i], ct->xy[2 * i + 1],
                  t, o);
            if (is_wall(g, p)) wall += area3(g, p[0], p[1], p[2]) / 2;
            else ground += o / 2;
        }
    }
    CHECK(fabs(ground - u->ground_area) <= 1e-9 * u->ground_area + 1e-12, "%s: ground area %.15g != source %.15g",
          what, ground, u->ground_area);
    CHECK(fabs(wall - u->wall_area) <= 1e-6 * u->wall_area + 1e-12, "%s: wall area %.15g != source %.15g (laid twice?)",
          what, wall, u->wall_area);

    /* Coverage at random points: as many pieces as source triangles (0 in a hole, never 2), and the
     * source's height there. */
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (size_t v = 0; v < u->s.vertex_count; v++) {
        double p[3];
        plane_of(g, u, (uint32_t)v, p);
        for (int d = 0; d < 2; d++) lo[d] = fmin(lo[d], p[d]), hi[d] = fmax(hi[d], p[d]);
    }
    int compared = 0;
    for (int k = 0; k < 400; k++) {
        double x = test_rand_range(seed, lo[0] - 1, hi[0] + 1), y = test_rand_range(seed, lo[1] - 1, hi[1] + 1);
        int src = 0, pieces = 0;
        bool near = false;
        double hs = 0, hp = 0, h;
        for (size_t t = 0; t < u->s.triangle_count; t++) {
            double p[3][3];
            for (int m = 0; m < 3; m++) plane_of(g, u, u->s.tri[3 * t + m], p[m]);
            if (orient2(p[0], p[1], p[2]) == 0) continue;
            int r = locate(p, x, y, 1e-7, &h);
            near = near || r < 0;
            if (r > 0) src++, hs = h;
        }
        const terra_cook_mesh *m = find_tile(ct, (int32_t)floor(x / S), (int32_t)floor(y / S));
        for (uint32_t t = 0; m && t < m->triangle_count; t++) {
            double p[3][3];
            mesh_tri(m, t, p);
            if (is_wall(g, p)) continue;
            int r = locate(p, x, y, 1e-7, &h);
            near = near || r < 0;
            if (r > 0) pieces++, hp = h;
        }
        if (near) continue;
        compared++;
        CHECK(src <= 1 && pieces == src, "%s: at %g,%g %d pieces over %d source triangles", what, x, y, pieces, src);
        if (src == 1 && pieces == 1)
            CHECK(fabs(hp - hs) <= 1e-5 * (1 + fabs(hs)), "%s: height %g against the source's %g", what, hp, hs);
    }
    CHECK(compared > 300, "%s: only %d points compared", what, compared);

    /* A ground vertex on a shared tile side is in the neighbour, bit for bit, wherever the neighbour
     * has ground there. And every vertex lies on a source triangle carrying its material. */
    for (size_t i = 0; i < ct->n; i++) {
        const terra_cook_mesh *m = &ct->mesh[i];
        int32_t tx = ct->xy[2 * i], ty = ct->xy[2 * i + 1];
        double rect[4];
        terra_cook_tile_rect(g, 0, tx, ty, rect);
        for (uint32_t t = 0; t < m->triangle_count; t++) {
            double p[3][3];
            mesh_tri(m, t, p);
            bool piece_wall = is_wall(g, p);
            for (int k = 0; k < 3; k++) {
                uint32_t v = m->tri[3 * (size_t)t + k];
                double x = p[k][0], y = p[k][1];
                if (!piece_wall) {
                    const int32_t nb[4][2] = {{x == rect[0] ? tx - 1 : INT32_MIN, ty},
                                              {x == rect[2] ? tx + 1 : INT32_MIN, ty},
                                              {tx, y == rect[1] ? ty - 1 : INT32_MIN},
                                              {tx, y == rect[3] ? ty + 1 : INT32_MIN}};
                    for (int s = 0; s < 4; s++) {
                        if (nb[s][0] == INT32_MIN || nb[s][1] == INT32_MIN) continue;
                        const terra_cook_mesh *b = find_tile(ct, nb[s][0], nb[s][1]);
                        bool covered = false, found = false;
                        for (uint32_t bt = 0; b && bt < b->triangle_count && !covered; bt++) {
                            double q[3][3], h;
                            mesh_tri(b, bt, q);
                            covered = !is_wall(g, q) && locate(q, x, y, 1e-9, &h) != 0;
                        }
                        for (uint32_t bv = 0; covered && bv < b->vertex_count && !found; bv++)
                            found = b->xy[2 * (size_t)bv] == x && b->xy[2 * (size_t)bv + 1] == y &&
                                    b->z[bv] == m->z[v] && b->material[bv] == m->material[v] &&
                                    !memcmp(b->normal + 3 * (size_t)bv, m->normal + 3 * (size_t)v, 3 * sizeof(float));
                        CHECK(!covered || found, "%s: vertex %.17g,%.17g,%g of tile %d,%d missing in tile %d,%d", what,
                              x, y, p[k][2], tx, ty, nb[s][0], nb[s][1]);
                    }
                }
                /* materials: the source triangles under the vertex */
                bool on_source = false, carried = false;
                for (size_t st = 0; st < u->s.triangle_count && !carried; st++) {
                    double q[3][3], h;
                    for (int mm = 0; mm < 3; mm++) plane_of(g, u, u->s.tri[3 * st + mm], q[mm]);
                    bool under;
                    if (orient2(q[0], q[1], q[2]) != 0) {
                        under = locate(q, x, y, 1e-9, &h) != 0 && fabs(h - p[k][2]) <= 1e-4 * (1 + fabs(h));
                    } else {
                        double bl[2] = {INFINITY, INFINITY}, bh[2] = {-INFINITY, -INFINITY}, zl = INFINITY,
                               zh = -INFINITY;
                        for (int mm = 0; mm < 3; mm++) {
                            for (int d = 0; d < 2; d++) bl[d] = fmin(bl[d], q[mm][d]), bh[d] = fmax(bh[d], q[mm][d]);
                            zl = fmin(zl, q[mm][2]), zh = fmax(zh, q[mm][2]);
                        }
                        under = x >= bl[0] - 1e-9 && x <= bh[0] + 1e-9 && y >= bl[1] - 1e-9 && y <= bh[1] + 1e-9 &&
                                p[k][2] >= zl - 1e-4 && p[k][2] <= zh + 1e-4;
                    }
                    if (!under) continue;
                    on_source = true;
                    for (int mm = 0; mm < 3; mm++) {
                        uint32_t sv = u->s.tri[3 * st + mm];
                        bool same = q[mm][0] == x && q[mm][1] == y && (float)q[mm][2] == m->z[v];
                        if (same) CHECK(u->s.material[sv] == m->material[v], "%s: source vertex lost its material", what);
                        carried = carried || u->s.material[sv] == m->material[v];
                    }
                }
                CHECK(on_source && carried, "%s: vertex %g,%g,%g: on the source %d, material %u carried %d", what, x, y,
                      p[k][2], on_source, m->material[v], carried);
            }
        }
    }
}

static void test_random_soups(void) {
    unsigned long long seed = 0x5ce4e5ull;
    for (int c = 0; c < 60; c++) {
        terra_cook_grid g;
        soup u;
        random_case(&seed, &g, &u, (gen_opts){.walls = true, .holes = true, .snap = true, .shuffle_winding = true});
        char what[64];
        snprintf(what, sizeof what, "case %d (S %g, unit %g)", c, g.tile_units, g.unit[0]);
        cut_tiles ct;
        if (make_tiles(&g, &u, 0, &ct)) {
            terra_scenery_cut_info info;
            terra_scenery_cut_get_info(ct.cut, &info);
            CHECK(info.welded == 0 && info.collapsed == 0 && info.triangles == u.s.triangle_count && info.tiles == ct.n,
                  "%s", what);
            check_case(&g, &u, &ct, &seed, what);
            free_tiles(&ct);
        }
        soup_free(&u);
    }
}

/* Triangles whose edges pass exactly through tile corners, often several (integer lattices do
 * that): a crossing that rounding puts a hair beside a corner must still lie in the tile and match
 * its neighbours (without the cut's snap onto grid lines, cases 83 and 131 fail both). */
static void test_through_corners(void) {
    unsigned long long seed = 0xc0ffeeull;
    for (int c = 0; c < 300; c++) {
        terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = 1, .depth = 2};
        soup u = {0};
        double k = (double)(test_rand_u64(&seed) % 11) - 5, m = (double)(test_rand_u64(&seed) % 11) - 5;
        double a = (double)(1 + test_rand_u64(&seed) % 9), b = (double)(1 + test_rand_u64(&seed) % 9);
        double j = (double)(1 + test_rand_u64(&seed) % 5), sa = test_rand_u64(&seed) % 2 ? 1 : -1;
        /* A and B on a line through the corner (k, m); C off it */
        uint32_t A = soup_vertex(&u, k - a, 1, m - sa * b, 0), B = soup_vertex(&u, k + j * a, 2, m + sa * j * b, 1);
        uint32_t C = soup_vertex(&u, k + test_rand_range(&seed, -6, 6), 3, m + test_rand_range(&seed, -6, 6), 2);
        soup_tri(&u, A, B, C);
        soup_areas(&g, &u);
        cut_tiles ct;
        if (make_tiles(&g, &u, 0, &ct)) {
            char what[64];
            snprintf(what, sizeof what, "corner case %d", c);
            check_case(&g, &u, &ct, &seed, what);
            free_tiles(&ct);
        }
        soup_free(&u);
    }
}

/* Walls standing exactly on grid lines, across a corner: laid once, in the tiles on their +x / +y side. */
static void test_walls_on_lines(void) {
    terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = 1, .depth = 2};
    soup u = {0};
    soup_wall(&u, 2, 0.5, 2, 2.5, 0, 3, 1);        /* on x = 2, across y = 1 and 2 */
    soup_wall(&u, 0.25, 1, 1.75, 1, 0, 3, 2);      /* on y = 1, across x = 1 */
    soup_wall(&u, 3, 3, 3, 3.5, 0, 1, 3);          /* on x = 3, starting on the corner (3, 3) */
    soup_areas(&g, &u);
    cut_tiles ct;
    if (!make_tiles(&g, &u, 0, &ct)) return;
    const int32_t want[][2] = {{2, 0}, {0, 1}, {1, 1}, {2, 1}, {2, 2}, {3, 3}};
    CHECK(ct.n == 6, "%zu tiles", ct.n);
    for (size_t i = 0; i < ct.n && i < 6; i++)
        CHECK(ct.xy[2 * i] == want[i][0] && ct.xy[2 * i + 1] == want[i][1], "tile %zu: %d,%d", i, ct.xy[2 * i],
              ct.xy[2 * i + 1]);
    double wall = 0;
    for (size_t i = 0; i < ct.n; i++)
        for (uint32_t t = 0; t < ct.mesh[i].triangle_count; t++) {
            double p[3][3];
            mesh_tri(&ct.mesh[i], t, p);
            CHECK(orient2(p[0], p[1], p[2]) == 0);
            wall += area3(&g, p[0], p[1], p[2]) / 2;
        }
    CHECK(fabs(wall - u.wall_area) < 1e-6 * u.wall_area, "%.17g != %.17g", wall, u.wall_area); /* heights are floats */
    terra_cook_mesh empty = {0};
    double err;
    CHECK(terra_scenery_cut_tile(ct.cut, 1, 0, &empty, &err) == TERRA_OK && empty.triangle_count == 0);
    terra_cook_mesh_free(&empty);
    free_tiles(&ct);
    soup_free(&u);
}

/* The same ground as a soup of separate triangles, each corner moved by less than the tolerance,
 * with duplicate and degenerate triangles added: welded back into the indexed ground. */
static void test_weld(void) {
    unsigned long long seed = 0xbeefull;
    for (int c = 0; c < 10; c++) {
        terra_cook_grid g;
        soup u, loose = {0};
        random_case(&seed, &g, &u, (gen_opts){.holes = true});
        double tol = 0.01;
        for (size_t t = 0; t < u.s.triangle_count; t++) {
            uint32_t v[3];
            for (int k = 0; k < 3; k++) {
                const double *p = u.s.position + 3 * (size_t)u.s.tri[3 * t + k];
                v[k] = soup_vertex(&loose, p[0] + test_rand_range(&seed, -1, 1) * tol / 4,
                                   p[1] + test_rand_range(&seed, -1, 1) * tol / 4,
                                   p[2] + test_rand_range(&seed, -1, 1) * tol / 4, u.s.material[u.s.tri[3 * t + k]]);
            }
            soup_tri(&loose, v[0], v[1], v[2]);
            if (t % 7 == 0) soup_tri(&loose, v[0], v[2], v[1]); /* the same again, turned over */
            if (t % 11 == 0) soup_tri(&loose, v[0], v[0], v[1]); /* no area */
        }
        terra_scenery_cut_desc d = {.grid = &g, .weld_tolerance = tol};
        terra_scenery_cut *cut = NULL;
        CHECK(terra_scenery_cut_build(&loose.s, &d, &cut) == TERRA_OK, "%s", terra_last_error());
        if (cut) {
            terra_scenery_cut_info info;
            terra_scenery_cut_get_info(cut, &info);
            size_t extra = (u.s.triangle_count + 6) / 7 + (u.s.triangle_count + 10) / 11;
            CHECK(info.collapsed == extra && info.triangles == u.s.triangle_count, "collapsed %zu of %zu, kept %zu",
                  info.collapsed, extra, info.triangles);
            /* the welded vertices: those the kept triangles use */
            size_t used = 0;
            bool *seen = calloc(u.s.vertex_count, 1);
            for (size_t t = 0; t < 3 * u.s.triangle_count; t++) used += !seen[u.s.tri[t]], seen[u.s.tri[t]] = true;
            free(seen);
            CHECK(info.vertices == used, "%zu vertices welded, %zu in the ground", info.vertices, used);
            terra_scenery_cut_free(cut);
        }
        cut_tiles ct;
        soup_areas(&g, &loose);
        if (make_tiles(&g, &loose, tol, &ct)) {
            double ground = 0;
            for (size_t i = 0; i < ct.n; i++)
                for (uint32_t t = 0; t < ct.mesh[i].triangle_count; t++) {
                    double p[3][3];
                    mesh_tri(&ct.mesh[i], t, p);
                    ground += orient2(p[0], p[1], p[2]) / 2;
                }
            CHECK(fabs(ground - u.ground_area) < 1e-3 * u.ground_area, "%g against %g", ground, u.ground_area);
            free_tiles(&ct);
        }
        soup_free(&loose);
        soup_free(&u);
    }
}

/* Tiles made on four threads at once are the tiles made one by one. */
typedef struct worker {
    const cut_tiles *ct;
    int start;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (size_t k = 0; k < w->ct->n; k++) {
        size_t i = (k + (size_t)w->start * 7) % w->ct->n;
        terra_cook_mesh m = {0};
        double err;
        const terra_cook_mesh *r = &w->ct->mesh[i];
        if (terra_scenery_cut_tile(w->ct->cut, w->ct->xy[2 * i], w->ct->xy[2 * i + 1], &m, &err) != TERRA_OK ||
            m.vertex_count != r->vertex_count || m.triangle_count != r->triangle_count ||
            memcmp(m.xy, r->xy, 2 * sizeof(double) * m.vertex_count) || memcmp(m.z, r->z, sizeof(float) * m.vertex_count) ||
            memcmp(m.normal, r->normal, 3 * sizeof(float) * m.vertex_count) ||
            memcmp(m.material, r->material, sizeof(uint16_t) * m.vertex_count) ||
            memcmp(m.tri, r->tri, 3 * sizeof(uint32_t) * m.triangle_count))
            w->bad++;
        terra_cook_mesh_free(&m);
    }
    return NULL;
}

static void test_threads(void) {
    unsigned long long seed = 0x7777ull;
    terra_cook_grid g;
    soup u;
    random_case(&seed, &g, &u, (gen_opts){.walls = true, .holes = true, .snap = true});
    g.tile_units = 0.75;
    cut_tiles ct;
    if (make_tiles(&g, &u, 0, &ct)) {
        CHECK(ct.n > 20, "%zu tiles", ct.n);
        pthread_t th[4];
        worker w[4];
        for (int i = 0; i < 4; i++) {
            w[i] = (worker){&ct, i, 0};
            CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK(w[i].bad == 0, "thread %d: %d tiles differ", i, w[i].bad);
        }
        free_tiles(&ct);
    }
    soup_free(&u);
}

static void test_bad_input(void) {
    terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = 1};
    soup u = {0};
    uint32_t a = soup_vertex(&u, 0, 0, 0, 0), b = soup_vertex(&u, 1, 0, 0, 0), c = soup_vertex(&u, 0, 0, 1, 0);
    soup_tri(&u, a, b, c);
    terra_scenery_cut *cut = NULL;
    terra_scenery_cut_desc d = {.grid = &g};
    g.frame = TERRA_FRAME_GEOGRAPHIC;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && !cut);
    g.frame = TERRA_FRAME_LOCAL, g.tile_units = 0;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && !cut);
    g.tile_units = 1;
    u.s.position[4] = NAN;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && strstr(terra_last_error(), "vertex 1"),
          "%s", terra_last_error());
    u.s.position[4] = 0, u.s.position[3] = 1e300;
    g.tile_units = 1e-300;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && !cut, "%s", terra_last_error());
    u.s.position[3] = 1;
    g.tile_units = 1;
    d.weld_tolerance = -1;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && !cut);
    d.weld_tolerance = 0;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_OK && cut, "%s", terra_last_error());
    terra_scenery_cut_free(cut);
    cut = NULL;
    u.s.tri[2] = 7;
    CHECK(terra_scenery_cut_build(&u.s, &d, &cut) == TERRA_E_INVALID && !cut);
    soup_free(&u);
}

int main(void) {
    RUN(test_random_soups);
    RUN(test_through_corners);
    RUN(test_walls_on_lines);
    RUN(test_weld);
    RUN(test_threads);
    RUN(test_bad_input);
    return finish();
}
