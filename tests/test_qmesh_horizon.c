/* The horizon occlusion point of geographic tiles (terra_qmesh_header_geographic) judged with
 * CesiumJS's own culling maths (EllipsoidalOccluder.isScaledSpacePointVisible, restated here):
 * random tiles from a few metres to a hemisphere wide. A finite point must be a sound occluder
 * (every vertex visible from the point; whenever the point is hidden from a camera, every vertex is
 * hidden too) and tight (some vertex on its tangent cone); a tile with a vertex beyond 90 degrees
 * (plus its height's horizon dip) gets a point at effectively infinite distance along the direction
 * to its centre, as Cesium's real root tile in shared data does; `terra bake --frame geographic`
 * tiles get the same. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/bake.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846
#define DEG2RAD (PI / 180.0)
#define FAR_MIN 1e16 /* a point this far counts as "effectively infinite" (Cesium's: 8e16 .. 1e24) */
#define FAR_MAX 1e25

static const double INV[3] = {1.0 / TERRA_WGS84_A, 1.0 / TERRA_WGS84_A, 1.0 / TERRA_WGS84_B};

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static double len3(const double a[3]) { return sqrt(dot3(a, a)); }

static void to_scaled(const double ecef[3], double s[3]) {
    for (int k = 0; k < 3; k++) s[k] = ecef[k] * INV[k];
}

/* CesiumJS's culling test (EllipsoidalOccluder's isScaledSpacePointVisible) for point p seen from
 * camera c, both in scaled space: p is hidden when it is behind the camera's horizon plane,
 * vt.vc > vh^2, and inside the cone tangent to the ellipsoid, (vt.vc)^2 / |vt|^2 > vh^2 (vt = p - c,
 * vc = -c, vh^2 = |c|^2 - 1). *plane and *cone receive the two sides' margins (squared scaled
 * units: 1e-12 is some micrometres on the ground). */
static void cull_terms(const double p[3], const double c[3], double *plane, double *cone) {
    double vh2 = dot3(c, c) - 1.0;
    double vt[3] = {p[0] - c[0], p[1] - c[1], p[2] - c[2]};
    double vtdotvc = -dot3(vt, c);
    *plane = vtdotvc - vh2;
    *cone = vtdotvc * vtdotvc / dot3(vt, vt) - vh2;
}

/* > 0: p is hidden from c; <= 0: visible. */
static double hidden_by(const double p[3], const double c[3]) {
    double a, b;
    cull_terms(p, c, &a, &b);
    return a < b ? a : b;
}

/* Scaled-space vertex lifted onto the unit sphere where it lies below it (Cesium's maths counts
 * such points as on the ellipsoid). */
static void lifted(const double s[3], double out[3]) {
    double m = len3(s), f = m < 1 ? 1 / m : 1;
    for (int k = 0; k < 3; k++) out[k] = s[k] * f;
}

/* Independent of the code under test: does a finite point exist? Each lifted vertex at angle a
 * from the direction, with horizon dip b = acos(1/|s|), needs a + b < 90 degrees. Returns the
 * largest a + b (radians). */
static double widest_angle(const double *scaled, size_t n, const double dir[3]) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double s[3];
        lifted(scaled + 3 * i, s);
        double m = len3(s);
        double cx = s[1] * dir[2] - s[2] * dir[1], cy = s[2] * dir[0] - s[0] * dir[2], cz = s[0] * dir[1] - s[1] * dir[0];
        double a = atan2(sqrt(cx * cx + cy * cy + cz * cz), dot3(s, dir)), b = m > 1 ? acos(1.0 / m) : 0;
        if (a + b > worst) worst = a + b;
    }
    return worst;
}

typedef struct judged {
    int finite, far, cameras, culled;
} judged;

/* Checks one tile's header against its vertices (ECEF, n x 3) and its centre. Cameras: random
 * positions around the tile (within `spread` degrees of its centre, 10 m to 20000 km up). tol: how
 * far (radians) the vertices may be from those the header was computed from (decoded tiles:
 * quantization); 0 for exact vertices, the only ones the cameras judge. */
static void judge(const char *what, const terra_qmesh_header *H, const double *ecef, size_t n, double lon_c,
                  double lat_c, double spread, double tol, unsigned long long *rng, judged *J) {
    double dir[3], P[3];
    to_scaled(H->center, dir);
    double dl = len3(dir);
    for (int k = 0; k < 3; k++) dir[k] /= dl;
    for (int k = 0; k < 3; k++) P[k] = H->horizon[k];
    double pm = len3(P);
    CHECK(isfinite(pm) && pm >= 1, "%s: horizon point (%g, %g, %g)", what, P[0], P[1], P[2]);
    if (!(isfinite(pm) && pm >= 1)) return;
    /* along the direction to the centre */
    double cr[3] = {P[1] * dir[2] - P[2] * dir[1], P[2] * dir[0] - P[0] * dir[2], P[0] * dir[1] - P[1] * dir[0]};
    CHECK(len3(cr) <= 1e-12 * pm && dot3(P, dir) > 0, "%s: the point is not along the centre's direction", what);
    double *scaled = malloc(3 * n * sizeof *scaled);
    if (!scaled) return;
    for (size_t i = 0; i < n; i++) to_scaled(ecef + 3 * i, scaled + 3 * i);
    double widest = widest_angle(scaled, n, dir);
    if (widest >= PI / 2 + 1e-9) {
        CHECK(pm >= FAR_MIN && pm <= FAR_MAX, "%s: a vertex %.6f deg off, and the point is at %g, not far", what,
              widest / DEG2RAD, pm);
        J->far++;
        /* visible from every camera above the tile's half of the globe */
        for (int c = 0; c < 64; c++) {
            double lon = lon_c + test_rand_range(rng, -89, 89), lat = test_rand_range(rng, -89, 89), e[3], C[3];
            terra_qmesh_geodetic_to_ecef(lon * DEG2RAD, lat * DEG2RAD, pow(10, test_rand_range(rng, 1, 7.3)), e);
            to_scaled(e, C);
            if (dot3(C, dir) <= 0) continue;
            CHECK(hidden_by(P, C) <= 0, "%s: a far point hidden from a camera on its side", what);
        }
    } else if (widest <= PI / 2 - 1e-9) {
        J->finite++;
        CHECK(pm < 1e6, "%s: every vertex within %.6f deg, yet the point is at %g", what, widest / DEG2RAD, pm);
        /* every (lifted) vertex in front of the point's horizon plane (visible from it); the
         * point as near as it can be: its horizon circle (at acos(1 / |P|) from the direction)
         * passes through the widest vertex's horizon */
        for (size_t i = 0; i < n; i++) {
            double s[3], plane, cone;
            lifted(scaled + 3 * i, s);
            cull_terms(s, P, &plane, &cone);
            CHECK(plane <= 1e-12 + 2 * tol * pm, "%s: vertex %zu behind the horizon point's horizon plane (%g)", what, i, plane);
        }
        CHECK(fabs(acos(1 / pm) - widest) <= 1e-7 + tol, "%s: the point's horizon at %.9f deg, the widest vertex's at %.9f",
              what, acos(1 / pm) / DEG2RAD, widest / DEG2RAD);
        /* the occluder property: the point hidden -> every vertex hidden */
        for (int c = 0; tol == 0 && c < 256; c++) {
            double lon = lon_c + test_rand_range(rng, -spread, spread);
            double lat = fmax(-90, fmin(90, lat_c + test_rand_range(rng, -spread, spread)));
            double e[3], C[3];
            terra_qmesh_geodetic_to_ecef(lon * DEG2RAD, lat * DEG2RAD, pow(10, test_rand_range(rng, 1, 7.3)), e);
            to_scaled(e, C);
            J->cameras++;
            if (hidden_by(P, C) <= 1e-12) continue;
            J->culled++;
            for (size_t i = 0; i < n; i++) {
                double h = hidden_by(scaled + 3 * i, C);
                if (h < -1e-12) {
                    CHECK(0, "%s: the point is hidden from a camera that sees vertex %zu (%g)", what, i, h);
                    break;
                }
            }
        }
    }
    free(scaled);
}

/* A tile over [w, e] x [s, n] degrees: its corners, edge points and random inner vertices at
 * heights in [h0, h1]; the centre where bake puts it (middle of the rectangle, middle height). */
static void random_tile(unsigned long long *rng, double w, double s, double e, double n, double h0, double h1,
                        size_t count, double *ecef, double center[3]) {
    for (size_t i = 0; i < count; i++) {
        double u = i < 9 ? (double)(i % 3) / 2 : test_rand_unit(rng), v = i < 9 ? (double)(i / 3) / 2 : test_rand_unit(rng);
        if (i >= 9 && i % 4 == 0) u = (double)(i / 4 % 2); /* on the west or east edge */
        terra_qmesh_geodetic_to_ecef((w + (e - w) * u) * DEG2RAD, (s + (n - s) * v) * DEG2RAD,
                                     test_rand_range(rng, h0, h1), ecef + 3 * i);
    }
    terra_qmesh_geodetic_to_ecef(0.5 * (w + e) * DEG2RAD, 0.5 * (s + n) * DEG2RAD, 0.5 * (h0 + h1), center);
}

static void test_random_tiles(void) {
    unsigned long long rng = 13;
    judged J = {0};
    enum { MAXV = 400 };
    double *ecef = malloc(3 * MAXV * sizeof *ecef);
    if (!ecef) return;
    for (int t = 0; t < 3000; t++) {
        /* sizes from 0.4 m to a whole root tile, log-uniform, plus every power-of-two level */
        double size = t % 10 == 0 ? 180.0 / (double)(1 << (t / 10 % 8)) : pow(10, test_rand_range(&rng, -5.5, log10(180)));
        double wide = size < 180 ? 2 * size : 360; /* roots are 180 degrees high, 180 wide */
        double w = test_rand_range(&rng, -180, 180 - size), s = test_rand_range(&rng, -90, 90 - fmin(size, 180));
        if (size >= 180) w = t % 20 ? 0 : -180, s = -90;
        double e = w + size, n = s + fmin(size, 180);
        double h0 = test_rand_range(&rng, -400, 3000), h1 = h0 + (t % 7 == 0 ? 0 : test_rand_range(&rng, 0, 6000));
        size_t count = 9 + (size_t)(test_rand_unit(&rng) * (MAXV - 9));
        double center[3];
        random_tile(&rng, w, s, e, n, h0, h1, count, ecef, center);
        terra_qmesh_header H;
        terra_qmesh_header_geographic(&H, ecef, count, center, h0, h1);
        char what[96];
        snprintf(what, sizeof what, "tile %d (%.3g deg at %.4f,%.4f)", t, size, w, s);
        judge(what, &H, ecef, count, 0.5 * (w + e), 0.5 * (s + n), fmin(3 * wide, 120), 0, &rng, &J);
    }
    free(ecef);
    printf("  random tiles: %d finite points, %d far; %d cameras, %d saw the point hidden\n", J.finite, J.far,
           J.cameras, J.culled);
    /* the property was exercised both ways */
    CHECK(J.finite > 2000 && J.far >= 50, "finite %d, far %d", J.finite, J.far);
    CHECK(J.culled > 10000 && J.culled < J.cameras - 10000, "culled %d of %d", J.culled, J.cameras);
}

/* The two 180-degree roots (a 17 x 17 grid each, heights over land and sea) get the far point; the
 * 90-degree level-1 tiles do not. */
static void test_root_tiles(void) {
    unsigned long long rng = 7;
    double ecef[3 * 17 * 17], center[3];
    for (int level = 0; level <= 1; level++)
        for (int x = 0; x < 2 << level; x++)
            for (int y = 0; y < 1 << level; y++) {
                double w, s, e, n;
                terra_qmesh_geographic_tile_bounds(level, x, y, &w, &s, &e, &n);
                for (int j = 0; j < 17; j++)
                    for (int i = 0; i < 17; i++)
                        terra_qmesh_geodetic_to_ecef((w + (e - w) * i / 16) * DEG2RAD, (s + (n - s) * j / 16) * DEG2RAD,
                                                     test_rand_range(&rng, -100, 5000), ecef + 3 * (17 * j + i));
                terra_qmesh_geodetic_to_ecef(0.5 * (w + e) * DEG2RAD, 0.5 * (s + n) * DEG2RAD, 2450, center);
                terra_qmesh_header H;
                terra_qmesh_header_geographic(&H, ecef, 17 * 17, center, -100, 5000);
                double pm = len3(H.horizon);
                if (level == 0) CHECK(pm >= FAR_MIN && pm <= FAR_MAX, "root %d: point at %g", x, pm);
                else CHECK(pm < 1e6, "level 1 tile %d/%d: point at %g", x, y, pm);
                char what[64];
                snprintf(what, sizeof what, "level %d tile %d/%d", level, x, y);
                judged J = {0};
                judge(what, &H, ecef, 17 * 17, 0.5 * (w + e), 0.5 * (s + n), 120, 0, &rng, &J);
            }
}

/* Cesium's real root tile (quantized-mesh-tile-cs's test_0_0_0, lon -180..0): the point terra
 * computes for its vertices and centre has the same direction and order of magnitude as the one
 * it carries, (5.1, -8.3e16, 0). */
static void test_cesium_root_tile(void) {
    char path[1024];
    shared_path("data/qm/bertt/test_0_0_0.terrain", path, sizeof path);
    uint8_t *data;
    size_t size;
    if (terra_io_read_file(path, 1u << 20, &data, &size) != TERRA_OK) {
        printf("  SKIP: %s: %s\n", path, terra_last_error());
        return;
    }
    terra_qmesh m;
    terra_status st = terra_qmesh_decode_any(data, size, NULL, &m);
    terra_free(data);
    CHECK(st == TERRA_OK, "%s: %s", path, terra_last_error());
    if (st) return;
    double *ecef = malloc(3 * (size_t)m.vertex_count * sizeof *ecef);
    if (!ecef) {
        terra_qmesh_free(&m);
        return;
    }
    for (uint32_t i = 0; i < m.vertex_count; i++) {
        double lon = -180 + 180.0 * m.u[i] / 32767, lat = -90 + 180.0 * m.v[i] / 32767;
        double h = m.header.min_height + (m.header.max_height - m.header.min_height) * m.h[i] / 32767.0;
        terra_qmesh_geodetic_to_ecef(lon * DEG2RAD, lat * DEG2RAD, h, ecef + 3 * i);
    }
    terra_qmesh_header H;
    terra_qmesh_header_geographic(&H, ecef, m.vertex_count, m.header.center, m.header.min_height, m.header.max_height);
    double ours = len3(H.horizon), theirs = len3(m.header.horizon);
    double cosang = dot3(H.horizon, m.header.horizon) / (ours * theirs);
    printf("  Cesium's root tile: (%.3g, %.3g, %.3g); terra: (%.3g, %.3g, %.3g)\n", m.header.horizon[0],
           m.header.horizon[1], m.header.horizon[2], H.horizon[0], H.horizon[1], H.horizon[2]);
    CHECK(theirs > 8e16 && theirs < 9e16, "the shared tile's point moved: %g", theirs);
    CHECK(cosang > 1 - 1e-12, "direction differs from Cesium's (cos %.17g)", cosang);
    CHECK(fabs(log10(ours / theirs)) <= 1, "magnitude %g against Cesium's %g", ours, theirs);
    free(ecef);
    terra_qmesh_free(&m);
}

/* `terra bake --frame geographic --levels 5` (what cli_cesium_browser.sh serves to CesiumJS): the
 * roots get the far point, every other tile a sound finite one. */
static void test_baked_tiles(void) {
    terra_world_desc wd = {.seed = 1};
    terra_source *src = NULL;
    CHECK(terra_world_create(&wd, &src) == TERRA_OK, "world: %s", terra_last_error());
    if (!src) return;
    terra_bake_desc in = {0}, d;
    in.frame = TERRA_FRAME_GEOGRAPHIC;
    in.levels = 5;
    CHECK(terra_bake_desc_resolve(&in, &d) == TERRA_OK, "resolve: %s", terra_last_error());
    terra_tile_key *keys = NULL;
    size_t count = 0;
    CHECK(terra_bake_keys(&d, &keys, &count) == TERRA_OK, "keys: %s", terra_last_error());
    terra_bake_tile t;
    memset(&t, 0, sizeof t);
    unsigned long long rng = 3;
    int roots = 0, finite = 0;
    for (size_t k = 0; k < count; k++) {
        int level = terra_tile_key_level(keys[k]);
        int32_t x = terra_tile_key_x(keys[k]), y = terra_tile_key_y(keys[k]);
        if (terra_bake_tile_build(src, &d, keys[k], false, &t) != TERRA_OK) {
            CHECK(0, "build %d/%d/%d: %s", level, x, y, terra_last_error());
            continue;
        }
        const terra_qmesh *m = &t.mesh;
        double w, s, e, n;
        terra_qmesh_geographic_tile_bounds(level, x, y, &w, &s, &e, &n);
        double *ecef = malloc(3 * (size_t)m->vertex_count * sizeof *ecef);
        if (!ecef) break;
        for (uint32_t i = 0; i < m->vertex_count; i++) {
            double lon = w + (e - w) * m->u[i] / 32767.0, lat = s + (n - s) * m->v[i] / 32767.0;
            double h = m->header.min_height + (m->header.max_height - m->header.min_height) * m->h[i] / 32767.0;
            terra_qmesh_geodetic_to_ecef(lon * DEG2RAD, lat * DEG2RAD, h, ecef + 3 * i);
        }
        double pm = len3(m->header.horizon);
        if (level == 0) {
            roots++;
            CHECK(pm >= FAR_MIN && pm <= FAR_MAX, "baked root %d: point at %g", x, pm);
        } else {
            finite += pm < 1e6;
            CHECK(pm < 1e6, "baked tile %d/%d/%d: point at %g", level, x, y, pm);
        }
        char what[64];
        snprintf(what, sizeof what, "baked %d/%d/%d", level, x, y);
        judged J = {0};
        /* a quantization step (u, v over 32767; heights over max - min) as an angle */
        double step = ((e - w) * DEG2RAD + (m->header.max_height - m->header.min_height) / 6.3e6) / 32767;
        judge(what, &m->header, ecef, m->vertex_count, 0.5 * (w + e), 0.5 * (s + n), 0, step, &rng, &J);
        free(ecef);
    }
    CHECK(roots == 2 && finite == (int)count - 2, "%d roots, %d finite of %zu", roots, finite, count);
    terra_bake_tile_free(&t);
    terra_free(keys);
    terra_source_destroy(src);
}

int main(void) {
    RUN(test_random_tiles);
    RUN(test_root_tiles);
    RUN(test_cesium_root_tile);
    RUN(test_baked_tiles);
    return finish();
}
