/* The planet: the cube-sphere mapping, shared samples across face edges and corners, conservative
 * ranges, the horizon test against brute force, selection across every altitude. */
#include "check.h"
#include "terra/planet.h"
#include "terra/qmesh.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846

static uint64_t rng = 0x1234567u;
static double urand(void) { /* [0, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static terra_vec3 vsub(terra_vec3 a, terra_vec3 b) { return (terra_vec3){a.x - b.x, a.y - b.y, a.z - b.z}; }
static double vdot(terra_vec3 a, terra_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static double vlen(terra_vec3 a) { return sqrt(vdot(a, a)); }
static terra_vec3 vscale(terra_vec3 a, double k) { return (terra_vec3){a.x * k, a.y * k, a.z * k}; }
static terra_vec3 vunit(terra_vec3 a) { return vscale(a, 1 / vlen(a)); }
static terra_vec3 vadd(terra_vec3 a, terra_vec3 b) { return (terra_vec3){a.x + b.x, a.y + b.y, a.z + b.z}; }
static bool same_bits(terra_vec3 a, terra_vec3 b) { return memcmp(&a, &b, sizeof a) == 0; }

static terra_planet *planet(void) {
    static terra_planet *p;
    if (!p && terra_planet_create(NULL, &p) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    return p;
}

/* The planet the ray-cast and selection tests run on: the sphere, then WGS84. */
static terra_planet *P;
static terra_planet *wgs84(void) {
    static terra_planet *p;
    if (!p && terra_planet_create(&(terra_planet_desc){.wgs84 = true}, &p) != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        exit(1);
    }
    return p;
}

/* WGS84: a point over the ellipsoid is where geodetic coordinates put it in ECEF (qmesh.h's
 * conversion, Cesium's; terra's x, y, z are ECEF's X, Z, -Y), and terra_planet_up_at gives back its
 * normal and height, from 11 km under the ellipsoid to 40,000 km over it, poles included. */
static void test_wgs84(void) {
    terra_planet *p = wgs84();
    CHECK(terra_planet_get_desc(p)->radius_m == TERRA_WGS84_A && fabs(terra_planet_get_desc(p)->polar_radius_m - TERRA_WGS84_B) < 1e-6);
    double worst_pos = 0, worst_dir = 0, worst_h = 0;
    for (int k = 0; k < 20000; k++) {
        const double lat = k < 4 ? (k & 1 ? 90 : -90) : urand() * 180 - 90, lon = urand() * 360 - 180;
        const double h = k % 3 == 0 ? urand() * 20000 - 11000 : pow(10, urand() * 7.6);
        const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
        const terra_vec3 q = terra_planet_point(p, d, h);
        double e[3];
        terra_qmesh_geodetic_to_ecef(lon * PI / 180, lat * PI / 180, h, e);
        worst_pos = fmax(worst_pos, vlen(vsub(q, (terra_vec3){e[0], e[2], -e[1]})));
        double hb;
        const terra_vec3 u = terra_planet_up_at(p, q, &hb);
        worst_dir = fmax(worst_dir, vlen(vsub(u, d)));
        worst_h = fmax(worst_h, fabs(hb - h));
    }
    printf("     20000 points: %.3g m from the ECEF conversion, normals back within %.3g, heights within %.3g m\n", worst_pos,
           worst_dir, worst_h);
    CHECK(worst_pos < 1e-6 * 5e7 * 1e-3, "a point lies %g m from its ECEF position", worst_pos);
    CHECK(worst_dir < 1e-12, "a normal came back %g off", worst_dir);
    CHECK(worst_h < 1e-6, "a height came back %g m off", worst_h);
}

/* A rugged grid over 45..45.5 N, 7..7.5 E (ridges 1,400 m high, a hole of NaN samples in it). */
static terra_geo_grid *test_grid(void) {
    enum { GW = 241, GH = 181 };
    static float h[GW * GH];
    for (int j = 0; j < GH; j++)
        for (int i = 0; i < GW; i++)
            h[j * GW + i] = (float)(800 + 700 * sin(i * 0.21) * cos(j * 0.17) + 120 * sin(i * 1.3 + j * 0.9));
    for (int j = 90; j < 94; j++)
        for (int i = 100; i < 103; i++) h[j * GW + i] = NAN;
    terra_geo_grid *g = NULL;
    CHECK(terra_geo_grid_create(&(terra_geo_grid_desc){.bounds = {7, 45, 7.5, 45.5}, .width = GW, .height = GH, .heights = h},
                                &g) == TERRA_OK,
          "%s", terra_last_error());
    return g;
}

/* A grid laid over WGS84: its heights exactly inside (the planet's own in its hole), the planet's own
 * past the blend band, no step anywhere between (heights 0.5 m apart across the border and the
 * band's edge differ by no more than the ground's slopes allow), every range still conservative
 * (dense samples of random tiles over and around it), and the level errors counting its ground. */
static void test_overlay(void) {
    terra_geo_grid *g = test_grid();
    if (!g) return;
    terra_planet *p, *bare = wgs84();
    CHECK(terra_planet_create(&(terra_planet_desc){.wgs84 = true, .overlay = g, .overlay_blend_m = 3000}, &p) == TERRA_OK, "%s",
          terra_last_error());
    if (!p) return;
    int inside = 0, outside = 0, hole = 0;
    for (int k = 0; k < 20000; k++) {
        const double lat = 44.9 + urand() * 0.7, lon = 6.85 + urand() * 0.8;
        const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
        double la, lo;
        terra_planet_dir_latlon(d, &la, &lo);
        const float h = terra_planet_height(p, d), own = terra_planet_height(bare, d), hg = terra_geo_grid_height(g, la, lo);
        if (la >= 45 && la <= 45.5 && lo >= 7 && lo <= 7.5) {
            if (hg == hg) {
                CHECK(h == hg, "at %.6f, %.6f the planet says %g m, the grid %g m", la, lo, (double)h, (double)hg);
                inside++;
            } else {
                CHECK(h == own, "in the grid's hole the planet's own ground");
                hole++;
            }
        } else if (la < 44.96 || la > 45.54 || lo < 6.95 || lo > 7.55) {
            CHECK(h == own, "at %.6f, %.6f, past the band: %g m, the planet's own %g m", la, lo, (double)h, (double)own);
            outside++;
        }
        /* no step: a pair 0.5 m apart north-south and east-west */
        const double k_lat = 0.5 / 110574.0, k_lon = 0.5 / (111320.0 * cos(lat * PI / 180));
        const float hn = terra_planet_height(p, terra_planet_latlon_dir(lat + k_lat, lon));
        const float he = terra_planet_height(p, terra_planet_latlon_dir(lat, lon + k_lon));
        const bool near_hole = fabs(la - (45 + 91.5 / 360)) < 0.02 && fabs(lo - (7 + 101 / 480.0)) < 0.02;
        if (!near_hole) CHECK(fabs(hn - h) < 15 && fabs(he - h) < 15, "a step at %.6f, %.6f: %g, %g, %g m", la, lo, (double)h,
                              (double)hn, (double)he);
    }
    printf("     %d samples inside (the grid's heights exactly), %d in its hole, %d past the band (the planet's own)\n", inside,
           hole, outside);
    CHECK(inside > 5000 && outside > 2000 && hole > 0);
    /* ranges over and around the grid, levels 0 to 12 */
    const int N = terra_planet_get_desc(p)->cells;
    long checked = 0;
    for (int k = 0; k < 400; k++) {
        const int level = (int)(urand() * 13);
        const terra_tile_key key = terra_planet_key_at(p, terra_planet_latlon_dir(44.95 + urand() * 0.6, 6.95 + urand() * 0.6), level);
        float lo, hi;
        CHECK(terra_planet_height_range(p, key, &lo, &hi) == TERRA_OK);
        for (int j = 0; j <= N; j += N / 16)
            for (int i = 0; i <= N; i += N / 16) {
                const float h = terra_planet_height(p, terra_planet_tile_dir(p, key, i, j));
                CHECK(h >= lo && h <= hi, "level %d: height %g outside the range %g..%g", level, (double)h, (double)lo, (double)hi);
                checked++;
            }
    }
    printf("     %ld samples of 400 tiles over and around it within their ranges; level 6's error %.1f m (%.1f m without it)\n",
           checked, (double)terra_planet_level_error(p, 6), (double)terra_planet_level_error(bare, 6));
    CHECK(terra_planet_level_error(p, 6) > terra_planet_level_error(bare, 6), "the level errors do not see the grid's ground");
    /* rays over and around it meet its ground where it is: within 10 cm, never under it before */
    int hits = 0;
    for (int k = 0; k < 200; k++) {
        const terra_vec3 d = terra_planet_latlon_dir(44.95 + urand() * 0.6, 6.95 + urand() * 0.6);
        const terra_vec3 e = terra_planet_point(p, d, terra_planet_height(p, d) + pow(10, urand() * 4));
        terra_vec3 ea, no;
        terra_planet_frame(d, &ea, &no, NULL);
        const double down = -(0.01 + urand() * 1.5), turn = urand() * 2 * PI;
        const terra_vec3 h = vadd(vscale(ea, cos(turn)), vscale(no, sin(turn)));
        const terra_vec3 v = vadd(vscale(h, cos(down)), vscale(d, sin(down)));
        double t;
        if (!terra_planet_raycast(p, e, v, 0, &t, NULL)) continue;
        hits++;
        const double a = terra_planet_altitude(p, vadd(e, vscale(v, t)), NULL, NULL);
        CHECK(a > -1e-3 && a < 0.1 + 1e-6 * t, "a ray's hit %g m along is %g m above the ground", t, a);
        for (int m = 0; m < 100; m++)
            CHECK(terra_planet_altitude(p, vadd(e, vscale(v, t * m / 100.0)), NULL, NULL) > 0, "a ray under the ground before its hit");
    }
    CHECK(hits > 150, "only %d of 200 rays down met the ground", hits);
    terra_planet_destroy(p);
    terra_geo_grid_destroy(g);
}

/* The tiles selected for a camera (its frustum from the camera); 0 when the run fails. */
static int select_view(terra_planet_select *sel, const terra_camera *cam, const terra_planet_tile **tiles) {
    terra_frustum fr;
    terra_camera_frustum(cam, &fr);
    int n = 0;
    CHECK(terra_planet_select_run(sel, cam->eye, &fr, tiles, &n) == TERRA_OK, "%s", terra_last_error());
    return n;
}

/* Faces and directions round-trip; every direction falls on exactly one face's square. */
static void test_mapping(void) {
    for (int k = 0; k < 20000; k++) {
        const int f = (int)(urand() * 6);
        const double s = urand() * 2 - 1, t = urand() * 2 - 1;
        const terra_vec3 d = terra_planet_face_dir(f, s, t);
        CHECK(fabs(vlen(d) - 1) < 1e-15, "not unit: %g", vlen(d));
        double s2, t2;
        const int f2 = terra_planet_dir_face(d, &s2, &t2);
        CHECK(f2 == f || fabs(fabs(s) - 1) < 1e-12 || fabs(fabs(t) - 1) < 1e-12, "face %d became %d", f, f2);
        if (f2 == f) CHECK(fabs(s2 - s) < 1e-12 && fabs(t2 - t) < 1e-12, "(%g, %g) became (%g, %g)", s, t, s2, t2);
    }
    for (int k = 0; k < 2000; k++) { /* latitude and longitude round-trip */
        const double lat = urand() * 178 - 89, lon = urand() * 358 - 179;
        double la, lo;
        terra_planet_dir_latlon(terra_planet_latlon_dir(lat, lon), &la, &lo);
        CHECK(fabs(la - lat) < 1e-9 && fabs(lo - lon) < 1e-9, "(%g, %g) became (%g, %g)", lat, lon, la, lo);
    }
    /* the frame: east, north, up right-handed and orthonormal; east of (lat 0, lon 0) is lon 90 */
    terra_vec3 e, n, u;
    terra_planet_frame(terra_planet_latlon_dir(0, 0), &e, &n, &u);
    const terra_vec3 east = terra_planet_latlon_dir(0, 90), north = terra_planet_latlon_dir(90, 0);
    CHECK(vlen(vsub(e, east)) < 1e-12 && vlen(vsub(n, north)) < 1e-12, "frame at (0, 0)");
    /* a camera's up: +y is the plane's frame; on the equator, heading 90 looks east, pitch -90 down */
    for (int k = 0; k < 100; k++) {
        terra_camera a = {.yaw_rad = urand() * 7 - 3.5, .pitch_rad = urand() * 3 - 1.5}, b = a;
        b.up = (terra_vec3){0, 1, 0};
        terra_vec3 fa, ra, ua, fb, rb, ub;
        terra_camera_basis(&a, &fa, &ra, &ua);
        terra_camera_basis(&b, &fb, &rb, &ub);
        CHECK(vlen(vsub(fa, fb)) < 1e-15 && vlen(vsub(ra, rb)) < 1e-15 && vlen(vsub(ua, ub)) < 1e-15, "up +y is the plane's");
    }
    terra_vec3 fw;
    terra_camera_basis(&(terra_camera){.up = terra_planet_latlon_dir(0, 0), .yaw_rad = PI / 2}, &fw, NULL, NULL);
    CHECK(vlen(vsub(fw, east)) < 1e-12, "heading 90 looks east");
    terra_camera_basis(&(terra_camera){.up = terra_planet_latlon_dir(30, 40), .pitch_rad = -PI / 2}, &fw, NULL, NULL);
    CHECK(vlen(vadd(fw, terra_planet_latlon_dir(30, 40))) < 1e-12, "pitch -90 looks down");
    for (int k = 0; k < 1000; k++) {
        terra_planet_frame(terra_planet_latlon_dir(urand() * 180 - 90, urand() * 360 - 180), &e, &n, &u);
        const terra_vec3 x = {e.y * n.z - e.z * n.y, e.z * n.x - e.x * n.z, e.x * n.y - e.y * n.x};
        CHECK(vlen(vsub(x, u)) < 1e-9 && fabs(vdot(e, n)) < 1e-12 && fabs(vlen(e) - 1) < 1e-12, "frame not orthonormal");
    }
}

/* The equal-angle mapping keeps cells near equal: the worst ratio of cell areas on a face. */
static void test_area_ratio(void) {
    const int n = 256;
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            const double s0 = 2.0 * i / n - 1, s1 = 2.0 * (i + 1) / n - 1, t0 = 2.0 * j / n - 1, t1 = 2.0 * (j + 1) / n - 1;
            const terra_vec3 a = terra_planet_face_dir(0, s0, t0), b = terra_planet_face_dir(0, s1, t0);
            const terra_vec3 c = terra_planet_face_dir(0, s1, t1), d = terra_planet_face_dir(0, s0, t1);
            /* two flat triangles stand for the cell (fine cells: the error is far below the ratio's) */
            const terra_vec3 ab = vsub(b, a), ac = vsub(c, a), ad = vsub(d, a);
            const terra_vec3 x1 = {ab.y * ac.z - ab.z * ac.y, ab.z * ac.x - ab.x * ac.z, ab.x * ac.y - ab.y * ac.x};
            const terra_vec3 x2 = {ac.y * ad.z - ac.z * ad.y, ac.z * ad.x - ac.x * ad.z, ac.x * ad.y - ac.y * ad.x};
            const double area = 0.5 * (vlen(x1) + vlen(x2));
            lo = fmin(lo, area), hi = fmax(hi, area);
        }
    printf("     cell area ratio over a face (equal-angle): %.4f\n", hi / lo);
    CHECK(hi / lo < 1.42, "the worst cell area ratio is %g", hi / lo);
}

/* Direction d seen from the face of axis k (d on that face's border): the face and its lattice point
 * at n cells across; false when d does not fall on it. */
static bool on_face(terra_vec3 d, int k, int64_t n, int *g, int64_t *gi, int64_t *gj) {
    const double v[3] = {d.x, d.y, d.z};
    *g = k * 2 + (v[k] < 0);
    const terra_vec3 nudged = {v[0] * (k == 0 ? 1 + 1e-9 : 1), v[1] * (k == 1 ? 1 + 1e-9 : 1), v[2] * (k == 2 ? 1 + 1e-9 : 1)};
    double s, t;
    if (terra_planet_dir_face(nudged, &s, &t) != *g) return false;
    *gi = llround((s + 1) * 0.5 * (double)n);
    *gj = llround((t + 1) * 0.5 * (double)n);
    return true;
}

static terra_vec3 lattice(const terra_planet *p, int face, int level, int64_t gi, int64_t gj) {
    const int N = terra_planet_get_desc(p)->cells;
    const int32_t tiles = terra_planet_tiles_per_side(p, level);
    int32_t x = (int32_t)(gi / N), y = (int32_t)(gj / N);
    if (x == tiles) x--;
    if (y == tiles) y--;
    return terra_planet_tile_dir(p, terra_tile_key_make(face, level, x, y), (int)(gi - (int64_t)x * N), (int)(gj - (int64_t)y * N));
}

/* Tiles that meet across a face edge or corner, or across levels, compute bit-identical directions and
 * heights where they share a lattice point: every border sample of every face at three levels, against
 * the face across, and random samples against the next coarser level. */
static void test_shared_samples(void) {
    terra_planet *p = planet();
    const int N = terra_planet_get_desc(p)->cells, top = terra_planet_get_desc(p)->levels - 1;
    long compared = 0, corners = 0;
    const int levels[3] = {top, top - 2, top - 9};
    for (int li = 0; li < 3; li++) {
        const int L = levels[li];
        const int64_t n = (int64_t)terra_planet_tiles_per_side(p, L) * N;
        const int64_t step = n > 4096 ? n / 4096 : 1;
        for (int f = 0; f < 6; f++)
            for (int side = 0; side < 4; side++)
                for (int64_t k = 0; k <= n; k += (k + step > n && k != n ? n - k : step)) {
                    const int64_t gi = side == 0 ? 0 : side == 1 ? n : k, gj = side == 2 ? 0 : side == 3 ? n : k;
                    const terra_vec3 d = lattice(p, f, L, gi, gj);
                    int found = 0;
                    const double v[3] = {d.x, d.y, d.z};
                    for (int k3 = 0; k3 < 3; k3++) { /* the faces whose axis is as long: one, two at a corner */
                        int g;
                        int64_t ei, ej;
                        if (k3 == f / 2 || fabs(v[k3]) != fabs(v[f / 2]) || !on_face(d, k3, n, &g, &ei, &ej)) continue;
                        found++;
                        const terra_vec3 e = lattice(p, g, L, ei, ej);
                        CHECK(same_bits(d, e), "face %d (%lld, %lld) and face %d (%lld, %lld) at level %d differ by %g", f,
                              (long long)gi, (long long)gj, g, (long long)ei, (long long)ej, L, vlen(vsub(d, e)));
                        const float h1 = terra_planet_height(p, d), h2 = terra_planet_height(p, e);
                        CHECK(memcmp(&h1, &h2, sizeof h1) == 0, "heights differ across the edge");
                        compared++;
                    }
                    CHECK(found >= 1, "face %d (%lld, %lld) at level %d: no face across", f, (long long)gi, (long long)gj, L);
                    if (found == 2) corners++;
                    if (k == n) break;
                }
    }
    CHECK(corners == 3 * 6 * 4 * 2, "%ld corner samples compared twice (want every face's four corners, twice)", corners);
    /* across levels: a coarse lattice point is the finer level's even point */
    for (int k = 0; k < 20000; k++) {
        const int f = (int)(urand() * 6), L = 1 + (int)(urand() * top);
        const int64_t n = (int64_t)terra_planet_tiles_per_side(p, L) * N;
        const int64_t gi = (int64_t)(urand() * (double)(n + 1)), gj = (int64_t)(urand() * (double)(n + 1));
        CHECK(same_bits(lattice(p, f, L, gi, gj), lattice(p, f, L - 1, 2 * gi, 2 * gj)), "levels %d and %d differ", L, L - 1);
        compared++;
    }
    printf("     %ld shared samples compared bit for bit (%ld at cube corners)\n", compared, corners);
}

/* Tile ranges hold every height: dense samples of random tiles at every level (the lattice and random
 * points inside), and how much wider than the sampled extent they are. */
static void test_ranges(void) {
    terra_planet *p = planet();
    const int top = terra_planet_get_desc(p)->levels - 1;
    float glo, ghi;
    terra_planet_height_bounds(p, &glo, &ghi);
    for (int L = 0; L <= top; L++) {
        double excess = 0, extent = 0;
        for (int k = 0; k < 12; k++) {
            const int32_t n = terra_planet_tiles_per_side(p, L);
            const terra_tile_key key = terra_tile_key_make((int)(urand() * 6), L, (int32_t)(urand() * n), (int32_t)(urand() * n));
            float lo, hi;
            CHECK(terra_planet_height_range(p, key, &lo, &hi) == TERRA_OK);
            CHECK(lo >= glo && hi <= ghi, "tile range %g..%g outside the planet's %g..%g", (double)lo, (double)hi, (double)glo, (double)ghi);
            float slo = INFINITY, shi = -INFINITY;
            const int m = 24;
            const int N = terra_planet_get_desc(p)->cells;
            for (int j = 0; j <= m; j++)
                for (int i = 0; i <= m; i++) {
                    /* a lattice-aligned point and a random one inside the tile */
                    const terra_vec3 d1 = terra_planet_tile_dir(p, key, i * N / m, j * N / m);
                    const double s0 = 2.0 * terra_tile_key_x(key) / n - 1, t0 = 2.0 * terra_tile_key_y(key) / n - 1;
                    const terra_vec3 d2 = terra_planet_face_dir(terra_tile_key_face(key), s0 + 2.0 / n * urand(), t0 + 2.0 / n * urand());
                    const float h1 = terra_planet_height(p, d1), h2 = terra_planet_height(p, d2);
                    CHECK(h1 >= lo && h1 <= hi && h2 >= lo && h2 <= hi, "level %d: height %g / %g outside %g..%g", L,
                          (double)h1, (double)h2, (double)lo, (double)hi);
                    slo = fminf(slo, fminf(h1, h2)), shi = fmaxf(shi, fmaxf(h1, h2));
                }
            excess += (double)(hi - lo) - (double)(shi - slo);
            extent += (double)(shi - slo);
        }
        if (L % 4 == 0 || L == top)
            printf("     level %2d: sampled extent %9.1f m, range %9.1f m wider (mean of 12 tiles); level error %.2f m\n", L,
                   extent / 12, excess / 12, (double)terra_planet_level_error(p, L));
    }
    /* a user's planet: its callbacks by direction, its range trusted and checked against its answers */
    CHECK(terra_planet_height_range(p, terra_tile_key_make(6, 0, 0, 0), &glo, &ghi) == TERRA_E_INVALID);
}

static float user_height(void *u, terra_vec3 d) { (void)u; return (float)(100 * d.x + 50 * d.y * d.z); }

static void test_user_planet(void) {
    terra_planet *p;
    CHECK(terra_planet_create(&(terra_planet_desc){.height_at = user_height}, &p) == TERRA_E_INVALID,
          "a height_at with no range at all is refused");
    CHECK(strstr(terra_last_error(), "min_height") != NULL, "%s", terra_last_error());
    CHECK(terra_planet_create(&(terra_planet_desc){.radius_m = 1737400, .height_at = user_height, .min_height = -200,
                                                   .max_height = 200},
                              &p) == TERRA_OK);
    if (!p) return;
    const terra_vec3 d = terra_planet_latlon_dir(10, 20);
    CHECK(terra_planet_height(p, d) == user_height(NULL, d));
    const terra_vec3 g = terra_planet_ground_point(p, d);
    CHECK(fabs(vlen(g) - (1737400.0 + (double)user_height(NULL, d))) < 1e-4, "%.9f vs %.9f", vlen(g), 1737400.0 + (double)user_height(NULL, d));
    terra_vec3 up, n;
    const double alt = terra_planet_altitude(p, vscale(d, vlen(g) + 25), &up, &n);
    CHECK(fabs(alt - 25) < 1e-4 && vlen(vsub(up, d)) < 1e-12 && vdot(n, up) > 0.99, "altitude %g", alt);
    float lo, hi;
    CHECK(terra_planet_height_range(p, terra_tile_key_make(2, 3, 1, 1), &lo, &hi) == TERRA_OK && lo == -200 && hi == 200);
    terra_planet_destroy(p);
}

/* A built tile: vertices at their ground points (origin + float position), morph targets on the
 * parent's samples, normals outward and near the surface's, every vertex a surface. */
static void test_build(void) {
    terra_planet *p = planet();
    const int N = terra_planet_get_desc(p)->cells, top = terra_planet_get_desc(p)->levels - 1;
    terra_grid_vertex *v = malloc(sizeof *v * (size_t)terra_grid_vertex_count(N));
    terra_grid_vertex *pv = malloc(sizeof *pv * (size_t)terra_grid_vertex_count(N));
    void *scratch = malloc(terra_planet_scratch_bytes(N));
    for (int k = 0; k < 24; k++) {
        const int L = k % top;
        const int32_t n = terra_planet_tiles_per_side(p, L);
        const terra_tile_key key = terra_tile_key_make(k % 6, L, (int32_t)(urand() * n), (int32_t)(urand() * n));
        terra_grid_info info;
        CHECK(terra_planet_build(p, key, v, scratch, &info) == TERRA_OK, "%s", terra_last_error());
        const terra_tile_key parent = terra_tile_key_parent(key);
        CHECK(terra_planet_build(p, parent, pv, scratch, NULL) == TERRA_OK);
        const terra_vec3 o = terra_planet_tile_origin(p, key), po = terra_planet_tile_origin(p, parent);
        CHECK(o.x == floor(o.x) && o.y == floor(o.y) && o.z == floor(o.z), "origin in whole metres");
        float lo, hi;
        terra_planet_height_range(p, key, &lo, &hi);
        terra_vec3 bc;
        double br;
        terra_planet_tile_bounds(p, key, lo, hi, &bc, &br, NULL);
        for (int j = 0; j <= N; j++)
            for (int i = 0; i <= N; i++) {
                const terra_grid_vertex *a = &v[j * (N + 1) + i];
                const terra_vec3 g = terra_planet_ground_point(p, terra_planet_tile_dir(p, key, i, j));
                const terra_vec3 w = {o.x + a->x, o.y + a->y, o.z + a->z};
                const double tol = 1e-6 * vlen(vsub(g, o)) + 1e-6;
                CHECK(vlen(vsub(w, g)) <= tol, "vertex (%d, %d) of level %d is %g m off its ground point", i, j, L, vlen(vsub(w, g)));
                CHECK(vlen(vsub(w, bc)) <= br, "vertex outside the tile's bounding sphere");
                /* the morph target is the parent's vertex at the even point before it (on a face's edge the
                 * even point before or after it along the edge, the lesser by position) */
                int ti = i & ~1, tj = j & ~1;
                const int64_t gi = (int64_t)terra_tile_key_x(key) * N + i, gj = (int64_t)terra_tile_key_y(key) * N + j, nn_ = (int64_t)n * N;
                if ((j & 1) && (gi == 0 || gi == nn_) && a->my != v[tj * (N + 1) + ti].y) tj = j + 1;
                if ((i & 1) && (gj == 0 || gj == nn_) && a->mx != v[tj * (N + 1) + ti].x) ti = i + 1;
                const int pi = ((int)(terra_tile_key_x(key) & 1) * N + ti) / 2, pj = ((int)(terra_tile_key_y(key) & 1) * N + tj) / 2;
                const terra_grid_vertex *b = &pv[pj * (N + 1) + pi];
                const terra_vec3 t = {o.x + a->mx, o.y + a->my, o.z + a->mz}, pt = {po.x + b->x, po.y + b->y, po.z + b->z};
                CHECK(vlen(vsub(t, pt)) <= 2 * tol + 1e-6 * vlen(vsub(pt, po)), "morph target %g m off the parent's vertex", vlen(vsub(t, pt)));
                CHECK(memcmp(a->morph_normal, b->normal, 2) == 0, "the morph normal is not the parent's normal at the target");
                float nn[3];
                terra_oct_decode(a->normal, nn);
                const terra_vec3 nv = {nn[0], nn[2], nn[1]}, up = terra_planet_tile_dir(p, key, i, j);
                CHECK(vdot(nv, up) > 0.2, "normal %g from up", vdot(nv, up));
                CHECK(a->surface >= TERRA_SURFACE_GRASS && a->surface <= TERRA_SURFACE_WATER && a->level == L);
            }
    }
    free(v), free(pv), free(scratch);
}

/* terra_horizon_hides against brute force: for random eyes and caps it calls hidden, every sampled
 * point of the cap, at any radius from the ball's up to the top, has its segment from the eye pass
 * through the ball; and caps it calls seen are mostly seen at their top (the test is tight). */
static void test_horizon_brute(void) {
    const double R = 6371000;
    long hidden = 0, tested = 0, seen_called = 0, seen_top = 0;
    for (int k = 0; k < 20000; k++) {
        const terra_vec3 eye = vscale(terra_planet_latlon_dir(urand() * 180 - 90, urand() * 360 - 180), R + pow(10, urand() * 7.6));
        const terra_vec3 d = terra_planet_latlon_dir(urand() * 180 - 90, urand() * 360 - 180);
        const double angle = pow(10, -6 + 5.5 * urand()), top = R + pow(10, urand() * 4.5);
        terra_vec3 e, n;
        terra_planet_frame(d, &e, &n, NULL);
        if (!terra_horizon_hides(eye, R, d, angle, top)) {
            /* the cap's point at its top nearest the eye */
            const terra_vec3 ed = vscale(eye, 1 / vlen(eye));
            terra_vec3 tow = vsub(ed, vscale(d, vdot(ed, d)));
            const double tl = vlen(tow);
            if (tl > 0) {
                const double gamma = atan2(tl, vdot(ed, d));
                const double a = fmin(angle, gamma);
                const terra_vec3 q = vscale(vadd(vscale(d, cos(a)), vscale(tow, sin(a) / tl)), top), dv = vsub(q, eye);
                const double t = fmin(fmax(-vdot(eye, dv) / vdot(dv, dv), 0), 1);
                seen_called++;
                seen_top += vlen(vadd(eye, vscale(dv, t))) >= R;
            }
            continue;
        }
        hidden++;
        for (int m = 0; m < 200; m++) { /* points of the cap at random radii */
            const double a = angle * sqrt(urand()), phi = 2 * PI * urand();
            const terra_vec3 dir = vadd(vscale(d, cos(a)), vscale(vadd(vscale(e, cos(phi)), vscale(n, sin(phi))), sin(a)));
            const terra_vec3 q = vscale(dir, R + (top - R) * urand()), dv = vsub(q, eye);
            const double t = fmin(fmax(-vdot(eye, dv) / vdot(dv, dv), 0), 1);
            CHECK(vlen(vadd(eye, vscale(dv, t))) < R, "a point called hidden is seen");
            tested++;
        }
    }
    printf("     %ld of 20000 random caps hidden, %ld of their points checked; of those called seen, %.2f%% are seen at their top\n",
           hidden, tested, 100.0 * seen_top / seen_called);
    CHECK(hidden > 500, "too few hidden cases to test (%ld)", hidden);
    CHECK(seen_top > 0.99 * seen_called, "the test keeps caps it could cull");
    CHECK(!terra_horizon_hides((terra_vec3){0, R * 0.5, 0}, R, (terra_vec3){0, -1, 0}, 0.01, R + 1), "an eye inside the ball hides nothing");
}

/* The ray cast: its hit lies on the ground (within 10 cm for hits within a kilometre, 1e-6 of the
 * distance beyond), and every point of the ray before it is above the ground. Rays from 2 m to
 * 40,000 km, grazing to straight down. */
static void test_raycast(void) {
    terra_planet *p = P;
    const double R = terra_planet_get_desc(p)->radius_m;
    int hits = 0;
    double worst_alt = 0;
    for (int k = 0; k < 300; k++) {
        const terra_vec3 d = terra_planet_latlon_dir(urand() * 180 - 90, urand() * 360 - 180);
        const double alt = pow(10, 0.3 + urand() * 7.3);
        const terra_vec3 e = terra_planet_point(p, d, terra_planet_height(p, d) + alt);
        terra_vec3 ea, no;
        terra_planet_frame(d, &ea, &no, NULL);
        const double down = -(0.002 + urand() * 1.5);
        terra_vec3 v = vadd(vscale(ea, cos(down)), vscale(d, sin(down)));
        double t;
        terra_vec3 g;
        if (!terra_planet_raycast(p, e, v, 0, &t, &g)) continue;
        hits++;
        const terra_vec3 at = vadd(e, vscale(v, t));
        const double a = terra_planet_altitude(p, at, NULL, NULL);
        CHECK(a > -1e-3 && a < 0.1 + 1e-6 * t, "the hit %g m along is %g m above the ground", t, a);
        if (t < 1000) CHECK(a < 0.1, "the hit %g m along is %g m above the ground", t, a);
        CHECK(vlen(vsub(g, at)) < 0.1 + 1e-6 * t, "the hit point is %g m from the ray", vlen(vsub(g, at)));
        worst_alt = fmax(worst_alt, a);
        for (int m = 0; m < 200; m++) {
            const double tt = t * m / 200.0;
            CHECK(terra_planet_altitude(p, vadd(e, vscale(v, tt)), NULL, NULL) > 0, "the ray is under the ground before its hit");
        }
        double t2; /* stopped short: no hit, or one as close to the ground (the pieces fall elsewhere) */
        if (terra_planet_raycast(p, e, v, t * 0.999, &t2, NULL)) {
            const double a2 = terra_planet_altitude(p, vadd(e, vscale(v, t2)), NULL, NULL);
            CHECK(t2 <= t * 0.999 && a2 > -1e-3 && a2 < 0.1 + 1e-6 * t2, "a ray stopped short hits %g m above the ground", a2);
        }
    }
    printf("     %d of 300 rays hit; the highest hit %.4f m above the ground\n", hits, worst_alt);
    CHECK(hits > 100);
    CHECK(!terra_planet_raycast(p, vscale(terra_planet_latlon_dir(0, 0), 2 * R), terra_planet_latlon_dir(0, 0), 0, NULL, NULL),
          "a ray pointing away hits nothing");
}

typedef struct kept { int face; double s0, t0, s1, t1; } kept;

/* A selected tile's square of face coordinates. */
static kept tile_rect(const terra_planet *p, const terra_planet_tile *t) {
    const int32_t per = terra_planet_tiles_per_side(p, t->level), x = terra_tile_key_x(t->key), y = terra_tile_key_y(t->key);
    return (kept){terra_tile_key_face(t->key), 2.0 * x / per - 1, 2.0 * y / per - 1, 2.0 * (x + 1) / per - 1, 2.0 * (y + 1) / per - 1};
}

/* Whether a selected tile holds direction d (a hair's width over its edges counts). */
static bool covered(const kept *k, int n, terra_vec3 d) {
    double s, t;
    const int f = terra_planet_dir_face(d, &s, &t);
    for (int i = 0; i < n; i++) {
        const double eps = 1e-9 * (k[i].s1 - k[i].s0) + 1e-12;
        if (k[i].face == f && s >= k[i].s0 - eps && s <= k[i].s1 + eps && t >= k[i].t0 - eps && t <= k[i].t1 + eps) return true;
    }
    /* on a face edge the tile across holds it too */
    return false;
}

static long allocs;
static void *count_alloc(size_t n, void *u) { (void)u; allocs++; return malloc(n); }
static void *count_realloc(void *q, size_t n, void *u) { (void)u; allocs++; return realloc(q, n); }
static void count_free(void *q, void *u) { (void)u; free(q); }

/* The camera `alt` metres above the ground at (lat, lon), heading and pitch in degrees. */
static terra_camera planet_camera(const terra_planet *p, double lat, double lon, double alt, double heading, double pitch) {
    const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
    return (terra_camera){.eye = terra_planet_point(p, d, terra_planet_height(p, d) + alt), .yaw_rad = heading * PI / 180, .pitch_rad = pitch * PI / 180,
                          .fov_y_rad = 60 * PI / 180, .aspect = 16.0 / 9.0, .up = d};
}

/* Brute force over cameras from 2 m to 40,000 km: a ray from the eye through every pixel of a 64 x 36
 * frame hits only ground of tiles that were kept (no tile culled by the frustum or the horizon is
 * seen); and counted, kept tiles whose every sampled ground point is hidden by the planet. Selection
 * allocates nothing once made. */
static void test_select_brute(void) {
    terra_planet *p = P;
    terra_planet_select *sel;
    CHECK(terra_planet_select_create(&(terra_planet_select_desc){.view_height_px = 36, .max_tiles = 1 << 16}, p, &sel) == TERRA_OK,
          "%s", terra_last_error());
    if (!sel) return;
    const double R = terra_planet_get_desc(p)->radius_m, Rb = terra_planet_get_desc(p)->polar_radius_m;
    float glo, ghi;
    terra_planet_height_bounds(p, &glo, &ghi);
    /* hidden by the planet: the segment from the eye dips into the ellipsoid (a ball in the space
     * scaled by 1 / a, 1 / b, 1 / a), shrunk by the lowest ground */
    const double occluder = 1 + fmin(glo, 0) / Rb;
    const terra_vec3 sc = {1 / R, 1 / Rb, 1 / R};
    const double alts[] = {2, 30, 500, 5e3, 5e4, 5e5, 5e6, 2e7, 4e7};
    const int W = 64, H = 36;
    kept *k = malloc(sizeof *k * (1 << 16));
    long wrong = 0, hits = 0, drawn = 0, beyond = 0;
    for (size_t a = 0; a < sizeof alts / sizeof alts[0]; a++)
        for (int rep = 0; rep < 2; rep++) {
            const double dip = acos(R / (R + alts[a])) * 180 / PI;
            const double pitch = alts[a] < 1e5 ? -15 + 20 * urand() : -dip - 30 + 60 * urand();
            const terra_camera cam = planet_camera(p, urand() * 170 - 85, urand() * 360 - 180, alts[a], urand() * 360, pitch);
            const terra_planet_tile *tiles;
            const int n = select_view(sel, &cam, &tiles);
            for (int i = 0; i < n; i++) {
                k[i] = tile_rect(p, &tiles[i]);
                /* wholly beyond the horizon: every sampled ground point's segment from the eye dips into the ball */
                bool seen = false;
                const int N = terra_planet_get_desc(p)->cells;
                for (int jj = 0; jj <= 8 && !seen; jj++)
                    for (int ii = 0; ii <= 8 && !seen; ii++) {
                        const terra_vec3 g = terra_planet_ground_point(p, terra_planet_tile_dir(p, tiles[i].key, ii * N / 8, jj * N / 8));
                        const terra_vec3 es = {cam.eye.x * sc.x, cam.eye.y * sc.y, cam.eye.z * sc.z};
                        const terra_vec3 dv = {(g.x - cam.eye.x) * sc.x, (g.y - cam.eye.y) * sc.y, (g.z - cam.eye.z) * sc.z};
                        const double t = fmin(fmax(-vdot(es, dv) / vdot(dv, dv), 0), 1);
                        seen = vlen(vadd(es, vscale(dv, t))) >= occluder;
                    }
                beyond += !seen;
            }
            drawn += n;
            terra_vec3 f, r, u;
            terra_camera_basis(&cam, &f, &r, &u);
            const double ty = tan(cam.fov_y_rad / 2), tx = ty * cam.aspect;
            int cam_wrong = 0;
            for (int py = 0; py < H; py++)
                for (int px = 0; px < W; px++) {
                    const double sx = ((px + 0.5) / W * 2 - 1) * tx, sy = (1 - (py + 0.5) / H * 2) * ty;
                    terra_vec3 v = vadd(f, vadd(vscale(r, sx), vscale(u, sy)));
                    v = vscale(v, 1 / vlen(v));
                    terra_vec3 d;
                    if (!terra_planet_raycast(p, cam.eye, v, 0, NULL, &d)) continue;
                    hits++;
                    if (!covered(k, n, terra_planet_up_at(p, d, NULL))) cam_wrong++;
                }
            CHECK(cam_wrong == 0, "altitude %g m: %d pixels see ground of culled tiles", alts[a], cam_wrong);
            wrong += cam_wrong;
            const terra_planet_select_stats *st = terra_planet_select_get_stats(sel);
            printf("     alt %8.0f m pitch %6.1f: %5d tiles drawn, %5d visited, %4d culled by the horizon, %4d by the frustum\n",
                   alts[a], pitch, n, st->visited, st->culled_horizon, st->culled_frustum);
        }
    printf("     %ld pixel rays hit ground, %ld saw culled tiles; kept tiles wholly beyond the horizon: %ld of %ld (%.2f%%)\n",
           hits, wrong, beyond, drawn, 100.0 * beyond / drawn);
    CHECK(hits > 9 * 2 * W * H / 4, "too few rays hit the ground (%ld)", hits);
    /* allocations: none while selecting */
    allocs = 0;
    terra_set_allocator(&(terra_allocator){count_alloc, count_realloc, count_free, NULL});
    for (int i = 0; i < 50; i++) {
        const terra_camera cam = planet_camera(p, 10 + i * 0.001, 20, 100 + 1000 * i, 30, -10);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_planet_tile *tiles;
        int n;
        terra_planet_select_run(sel, cam.eye, &fr, &tiles, &n);
    }
    terra_set_allocator(NULL);
    CHECK(allocs == 0, "%ld allocations while selecting", allocs);
    free(k);
    terra_planet_select_destroy(sel);
}

/* terra_cap_distance is a lower bound of the distance to every point of its cap, and exact up to
 * sampling: random caps (angles up to 100 degrees, shells 1 m to 100 km thick) and eyes inside,
 * over and far outside them, against 40,000 sampled points each. */
static void test_cap_distance(void) {
    double worst_gap = 0;
    for (int k = 0; k < 300; k++) {
        const terra_vec3 dir = vunit((terra_vec3){urand() - 0.5, urand() - 0.5, urand() - 0.5});
        const double angle = pow(10, -5 + urand() * 5.25) * 0.01745, r_lo = 6.37e6 - urand() * 1e4;
        const double r_hi = r_lo + pow(10, urand() * 5);
        const double re = k % 3 == 0 ? r_lo + urand() * (r_hi - r_lo) : r_hi + pow(10, urand() * 8);
        const terra_vec3 eye = vscale(vunit((terra_vec3){urand() - 0.5, urand() - 0.5, urand() - 0.5}), re);
        const double d = terra_cap_distance(eye, dir, angle, r_lo, r_hi);
        terra_vec3 e1, e2;
        terra_planet_frame(dir, &e1, &e2, NULL);
        double best = INFINITY;
        for (int m = 0; m < 40000; m++) { /* points of the cap: its rim and edges more often */
            const double a = angle * (m % 4 == 0 ? 1 : sqrt(urand())), turn = urand() * 2 * PI;
            const terra_vec3 u = vadd(vscale(dir, cos(a)), vscale(vadd(vscale(e1, cos(turn)), vscale(e2, sin(turn))), sin(a)));
            const double r = m % 3 == 0 ? r_lo : m % 3 == 1 ? r_hi : r_lo + urand() * (r_hi - r_lo);
            best = fmin(best, vlen(vsub(vscale(u, r), eye)));
        }
        CHECK(d <= best * (1 + 1e-12) + 1e-6, "cap %d: distance %g m, but a point lies %g m away", k, d, best);
        worst_gap = fmax(worst_gap, (best - d) / fmax(best, 1));
    }
    printf("     300 caps: never farther than a sampled point, at most %.3g of the distance nearer\n", worst_gap);
}

/* terra_planet_tile_bounds' sphere and terra_planet_tile_cap's cap hold every ground point of a
 * tile between its lowest and highest heights, on the sphere and on WGS84 (dense samples of random
 * tiles at every level, the ellipsoid's flattest and roundest among them). */
static void test_tile_bounds_and_caps(void) {
    for (int shape = 0; shape < 2; shape++) {
        terra_planet *p = shape ? wgs84() : planet();
        const int N = terra_planet_get_desc(p)->cells;
        long points = 0;
        for (int k = 0; k < 300; k++) {
            const int level = (int)(urand() * terra_planet_get_desc(p)->levels);
            const int32_t n = terra_planet_tiles_per_side(p, level);
            const terra_tile_key key = terra_tile_key_make((int)(urand() * 6), level, (int32_t)(urand() * n), (int32_t)(urand() * n));
            float lo, hi;
            CHECK(terra_planet_height_range(p, key, &lo, &hi) == TERRA_OK);
            terra_vec3 dir;
            double angle, r_lo, r_hi;
            terra_planet_tile_cap(p, key, lo, hi, &dir, &angle, &r_lo, &r_hi);
            terra_vec3 bc;
            double br;
            terra_planet_tile_bounds(p, key, lo, hi, &bc, &br, NULL);
            for (int j = 0; j <= N; j += N / 8)
                for (int i = 0; i <= N; i += N / 8) {
                    const terra_vec3 d = terra_planet_tile_dir(p, key, i, j);
                    for (int e = 0; e < 2; e++) {
                        const terra_vec3 g = terra_planet_point(p, d, e ? hi : lo);
                        const double r = vlen(g), c = vdot(vscale(g, 1 / r), dir);
                        CHECK(r >= r_lo && r <= r_hi, "level %d: a point %g m from the centre, outside %g..%g", level, r, r_lo, r_hi);
                        CHECK(c >= cos(angle) - 1e-15, "level %d: a point %g rad from the cap's direction, past %g", level,
                              acos(fmin(c, 1)), angle);
                        CHECK(vlen(vsub(g, bc)) <= br, "level %d: a ground point outside the tile's bounding sphere", level);
                        points++;
                    }
                }
        }
        printf("     %s: %ld points of 300 tiles inside their bounding spheres and caps\n", shape ? "WGS84" : "sphere", points);
    }
}

/* A selection for a 270-pixel-high view (tiles of several levels in any view). */
static terra_planet_select *select_270(const terra_planet *p) {
    terra_planet_select *sel = NULL;
    CHECK(terra_planet_select_create(&(terra_planet_select_desc){.view_height_px = 270, .max_tiles = 1 << 16}, p, &sel) ==
              TERRA_OK,
          "%s", terra_last_error());
    return sel;
}

/* The distances the walk splits by are lower bounds (the bounding sphere's, or the cap's where it is
 * farther): every drawn tile above level 0 has all its vertices at least the range of the level
 * below away, for 20 views from 2 m to 3,000 km looking down and across (on the sphere and WGS84). */
static void test_split_distances_hold(void) {
    terra_planet *p = P;
    terra_planet_select *sel = select_270(p);
    if (!sel) return;
    const int N = terra_planet_get_desc(p)->cells;
    static const double alts[] = {2, 300, 3e4, 3e5, 3e6};
    long tiles = 0, vertices = 0;
    double tightest = INFINITY; /* the least ratio of a vertex's distance to the range it must clear */
    for (int k = 0; k < 20; k++) {
        const terra_camera cam = planet_camera(p, urand() * 160 - 80, urand() * 360 - 180, alts[k % 5], urand() * 360, k % 2 ? -15 : -60);
        const terra_planet_tile *t;
        const int n = select_view(sel, &cam, &t);
        for (int i = 0; i < n; i++) {
            if (t[i].level == 0) continue;
            const double need = terra_planet_select_range(sel, t[i].level - 1);
            double nearest = INFINITY;
            for (int jj = 0; jj <= N; jj++)
                for (int ii = 0; ii <= N; ii++)
                    nearest = fmin(nearest, vlen(vsub(terra_planet_ground_point(p, terra_planet_tile_dir(p, t[i].key, ii, jj)), cam.eye)));
            tightest = fmin(tightest, nearest / need);
            CHECK(nearest >= need * (1 - 1e-9), "level %d tile drawn with a vertex %g m away, nearer than the range %g m below",
                  t[i].level, nearest, need);
            tiles++, vertices += (long)(N + 1) * (N + 1);
        }
    }
    printf("     %ld tiles, %ld vertices: each at least the range of the level below away (tightest %.4f of it)\n", tiles, vertices,
           tightest);
    CHECK(tiles > 400, "too few tiles checked (%ld)", tiles);
    terra_planet_select_destroy(sel);
}

/* ---- cracks: morphed edges of neighbours coincide, across levels and face edges ------------------ */

/* A vertex of a built tile in world metres, unmorphed and morphed for this eye (as the vertex stage
 * morphs: by its unmorphed distance from the eye). */
static terra_vec3 morphed_at(const terra_grid_vertex *v, terra_vec3 o, terra_vec3 eye, float ms, float me) {
    const terra_vec3 p = {o.x + v->x, o.y + v->y, o.z + v->z}, t = {o.x + v->mx, o.y + v->my, o.z + v->mz};
    const double k = terra_morph_factor(vlen(vsub(p, eye)), ms, me);
    return vadd(p, vscale(vsub(t, p), k));
}

static double segment_distance(terra_vec3 q, terra_vec3 a, terra_vec3 b) {
    const terra_vec3 ab = vsub(b, a);
    const double L2 = vdot(ab, ab), t = L2 > 0 ? fmin(fmax(vdot(vsub(q, a), ab) / L2, 0), 1) : 0;
    return vlen(vsub(q, vadd(a, vscale(ab, t))));
}

/* A tile's skirt as the renderer hangs it (gl/renderer.c, planet_skirt_depth): its border's range of
 * distances from the centre plus its longest border step. */
static double skirt_of(const terra_grid_vertex *v, terra_vec3 o, int N) {
    double lo = INFINITY, hi = -INFINITY, step = 0;
    for (int e = 0; e < 4 * N; e++) {
        const int side = e / N, m = e % N;
        const int i = side == 0 ? m : side == 1 ? N : side == 2 ? N - m : 0, j = side == 0 ? 0 : side == 1 ? m : side == 2 ? N : N - m;
        const int i2 = side == 0 ? m + 1 : side == 1 ? N : side == 2 ? N - m - 1 : 0;
        const int j2 = side == 0 ? 0 : side == 1 ? m + 1 : side == 2 ? N : N - m - 1;
        const terra_vec3 a = {o.x + v[j * (N + 1) + i].x, o.y + v[j * (N + 1) + i].y, o.z + v[j * (N + 1) + i].z};
        const terra_vec3 b = {o.x + v[j2 * (N + 1) + i2].x, o.y + v[j2 * (N + 1) + i2].y, o.z + v[j2 * (N + 1) + i2].z};
        lo = fmin(lo, vlen(a)), hi = fmax(hi, vlen(a)), step = fmax(step, vlen(vsub(b, a)));
    }
    return hi - lo + step;
}

/* CDLOD on the planet: for cameras from 2 m to 3,000 km, over face edges and cube corners too, every
 * border vertex of a drawn tile, morphed for the eye as it is drawn, is checked against the morphed
 * border of the drawn tile beside it (found by the direction half a cell past the edge, so across
 * face edges as well). Beside a tile of the same level it lies on it: within 1 mm plus the float
 * rounding of the vertices (2e-7 of the tile's side). Beside another level it need not (the ranges
 * follow tau, not the morph margin, so neighbours may be two levels apart or mid-morph; the selection
 * counts the tiles at risk, crack_risk): the gap is measured and must be within the skirt the
 * renderer hangs from the two tiles, which closes it (test_gl_planet sees no hole pixel). */
static void test_no_cracks_between_neighbours(void) {
    terra_planet *p = P;
    terra_planet_select *sel = select_270(p);
    if (!sel) return;
    const int N = terra_planet_get_desc(p)->cells, nv = terra_grid_vertex_count(N);
    enum { MAXT = 600 }; /* tiles built a view (each once) */
    terra_grid_vertex *built = malloc(sizeof *built * (size_t)nv * MAXT);
    void *scratch = malloc(terra_planet_scratch_bytes(N));
    kept *k = malloc(sizeof *k * (1 << 16));
    static const double places[][2] = {{-4.3, -12.3}, {0, 45}, {35.2644, 45}, {89.95, 10}, {-20, 135}};
    static const double alts[] = {2, 50, 800, 1e4, 2e5, 3e6};
    /* the views: those places at those heights, then over the middle of each of the cube's 12 edges
     * (50 m and 10 km up) and each of its 8 corners (50 m up) */
    enum { NPLACES = 5, NALTS = 6, NVIEWS = NPLACES * NALTS + 12 * 2 + 8 };
    double views[NVIEWS][3];
    int nv_ = 0;
    for (int pl = 0; pl < NPLACES; pl++)
        for (int a = 0; a < NALTS; a++) views[nv_][0] = places[pl][0], views[nv_][1] = places[pl][1], views[nv_++][2] = alts[a];
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            for (int sg = 0; sg < 4; sg++) {
                double v[3] = {0, 0, 0};
                v[i] = sg & 1 ? -1 : 1, v[j] = sg & 2 ? -1 : 1;
                for (int h = 0; h < 2; h++) {
                    terra_planet_dir_latlon((terra_vec3){v[0], v[1], v[2]}, &views[nv_][0], &views[nv_][1]);
                    views[nv_++][2] = h ? 1e4 : 50;
                }
            }
    for (int c = 0; c < 8; c++) {
        terra_planet_dir_latlon((terra_vec3){c & 1 ? -1 : 1, c & 2 ? -1 : 1, c & 4 ? -1 : 1}, &views[nv_][0], &views[nv_][1]);
        views[nv_++][2] = 50;
    }
    bool edge_seen[6][6] = {{false}}; /* faces a and b met at a border vertex tested */
    long vertices = 0, mixed = 0, gaps = 0, unfinished = 0, risks = 0, across = 0;
    double worst = 0, worst_m = 0, worst_skirt = 0;
    static double skirt[600];
    for (int vw = 0; vw < NVIEWS; vw++) {
        const double alt = views[vw][2];
        const terra_camera cam = planet_camera(p, views[vw][0], views[vw][1], alt, urand() * 360, alt < 5e3 ? -20 : -60);
        const terra_planet_tile *tiles;
        int n = select_view(sel, &cam, &tiles);
        if (n > MAXT) n = MAXT; /* the nearest come first: test those and their neighbours */
        for (int i = 0; i < n; i++) {
            k[i] = tile_rect(p, &tiles[i]);
            CHECK(terra_planet_build(p, tiles[i].key, built + (size_t)i * nv, scratch, NULL) == TERRA_OK, "%s", terra_last_error());
            skirt[i] = skirt_of(built + (size_t)i * nv, terra_planet_tile_origin(p, tiles[i].key), N);
        }
        risks += terra_planet_select_get_stats(sel)->crack_risk;
        for (int ta = 0; ta < n; ta++) {
            const terra_planet_tile *A = &tiles[ta];
            const terra_grid_vertex *va = built + (size_t)ta * nv;
            const terra_vec3 oa = terra_planet_tile_origin(p, A->key);
            const int face = terra_tile_key_face(A->key);
            const double cells = (double)terra_planet_tiles_per_side(p, A->level) * N;
            for (int e = 0; e < 4 * (N - 1); e++) { /* the border's vertices, corners aside */
                const int side = e / (N - 1), m = 1 + e % (N - 1);
                const int vi = side == 0 ? 0 : side == 1 ? N : m, vj = side == 2 ? 0 : side == 3 ? N : m;
                const double oi = side == 0 ? -0.5 : side == 1 ? 0.5 : 0, oj = side == 2 ? -0.5 : side == 3 ? 0.5 : 0;
                const double gi = (double)terra_tile_key_x(A->key) * N + vi + oi, gj = (double)terra_tile_key_y(A->key) * N + vj + oj;
                const terra_vec3 past = terra_planet_face_dir(face, 2 * gi / cells - 1, 2 * gj / cells - 1);
                double ps, pt;
                const int pf = terra_planet_dir_face(past, &ps, &pt);
                int tb = -1;
                for (int b = 0; b < n && tb < 0; b++)
                    if (b != ta && k[b].face == pf && ps >= k[b].s0 && ps <= k[b].s1 && pt >= k[b].t0 && pt <= k[b].t1) tb = b;
                if (tb < 0) continue; /* the ground beside is culled or off the frustum */
                const terra_planet_tile *B = &tiles[tb];
                const terra_grid_vertex *vb = built + (size_t)tb * nv;
                const terra_vec3 ob = terra_planet_tile_origin(p, B->key);
                const terra_vec3 q = morphed_at(&va[vj * (N + 1) + vi], oa, cam.eye, A->morph_start, A->morph_end);
                double best = INFINITY;
                for (int be = 0; be < 4; be++) /* B's four edges as morphed polylines */
                    for (int c = 0; c < N; c++) {
                        const int i0 = be == 0 ? 0 : be == 1 ? N : c, j0 = be == 2 ? 0 : be == 3 ? N : c;
                        const int i1 = be == 0 ? 0 : be == 1 ? N : c + 1, j1 = be == 2 ? 0 : be == 3 ? N : c + 1;
                        best = fmin(best, segment_distance(q, morphed_at(&vb[j0 * (N + 1) + i0], ob, cam.eye, B->morph_start, B->morph_end),
                                                           morphed_at(&vb[j1 * (N + 1) + i1], ob, cam.eye, B->morph_start, B->morph_end)));
                    }
                if (terra_tile_key_face(B->key) != face) edge_seen[face][terra_tile_key_face(B->key)] = true, across++;
                const double side_m = vlen(vsub(terra_planet_tile_dir(p, A->key, 0, 0), terra_planet_tile_dir(p, A->key, N, 0))) *
                                      terra_planet_get_desc(p)->radius_m;
                const double allowed = 1e-3 + 2e-7 * fmax(side_m, vlen(vsub(oa, ob)));
                vertices++;
                if (A->level != B->level) { /* closed by the skirts */
                    mixed++;
                    unfinished += best > allowed;
                    worst_m = fmax(worst_m, best);
                    worst_skirt = fmax(worst_skirt, best / fmax(skirt[ta], skirt[tb]));
                    CHECK(best <= fmax(skirt[ta], skirt[tb]), "a gap of %g m between levels %d and %d, deeper than their skirts (%g, %g m)",
                          best, A->level, B->level, skirt[ta], skirt[tb]);
                    continue;
                }
                worst = fmax(worst, best / allowed);
                if (best > allowed) {
                    if (gaps < 3)
                        fprintf(stderr, "  gap %.4g m (allowed %.3g): levels %d|%d, faces %d|%d, eye %.0f m up\n", best, allowed,
                                A->level, B->level, face, terra_tile_key_face(B->key), alt);
                    gaps++;
                }
            }
        }
    }
    int edges = 0;
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++) edges += edge_seen[a][b] && edge_seen[b][a];
    printf("     %ld border vertices beside a drawn neighbour (%ld across a face edge, all %d edges both ways): beside the same "
           "level worst gap %.3f of the allowance; beside another level (%ld) %ld not on its border, worst %.3f m, %.2f of the "
           "skirt (%ld tiles at crack risk)\n",
           vertices, across, edges, worst, mixed, unfinished, worst_m, worst_skirt, risks);
    CHECK(edges == 12, "only %d of the cube's 12 edges were crossed both ways by a tested border", edges);
    CHECK(!unfinished || risks, "gaps between levels the selection did not count as a crack risk");
    CHECK(vertices > 20000 && mixed > 2000, "too few border vertices tested (%ld, %ld across levels)", vertices, mixed);
    CHECK(gaps == 0, "%ld border vertices off a same-level neighbour's border", gaps);
    free(built);
    free(scratch);
    free(k);
    terra_planet_select_destroy(sel);
}

int main(void) {
    RUN(test_mapping);
    RUN(test_area_ratio);
    RUN(test_shared_samples);
    RUN(test_ranges);
    RUN(test_user_planet);
    RUN(test_build);
    RUN(test_horizon_brute);
    P = planet();
    RUN(test_raycast);
    RUN(test_select_brute);
    RUN(test_cap_distance);
    RUN(test_tile_bounds_and_caps);
    RUN(test_split_distances_hold);
    RUN(test_no_cracks_between_neighbours);
    RUN(test_wgs84);
    RUN(test_overlay);
    P = wgs84();
    RUN(test_raycast);
    RUN(test_select_brute);
    RUN(test_split_distances_hold);
    RUN(test_no_cracks_between_neighbours);
    return finish();
}
